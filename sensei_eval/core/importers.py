"""Named importers: result files of public agent benchmarks, as record dicts (`QueryRecord` fields).

* **tau-bench** (`tau-bench`): tau-bench's result file, a JSON array of `{task_id, trial, reward, info:
  {task: {actions: [{name, kwargs}], outputs: [...], instruction}, reward_info}, traj: [chat-completions
  messages]}`, and tau2-bench's, a document `{info: {environment_info: {policy, tool_defs}}, tasks: [{id,
  evaluation_criteria: {actions: [{name, arguments}], communicate_info, reward_basis}}], simulations: [{id,
  task_id, trial, messages, reward_info: {reward}, termination_reason}]}` whose messages carry `tool_calls:
  [{id, name, arguments}]` and tool results `{role: tool, id, content}`. The task's actions become
  `expected_tool_calls`; its required outputs (`task.outputs`; tau2's `communicate_info` when its
  `reward_basis` counts `COMMUNICATE`, as by default) become `expected_outputs`; the tools tau2 records
  (`environment_info.tool_defs`: name, the function's `def` line and docstring, the JSON schema of its
  parameters) become `tools` (tau-bench's files record none); the reward and how the run ended go into
  `metadata`. Tool calls the simulated *user* makes (tau2's `requestor: user`) are the user's turns,
  written as text.
* **Who&When / Magentic-One logs** (`who-and-when`): `{question, history: [{role, content, name?}], …}`.
  A `role` that is not system/user/assistant (Magentic-One writes the agent: `Orchestrator (thought)`,
  `WebSurfer`) is the speaker of an assistant turn; `name` is the speaker where given; `human` is the user.
  The annotation (`mistake_agent`, `mistake_step`, `mistake_reason`) and `ground_truth` go into `metadata`.

Each importer yields `(where, record dict)` per run, `where` locating it in the file (`simulations[3]`), or
`(where, LoadError)` for a run it cannot read: **one bad entry is a located error for that run only**, and
the entries after it are read (`[good, bad, good]` gives two records and one error naming the field, e.g.
`simulations[1].messages[2].tool_calls: expected a list of tool calls, got str`). Only a file whose shape
is not the format at all (no `simulations` list, not a list of results) is one error for the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from sensei_eval.core.errors import LoadError, RecordFieldError, describe_error

__all__ = ('import_tau_bench', 'import_who_and_when')

_CHAT_ROLES = ('system', 'user', 'assistant', 'tool')
# tau2-bench's reward component that makes `communicate_info` required (its default basis: DB, COMMUNICATE).
_COMMUNICATE = 'COMMUNICATE'

Imported = Iterator[tuple[str, dict[str, Any] | LoadError]]


def import_tau_bench(data: Any, stem: str) -> Imported:
    """The runs of a tau-bench (a list of results) or tau2-bench (`{simulations: [...]}`) result file."""
    if isinstance(data, dict) and 'simulations' in data:
        if not isinstance(data['simulations'], list):
            yield 'simulations', _error('simulations', f'expected a list of simulations, got {_kind(data["simulations"])}')
            return
        yield from _tau2(data, stem)
        return
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        where = f'[{i}]' if isinstance(data, list) else '(document)'
        yield where, _guarded(where, partial(_tau_bench_run, item, i, where, stem))


def _tau_bench_run(item: Any, i: int, where: str, stem: str) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get('traj'), list):
        raise RecordFieldError(where, 'expected a tau-bench result {task_id, traj: [...], reward, info}')
    info = _obj(item.get('info'))
    task = _obj(info.get('task'))
    actions = task.get('actions')
    expected = _actions(actions, f'{where}.info.task.actions', 'kwargs') if actions is not None else None
    task_id, trial = item.get('task_id', i), item.get('trial', 0)
    metadata = {'source': 'tau-bench', 'task_id': task_id, 'trial': trial, 'reward': item.get('reward')}
    record: dict[str, Any] = {
        'query_id': f'{stem}-task{task_id}-trial{trial}',
        'message_format': 'openai',
        'messages': [_plain(m) for m in item['traj']],
        'expected_tool_calls': expected,
        'metadata': metadata,
    }
    if task.get('outputs') is not None:
        record['expected_outputs'] = _outputs(task['outputs'], f'{where}.info.task.outputs')
    if isinstance(task.get('instruction'), str):
        metadata['user_instruction'] = task['instruction']
    return record


def _guarded(where: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any] | LoadError:
    """One run's record dict, or the located error that stops this run (and only this run)."""
    try:
        return build()
    except RecordFieldError as e:
        return _error(e.field or where, e.message)
    except Exception as e:  # a shape no check above foresaw: this run is an error, the next ones are read
        return _error(where, f'cannot read this run ({describe_error(e)})')


