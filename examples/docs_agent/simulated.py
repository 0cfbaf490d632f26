"""A simulated documentation-agent model: a scripted stand-in so the optimize/validate loop runs offline.

**This is not a language model and proves nothing about one.** It is a pydantic-ai `FunctionModel`
that plays a documentation agent by script: it reads the system prompt it is given (the agent's
instructions), looks for a handful of rules in it with case-insensitive regular expressions (several
phrasings each, so a paraphrased rule still counts), and behaves accordingly. It calls the real tools
of `tools.py` (returning `ToolCallPart`s, then reading the `ToolReturnPart`s on the next turn) and writes
its final answer from what they returned. The same prompt and query always give the same run.

Its purpose is to make the loop show *real, repeatable movement* with no key and no network: when the
optimizer writes a component that states a rule, the runs change in the way the judges look for, and
the scores move. A rule is a concept, not a sentence: each has a small set of phrasings (`RULE_PATTERNS`:
"cite sources", "include links to the pages you used", "reference the documentation" all mean citing),
and the whole system prompt is read, so a rule written in any component counts. `RULES` below is one
phrasing per rule for tests that want a fixed prompt; the example's proposer (`proposer.py`) never sees
it. Whether a real model would follow the same sentence is a separate, empirical question that only a
run against a real model (`SENSEI_EVAL_AGENT_MODEL`) can answer.

Rules (name → behaviour with the rule; without it):

* `no_greeting` — starts with the answer; otherwise opens with "Hello! I'd be happy to help" and
  closes with "Hope this helps!".
* `pass_version` — passes `version=` to `context7_get_docs` when the query names a version (one call per
  version); otherwise never passes it (and so reads the latest version's page).
* `official_first` — resolves the library and reads its docs with Context7 first; otherwise, for
  about half the queries (chosen by a hash of the query text), uses `tavily_search` only.
* `state_confidence` — ends each part with `Confidence: high (official docs …)` or `low (community …)`.
* `decompose` — answers each part of an "X and Y" question separately, researching each; otherwise
  researches and answers only the first part.
* `verify` — checks the key identifier of each page with `scout_grep` before answering.
* `cite_sources` / `cite_snippets` — cites each claim with a `<source ref="corpus/x.md"/>` tag, or with
  `<source ref="corpus/x.md">"quoted snippet"</source>` when the prompt also asks for snippets/quotes;
  otherwise only a vague "according to the docs … (see corpus/x.md)".
* `report_searches` — ends with a "Searched:" line listing every tool call and what it returned.

`RULES` has one sentence per rule that triggers it; `improved_components()` appends them to the
mediocre components of `prompts.py`, for tests and benchmarks that want a "fixed" prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from . import prompts

__all__ = (
    'RULES',
    'RULE_COMPONENTS',
    'RULE_PATTERNS',
    'detect_rules',
    'improved_components',
    'improved_prompt',
    'simulated_model',
)

# ---------------------------------------------------------------------------------------------------
# Rules: what the script looks for in its instructions

_NEG = r"(?:do not|don't|never|avoid|without|skip|omit|no|drop|remove|leave out|cut)"

# Each rule is a concept with several phrasings: what a sentence *means* triggers it, not one wording.
# The whole system prompt is read, so a rule stated in any component counts.
RULE_PATTERNS: dict[str, list[str]] = {
    'no_greeting': [
        rf'{_NEG}\b[^.\n]{{0,40}}\b(?:greet\w*|pleasantries|filler|small talk|chit-?chat|preamble|hello)',
        r'audience is (?:other )?(?:ai )?(?:agents|programs|tools)',
        r'(?:reader|caller|user) is (?:an(?:other)? )?(?:ai )?(?:agent|program|tool)\b',
        r'(?:start|begin|open|lead)\b[^.\n]{0,30}\b(?:directly |straight )?with the (?:answer|facts)',
        r'get (?:straight|right|directly) to the (?:point|answer)',
        r'(?:machine|agent)[- ](?:readable|consumption|consumable)',
    ],
    'pass_version': [
        r'pass\b[^.\n]{0,20}\bversion',
        r'version[- ]specific',
        r'\bversion\s*=',
        r'(?:include|specify|set|provide|forward|supply|use)\b[^.\n]{0,20}`?version`?\s*(?:argument|parameter|param)',
        r'(?:names|mentions|specifies|asks about|gives)\b[^.\n]{0,15}\bversion\b'
        r'[^.\n]{0,60}\b(?:pass|include|set|specify|use|forward)',
        r'(?:docs|documentation) (?:for|of) the (?:exact |specific |requested )?version',
    ],
    'official_first': [
        r'official (?:docs|documentation|sources?)\b[^.\n]{0,20}\b(?:first|before)',
        r'(?:prefer|start with|begin with|exhaust|consult|try|check)\b[^.\n]{0,30}\bofficial (?:docs|documentation|sources?)',
        r'trust (?:hierarchy|order|ranking)',
        r'(?:community|blog|web search|tavily)\w*\b[^.\n]{0,50}\b(?:last resort|fall ?back|only (?:if|when|after))',
        r'(?:call|use|consult|start with|begin with|prefer)\b[^.\n]{0,20}\b'
        r'(?:(?:the )?documentation (?:lookup|tool)|(?:the )?docs tool|context7)',
        r'(?:look up|read|check)\b[^.\n]{0,20}\b(?:the )?(?:library|framework)\W?s? (?:own )?(?:docs|documentation)\b'
        r'[^.\n]{0,30}\b(?:first|before)',
    ],
    'state_confidence': [
        r'confidence (?:line|level|rating|statement|score)s?\b',
        r'(?:state|give|communicate|report|include|indicate|express|add|end with)\b[^.\n]{0,40}\bconfidence',
        r'how (?:sure|confident|certain) you are',
        r'(?:say|note|flag|mark)\b[^.\n]{0,30}\bhow reliable',
    ],
    'decompose': [
        r'(?:split|break|decompose|divide)\b[^.\n]{0,40}\b(?:parts?|sub-?questions?|topics?|pieces)',
        r'(?:answer|research|address|cover|search)\b[^.\n]{0,20}\b(?:each|every|all) (?:parts?|sub-?questions?)\b',
        r'multi-?part (?:questions?|quer(?:y|ies))\b[^.\n]{0,60}\b(?:separately|individually|each|every)',
        r'independent (?:topics|parts|questions|sub-?questions)',
        r'(?:do not|don\'t|never) (?:skip|ignore|drop) (?:a|any) part',
    ],
    'verify': [
        r'(?:verify|confirm|cross-?check|double-?check|check)\b[^.\n]{0,60}'
        r'\b(?:scout_grep|grep|code (?:examples?|blocks?|search)|second source|another source)',
        r'scout_grep\b[^.\n]{0,50}\b(?:verify|confirm|check)',
    ],
    'cite_sources': [
        r'<source\b',
        r'source tags?\b',
        r'\bcite\b[^.\n]{0,30}\b(?:sources?|pages?|docs|documentation|claims?|references?)',
        r'(?:include|add|give|provide)\b[^.\n]{0,20}\b(?:links?|references?|urls?)\b[^.\n]{0,40}'
        r'\b(?:pages?|sources?|docs|documentation)',
        r'reference the (?:documentation|docs|sources?|pages?)',
        r'(?:every|each) (?:claim|statement)\b[^.\n]{0,30}\b(?:cited|sourced|backed by a source)',
        r'(?:every|each|all) citations?\b',
    ],
    'cite_snippets': [
        r'\b(?:snippets?|quot(?:e|es|ed|ing|ation)|excerpts?|verbatim)\b',
    ],
    'report_searches': [
        r'(?:say|state|explain|list|report|note|mention|finish with|end with|include)\b[^.\n]{0,30}'
        r'\b(?:what|which)\b[^.\n]{0,20}\b(?:you )?(?:searched|search(?:es)?|looked|tools?|queries|tried)',
        r'(?:what was|what you) (?:searched|tried|looked)',
        r'searches you (?:made|ran|did)',
        r'(?:list|report|show)\b[^.\n]{0,20}\b(?:the |your )?(?:tool calls|searches)\b',
    ],
}

# One sentence per rule that triggers it (and only it), with the component it belongs in.
RULES: list[tuple[str, str]] = [
    ('no_greeting', 'Your audience is other AI agents: no pleasantries, greetings or filler; start with the answer.'),
    ('pass_version', 'When the query names a version, pass it as the `version` argument of context7_get_docs.'),
    (
        'official_first',
        'Official docs first: resolve the library and read its documentation with Context7 before any web search; '
        'community posts are a last resort.',
    ),
    (
        'state_confidence',
        "State your confidence with a line such as 'Confidence: high (official docs)' or "
        "'Confidence: low (community post)', matching how reliable the source is.",
    ),
    ('decompose', "Split multi-part questions ('X and Y') into their parts; research and answer each part separately."),
    ('verify', 'After reading the docs, verify the key API names with scout_grep over the code examples before answering.'),
    (
        'cite_snippets',
        'Cite every claim inline as <source ref="corpus/file.md">"exact quoted snippet"</source>, quoting the sentence '
        'that supports it.',
    ),
    (
        'report_searches',
        'Finish with what you searched (tools and arguments) and what each returned, so the caller can troubleshoot.',
    ),
]

RULE_COMPONENTS: dict[str, str] = {
    'no_greeting': 'IDENTITY',
    'pass_version': 'AVAILABLE_TOOLS',
    'official_first': 'CHOOSING_SOURCES',
    'state_confidence': 'CONFIDENCE_LEVELS',
    'decompose': 'QUERY_DECOMPOSITION',
    'verify': 'RESEARCH_METHODOLOGY',
    'cite_sources': 'CITATIONS',
    'cite_snippets': 'CITATIONS',
    'report_searches': 'REPORTING_RESULTS',
}


def detect_rules(prompt: str) -> frozenset[str]:
    """The rules a prompt states. `cite_snippets` counts only together with `cite_sources` (snippets in tags)."""
    found = {name for name, patterns in RULE_PATTERNS.items() if any(re.search(p, prompt, re.IGNORECASE) for p in patterns)}
    if 'cite_sources' not in found:
        found.discard('cite_snippets')
    elif 'cite_snippets' in found:
        found.discard('cite_sources')
    return frozenset(found)


def improved_components(rules: Iterable[str] | None = None) -> dict[str, str]:
    """`prompts.py`'s components with the sentences of `rules` (default: all) appended to their component."""
    wanted = set(rules) if rules is not None else {name for name, _ in RULES}
    texts = {name: str(getattr(prompts, name)) for name in prompts.COMPONENTS}
    for name, sentence in RULES:
        if name in wanted:
            component = RULE_COMPONENTS[name]
            texts[component] = f'{texts[component]}\n{sentence}'
    return texts


