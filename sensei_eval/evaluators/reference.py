"""Reference checks: the record's tool calls against the `expected_tool_calls` it carries, and its replies
against the `expected_outputs` (what it must tell the user).

The semantics, chosen from first principles and from what reference-based evaluators in the field
mean (tau-bench and tau2-bench judge the final state of the world and the required outputs);
`docs/reference.md` is the user's page for the same rules.

**What the reference says.** `expected_tool_calls` lists the calls a good run makes. A missing field
means *no reference* for calls; an empty list `[]` means *change nothing*: the run may look things up,
but any state-changing call fails it. `expected_outputs` lists what the agent's replies to the user
must say; missing or `[]`, nothing is required. With neither, the check is skipped.

**Required outputs** are part of the reference: each must appear in one of the agent's replies, read
as `core.outputs` reads them (numbers as numbers, words case-folded, in order). Every output no reply
says is named in one major `completeness` finding (mode score 0.5 x the share said), so a run that made
every call right but told the user "6 suitcases" where the reference says 4 fails.

**Every call is classified as state-changing or not**, from the best evidence the record has, and the
report says which evidence decided (`details.calls[*].evidence`, `details.tools`):

1. `annotation`: the tool's MCP annotations in the record's tool definitions (`metadata.tools`, MCP
   `{"name", "annotations": {"readOnlyHint", "destructiveHint"}}` or OpenAI `{"type": "function",
   "function": {...}}`): `readOnlyHint: true` reads; `readOnlyHint: false` or `destructiveHint: true` writes;
2. `description`: the tool's description in those definitions (or in `QueryRecord.tools`, the tools the
   agent had), read by its leading verb ("Cancel the
   reservation" writes; "Get the details", "Returns the status" read; "Calculate ..." computes; "Transfer
   the user to a human agent" hands off) or by what it says it does not do ("will not change the database");
3. `profile`: the check's `tools: {NAME: {read_only: true|false}}` rule, then its
   `state_changing_patterns` and `read_only_patterns` (regular expressions on the name);
4. `name`: the tool's name, split into words (snake_case, kebab, dotted, camelCase), as the last resort:
   a hand-off (`transfer_to_X`, `handoff`, `escalate`: the OpenAI Agents SDK's convention) and a pure
   computation (`calculate`, `think`, `final_answer`) change nothing; the first word that is a known
   verb decides (`cancel_x` writes, `get_x` reads). A name with no known verb (`scout_grep`,
   `kubectl-logs`) is `unknown`: an extra call of it does not fail the run (failing needs evidence, and
   most tools whose names say nothing only look things up), but a missing expected call of it does.
   Declare such a tool when it does change state (annotations in the record, or
   `tools: {NAME: {read_only: false}}` in a profile).

A call that errored changed nothing and counts as neither a match nor an extra write.

**Matching.** Each expected call is matched to a **distinct** successful call (a multiset: a tool
expected twice needs two calls) of the same tool whose arguments fit. At the top level,
`arguments='exact'` (default) compares every key (an argument the reference does not name is a
difference); `'subset'` only the expected keys. **Below the top level arguments compare as APIs read
them**, whatever that rule: keys of nested objects the reference does not name are ignored at every
depth (`flights[].origin` beside the expected `flight_number` and `date`); a list of scalars is a
multiset (`["b", "a"]` fits `["a", "b"]`: tau-bench stores `sorted(item_ids)`) unless the check's rule
for the tool names it ordered (`tools: {NAME: {ordered: [ARG, "flights.stops"]}}`, paths from the
arguments' root); list items that are objects are paired by a key they share (`id`, `*_id`, `name`,
or any key whose values are unique on both sides) or else, and in an ordered list, by position (a list
must have as many items as expected). An expected call with `args: null` matches any call of its tool. Values compare `lenient`
by default: what JSON cannot tell apart (key order), numbers and numeric strings (`"100"` == `100`),
spaces around any string, and case and runs of whitespace in **free text** (a string of
`free_text_words` words or more). `exact` compares the JSON values; `ignore` skips the argument; set it
for the check (`values`), per tool or per argument (`tools: {NAME: {values: ..., args: {ARG: mode}}}`).
Order is free (`ordered=True`: the matched calls must come in the expected order). The per-call match
table (`details.expected[*].matched`) follows these rules only, so agreement with a benchmark's
per-action labels stays measurable (it reproduces every one of tau2-airline's 148 action labels).

**What fails.**

* a missing or wrong **required** expected call (a `major` finding). An expected call is required when
  it says so (`required`), else by `tools.NAME.required`, else unless its tool is known to change
  nothing: the reference's word is evidence enough that an `unknown` tool was needed. A missing
  lookup, computation or hand-off is an advisory (`minor`) finding: reported, scored lower, the
  check passes. A call whose only differing arguments are free text (a summary in other words) is minor;
* an **extra state-changing call**: a successful state-changing call matched to no expected call
  (`extra_writes='fail'`, the default). Reads, computations and hand-offs the reference does not list
  are free. `extra_writes='allow'` (in a profile, for agents whose references are partial) lets extra
  writes pass, except under an empty reference, which always means "change nothing";
* with `strict=True`, **any** extra successful call, reads included.

Findings land in the failure modes' issue models: a missed call (or an extra one) is a
`tool_selection` issue (`missed_tools` / `unnecessary_tools`); a tool called but never with the
expected arguments is a `tool_parameters` issue naming the parameter, the expected and actual values
and the step (a wrong write is reported there once, not again as an extra write). Each mode gets its
own score: 1 with no finding; `0.5 + 0.5·r` with only minor ones; `0.5·r` once a major one, where `r`
is the weighted share of the reference done: expected calls matched (1 per required call, 0.25 per
advisory one) over all expected calls plus every extra write (1 each), so runs rank by how much of
the reference they did and how much they changed that nobody asked for.

The options are fields of the check (set them in a profile) and can be set per record in
`metadata.reference_check` (`{"strict": true, "ordered": true, "arguments": "subset",
"values": "exact", "extra_writes": "allow"}`).

pydantic-evals' `ToolCorrectness` (run on a span tree built from the record) gives the same answer for
tool names and still runs, so its verdict sits beside ours in `details`. Its `ArgumentCorrectness`
inspects one occurrence of a tool (first, last or an index), so a tool expected twice with different
arguments can never pass it, and its `TrajectoryMatch` F1 falls below 1 with any extra call: neither
can express the matching above, which is why the arguments and the are matched here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from pydantic_evals.evaluators import EvaluatorContext, ToolCorrectness
from pydantic_evals.online import run_evaluators

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.issues import Issue, ToolParameterIssue, ToolSelectionIssue
from sensei_eval.core.outputs import judge_outputs
from sensei_eval.core.records import ExpectedToolCall, QueryRecord, ToolCall
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.spans import span_tree
from sensei_eval.core.transcript import Transcript
from sensei_eval.evaluators.base import Judge, register_judge
from sensei_eval.models.judge_model import JudgeModel

__all__ = (
    'DEFAULT_READ_ONLY_PATTERNS',
    'ArgumentMatch',
    'CallMatch',
    'Effect',
    'ExtraWrites',
    'ReferenceCheck',
    'ValueMatch',
    'classify_tool',
    'match_expected_calls',
    'read_only_tools',
    'tool_definitions',
)

ArgumentMatch = Literal['exact', 'subset']
ValueMatch = Literal['exact', 'lenient', 'ignore']
ExtraWrites = Literal['fail', 'allow']
EffectKind = Literal['write', 'read', 'compute', 'hand-off', 'unknown']
Evidence = Literal['annotation', 'description', 'profile', 'name']
_VALUE_MATCHES = ('exact', 'lenient', 'ignore')
_EXTRA_WRITES = ('fail', 'allow')
# Keys a record's `metadata.reference_check` may set; anything else there is reported, not ignored.
_RECORD_OPTIONS = frozenset({'strict', 'ordered', 'arguments', 'values', 'extra_writes'})
# Keys of one tool's rule in `tools`.
_TOOL_RULE_KEYS = frozenset({'required', 'read_only', 'values', 'args', 'ordered'})
# Kept for profiles written against earlier versions: a lookup verb at the start of a name. The name
# rules below already cover it; a profile's own `read_only_patterns` add to them as `profile` evidence.
DEFAULT_READ_ONLY_PATTERNS: tuple[str, ...] = (
    r'^(?:get|list|search|find|read|lookup|fetch|describe|view|show)(?:[_\-.A-Z0-9]|$)',
)
# A string of this many words or more is free text (a summary, a reason, a message): compared without
# case and runs of whitespace, and a difference in it alone is a minor finding.
_FREE_TEXT_WORDS = 6
# Weight of an advisory expected call in the matched share `r` (a required call weighs 1): a missed
# lookup costs a quarter of what a missed state change costs.
_ADVISORY_WEIGHT = 0.25
_NUMERIC = re.compile(r'[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?')


def _verbs(text: str) -> frozenset[str]:
    """A set of verbs written as words separated by white space."""
    return frozenset(text.split())


# ---------------------------------------------------------------------------------------------------
# What a tool does: verbs as tool names and descriptions use them (English, any domain). A word is
# looked up as written and, in descriptions, without a third-person "s" ("Cancels" -> cancel).
_WRITE_VERBS = _verbs(
    """
    create add insert update modify edit change set put patch post delete remove cancel book reserve send
    submit write save upload pay refund charge exchange return purchase buy apply assign approve reject close
    enable disable toggle suspend resume activate deactivate reset restart reboot move rename register
    subscribe unsubscribe schedule reschedule issue grant revoke deploy refuel make mark archive merge commit
    publish upgrade downgrade replace install uninstall block unblock lock unlock confirm complete start stop
    kill terminate finalize claim redeem upsert append clear drop transfer share invite accept decline process
    void attach detach unlink connect disconnect provision allocate increase decrease extend renew rebook
    destroy erase purge overwrite rollback revert forward
    """
)
_READ_VERBS = _verbs(
    """
    get list search find read lookup look fetch describe view show query retrieve browse inspect count locate
    load download check verify peek scan explore see resolve grep watch monitor poll test
    """
)
# Names and descriptions of tools that change nothing and read nothing outside: computations, notes to
# self, the answer itself.
_COMPUTE_VERBS = _verbs(
    """
    calculate calc calculator compute think reason reflect plan convert evaluate math format parse validate
    summarize summarise translate estimate final answer sum multiply divide
    """
)
# A hand-off passes the conversation on (to a human, another agent): it changes who answers, not the world.
_HANDOFF_VERBS = frozenset({'transfer', 'handoff', 'handover', 'escalate', 'delegate', 'route', 'forward'})
_HANDOFF_ONLY = frozenset({'handoff', 'handover', 'escalate', 'delegate'})  # a hand-off whatever follows
_HANDOFF_TEXT = re.compile(
    r'\b(?:transfer|hand(?:s|ing)? off|hand(?:s)? over|escalate|route|forward)s?\b[^.]{0,40}\b(?:to|with)\b[^.]{0,30}'
    r'\b(?:human|agent|person|operator|specialist|representative|supervisor|team)',
    re.IGNORECASE,
)
_NO_CHANGE_TEXT = re.compile(
    r'\bread[- ]only\b|\b(?:does|do|will|would) not (?:\w+ ){0,6}(?:change|modify|alter|write|update|affect)'
    r'|\bwithout (?:changing|modifying|altering)|\bno side[- ]effects?\b',
    re.IGNORECASE,
)
_READ_ONLY_TEXT = re.compile(r'\bread[- ]only\b|\bno side[- ]effects?\b', re.IGNORECASE)
_DESCRIPTION_LEAD = re.compile(
    r'^\s*(?:(?:this|the) (?:tool|function|endpoint|api)\s*(?:is used to|can be used to|will|lets you|allows you to)?'
    r'|use (?:this|the) (?:tool|function) to|(?:a )?(?:tool|function) (?:that|to)|used to|allows? (?:you|the \w+) to'
    r'|lets? (?:you|the \w+)|(?:it )?(?:can|will)|helps? (?:you )?(?:to )?)\b\s*',
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Effect:
    """What a tool does to the world, and the evidence that says so (reported with every call)."""

    kind: EffectKind
    evidence: Evidence
    why: str

    @property
    def state_changing(self) -> bool:
        return self.kind == 'write'

    def as_dict(self) -> dict[str, Any]:
        return {'state_changing': self.state_changing, 'kind': self.kind, 'evidence': self.evidence, 'why': self.why}


def _words(name: str) -> list[str]:
    """A tool name as lower-case words: snake_case, kebab-case, dotted, slashed and camelCase split."""
    spaced = re.sub(r'(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])', ' ', name)
    return [w for w in re.split(r'[^A-Za-z0-9]+', spaced.lower()) if w]


def _verb_kind(word: str) -> EffectKind | None:
    if word in _WRITE_VERBS:
        return 'write'
    if word in _READ_VERBS:
        return 'read'
    if word in _COMPUTE_VERBS:
        return 'compute'
    return None


def _by_name(name: str) -> Effect:
    """The last resort: what the tool's name says (module docstring, rule 4). Words before the first
    known verb (a namespace, a product: `airline.cancelReservation`, `context7_get_docs`) are skipped."""
    words = _words(name)
    for k, word in enumerate(words):
        if words[k : k + 2] in (['hand', 'off'], ['hand', 'over']) or (
            word in _HANDOFF_VERBS and (words[k + 1 : k + 2] == ['to'] or word in _HANDOFF_ONLY)
        ):
            return Effect('hand-off', 'name', f'{name!r} names a hand-off (transfer_to_X, handoff, escalate)')
        kind = _verb_kind(word)
        if kind is not None:  # the first known verb decides: `cancel_search_job` writes, `search_cancelled` reads
            return Effect(kind, 'name', f'{word!r} in the name')
    return Effect('unknown', 'name', 'no verb in the name says it changes state (a failure needs evidence)')


def _by_description(text: str) -> Effect | None:
    """What a tool's description says it does, or None when it does not tell (rule 2). Its leading verb
    decides; a description that says it changes nothing ("read-only", "will not change the database")
    makes it a read, except that a leading write verb yields only to "read-only" or "no side effects"
    ("Cancel the booking. This does not affect other passengers" still writes)."""
    if _HANDOFF_TEXT.search(text):
        return Effect('hand-off', 'description', 'the description hands the conversation off')
    lead = _first_verb(text)
    word = (_DESCRIPTION_LEAD.sub('', text.strip(), count=1).split(None, 1) or [''])[0].strip('.,:;()"\'`').lower()
    if lead == 'write' and not _READ_ONLY_TEXT.search(text):
        return Effect('write', 'description', f'the description begins with {word!r}')
    if _NO_CHANGE_TEXT.search(text[:600]):
        return Effect('compute' if lead == 'compute' else 'read', 'description', 'the description says it changes nothing')
    if lead is None:
        return None
    return Effect(lead, 'description', f'the description begins with {word!r}')


def _first_verb(text: str) -> EffectKind | None:
    rest = _DESCRIPTION_LEAD.sub('', text.strip(), count=1)
    words = rest.split(None, 1)
    if not words:
        return None
    word = words[0].strip('.,:;()"\'`').lower()
    if word in ('returns', 'gets', 'retrieves', 'lists', 'fetches', 'looks', 'searches', 'finds', 'shows', 'reads'):
        return 'read'  # "Returns the status" reads; "Return some items" (imperative) writes
    for candidate in (word, word[:-1] if word.endswith('s') else word, word[:-2] if word.endswith('es') else word):
        kind = _verb_kind(candidate)
        if kind is not None:
            return kind
    return None


def tool_definitions(record: QueryRecord) -> dict[str, dict[str, Any]]:
    """Tool name -> its definition (`annotations`, `description`) from the record's `metadata.tools`, then
    the tools the agent had (`QueryRecord.tools`: descriptions only) for the tools `metadata.tools` leaves out.

    Reads MCP tool definitions (`{"name", "description", "annotations"}`), OpenAI tool schemas
    (`{"type": "function", "function": {"name", "description", ...}}`) and a mapping of name to
    definition."""
    tools = record.metadata.get('tools')
    items: list[Any]
    if isinstance(tools, dict):
        items = [{'name': k, **v} if isinstance(v, dict) else {'name': k} for k, v in tools.items()]
    elif isinstance(tools, list):
        items = list(tools)
    else:
        items = []
    items += [{'name': t.name, 'description': t.description or ''} for t in record.tools or []]
    out: dict[str, dict[str, Any]] = {}
    for tool in items:
        if not isinstance(tool, dict):
            continue
        function = tool.get('function')
        inner: dict[str, Any] = function if isinstance(function, dict) else tool
        name = inner.get('name') or tool.get('name')
        if not isinstance(name, str) or not name:
            continue
        if name in out:  # `metadata.tools` (which may carry annotations) before `QueryRecord.tools`
            continue
        notes = inner.get('annotations') or tool.get('annotations')
        description = inner.get('description') or tool.get('description')
        out[name] = {
            'annotations': notes if isinstance(notes, dict) else {},
            'description': description if isinstance(description, str) else '',
        }
    return out


def read_only_tools(record: QueryRecord) -> dict[str, bool]:
    """Tool name -> its `readOnlyHint`, from the tool definitions a record carries (`metadata.tools`)."""
    return {
        name: d['annotations']['readOnlyHint']
        for name, d in tool_definitions(record).items()
        if isinstance(d['annotations'].get('readOnlyHint'), bool)
    }


def classify_tool(
    name: str,
    definition: Mapping[str, Any] | None = None,
    rule: Mapping[str, Any] | None = None,
    *,
    read_only_patterns: Sequence[str] = (),
    state_changing_patterns: Sequence[str] = (),
) -> Effect:
    """Whether `name` changes state, from the best evidence there is (module docstring: annotation,
    description, profile, name)."""
    definition = definition or {}
    notes = definition.get('annotations') or {}
    if notes.get('readOnlyHint') is True:
        return Effect('read', 'annotation', 'readOnlyHint: true')
    if notes.get('destructiveHint') is True:
        return Effect('write', 'annotation', 'destructiveHint: true')
    if notes.get('readOnlyHint') is False:
        return Effect('write', 'annotation', 'readOnlyHint: false')
    description = definition.get('description') or ''
    if description.strip() and (by_text := _by_description(description)) is not None:
        return by_text
    rule = rule or {}
    if isinstance(rule.get('read_only'), bool):
        return Effect(
            'read' if rule['read_only'] else 'write', 'profile', f'tools.{name}.read_only: {str(rule["read_only"]).lower()}'
        )
    for pattern in state_changing_patterns:
        if re.search(pattern, name):
            return Effect('write', 'profile', f'state_changing_patterns: {pattern!r}')
    for pattern in read_only_patterns:
        if re.search(pattern, name):
            return Effect('read', 'profile', f'read_only_patterns: {pattern!r}')
    return _by_name(name)


@dataclass(frozen=True)
class CallMatch:
    """One expected call and the actual call (its index in `record.tool_calls()`) it was matched to."""

    expected: ExpectedToolCall
    actual_index: int | None


@dataclass(frozen=True)
class _Compare:
    """How one tool's arguments compare: which top-level keys count (`keys`), each value's mode, and the
    lists compared in order (`ordered`: argument paths, `flights.stops`; every other list of scalars is a
    multiset)."""

    keys: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    args: Mapping[str, ValueMatch] = field(default_factory=dict)
    free_text_words: int = _FREE_TEXT_WORDS
    ordered: frozenset[str] = frozenset()

    def mode(self, key: str) -> ValueMatch:
        return self.args.get(key, self.values)

    def differing(self, expected: dict[str, Any] | None, actual: dict[str, Any] | str) -> list[str]:
        """The argument names whose values differ (`['(arguments)']` for arguments that are not an object)."""
        if expected is None:
            return []
        if not isinstance(actual, dict):
            return ['(arguments)']
        keys = [k for k in expected if self.mode(k) != 'ignore' and not self.equal(k, expected[k], actual, k in actual)]
        if self.keys == 'exact':
            keys += [k for k in actual if k not in expected and self.mode(k) != 'ignore']
        return keys

    def equal(self, key: str, want: Any, actual: dict[str, Any], present: bool) -> bool:
        """Whether the call's value of top-level argument `key` is what the reference says, as an API reads
        it (`_fits`): whatever the top-level rule (`keys`), nested keys the reference does not name are
        ignored and lists of scalars are multisets unless `ordered` names them."""
        return present and _fits(want, actual[key], self.mode(key), self.free_text_words, self.ordered, key)

    def free_text(self, value: Any) -> bool:
        return isinstance(value, str) and len(value.split()) >= self.free_text_words


def _fits(want: Any, have: Any, mode: ValueMatch, words: int, ordered: frozenset[str], path: str) -> bool:
    """`have` is what `want` says as an API reads it, at every depth below the top level: keys of nested
    objects that `want` does not name are ignored; a list of scalars is a multiset (`[3, 1]` fits `[1, 3]`,
    as `sorted(item_ids)` stores it) unless its `path` is in `ordered`; list items that are objects are
    paired by a shared key (`_item_key`), else (or when ordered) by position; leaves compare by `mode`.
    `path` names the value from the arguments' root (`flights.stops`: list items add nothing to it)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and _fits(v, have[k], mode, words, ordered, f'{path}.{k}') for k, v in want.items()
        )
    if isinstance(want, list | tuple):
        if not isinstance(have, list | tuple) or len(want) != len(have):
            return False
        if path in ordered:
            return all(_fits(w, h, mode, words, ordered, path) for w, h in zip(want, have, strict=True))
        if all(_is_scalar(x) for x in (*want, *have)):
            return Counter(_leaf(w, mode, words) for w in want) == Counter(_leaf(h, mode, words) for h in have)
        key = _item_key(want, have)
        if key is None:
            return all(_fits(w, h, mode, words, ordered, path) for w, h in zip(want, have, strict=True))
        by_key = {_leaf(h[key], mode, words): h for h in have}
        return all(
            (match := by_key.get(_leaf(w[key], mode, words))) is not None and _fits(w, match, mode, words, ordered, path)
            for w in want
        )
    return bool(_leaf(want, mode, words) == _leaf(have, mode, words))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _leaf(value: Any, mode: ValueMatch, words: int) -> Any:
    value = _lenient(value, words) if mode == 'lenient' else _normal(value)
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def _item_key(want: Sequence[Any], have: Sequence[Any]) -> str | None:
    """The key list items are paired by: one every item on both sides has with a scalar value, unique
    on each side; `id`, then `*_id`/`*Id`, then `name`/`key`, then any other. None: pair by position."""
    if not want or not all(isinstance(x, dict) for x in (*want, *have)):
        return None
    shared = set.intersection(*(set(x) for x in (*want, *have)))
    both = (*want, *have)
    usable = [k for k in shared if _scalar_in_all(k, both) and _unique_in(k, want) and _unique_in(k, have)]

    def rank(k: str) -> tuple[int, str]:
        low = k.lower()
        return (0 if low == 'id' else 1 if low.endswith(('_id', 'id')) else 2 if low in ('name', 'key') else 3, k)

    return min(usable, key=rank) if usable else None