def _error(field: str, message: str) -> LoadError:
    # file and line are the caller's (`core.datasets` places the error in the file)
    return LoadError('', 0, field, message)


def _kind(value: Any) -> str:
    return 'null' if value is None else type(value).__name__


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _actions(actions: Any, where: str, args_key: str) -> list[dict[str, Any]]:
    """A task's actions as expected tool calls (`args_key`: tau-bench's `kwargs`, tau2's `arguments`)."""
    if not isinstance(actions, list):
        raise RecordFieldError(where, f'expected a list of actions, got {_kind(actions)}')
    out = []
    for k, a in enumerate(actions):
        if not isinstance(a, dict) or not isinstance(a.get('name'), str) or not a['name']:
            raise RecordFieldError(f'{where}[{k}]', 'expected an action {name, ' + args_key + '}')
        if a.get('requestor', 'assistant') != 'assistant':
            continue  # the simulated user's own action (tau2): not the agent's to make
        args = a.get(args_key)
        out.append({'tool_name': a['name'], 'args': args if isinstance(args, dict) else None})
    return out


def _outputs(outputs: Any, where: str) -> list[str]:
    """Required outputs: texts (a number is its text)."""
    if not isinstance(outputs, list):
        raise RecordFieldError(where, f'expected a list of required outputs, got {_kind(outputs)}')
    out = []
    for k, o in enumerate(outputs):
        if isinstance(o, int | float) and not isinstance(o, bool):
            o = str(o)
        if not isinstance(o, str):
            raise RecordFieldError(f'{where}[{k}]', f'expected a required output as text, got {_kind(o)}')
        out.append(o)
    return out


def _plain(message: Any) -> Any:
    """A tau-bench message as chat-completions (it already is; extra keys it carries are dropped)."""
    if not isinstance(message, dict):
        return message
    return {k: v for k, v in message.items() if k in ('role', 'content', 'tool_calls', 'tool_call_id', 'name')}


def _tau2(data: dict[str, Any], stem: str) -> Imported:
    info = _obj(data.get('info'))
    env = _obj(info.get('environment_info'))
    policy = env.get('policy') if isinstance(env.get('policy'), str) else None
    tools = _tau2_tools(env.get('tool_defs'))
    tasks = {str(t.get('id')): t for t in data.get('tasks') or [] if isinstance(t, dict)}
    for i, sim in enumerate(data['simulations']):
        where = f'simulations[{i}]'
        yield where, _guarded(where, partial(_tau2_run, sim, i, where, stem, tasks, policy, tools))