def improved_prompt(rules: Iterable[str] | None = None) -> str:
    """The full prompt with `improved_components(rules)`, assembled the way `prompts.build_prompt()` does."""
    return '\n\n'.join(f'## {name}\n{text}' for name, text in improved_components(rules).items())


# ---------------------------------------------------------------------------------------------------
# Reading the query

# (canonical library name, pattern naming it in a query); pydantic-settings before pydantic.
_LIBRARIES: list[tuple[str, str]] = [
    ('pydantic-settings', r'pydantic[- ]settings|\bbasesettings\b'),
    ('pydantic', r'\bpydantic\b(?![- ]settings)'),
    ('fastapi', r'\bfastapi\b'),
    ('httpx', r'\bhttpx\b'),
    ('Next.js', r'\bnext\.?js\b'),
    ('tokio', r'\btokio\b'),
]
_VERSION = re.compile(
    r'(?<![\w.])v(?P<v>\d+(?:\.\d+)*)\b'
    r'|(?:next\.?js|pydantic|tokio|httpx|fastapi|settings)\s+(?P<lib>\d+(?:\.\d+)*)\b'
    r'|(?<=\d)\s+(?:vs\.?|versus|or|to)\s+v?(?P<vs>\d+(?:\.\d+)*)\b',
    re.IGNORECASE,
)
_SPLIT = re.compile(r',?\s+and\s+(?:also\s+)?(?=(?:how|what|when|why|which|is|are|can|does|do|should)\b)|\?\s+(?=\w)|;\s+', re.I)
_WORD = re.compile(r"[A-Za-z_][\w.'-]*")
_STOP_TEXT = (
    'a an and are as at be by can do does for from how i in is it its my of on or should the this to use using what '
    'when where which why with you your vs versus me about into did get am we our there their they them also'
)
_STOP = frozenset(_STOP_TEXT.split())