def _scalar_in_all(key: str, items: Sequence[dict[str, Any]]) -> bool:
    return all(isinstance(x[key], str | int | float) and not isinstance(x[key], bool) for x in items)


def _unique_in(key: str, items: Sequence[dict[str, Any]]) -> bool:
    return len({json.dumps(x[key]) for x in items}) == len(items)


def match_expected_calls(
    expected: Sequence[ExpectedToolCall],
    calls: Sequence[ToolCall],
    *,
    ordered: bool = False,
    arguments: ArgumentMatch = 'exact',
    values: ValueMatch = 'lenient',
    compare: Callable[[str], _Compare] | None = None,
) -> list[CallMatch]:
    """Match each expected call to a distinct successful call: a maximum matching, not a greedy one.

    Greedy matching fails on wildcards (`args: null` taking the one call a specific expectation needed),
    so unordered matching uses augmenting paths and ordered matching a longest common subsequence.
    `compare` gives each tool's comparison (per-tool and per-argument modes); by default every tool
    compares with `arguments` and `values`.
    """
    usable = [i for i, c in enumerate(calls) if not c.failed]
    default = _Compare(keys=arguments, values=values)
    rule = compare or (lambda _name: default)

    def fits(e: ExpectedToolCall, i: int) -> bool:
        return calls[i].tool_name == e.tool_name and not rule(e.tool_name).differing(e.args, calls[i].args)

    pairs = _ordered_matching(expected, usable, fits) if ordered else _bipartite_matching(expected, usable, fits)
    return [CallMatch(e, pairs.get(k)) for k, e in enumerate(expected)]


