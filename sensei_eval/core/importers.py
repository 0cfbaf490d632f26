"""Named importers: result files of public agent benchmarks, as record dicts (`QueryRecord` fields).

* **tau-bench** (`tau-bench`): tau-bench's result file, a JSON array of `{task_id, trial, reward, info:
  {task: {actions: [{name, kwargs}], …}}, traj: [chat-completions messages]}`, and tau2-bench's, a document
  `{info: {environment_info: {policy}}, tasks: [{id, evaluation_criteria: {actions: [{name, arguments}]}}],
  simulations: [{id, task_id, trial, messages, reward_info: {reward}, termination_reason}]}` whose messages
  carry `tool_calls: [{id, name, arguments}]` and tool results `{role: tool, id, content}`. The task's
  actions become `expected_tool_calls`; the reward and how the run ended go into `metadata`. Tool calls the
  simulated *user* makes (tau2's `requestor: user`) are the user's turns, written as text.
* **Who&When / Magentic-One logs** (`who-and-when`): `{question, history: [{role, content, name?}], …}`.
  A `role` that is not system/user/assistant (Magentic-One writes the agent: `Orchestrator (thought)`,
  `WebSurfer`) is the speaker of an assistant turn; `name` is the speaker where given; `human` is the user.
  The annotation (`mistake_agent`, `mistake_step`, `mistake_reason`) and `ground_truth` go into `metadata`.

Each importer yields `(where, record dict)`; `where` locates the run in the file (`simulations[3]`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sensei_eval.core.errors import RecordFieldError

__all__ = ('import_tau_bench', 'import_who_and_when')

_CHAT_ROLES = ('system', 'user', 'assistant', 'tool')


def import_tau_bench(data: Any, stem: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The runs of a tau-bench (a list of results) or tau2-bench (`{simulations: [...]}`) result file."""
    if isinstance(data, dict) and isinstance(data.get('simulations'), list):
        yield from _tau2(data, stem)
        return
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        where = f'[{i}]' if isinstance(data, list) else '(document)'
        if not isinstance(item, dict) or not isinstance(item.get('traj'), list):
            raise RecordFieldError(where, 'expected a tau-bench result {task_id, traj: [...], reward, info}')
        info = _obj(item.get('info'))
        task = _obj(info.get('task'))
        expected = [
            {'tool_name': a['name'], 'args': a.get('kwargs') if isinstance(a.get('kwargs'), dict) else None}
            for a in task.get('actions') or []
            if isinstance(a, dict) and isinstance(a.get('name'), str)
        ]
        task_id, trial = item.get('task_id', i), item.get('trial', 0)
        metadata = {'source': 'tau-bench', 'task_id': task_id, 'trial': trial, 'reward': item.get('reward')}
        record: dict[str, Any] = {
            'query_id': f'{stem}-task{task_id}-trial{trial}',
            'message_format': 'openai',
            'messages': [_plain(m) for m in item['traj']],
            'expected_tool_calls': expected if 'actions' in task else None,
            'metadata': metadata,
        }
        if isinstance(task.get('instruction'), str):
            metadata['user_instruction'] = task['instruction']
        yield where, record


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _plain(message: Any) -> Any:
    """A tau-bench message as chat-completions (it already is; extra keys it carries are dropped)."""
    if not isinstance(message, dict):
        return message
    return {k: v for k, v in message.items() if k in ('role', 'content', 'tool_calls', 'tool_call_id', 'name')}


def _tau2(data: dict[str, Any], stem: str) -> Iterator[tuple[str, dict[str, Any]]]:
    info = _obj(data.get('info'))
    env = _obj(info.get('environment_info'))
    policy = env.get('policy') if isinstance(env.get('policy'), str) else None
    tasks = {str(t.get('id')): t for t in data.get('tasks') or [] if isinstance(t, dict)}
    for i, sim in enumerate(data['simulations']):
        where = f'simulations[{i}]'
        if not isinstance(sim, dict) or not isinstance(sim.get('messages'), list):
            raise RecordFieldError(where, 'expected a tau2-bench simulation {id, task_id, messages: [...]}')
        task = tasks.get(str(sim.get('task_id')), {})
        criteria = _obj(task.get('evaluation_criteria'))
        actions = criteria.get('actions')
        expected = None
        if isinstance(actions, list):
            expected = [
                {'tool_name': a['name'], 'args': a.get('arguments') if isinstance(a.get('arguments'), dict) else None}
                for a in actions
                if isinstance(a, dict) and isinstance(a.get('name'), str) and a.get('requestor', 'assistant') == 'assistant'
            ]
        messages = ([{'role': 'system', 'content': policy}] if policy else []) + list(_tau2_messages(sim['messages'], where))
        reward = _obj(sim.get('reward_info')).get('reward')
        trial = sim.get('trial', 0)
        record = {
            'query_id': f'{stem}-task{sim.get("task_id", i)}-trial{trial}',
            'message_format': 'openai',
            'messages': messages,
            'expected_tool_calls': expected,
            'metadata': {
                'source': 'tau2-bench',
                'task_id': sim.get('task_id'),
                'trial': trial,
                'reward': reward,
                'termination_reason': sim.get('termination_reason'),
                'simulation_id': sim.get('id'),
            },
        }
        yield where, record