@dataclass
class _Part:
    text: str
    library: str | None
    versions: list[str]

    @property
    def topic(self) -> str:
        text = _VERSION.sub(' ', self.text)
        for _, pattern in _LIBRARIES:
            text = re.sub(pattern, ' ', text, flags=re.IGNORECASE)
        words = [w.strip(".'-") for w in _WORD.findall(text)]
        return ' '.join(w for w in words if w and w.lower() not in _STOP and not re.fullmatch(r'v?\d+', w.lower()))


def _library_of(text: str) -> str | None:
    for name, pattern in _LIBRARIES:
        if re.search(pattern, text, re.IGNORECASE):
            return name
    return None


def _versions_of(text: str) -> list[str]:
    found: list[str] = []
    for m in _VERSION.finditer(text):
        v = m.group('v') or m.group('lib') or m.group('vs')
        if v and v not in found:
            found.append(v)
    return found


def _parts(query: str) -> list[_Part]:
    pieces = [p.strip(' ?.') for p in _SPLIT.split(query) if p and p.strip(' ?.')]
    merged: list[str] = []
    for piece in pieces:
        if merged and len(_WORD.findall(piece)) < 3:
            merged[-1] += ' and ' + piece
        else:
            merged.append(piece)
    library, versions = _library_of(query), _versions_of(query)
    return [_Part(p, _library_of(p) or library, _versions_of(p) or versions) for p in merged or [query]]