@functools.cache
def _module_source() -> str:
    """The matching code, read once: the criteria hash changes when the semantics do."""
    import sys

    return inspect.getsource(sys.modules[__name__])


@register_judge
@dataclass(repr=False)
class ReferenceCheck(Judge):
    """The record's successful tool calls against its expected tool calls (see the module docstring)."""

    name: ClassVar[str] = 'reference_check'
    failure_mode: ClassVar[str | None] = 'tool_selection'
    # it reports findings of these modes, each tagged with its own (see reports.mode_verdicts); completeness:
    # the required outputs (`expected_outputs`) no reply says
    failure_modes: ClassVar[tuple[str, ...]] = ('tool_selection', 'tool_parameters', 'completeness')
    needs_model: ClassVar[bool] = False

    strict: bool = False
    ordered: bool = False
    arguments: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    # an extra successful state-changing call: `fail` (the default) or `allow` (references that are partial)
    extra_writes: ExtraWrites = 'fail'
    # per tool: {required: bool, read_only: bool, values: exact|lenient|ignore, args: {ARG: mode}}
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # a profile's own name rules (regular expressions), checked before the built-in name rules
    read_only_patterns: Sequence[str] = ()
    state_changing_patterns: Sequence[str] = ()
    free_text_words: int = _FREE_TEXT_WORDS

    def __post_init__(self) -> None:
        if self.values not in _VALUE_MATCHES:
            raise ConfigError(f'values: expected one of {", ".join(_VALUE_MATCHES)}, got {self.values!r}')
        if self.extra_writes not in _EXTRA_WRITES:
            raise ConfigError(f'extra_writes: expected one of {", ".join(_EXTRA_WRITES)}, got {self.extra_writes!r}')
        if not isinstance(self.tools, Mapping):
            raise ConfigError('tools: expected a mapping of tool name to its rule')
        for name, rule in self.tools.items():
            if not isinstance(rule, Mapping):
                raise ConfigError(f'tools.{name}: expected a mapping (required, read_only, values, args)')
            for key in rule:
                if key not in _TOOL_RULE_KEYS:
                    raise ConfigError(f'tools.{name}.{key}: unknown key (known: {", ".join(sorted(_TOOL_RULE_KEYS))})')
            for key in ('required', 'read_only'):
                if key in rule and not isinstance(rule[key], bool):
                    raise ConfigError(f'tools.{name}.{key}: expected true or false')
            if 'values' in rule and rule['values'] not in _VALUE_MATCHES:
                raise ConfigError(f'tools.{name}.values: expected one of {", ".join(_VALUE_MATCHES)}')
            args = rule.get('args', {})
            if not isinstance(args, Mapping) or any(v not in _VALUE_MATCHES for v in args.values()):
                raise ConfigError(f'tools.{name}.args: expected a mapping of argument to {"|".join(_VALUE_MATCHES)}')
            ordered = rule.get('ordered', [])
            if isinstance(ordered, str) or not isinstance(ordered, Sequence) or not all(isinstance(a, str) for a in ordered):
                raise ConfigError(f'tools.{name}.ordered: expected a list of argument paths (`stops`, `flights.stops`)')
        for option in ('read_only_patterns', 'state_changing_patterns'):
            for pattern in getattr(self, option):
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ConfigError(f'{option}: {pattern!r} is not a regular expression ({e})') from None

    def criteria_hash(self) -> str:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        text = json.dumps(params, sort_keys=True, default=lambda v: list(v) if isinstance(v, tuple) else str(v))
        return hashlib.sha256((_module_source() + text).encode()).hexdigest()

    def applies_to(self, record: QueryRecord) -> str | None:
        # `[]` is a reference ("change nothing"); only a missing field is none
        if record.expected_tool_calls is not None or record.expected_outputs:
            return None
        return 'the record has no expected_tool_calls or expected_outputs'

    def for_record(self, record: QueryRecord) -> tuple[ReferenceCheck, list[str]]:
        """This check with the record's own options applied, and warnings about options it could not use."""
        options = record.metadata.get('reference_check')
        if options is None:
            return self, []
        if not isinstance(options, dict):
            return self, [f'metadata.reference_check: expected an object, got {type(options).__name__}; ignored']
        known = sorted(_RECORD_OPTIONS)
        unknown = [k for k in options if k not in _RECORD_OPTIONS]
        warnings = [f'metadata.reference_check.{k}: unknown option (known: {known}); ignored' for k in unknown]
        changes: dict[str, Any] = {}
        for key in ('strict', 'ordered'):
            if key in options:
                if isinstance(options[key], bool):
                    changes[key] = options[key]
                else:
                    warnings.append(f'metadata.reference_check.{key}: expected true or false; ignored')
        for key, allowed in (('arguments', ('exact', 'subset')), ('values', _VALUE_MATCHES), ('extra_writes', _EXTRA_WRITES)):
            if key in options:
                if options[key] in allowed:
                    changes[key] = options[key]
                else:
                    warnings.append(f'metadata.reference_check.{key}: expected one of {", ".join(allowed)}; ignored')
        return replace(self, **changes), warnings

    def compare_for(self, tool: str) -> _Compare:
        """How `tool`'s arguments compare under this check's options and its rule for the tool."""
        rule = self.tools.get(tool, {})
        return _Compare(
            keys=self.arguments,
            values=rule.get('values', self.values),
            args=dict(rule.get('args', {})),
            free_text_words=self.free_text_words,
            ordered=frozenset(rule.get('ordered', ())),
        )

    def effect(self, tool: str, definitions: Mapping[str, Mapping[str, Any]]) -> Effect:
        """What `tool` does, from the record's tool definitions, this check's rules, then its name."""
        return classify_tool(
            tool,
            definitions.get(tool),
            self.tools.get(tool),
            read_only_patterns=self.read_only_patterns,
            state_changing_patterns=self.state_changing_patterns,
        )

    def read_only(self, tool: str, definitions: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether `tool` changes nothing (reads, computes or hands off)."""
        return not self.effect(tool, definitions).state_changing

    def required(self, e: ExpectedToolCall, definitions: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether missing `e` fails the run: `e.required`, else `tools.NAME.required`, else unless its tool
        is known to change nothing (a read, a computation, a hand-off: an `unknown` tool stays required)."""
        if e.required is not None:
            return e.required
        rule = self.tools.get(e.tool_name, {})
        if 'required' in rule:
            return bool(rule['required'])
        return self.effect(e.tool_name, definitions).kind in ('write', 'unknown')

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        check, warnings = self.for_record(record)
        issues: list[tuple[str, Issue]] = []
        mode_scores: dict[str, float] = {}
        details: dict[str, Any] = check._options()
        reasons: list[str] = []
        if record.expected_tool_calls is not None:
            found = await check._judge_calls(record, transcript)
            if isinstance(found, str):  # pydantic-evals' ToolCorrectness failed: an error, never a verdict
                return self._result(model=None, status='error', error=found, latency_s=time.perf_counter() - start)
            call_issues, call_scores, call_details = found
            issues += call_issues
            mode_scores.update(call_scores)
            details.update(call_details)
            reasons.append(_reasoning(call_issues, len(record.expected_tool_calls)))
        if record.expected_outputs:
            outputs = judge_outputs(record, transcript)
            issues += [('completeness', i) for i in outputs.issues]
            mode_scores['completeness'], details['outputs'] = outputs.score, outputs.table
            reasons.append(outputs.reasoning)
        failing = [i for _, i in issues if i.severity != 'minor']
        details['minor_findings'] = len(issues) - len(failing)
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(reasons),
            issues=[{**i.model_dump(mode='json'), 'failure_mode': mode} for mode, i in issues],
            score=min(mode_scores.values()),
            mode_scores=mode_scores,
            passed=not failing,
            latency_s=time.perf_counter() - start,
            warnings=warnings,
            details=details,
        )

    async def _judge_calls(
        self, record: QueryRecord, transcript: Transcript
    ) -> tuple[list[tuple[str, Issue]], dict[str, float], dict[str, Any]] | str:
        """The calls against `expected_tool_calls`: findings, mode scores and details (or why pydantic-evals'
        ToolCorrectness, run beside the matching, failed)."""
        check = self
        expected = record.expected_tool_calls or []
        calls = record.tool_calls()
        matches = match_expected_calls(expected, calls, ordered=check.ordered, compare=check.compare_for)
        definitions = tool_definitions(record)
        effects = {
            name: check.effect(name, definitions)
            for name in dict.fromkeys([*(c.tool_name for c in calls), *(e.tool_name for e in expected)])
        }
        required = [check.required(e, definitions) for e in expected]
        steps = _call_steps(transcript, calls)
        issues, extra_writes = check._issues(matches, calls, steps, required, effects, empty=not expected)

        names_result, failures = await run_evaluators(
            [ToolCorrectness(expected_tools=[e.tool_name for e in expected], allow_extra=not check.strict)],
            _context(record),
        )
        if failures:
            return '; '.join(f'{f.name}: {f.error_message}' for f in failures)

        share = _matched_share(matches, required, len(extra_writes))
        mode_scores = {'tool_selection': _mode_score(issues, 'tool_selection', share)}
        if any(e.args is not None for e in expected):
            mode_scores['tool_parameters'] = _mode_score(issues, 'tool_parameters', share)
        details = {
            'reference': 'empty: change nothing' if not expected else f'{len(expected)} expected call(s)',
            'matched': sum(1 for m in matches if m.actual_index is not None),
            'matched_share': round(share, 4),
            'extra_state_changing_calls': len(extra_writes),
            'tools': {name: e.as_dict() for name, e in effects.items()},
            'calls': _call_details(calls, matches, steps, effects),
            'expected': _expected_details(matches, required, steps),
            'ToolCorrectness': {'value': names_result[0].value, 'reason': names_result[0].reason},
        }
        return issues, mode_scores, details

    def _options(self) -> dict[str, Any]:
        """The options a verdict was reached with (in its details)."""
        return {
            'strict': self.strict,
            'ordered': self.ordered,
            'arguments': self.arguments,
            'values': self.values,
            'extra_writes': self.extra_writes,
        }

    def _issues(
        self,
        matches: list[CallMatch],
        calls: Sequence[ToolCall],
        steps: list[int | None],
        required: list[bool],
        effects: Mapping[str, Effect],
        *,
        empty: bool = False,
    ) -> tuple[list[tuple[str, Issue]], list[int]]:
        """The findings, and the indices of the extra state-changing calls (they lower the score's share)."""
        issues: list[tuple[str, Issue]] = []
        used = {m.actual_index for m in matches if m.actual_index is not None}
        # a wrong write is reported once, as a parameter finding, not again as an extra write
        explained: set[int] = set()
        for m, req in zip(matches, required, strict=True):
            if m.actual_index is None:
                issues.append(self._missed(m.expected, req, calls, steps, effects, used, explained))
        unmatched = [i for i, c in enumerate(calls) if not c.failed and i not in used]
        writes = [i for i in unmatched if effects[calls[i].tool_name].state_changing]
        if self.strict:
            extra = self._beyond_expected(unmatched, calls, steps)
        elif self.extra_writes == 'fail' or empty:
            extra = self._unasked_writes([i for i in writes if i not in explained], calls, steps, effects, empty=empty)
        else:
            extra = None
        if extra is not None:
            issues.append(('tool_selection', extra))
        for _, found in issues:
            found.source = 'check'
        extra_writes = [i for i in writes if i not in explained] if (self.extra_writes == 'fail' or empty or self.strict) else []
        return issues, extra_writes

    def _missed(
        self,
        e: ExpectedToolCall,
        req: bool,
        calls: Sequence[ToolCall],
        steps: list[int | None],
        effects: Mapping[str, Effect],
        used: set[int],
        explained: set[int],
    ) -> tuple[str, Issue]:
        """The finding for an expected call no call matched: wrong arguments (a parameter finding; the calls
        it explains are added to `explained`), or a call missing, failed or out of order (a selection one)."""
        compare = self.compare_for(e.tool_name)
        same_tool = [i for i, c in enumerate(calls) if c.tool_name == e.tool_name]
        ok = [i for i in same_tool if not calls[i].failed]
        if ok and all(compare.differing(e.args, calls[i].args) for i in ok):
            issue = _parameter_issue(e, calls, ok, used, steps, compare)
            explained.update(i for i in ok if i not in used)
            free = all(compare.free_text((e.args or {}).get(k)) for k in issue.parameter.split(', '))
            issue.severity = 'major' if req and not free else 'minor'
            if req and free:
                issue.reasoning += ' Only free text differs (a summary or message in other words): a minor finding.'
            elif not req:  # say why it is minor, so the score below 1 of a pass is explained
                effect = effects[e.tool_name]
                what = f'a {effect.kind}, by {effect.evidence}' if e.required is None else 'marked not required'
                issue.reasoning += f' An advisory call ({what}): a minor finding, it lowers the score and does not fail the run.'
            return 'tool_parameters', issue
        if ok:  # a fitting call exists, but it is out of the expected order or taken by another expectation
            why = (
                f'{e.tool_name} was called with the expected arguments, but not in the expected order'
                if self.ordered
                else f'{e.tool_name} is expected more times than it was successfully called so'
            )
        elif same_tool:
            why = f'every call of {e.tool_name} failed (steps {_steps_text(same_tool, steps)})'
        else:
            why = f'{e.tool_name} was expected but never called'
        if not req:  # say why it is advisory and what that means, so a score below 1 with a pass is explained
            effect = effects[e.tool_name]
            why += (
                f' (an advisory call: {effect.kind}, by {effect.evidence}: {effect.why}'
                if e.required is None
                else ' (an advisory call: marked not required'
            ) + '; a missing advisory call lowers the score and does not fail the run)'
        selection = ToolSelectionIssue(missed_tools=[e.tool_name], unnecessary_tools=[], reasoning=why + '.')
        selection.steps = [s for i in same_tool if (s := steps[i]) is not None]
        selection.severity = 'major' if req else 'minor'
        return 'tool_selection', selection

    @staticmethod
    def _beyond_expected(extra: list[int], calls: Sequence[ToolCall], steps: list[int | None]) -> Issue | None:
        """Strict: every successful call no expectation took is a finding."""
        if not extra:
            return None
        names = sorted({calls[i].tool_name for i in extra})
        return _unnecessary(names, extra, steps, f'{len(extra)} call(s) beyond the expected ones (strict): {", ".join(names)}.')

    @staticmethod
    def _unasked_writes(
        unasked: list[int], calls: Sequence[ToolCall], steps: list[int | None], effects: Mapping[str, Effect], *, empty: bool
    ) -> Issue | None:
        """State-changing calls the reference does not contain (and no parameter finding explains)."""
        if not unasked:
            return None
        names = sorted({calls[i].tool_name for i in unasked})
        how = '; '.join(f'{n}: {effects[n].why} ({effects[n].evidence})' for n in names)
        what = 'the reference is empty ("change nothing")' if empty else 'the reference does not contain them'
        return _unnecessary(names, unasked, steps, f'{len(unasked)} state-changing call(s) nobody asked for, {what}: {how}.')