def _tau2_run(
    sim: Any,
    i: int,
    where: str,
    stem: str,
    tasks: dict[str, dict[str, Any]],
    policy: str | None,
    tools: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    if not isinstance(sim, dict) or not isinstance(sim.get('messages'), list):
        raise RecordFieldError(where, 'expected a tau2-bench simulation {id, task_id, messages: [...]}')
    task = tasks.get(str(sim.get('task_id')), {})
    criteria = _obj(task.get('evaluation_criteria'))
    task_where = f'tasks[id={sim.get("task_id")}].evaluation_criteria'
    expected = (
        _actions(criteria['actions'], f'{task_where}.actions', 'arguments') if criteria.get('actions') is not None else None
    )
    messages = ([{'role': 'system', 'content': policy}] if policy else []) + list(_tau2_messages(sim['messages'], where))
    reward = _obj(sim.get('reward_info')).get('reward')
    trial = sim.get('trial', 0)
    record: dict[str, Any] = {
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
    basis = criteria.get('reward_basis')
    counted = basis is None or (isinstance(basis, list) and _COMMUNICATE in basis)
    if criteria.get('communicate_info') is not None and counted:  # outside the basis they gate nothing
        record['expected_outputs'] = _outputs(criteria['communicate_info'], f'{task_where}.communicate_info')
    if tools is not None:
        record['tools'] = tools
    return record


def _tau2_tools(defs: Any) -> list[dict[str, Any]] | None:
    """tau2's `tool_defs` (name -> {name, doc, params}) as OpenAI function definitions; None when absent. `doc`
    is the function as tau2 prints it, `def name(...):` and its docstring: the docstring is the description."""
    if not isinstance(defs, dict):
        return None
    tools = []
    for name, d in defs.items():
        d = _obj(d)
        params = d.get('params')
        tools.append(
            {
                'name': str(d.get('name') or name),
                'description': _docstring(d.get('doc')),
                'parameters': params if isinstance(params, dict) else None,
            }
        )
    return tools


def _docstring(doc: Any) -> str | None:
    if not isinstance(doc, str):
        return None
    text = doc.strip()
    if text.startswith('def ') and '"""' in text:
        text = text.split('"""', 1)[1].rsplit('"""', 1)[0]
    return text.strip() or None


def _tau2_messages(messages: list[Any], where: str) -> Iterator[dict[str, Any]]:
    user_calls: set[str] = set()
    for n, m in enumerate(messages):
        mwhere = f'{where}.messages[{n}]'
        if not isinstance(m, dict) or m.get('role') not in ('assistant', 'user', 'tool', 'system'):
            raise RecordFieldError(f'{mwhere}.role', 'expected a message with role assistant, user, tool or system')
        role, content = m['role'], m.get('content')
        calls = _tau2_calls(m.get('tool_calls'), f'{mwhere}.tool_calls')
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
                    'function': {'name': c['name'], 'arguments': json.dumps(c.get('arguments') or {}, ensure_ascii=False)},
                }
                for c in calls
            ]
        if role == 'assistant' and not content and not calls:
            continue  # an empty turn (the agent said nothing): nothing to judge
        yield out


def _tau2_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """A tau2 message's `tool_calls`: absent or null is none; anything but a list of `{id, name, arguments}`
    is an error located at the field."""
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise RecordFieldError(where, f'expected a list of tool calls, got {_kind(calls)}')
    for k, c in enumerate(calls):
        if not isinstance(c, dict) or not isinstance(c.get('name'), str) or not c['name']:
            raise RecordFieldError(f'{where}[{k}]', 'expected a tool call {id, name, arguments}')
    return calls


def import_who_and_when(data: Any, stem: str) -> Imported:
    """The runs of Who&When / Magentic-One log files: one `{question, history}` document, or a list."""
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        where = f'[{i}]' if isinstance(data, list) else '(document)'
        yield where, _guarded(where, partial(_who_and_when_run, item, i, where, stem, len(items) == 1))


def _who_and_when_run(item: Any, i: int, where: str, stem: str, single: bool) -> dict[str, Any]:
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
        'query_id': str(qid) if qid not in (None, '') else (stem if single else f'{stem}-{i}'),
        'message_format': 'openai',
        'messages': messages,
        'metadata': metadata,
    }
    if isinstance(item.get('question'), str) and item['question'].strip():
        record['query'] = item['question']
    return record