def _web_only(query: str) -> bool:
    """Without the trust rule, about half the queries go to web search only (fixed by the query text)."""
    return int(hashlib.sha256(query.strip().encode()).hexdigest(), 16) % 2 == 0


# ---------------------------------------------------------------------------------------------------
# Reading tool results

_Call = tuple[str, dict[str, Any]]


def _key(tool: str, args: dict[str, Any]) -> str:
    return tool + json.dumps(args, sort_keys=True)


@dataclass
class _Page:
    ref: str
    trust: str
    version: str
    published: str | None
    body: str


def _pages(result: str) -> list[_Page]:
    pages: list[_Page] = []
    for block in result.split('\n\n---\n\n'):
        head, _, body = block.partition('\n\n')
        meta = dict(line.split(': ', 1) for line in head.splitlines() if ': ' in line)
        if 'source' not in meta or not body or meta['source'].startswith('corpus ('):
            continue
        trust, _, date = meta.get('trust', '').partition(' (published ')
        pages.append(_Page(meta['source'], trust, meta.get('version', '?'), date.rstrip(')') or None, body))
    return pages


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in re.split(r'(?<=[.!?])\s+(?=[A-Z`])', paragraph) if s.strip()]


def _best_paragraph(page: _Page, topic: str) -> str:
    words = {w.lower().rstrip('s') for w in _WORD.findall(topic)}
    paragraphs = [p for p in re.split(r'\n\s*\n', page.body.split('```')[0]) if p.strip() and not p.startswith('#')]

    def score(p: str) -> int:
        return len(words & {w.lower().rstrip('s') for w in _WORD.findall(p)})

    return max(paragraphs, key=score) if paragraphs else ''