def _unnecessary(names: list[str], indices: list[int], steps: list[int | None], reasoning: str) -> ToolSelectionIssue:
    """A major selection finding: calls of `names` that should not have been made."""
    selection = ToolSelectionIssue(missed_tools=[], unnecessary_tools=names, reasoning=reasoning)
    selection.steps = [s for i in indices if (s := steps[i]) is not None]
    selection.severity = 'major'
    return selection


def _matched_share(matches: list[CallMatch], required: list[bool], extra_writes: int) -> float:
    """The weighted share of the reference done: a required call weighs 1, an advisory one less, and each
    extra state-changing call counts against it."""
    weights = [1.0 if r else _ADVISORY_WEIGHT for r in required]
    done = sum(w for w, m in zip(weights, matches, strict=True) if m.actual_index is not None)
    return done / (sum(weights) + extra_writes) if (sum(weights) + extra_writes) else 1.0


def _reasoning(issues: list[tuple[str, Issue]], expected: int) -> str:
    if issues:
        return '; '.join(_reason(i) for _, i in issues)
    if expected:
        return f'all {expected} expected call(s) matched and no state-changing call beyond them'
    return 'the reference is empty ("change nothing") and no call changed state'


def _call_details(
    calls: Sequence[ToolCall], matches: list[CallMatch], steps: list[int | None], effects: Mapping[str, Effect]
) -> list[dict[str, Any]]:
    """Each call: its step, whether it failed, the expectation it matched, and what its tool does."""
    by_call = {m.actual_index: k for k, m in enumerate(matches) if m.actual_index is not None}
    return [
        {
            'tool_name': c.tool_name,
            'step': steps[i],
            'failed': c.failed,
            'expected': by_call.get(i),
            'state_changing': effects[c.tool_name].state_changing,
            'evidence': effects[c.tool_name].evidence,
        }
        for i, c in enumerate(calls)
    ]


