"""A scripted proposer for the example: rewrites a prompt component from the judges' feedback it is shown.

**It knows nothing about the example agent's rules.** It never reads `simulated.RULES` or
`RULE_PATTERNS`; all it has is the request in front of it — the component's current text and the
failure examples (the variant generator's request) or the feedback on each run (GEPA's reflection
request). From each issue it writes one imperative sentence, by fixed, generic text rules:

* an issue with a `suggested_fix` becomes that fix, with its "it" spelled out from the issue's
  `problem_type` and `example_text` ("Drop it: …" → "Drop greeting text such as "Hello!": …");
* an issue with a `parameter` and a `suggested_value` becomes "Set the `<parameter>` argument of your tool
  calls: <suggested value>.";
* an issue with `missed_tools` becomes "Call <tools> when the question needs them.";
* otherwise its `reasoning`, turned from a finding into an instruction where a simple pattern allows
  ("The answer cites no source at all, …" → "Always cite sources: …"), else "Avoid this: <reasoning>".

The sentences are ranked by how many issues produced them; variant k appends the k-th sentence to the
component, and a last variant appends all of them. Whether a sentence helps is for the judged runs to
show: the proposer cannot tell, and it writes sentences that change nothing as readily as ones that do.
So the example tests the *loop* — that it finds, validates and keeps a change driven by judge feedback
— and not whether a real model follows a rule.

`proposer_lm()` is a DSPy LM (a `ScriptedLM`), usable as the variant generator's LM and as GEPA's
reflection LM.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from sensei_eval.optimize.scripted import ScriptedLM

__all__ = ('instruction_from_issue', 'issues_in', 'propose', 'proposer_lm')


def proposer_lm() -> ScriptedLM:
    """The scripted proposer as a DSPy LM: answers the variant generator and GEPA's reflection step."""
    return ScriptedLM(respond)


def respond(messages: list[dict[str, Any]]) -> str:
    """The answer to one request, in the format the request asks for."""
    text = '\n'.join(str(m.get('content', '')) for m in messages)
    user = str(messages[-1].get('content', ''))
    if 'Section to rewrite:' in user:  # the variant generator: JSON {"variant": ...}
        current = _between(user, 'Current text:\n', '\n\nFailure examples:')
        earlier = _bullets(_between(user, 'Already proposed (write a different one):\n', '\n\nAnswer with JSON'))
        return json.dumps({'variant': propose(current, issues_in(_between(user, 'Failure examples:\n', '\n\n')), earlier)})
    current = _gepa_current(user)  # GEPA's reflection: the component's text and the feedback on its runs
    return json.dumps({'new_instruction': propose(current, issues_in(_gepa_feedback(user) or text), [])})


def propose(current: str, issues: list[dict[str, Any]], earlier: list[str]) -> str:
    """The next variant not proposed yet: the current text plus the k-th sentence, then all of them."""
    counts = Counter(s for s in (instruction_from_issue(i) for i in issues) if s and s not in current)
    sentences = [s for s, _ in counts.most_common()]
    options = [f'{current}\n{s}' for s in sentences]
    if len(sentences) > 1:
        options.append('\n'.join([current, *sentences]))
    return next((o for o in options if not any(_same(o, e) for e in earlier)), current)


def instruction_from_issue(issue: dict[str, Any]) -> str | None:
    """One imperative sentence from one issue's fields (see the module docstring); None for an empty issue."""
    fix = issue.get('suggested_fix')
    if isinstance(fix, str) and fix.strip():
        what = ' '.join(str(issue[k]) for k in ('problem_type',) if issue.get(k)) or 'this'
        example = issue.get('example_text')
        subject = f'{what} text such as "{example}"' if example else what
        return _sentence(re.sub(r'^(\w+) it\b', lambda m: f'{m.group(1)} {subject}', fix.strip()))
    if issue.get('parameter') and issue.get('suggested_value'):
        return _sentence(f'Set the `{issue["parameter"]}` argument of your tool calls: {issue["suggested_value"]}')
    missed = issue.get('missed_tools')
    if isinstance(missed, list) and missed:
        return _sentence(f'Call {", ".join(str(t) for t in missed)} when the question needs it')
    reasoning = issue.get('reasoning')
    if isinstance(reasoning, str) and reasoning.strip():
        return _sentence(_as_instruction(reasoning.strip()))
    return None