def _code_block(page: _Page) -> str:
    m = re.search(r'```\w*\n.*?```', page.body, re.DOTALL)
    return m.group(0) if m else ''


def _identifier(page: _Page, paragraph: str) -> str | None:
    """The API name to verify: the first code span (of the paragraph, then the page) used in the code example."""
    code = _code_block(page)
    for text in (paragraph, page.body.split('```')[0]):
        for span in re.findall(r'`([^`\n]+)`', text):
            for name in (str(n) for n in re.findall(r'[A-Za-z_][\w.:]*!?', span)):
                if len(name) >= 4 and name in code:
                    return name
    return None


# ---------------------------------------------------------------------------------------------------
# The script


@dataclass
class _State:
    query: str
    rules: frozenset[str]
    tools: set[str]
    done: dict[str, str] = field(default_factory=dict)  # call key → result
    order: list[tuple[_Call, str]] = field(default_factory=list)
    n_calls: int = 0


def _read(messages: list[ModelMessage], info: AgentInfo) -> _State:
    prompt_parts = [info.instructions or '']
    query = ''
    calls: dict[str, _Call] = {}
    state = _State('', frozenset(), {t.name for t in info.function_tools})
    for message in messages:
        if isinstance(message, ModelRequest):
            if message.instructions and message.instructions not in prompt_parts:
                prompt_parts.append(message.instructions)
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    prompt_parts.append(part.content)
                elif isinstance(part, UserPromptPart) and not query:
                    query = part.content if isinstance(part.content, str) else ' '.join(str(c) for c in part.content)
                elif isinstance(part, ToolReturnPart) and part.tool_call_id in calls:
                    call = calls[part.tool_call_id]
                    result = part.model_response_str()
                    state.done[_key(*call)] = result
                    state.order.append((call, result))
        elif isinstance(message, ModelResponse):
            for rpart in message.parts:
                if isinstance(rpart, ToolCallPart):
                    calls[rpart.tool_call_id] = (rpart.tool_name, rpart.args_as_dict())
                    state.n_calls += 1
    state.query = query
    state.rules = detect_rules('\n'.join(prompt_parts))
    return state


def _plan(state: _State) -> tuple[list[_Part], list[list[_Call]]]:
    """The parts to answer and the batches of tool calls, each batch computed from the results so far."""
    rules = state.rules
    parts = _parts(state.query)
    if 'decompose' not in rules:
        parts = parts[:1]
    web = 'official_first' not in rules and _web_only(state.query)
    batches: list[list[_Call]] = []

    def web_call(part: _Part) -> _Call:
        return ('tavily_search', {'query': part.text})

    if web or 'context7_resolve_library_id' not in state.tools:
        batches.append([web_call(p) for p in parts])
    else:
        libraries = list(dict.fromkeys(p.library for p in parts if p.library))
        batches.append([('context7_resolve_library_id', {'library_name': lib}) for lib in libraries])
        docs: list[_Call] = []
        for part in parts:
            resolved = state.done.get(_key('context7_resolve_library_id', {'library_name': part.library or ''}), '')
            m = re.search(r'library_id: (\S+)', resolved)
            if not m:
                docs.append(web_call(part))
                continue
            versions: list[str | None] = list(part.versions) if 'pass_version' in rules and part.versions else [None]
            for version in versions:
                args: dict[str, Any] = {'library_id': m.group(1), 'topic': part.topic or part.text}
                if version:
                    args['version'] = version
                docs.append(('context7_get_docs', args))
        batches.append(docs)
    if 'verify' in rules and 'scout_grep' in state.tools:
        greps: list[_Call] = []
        for call in batches[-1]:
            for page in _pages(state.done.get(_key(*call), ''))[:1]:
                ident = _identifier(page, _best_paragraph(page, str(call[1].get('topic') or call[1].get('query'))))
                if ident and ('scout_grep', {'pattern': re.escape(ident)}) not in greps:
                    greps.append(('scout_grep', {'pattern': re.escape(ident)}))
        batches.append(greps)
    return parts, batches


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    state = _read(messages, info)
    parts, batches = _plan(state)
    for batch in batches:
        missing = [c for c in batch if _key(*c) not in state.done and c[0] in state.tools]
        if missing:
            return ModelResponse(
                parts=[
                    ToolCallPart(tool, args, tool_call_id=f'call_{state.n_calls + i}_{tool}')
                    for i, (tool, args) in enumerate(missing)
                ]
            )
    return ModelResponse(parts=[TextPart(_answer(state, parts, batches))])


