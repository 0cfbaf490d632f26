"""What a tool does, read from what the run shows of it: a state change (`write`), a lookup (`read`), a
computation or note to self (`compute`), a hand-off of the conversation (`hand-off`), or `unknown`.

The reference check (`evaluators.reference`) needs it because a state-changing call the reference does not
contain is a failure, while an unlisted read is free. The evidence is taken in this order, and named in each
`Effect`: the tool's own annotation (`readOnlyHint` / `destructiveHint`), its description (the verb it starts
with, "read-only", "no side effects"), the agent profile's `read_only_patterns`, and last the verbs of its name
(English, any domain). A tool nothing says anything about is `unknown`, treated as a state change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sensei_eval.core.records import QueryRecord

__all__ = (
    'DEFAULT_READ_ONLY_PATTERNS',
    'Effect',
    'EffectKind',
    'Evidence',
    'classify_tool',
    'read_only_tools',
    'tool_definitions',
)

EffectKind = Literal['write', 'read', 'compute', 'hand-off', 'unknown']
Evidence = Literal['annotation', 'description', 'profile', 'name']
# Kept for profiles written against earlier versions: a lookup verb at the start of a name. The name
# rules below already cover it; a profile's own `read_only_patterns` add to them as `profile` evidence.
DEFAULT_READ_ONLY_PATTERNS: tuple[str, ...] = (
    r'^(?:get|list|search|find|read|lookup|fetch|describe|view|show)(?:[_\-.A-Z0-9]|$)',
)


def _verbs(text: str) -> frozenset[str]:
    """A set of verbs written as words separated by white space."""
    return frozenset(text.split())


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