def issues_in(text: str) -> list[dict[str, Any]]:
    """The issues (JSON objects) quoted in a request, one per line as the generator and GEPA's feedback show them."""
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        start = line.find('{')
        if start < 0:
            continue
        chunk = line[start:].rstrip()
        try:
            data = json.loads(chunk)
        except json.JSONDecodeError:
            data = _fields_of_clipped(chunk)
        if isinstance(data, dict) and data:
            found.append(data)
    return found


# ---------------------------------------------------------------------------------------------------
# Helpers


def _as_instruction(reasoning: str) -> str:
    first = re.split(r'(?<=\.)\s', reasoning)[0].rstrip('.')
    m = re.match(r'^The (?:answer|agent|run) (\w+) no (\w+?)s?\b(?: at all)?(?:,\s*(?:though|but|although)\s+(.*))?$', first)
    if m:
        word = m.group(1)
        verb = word[:-2] if word.endswith(('sses', 'shes', 'ches', 'xes')) else word.removesuffix('s')
        tail = f': the answer {m.group(3).removeprefix("it ")}' if m.group(3) else ''
        return f'Always {verb} {m.group(2)}s{tail}'
    m = re.match(r'^(?:\d+ of \d+ )?(\w+?)(?:\(s\)|s)? carr(?:y|ies) no (\w+)(.*)$', first)
    if m:
        return f'Make every {m.group(1)} carry a {m.group(2)}{m.group(3)}'
    return f'Avoid this: {first}'


def _same(option: str, shown: str) -> bool:
    """Whether an earlier variant, as the generator shows it (one line, long ones as "…<end>"), is `option`."""
    line, shown = ' '.join(option.split()), ' '.join(shown.split())
    return line.endswith(shown[1:]) if shown.startswith('…') else line == shown


def _sentence(text: str) -> str:
    text = ' '.join(text.split())
    return text if text.endswith(('.', '!', '?')) else text + '.'


def _fields_of_clipped(chunk: str) -> dict[str, Any]:
    """String fields of a JSON object cut short (the generator clips long issues)."""
    return {k: json.loads(f'"{v}"') for k, v in re.findall(r'"(\w+)":\s*"((?:[^"\\]|\\.)*)"', chunk)}


def _between(text: str, start: str, end: str) -> str:
    i = text.find(start)
    if i < 0:
        return ''
    i += len(start)
    j = text.find(end, i)
    return text[i : j if j >= 0 else len(text)].strip()


def _bullets(text: str) -> list[str]:
    return [line[2:].strip() for line in text.splitlines() if line.startswith('- ')]


def _gepa_feedback(text: str) -> str:
    """The feedback texts of GEPA's reflective examples (a JSON list after `[[ ## examples_with_feedback ## ]]`)."""
    marker = '[[ ## examples_with_feedback ## ]]'
    if marker not in text:
        return ''
    body = text.split(marker, 1)[1].split('\n\n[[ ## ', 1)[0].strip()
    try:
        examples, _ = json.JSONDecoder().raw_decode(body)  # the request goes on after the list
    except json.JSONDecodeError:
        return ''
    if not isinstance(examples, list):
        return ''
    return '\n'.join(str(e.get('Feedback', '')) for e in examples if isinstance(e, dict))


def _gepa_current(text: str) -> str:
    if text.lstrip().startswith('{'):
        try:
            value = json.loads(text).get('current_instruction', '')
            return str(value)
        except (json.JSONDecodeError, AttributeError):
            pass
    m = re.search(r'current_instruction[^\n]*\n(.*?)\n\n\[\[', text, re.DOTALL)
    return m.group(1).strip() if m else ''