def _expected_details(matches: list[CallMatch], required: list[bool], steps: list[int | None]) -> list[dict[str, Any]]:
    """Each expected call: whether it matched (at which step) and whether it was required."""
    return [
        {
            'tool_name': m.expected.tool_name,
            'args': m.expected.args,
            'matched': m.actual_index is not None,
            'required': req,
            'step': steps[m.actual_index] if m.actual_index is not None else None,
        }
        for m, req in zip(matches, required, strict=True)
    ]


# ---------------------------------------------------------------------------------------------------
# Matching


def _normal(value: Any) -> Any:
    """JSON normalisation: what JSON cannot tell apart compares equal (key order, tuples vs lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _lenient(value: Any, free_text_words: int) -> Any:
    """The lenient form of a value: numeric strings as numbers, strings stripped, free text folded."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMERIC.fullmatch(text):
            try:
                return float(text)
            except ValueError:  # pragma: no cover - the pattern only lets floats through
                return text
        return ' '.join(text.casefold().split()) if len(text.split()) >= free_text_words else text
    if isinstance(value, dict):
        return {str(k): _lenient(v, free_text_words) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lenient(v, free_text_words) for v in value]
    return _normal(value)


def _bipartite_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn's augmenting paths): expected index -> call index."""
    owner: dict[int, int] = {}  # call index -> expected index

    def augment(k: int, seen: set[int]) -> bool:
        for i in usable:
            if i in seen or not fits(expected[k], i):
                continue
            seen.add(i)
            if i not in owner or augment(owner[i], seen):
                owner[i] = k
                return True
        return False

    for k in range(len(expected)):
        augment(k, set())
    return {k: i for i, k in owner.items()}