def _tau2_messages(messages: list[Any], where: str) -> Iterator[dict[str, Any]]:
    user_calls: set[str] = set()
    for n, m in enumerate(messages):
        mwhere = f'{where}.messages[{n}]'
        if not isinstance(m, dict) or m.get('role') not in ('assistant', 'user', 'tool', 'system'):
            raise RecordFieldError(f'{mwhere}.role', 'expected a message with role assistant, user, tool or system')
        role, content = m['role'], m.get('content')
        calls = m.get('tool_calls') or []
        if role == 'tool':
            call_id = m.get('id') or m.get('tool_call_id')
            if call_id in user_calls or m.get('requestor') == 'user':
                yield {'role': 'user', 'content': f'[result of my tool call] {content}'}
            else:
                yield {'role': 'tool', 'tool_call_id': call_id, 'content': '' if content is None else str(content)}
            continue
        if role == 'user':
            text = content or ''
            for c in calls:
                user_calls.add(str(c.get('id')))
                text += f'\n[user tool call] {c.get("name")}({json.dumps(c.get("arguments"), ensure_ascii=False)})'
            if text.strip():
                yield {'role': 'user', 'content': text.strip()}
            continue
        out: dict[str, Any] = {'role': role, 'content': content}
        if calls:
            out['tool_calls'] = [
                {
                    'id': c.get('id'),
                    'type': 'function',
                    'function': {'name': c.get('name'), 'arguments': json.dumps(c.get('arguments') or {}, ensure_ascii=False)},
                }
                for c in calls
                if isinstance(c, dict)
            ]
        if role == 'assistant' and not content and not calls:
            continue  # an empty turn (the agent said nothing): nothing to judge
        yield out


def import_who_and_when(data: Any, stem: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The runs of Who&When / Magentic-One log files: one `{question, history}` document, or a list."""
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        where = f'[{i}]' if isinstance(data, list) else '(document)'
        if not isinstance(item, dict) or not isinstance(item.get('history'), list):
            raise RecordFieldError(where, 'expected a Who&When log {question, history: [{role, content}]}')
        messages = []
        for n, turn in enumerate(item['history']):
            if not isinstance(turn, dict):
                raise RecordFieldError(f'{where}.history[{n}]', 'expected {role, content}')
            role = str(turn.get('role') or 'assistant')
            content = turn.get('content')
            text = content if isinstance(content, str) else ('' if content is None else json.dumps(content, ensure_ascii=False))
            name = turn.get('name') if isinstance(turn.get('name'), str) and turn.get('name') else None
            if role.lower() == 'human':
                messages.append({'role': 'user', 'content': text})
            elif role in _CHAT_ROLES and role != 'tool':
                messages.append({'role': role, 'content': text, **({'name': name} if name else {})})
            else:  # the agent's name as the role (Magentic-One logs)
                messages.append({'role': 'assistant', 'content': text, 'name': name or role})
        qid = item.get('question_ID', item.get('question_id', item.get('id')))
        metadata = {
            k: item[k]
            for k in ('ground_truth', 'level', 'is_correct', 'mistake_agent', 'mistake_step', 'mistake_reason')
            if k in item
        }
        metadata['source'] = 'who-and-when'
        record: dict[str, Any] = {
            'query_id': str(qid) if qid not in (None, '') else (stem if len(items) == 1 else f'{stem}-{i}'),
            'message_format': 'openai',
            'messages': messages,
            'metadata': metadata,
        }
        if isinstance(item.get('question'), str) and item['question'].strip():
            record['query'] = item['question']
        yield where, record