def _answer(state: _State, parts: list[_Part], batches: list[list[_Call]]) -> str:
    rules = state.rules
    out: list[str] = []
    if 'no_greeting' not in rules:
        out.append("Hello! I'd be happy to help with that.")
    research = [c for batch in batches for c in batch if c[0] in ('context7_get_docs', 'tavily_search')]
    shown: set[str] = set()
    for part in parts:
        pages = [
            page
            for call in research
            if str(call[1].get('topic') or call[1].get('query')) in (part.topic or part.text, part.text)
            for page in _pages(state.done.get(_key(*call), ''))[:1]
        ]
        lines: list[str] = [f'### {part.text}'] if len(parts) > 1 else []
        if not pages:
            lines.append(f'I could not find documentation on this ({part.text}).')
        for page in pages:
            lines.extend(_page_lines(state, part, page, show_code=page.ref not in shown))
            shown.add(page.ref)
        out.append('\n\n'.join(lines))
    if 'report_searches' in rules:
        searched = [
            f'{tool}({", ".join(f"{k}={v!r}" for k, v in args.items())}) → {result.splitlines()[0] if result else "nothing"}'
            for (tool, args), result in state.order
        ]
        out.append('Searched:\n' + '\n'.join(f'- {s}' for s in searched))
    if 'no_greeting' not in rules:
        out.append('Hope this helps! Let me know if you have any other questions.')
    return '\n\n'.join(out)


def _page_lines(state: _State, part: _Part, page: _Page, *, show_code: bool) -> list[str]:
    """What one page contributes to the answer of one part: claim with citation, code, verification, confidence."""
    rules = state.rules
    paragraph = _best_paragraph(page, part.topic or part.text)
    sentences = _sentences(paragraph)[:2]
    claim = ' '.join(sentences)
    if 'cite_snippets' in rules:
        claim += f' <source ref="{page.ref}">"{sentences[0] if sentences else ""}"</source>'
    elif 'cite_sources' in rules:
        claim += f' <source ref="{page.ref}"/>'
    else:
        claim = f'According to the docs, {claim[:1].lower()}{claim[1:]} (see {page.ref})'
    lines = [claim]
    code = _code_block(page)
    if code and show_code:
        lines.append(code)
    ident = _identifier(page, paragraph) if 'verify' in rules else None
    grep_key = _key('scout_grep', {'pattern': re.escape(ident)}) if ident else ''
    if ident and grep_key in state.done:
        hits = [h.split(': ', 1)[0] for h in state.done[grep_key].splitlines()[1:] if re.match(r'corpus/\S+:\d+:', h)]
        where = next((h for h in hits if h.startswith(page.ref + ':')), hits[0] if hits else None)
        lines.append(f'Verified: `{ident}` appears in {where}.' if where else f'Not verified: no code example uses `{ident}`.')
    if 'state_confidence' in rules:
        if page.trust == 'official_docs':
            lines.append(f'Confidence: high (official docs, version {page.version})')
        else:
            lines.append(f'Confidence: low (community post from {page.published or "an unknown date"}; may be outdated)')
    return lines


def simulated_model() -> FunctionModel:
    """The scripted documentation agent as a pydantic-ai model (deterministic, offline)."""
    return FunctionModel(_respond, model_name='simulated-docs-agent')