def _ordered_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """The longest run of expected calls matched in order (LCS with `fits` as equality)."""
    n, m = len(expected), len(usable)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        for b in range(m - 1, -1, -1):
            best = max(table[a + 1][b], table[a][b + 1])
            if fits(expected[a], usable[b]):
                best = max(best, table[a + 1][b + 1] + 1)
            table[a][b] = best
    pairs: dict[int, int] = {}
    a = b = 0
    while a < n and b < m:
        if fits(expected[a], usable[b]) and table[a][b] == table[a + 1][b + 1] + 1:
            pairs[a] = usable[b]
            a, b = a + 1, b + 1
        elif table[a + 1][b] >= table[a][b + 1]:
            a += 1
        else:
            b += 1
    return pairs


# ---------------------------------------------------------------------------------------------------
# Findings


def _parameter_issue(
    e: ExpectedToolCall,
    calls: Sequence[ToolCall],
    candidates: list[int],
    used: set[int],
    steps: list[int | None],
    compare: _Compare,
) -> ToolParameterIssue:
    """The closest call of the right tool (fewest differing keys, unmatched calls first) and what differs."""
    want = _normal(e.args or {})

    def diff(i: int) -> list[str]:
        return [k for k in compare.differing(e.args, calls[i].args) if k != '(arguments)']

    best = min(candidates, key=lambda i: (i in used, len(diff(i)), i))
    keys = diff(best) or ['(arguments)']
    have = _normal(calls[best].args) if isinstance(calls[best].args, dict) else calls[best].args
    actual = {k: have.get(k, '(absent)') for k in keys} if isinstance(have, dict) else have
    suggested = {k: want.get(k, '(absent)') for k in keys}
    step = steps[best]
    issue = ToolParameterIssue(
        tool_name=e.tool_name,
        parameter=', '.join(keys),
        actual_value=_short(actual),
        suggested_value=_short(suggested),
        reasoning=(
            f'{e.tool_name} was called ({len(candidates)} successful call(s)) but never with the expected arguments; '
            f'the closest call{f" (step {step})" if step else ""} differs in {", ".join(keys)}.'
        ),
    )
    issue.steps = [step] if step is not None else []
    return issue


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + '…'


