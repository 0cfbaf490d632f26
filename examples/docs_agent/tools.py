"""The example agent's tools: offline stand-ins for Context7, Scout and Tavily over a local corpus.

The optimize/validate loop has to run on a fresh clone with no key and no network, so the tools search
`corpus/` (a dozen short Markdown pages shipped in the repo) instead of the real services. Scoring is
plain token overlap: no embeddings, nothing to download, and the same answer every time.

The tools keep the shape of the real ones because that is what the judges look at: `context7_get_docs`
takes a `version` (so version-aware calls give different pages than version-blind ones), an unknown
library id is an `Error: ...` string (so error recovery can be judged), `tavily_search` returns the
community posts with their dates (so source selection matters), and every result string starts with a
`source: corpus/<file>.md` reference that an answer can cite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

__all__ = (
    'CORPUS_DIR',
    'Doc',
    'context7_get_docs',
    'context7_resolve_library_id',
    'load_corpus',
    'scout_grep',
    'tavily_search',
    'version_major',
)

CORPUS_DIR = Path(__file__).parent / 'corpus'

_STOPWORDS_TEXT = (
    'a an and are as at be by can do does for from how i in is it my of on or should the this to use using '
    'what when where which why with you your vs versus me about into does did get set work works'
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_TOKEN = re.compile(r'[a-z0-9_]+(?:\.[a-z0-9_]+)*')
_FENCE = re.compile(r'^```')


@dataclass(frozen=True)
class Doc:
    """One corpus page: its front-matter and Markdown body."""

    path: str  # 'corpus/<name>.md', the reference results start with
    library_id: str
    library: str
    version: str
    title: str
    trust: str  # 'official_docs' or 'community'
    date: str | None
    body: str

    @property
    def tokens(self) -> frozenset[str]:
        return _tokens(self.body)

    @property
    def title_tokens(self) -> frozenset[str]:
        return _tokens(self.title)


@lru_cache(maxsize=1)
def load_corpus() -> tuple[Doc, ...]:
    """Every page of `corpus/`, sorted by file name (cached: the corpus is read once)."""
    docs: list[Doc] = []
    for path in sorted(CORPUS_DIR.glob('*.md')):
        text = path.read_text(encoding='utf-8')
        _, front, body = text.split('---\n', 2)
        meta = yaml.safe_load(front)
        docs.append(
            Doc(
                path=f'corpus/{path.name}',
                library_id=str(meta['library_id']),
                library=str(meta['library']),
                version=str(meta['version']),
                title=str(meta['title']),
                trust=str(meta['trust']),
                date=str(meta['date']) if meta.get('date') else None,
                body=body.strip(),
            )
        )
    return tuple(docs)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith('ies'):
        return word[:-3] + 'y'
    if len(word) > 3 and word.endswith('s') and not word.endswith('ss'):
        return word[:-1]
    return word


def _tokens(text: str) -> frozenset[str]:
    words: set[str] = set()
    for tok in _TOKEN.findall(text.lower()):
        for part in {tok, *tok.split('.'), *tok.split('_')}:
            if part and part not in _STOPWORDS:
                words.add(_stem(part))
    return frozenset(words)


def _score(doc: Doc, query: str) -> float:
    q = _tokens(query)
    if not q:
        return 0.0
    return 3.0 * len(q & doc.title_tokens) + len(q & doc.tokens)


def version_major(version: str) -> str:
    """'v2' → '2', '2.x' → '2', '1.10' → '1', '15' → '15', '0.115' → '0.115' (0.x versions keep the minor)."""
    v = version.strip().lower().lstrip('v').removesuffix('.x')
    parts = v.split('.')
    if parts[0] == '0' and len(parts) > 1:
        return '.'.join(parts[:2])
    return parts[0]


def _render(doc: Doc) -> str:
    header = [f'source: {doc.path}', f'library_id: {doc.library_id}', f'library: {doc.library}', f'version: {doc.version}']
    header.append(f'trust: {doc.trust}' + (f' (published {doc.date})' if doc.date else ''))
    return '\n'.join(header) + '\n\n' + doc.body


def context7_resolve_library_id(library_name: str) -> str:
    """Find the Context7 library id for a library name ('pydantic', 'Next.js', ...)."""
    wanted = re.sub(r'[^a-z0-9]+', '', library_name.lower())
    if not wanted:
        return 'Error: empty library name'
    libraries: dict[str, list[Doc]] = {}
    for doc in load_corpus():
        libraries.setdefault(doc.library_id, []).append(doc)
    ranked: list[tuple[int, str]] = []
    for library_id, docs in libraries.items():
        names = {re.sub(r'[^a-z0-9]+', '', n.lower()) for n in (docs[0].library, library_id.rsplit('/', 1)[-1])}
        if wanted in names:
            ranked.append((0, library_id))
        elif any(wanted in n or n in wanted for n in names):
            ranked.append((1, library_id))
    if not ranked:
        return f'Error: no library matches {library_name!r}'
    lines = ['source: corpus (library index)']
    for _, library_id in sorted(ranked):
        docs = libraries[library_id]
        versions = sorted({d.version for d in docs if d.trust == 'official_docs'})
        lines.append(
            f'- library_id: {library_id} (name: {docs[0].library}; versions: {", ".join(versions) or "?"}; '
            f'{sum(d.trust == "official_docs" for d in docs)} official page(s))'
        )
    return '\n'.join(lines)


def context7_get_docs(library_id: str, topic: str, version: str | None = None) -> str:
    """Official documentation of `library_id` (from `context7_resolve_library_id`) on `topic`.

    `version` ('15', 'v2', '1.10', ...) restricts the pages to that major version; without it the pages
    of the latest version are preferred.
    """
    docs = [d for d in load_corpus() if d.library_id == library_id.strip() and d.trust == 'official_docs']
    if not docs:
        return f'Error: library not found: {library_id!r} (resolve the name with context7_resolve_library_id first)'
    note = ''
    if version:
        same = [d for d in docs if version_major(d.version) == version_major(version)]
        if same:
            docs = same
        else:
            note = f'note: no documentation for version {version}; showing other versions\n'
    latest = max((version_major(d.version) for d in docs), key=_version_key)

    def rank(d: Doc) -> tuple[float, int]:
        return (_score(d, topic), version_major(d.version) == latest)

    best = max(docs, key=rank)
    return _render(best) if not note else _render(best).replace('\n', '\n' + note, 1)


def _version_key(major: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in major.split('.'))


def scout_grep(pattern: str) -> str:
    """Regex search (case-insensitive) over the code blocks of the corpus; returns `file:line: text` matches."""
    try:
        rx = re.compile(pattern, re.IGNORECASE)
    except re.error as e:
        return f'Error: invalid regex {pattern!r}: {e}'
    matches: list[str] = []
    for doc in load_corpus():
        full = (CORPUS_DIR / doc.path.removeprefix('corpus/')).read_text(encoding='utf-8').splitlines()
        in_code = False
        for lineno, line in enumerate(full, start=1):
            if _FENCE.match(line):
                in_code = not in_code
                continue
            if in_code and rx.search(line):
                matches.append(f'{doc.path}:{lineno}: {line.strip()}')
    if not matches:
        return f'source: corpus (code blocks)\nno matches for {pattern!r}'
    files = list(dict.fromkeys(m.split(':', 1)[0] for m in matches))
    return f'source: {", ".join(files)}\n' + '\n'.join(matches[:30])


def tavily_search(query: str) -> str:
    """Web search: community posts first (with their dates), then other pages that match."""
    scored = [(s, d) for d in load_corpus() if (s := _score(d, query)) >= 2]
    if not scored:
        return f'source: web search\nno results for {query!r}'
    # Blogs rank well on the web: a relevant community post tends to come before the official page.
    scored.sort(key=lambda sd: (-(sd[0] + (4 if sd[1].trust == 'community' else 0)), sd[1].path))
    return '\n\n---\n\n'.join(_render(d) for _, d in scored[:2])