def _reason(issue: Issue) -> str:
    return str(getattr(issue, 'reasoning', type(issue).__name__))


def _mode_score(issues: list[tuple[str, Issue]], mode: str, share: float) -> float:
    """1 with no finding; 0.5 + 0.5·share with minor ones only; 0.5·share once a major one (module docstring)."""
    found = [i for m, i in issues if m == mode]
    if not found:
        return 1.0
    if all(i.severity == 'minor' for i in found):
        return 0.5 + 0.5 * share
    return 0.5 * share


def _steps_text(indices: list[int], steps: list[int | None]) -> str:
    return ', '.join(str(steps[i]) for i in indices if steps[i] is not None) or 'not shown'


def _call_steps(transcript: Transcript, calls: Sequence[ToolCall]) -> list[int | None]:
    """The transcript step of each tool call, by the call's position in the record."""
    return [step.number if (step := transcript.step_of(c.call_at)) is not None else None for c in calls]


def _context(record: QueryRecord) -> EvaluatorContext[Any, Any, Any]:
    return EvaluatorContext[Any, Any, Any](
        name=record.query_id,
        inputs=record.query,
        metadata=None,
        expected_output=None,
        output=record.final_answer(),
        duration=0.0,
        _span_tree=span_tree(record),
        attributes={},
        metrics={},
    )
