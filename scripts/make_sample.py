"""Regenerate datasets/sample.jsonl (and its packaged copy, sensei_eval/data/sample.jsonl): hand-written agent runs, each built by a small function below.

Kept in the repo so the sample can be read, reviewed and changed as code rather than as one-line JSON.
Run: python scripts/make_sample.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SYSTEM_DOCS = (
    'You are sensei, a documentation research agent. Your audience is other AI agents. Research with '
    'tools before answering, cite sources inline with <source ref="...">snippet</source>, state confidence.'
)
SYSTEM_SRE = 'You are TARSy, an SRE investigation agent for Kubernetes alerts. Use the MCP tools; reason in ReAct format.'
RATER = {'agent_model': 'claude-sonnet-4-5', 'agent_system': 'claude-code', 'agent_version': '2.0.14'}
RECORDS: list[dict[str, Any]] = []


def rating(c: int, r: int, u: int, why: str) -> dict[str, Any]:
    return {'correctness': c, 'relevance': r, 'usefulness': u, 'reasoning': why, **RATER}


def openai(query: str, steps: list[tuple[str, dict[str, Any], str]], answer: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{'role': 'system', 'content': SYSTEM_DOCS}, {'role': 'user', 'content': query}]
    for i, (tool, args, result) in enumerate(steps, start=1):
        cid = f'call_{i:02d}'
        msgs.append(
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [{'id': cid, 'type': 'function', 'function': {'name': tool, 'arguments': json.dumps(args)}}],
            }
        )
        msgs.append({'role': 'tool', 'tool_call_id': cid, 'content': result})
    msgs.append({'role': 'assistant', 'content': answer})
    return msgs


def pydantic_ai(query: str, steps: list[tuple[str, dict[str, Any], str]], answer: str) -> list[dict[str, Any]]:
    ts = '2026-10-02T10:00:00Z'
    msgs: list[dict[str, Any]] = [
        {
            'kind': 'request',
            'parts': [
                {'part_kind': 'system-prompt', 'content': SYSTEM_DOCS, 'timestamp': ts},
                {'part_kind': 'user-prompt', 'content': query, 'timestamp': ts},
            ],
        }
    ]
    for i, (tool, args, result) in enumerate(steps, start=1):
        cid = f'pyd_{i:02d}'
        msgs.append(
            {
                'kind': 'response',
                'model_name': 'claude-sonnet-4-5',
                'timestamp': ts,
                'parts': [{'part_kind': 'tool-call', 'tool_name': tool, 'args': args, 'tool_call_id': cid}],
            }
        )
        msgs.append(
            {
                'kind': 'request',
                'parts': [
                    {'part_kind': 'tool-return', 'tool_name': tool, 'content': result, 'tool_call_id': cid, 'timestamp': ts}
                ],
            }
        )
    msgs.append(
        {
            'kind': 'response',
            'model_name': 'claude-sonnet-4-5',
            'timestamp': ts,
            'parts': [{'part_kind': 'text', 'content': answer}],
        }
    )
    return msgs


def tarsy(alert: dict[str, Any], steps: list[tuple[str, str, dict[str, Any], str]], final: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {'role': 'system', 'content': SYSTEM_SRE},
        {'role': 'user', 'content': f'Investigate this alert:\n{json.dumps(alert, indent=2)}'},
    ]
    for thought, tool, args, observation in steps:
        msgs.append({'role': 'assistant', 'content': f'Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(args)}'})
        msgs.append({'role': 'user', 'content': f'Observation: {observation}'})
    msgs.append({'role': 'assistant', 'content': f'Thought: I have enough to conclude.\nFinal Answer: {final}'})
    return msgs


def add(
    query_id: str,
    fmt: str | None,
    query: str,
    messages: list[dict[str, Any]],
    rate: dict[str, Any] | None,
    *,
    expected: list[dict[str, Any]] | None = None,
    alert: dict[str, Any] | None = None,
    **meta: Any,
) -> None:
    RECORDS.append(
        {
            'query_id': query_id,
            'query': query,
            'message_format': fmt,
            'messages': messages,
            'rating': rate,
            'prompt_version': 'sensei-prompts-v3' if alert is None else 'tarsy-chain-v7',
            'expected_tool_calls': expected,
            'alert_data': alert,
            # the documentation agent's runs name their profile, so its conventions are checked on them; their
            # expected calls list only the arguments that matter (the library id), so they match as a subset
            'metadata': {
                'source': 'sample',
                **({'profile': 'docs-agent'} if alert is None else {}),
                **({'reference_check': {'arguments': 'subset'}} if expected else {}),
                **meta,
            },
        }
    )


# --------------------------------------------------------------------------------------------------
# Clean documentation-agent runs

PYD_VALIDATORS = """# Validators (Pydantic v2)
Field validators are defined with the `field_validator` decorator. A field validator is a class method:

    from pydantic import BaseModel, field_validator

    class User(BaseModel):
        name: str

        @field_validator('name', mode='after')
        @classmethod
        def name_must_not_be_blank(cls, value: str) -> str:
            if not value.strip():
                raise ValueError('name must not be blank')
            return value

mode='after' validators run after Pydantic's own parsing; mode='before' validators receive the raw input.
Validators that check several fields together use `model_validator(mode='after')` and return self.
In Pydantic v1 the decorator was `validator`; it is deprecated in v2."""

q = 'How do I write a field validator in Pydantic v2, and how do I validate two fields together?'
add(
    'docs-001',
    'pydantic-ai',
    q,
    pydantic_ai(
        q,
        [
            (
                'context7_resolve_library_id',
                {'library_name': 'pydantic'},
                'Matches: /pydantic/pydantic (official docs, trust 9.6), /pydantic/pydantic-settings',
            ),
            (
                'context7_get_docs',
                {'library_id': '/pydantic/pydantic', 'topic': 'field validators v2 model_validator'},
                PYD_VALIDATORS,
            ),
        ],
        """## Field validator (one field)
Decorate a classmethod with `field_validator`:
```python
@field_validator('name', mode='after')
@classmethod
def name_must_not_be_blank(cls, value: str) -> str: ...
```
<source ref="https://docs.pydantic.dev/latest/concepts/validators/">Field validators are defined with the `field_validator` decorator. A field validator is a class method</source>

## Several fields together
Use `model_validator(mode='after')` and return `self`.
<source ref="https://docs.pydantic.dev/latest/concepts/validators/">Validators that check several fields together use `model_validator(mode='after')` and return self.</source>

Note: the v1 `validator` decorator is deprecated in v2.
Confidence: high (official documentation).""",
    ),
    rating(5, 5, 5, 'Exact, cited, both parts answered.'),
)

FASTAPI_YIELD = """# Dependencies with yield
FastAPI supports dependencies that do some extra steps after finishing. To do this, use `yield` instead of
`return`, and write the extra steps (code) after.

    async def get_db():
        db = DBSession()
        try:
            yield db
        finally:
            db.close()

Only the code prior to and including the yield statement is executed before creating a response. The code
following the yield statement is executed after the response has been delivered. You can use `Depends`
to declare the dependency: `def read_items(db: Annotated[DBSession, Depends(get_db)])`.
If you raise an HTTPException in the code after yield, it will not reach the client since FastAPI 0.106.0."""

q = 'In FastAPI, how do I close a database session after the request using a dependency?'
add(
    'docs-002',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/fastapi/fastapi', 'topic': 'dependencies with yield'}, FASTAPI_YIELD),
        ],
        """Use a dependency with `yield` and close the session in `finally`:
```python
async def get_db():
    db = DBSession()
    try:
        yield db
    finally:
        db.close()
```
Inject it with `Depends`: `db: Annotated[DBSession, Depends(get_db)]`.
<source ref="https://fastapi.tiangolo.com/tutorial/dependencies/dependencies-with-yield/">The code following the yield statement is executed after the response has been delivered.</source>

Caveat: exceptions raised after `yield` no longer reach the client (since 0.106.0).
<source ref="https://fastapi.tiangolo.com/tutorial/dependencies/dependencies-with-yield/">If you raise an HTTPException in the code after yield, it will not reach the client since FastAPI 0.106.0.</source>
Confidence: high (official docs).""",
    ),
    rating(5, 5, 4, 'Correct and concise.'),
    expected=[{'tool_name': 'context7_get_docs', 'args': {'library_id': '/fastapi/fastapi'}}],
)

HTTPX_TIMEOUT = """# Timeouts
HTTPX is careful to enforce timeouts everywhere by default. The default behavior is to raise a TimeoutException
after 5 seconds of network inactivity.

    client = httpx.Client(timeout=10.0)
    timeout = httpx.Timeout(10.0, connect=60.0)
    client = httpx.Client(timeout=timeout)

httpx.Timeout accepts four granular settings: connect, read, write and pool. Pass timeout=None to disable."""

HTTPX_SOURCE = """httpx/_config.py
class Timeout:
    def __init__(self, timeout=DEFAULT_TIMEOUT_CONFIG, *, connect=UNSET, read=UNSET, write=UNSET, pool=UNSET):"""

q = 'How do I set a longer connect timeout than read timeout on an httpx Client?'
add(
    'docs-003',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/encode/httpx', 'topic': 'timeouts'}, HTTPX_TIMEOUT),
            ('scout_grep', {'repo': 'encode/httpx', 'pattern': 'class Timeout'}, HTTPX_SOURCE),
        ],
        """Build an `httpx.Timeout` with a default plus an override for `connect`, and pass it to `httpx.Client`:
```python
timeout = httpx.Timeout(10.0, connect=60.0)   # read/write/pool 10 s, connect 60 s
client = httpx.Client(timeout=timeout)
```
<source ref="https://www.python-httpx.org/advanced/timeouts/">httpx.Timeout accepts four granular settings: connect, read, write and pool.</source>
<source ref="https://github.com/encode/httpx/blob/master/httpx/_config.py">def __init__(self, timeout=DEFAULT_TIMEOUT_CONFIG, *, connect=UNSET, read=UNSET, write=UNSET, pool=UNSET)</source>
Default without configuration: 5 s of inactivity. Confidence: high (docs and source agree).""",
    ),
    rating(5, 5, 5, 'Exactly what I needed.'),
    expected=[
        {'tool_name': 'context7_get_docs', 'args': {'library_id': '/encode/httpx'}},
        {'tool_name': 'scout_grep', 'args': None},
    ],
)

SQLA_JOIN = """# ORM Querying Guide (SQLAlchemy 2.0)
In 2.0 style, queries are built with select() and executed with Session.execute() or Session.scalars().

    stmt = select(User).join(User.addresses).where(Address.email_address == 'pat@example.com')
    users = session.scalars(stmt).all()

Select.join() accepts a relationship attribute as the ON clause target. Use Select.join_from() to state the
left side explicitly. The legacy Query.join() API still works but is not 2.0 style."""

q = 'In SQLAlchemy 2.0, how do I write a select with a join across a relationship?'
add(
    'docs-004',
    'pydantic-ai',
    q,
    pydantic_ai(
        q,
        [
            ('context7_get_docs', {'library_id': '/sqlalchemy/sqlalchemy', 'topic': '2.0 select join relationship'}, SQLA_JOIN),
        ],
        """## 2.0-style join
```python
stmt = select(User).join(User.addresses).where(Address.email_address == 'pat@example.com')
users = session.scalars(stmt).all()
```
`Select.join()` takes the relationship attribute as the ON clause target; use `join_from()` to name the left side.
<source ref="https://docs.sqlalchemy.org/en/20/orm/queryguide/select.html">Select.join() accepts a relationship attribute as the ON clause target.</source>
Avoid the legacy `Query.join()` in new code.
<source ref="https://docs.sqlalchemy.org/en/20/orm/queryguide/select.html">The legacy Query.join() API still works but is not 2.0 style.</source>
Confidence: high.""",
    ),
    rating(5, 5, 4, 'Right API for 2.0.'),
    expected=[{'tool_name': 'context7_get_docs', 'args': {'library_id': '/sqlalchemy/sqlalchemy'}}],
)

# --------------------------------------------------------------------------------------------------
# Documentation-agent runs with planted failures

SETTINGS_DOCS = """# Pydantic: Models
Models are classes that inherit from BaseModel and define fields as annotated attributes. Model configuration
is controlled with model_config = ConfigDict(...). Fields can declare defaults and aliases with Field()."""

q = 'With pydantic-settings, how do I load settings from a .env file with a prefix?'
add(
    'docs-005',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/pydantic/pydantic', 'topic': 'settings env file prefix'}, SETTINGS_DOCS),
        ],
        """Define a `BaseModel` subclass and set `model_config = ConfigDict(...)` with your options.
<source ref="https://docs.pydantic.dev/latest/concepts/models/">Model configuration is controlled with model_config = ConfigDict(...).</source>
The docs fetched do not cover .env loading; confidence: low.""",
    ),
    rating(2, 3, 2, 'Looked up the wrong library, so no env_prefix answer.'),
    failure='tool_parameters',
)

NEXT_COOKIES = """# cookies (Next.js)
cookies is an async function that allows you to read the HTTP incoming request cookies in Server Components,
and read/write outgoing request cookies in Server Actions or Route Handlers.

    import { cookies } from 'next/headers'
    export default async function Page() {
      const cookieStore = await cookies()
      const theme = cookieStore.get('theme')
    }"""

q = 'In Next.js 15, do I need to await cookies() in a Server Component?'
add(
    'docs-006',
    'pydantic-ai',
    q,
    pydantic_ai(
        q,
        [
            ('context7_get_docs', {'library_id': '/vercel/next.js', 'topic': 'cookies server component'}, NEXT_COOKIES),
        ],
        """Yes: `cookies` is async, so `await cookies()` before calling `get`:
```ts
const cookieStore = await cookies()
const theme = cookieStore.get('theme')
```
<source ref="https://nextjs.org/docs/app/api-reference/functions/cookies">cookies is an async function that allows you to read the HTTP incoming request cookies in Server Components</source>
Confidence: medium (the docs fetched do not say which version they describe).""",
    ),
    rating(4, 4, 3, 'Right, but not checked against the version I asked about.'),
    failure='tool_parameters',
)

HTTPX_TRANSPORT = """# Transports
HTTPX's Client also accepts a transport argument. The HTTPTransport class supports a retries option:

    transport = httpx.HTTPTransport(retries=1)
    client = httpx.Client(transport=transport)

Retries apply to connection errors (ConnectError, ConnectTimeout) only, not to HTTP error responses."""

q = 'How do I make httpx retry failed requests?'
add(
    'docs-007',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/encode/httpx', 'topic': 'retries transport'}, HTTPX_TRANSPORT),
        ],
        """Two options:
1. Connection retries: `httpx.HTTPTransport(retries=1)` passed as `transport=`.
<source ref="https://www.python-httpx.org/advanced/transports/">The HTTPTransport class supports a retries option</source>
2. Status-code retries: set `httpx.Client.retry_policy` to `RetryPolicy(total=3, status_forcelist=[502, 503])`.
Confidence: high.""",
    ),
    rating(2, 4, 2, 'The retry_policy attribute does not exist; my code broke.'),
    failure='hallucination',
)

DRF_PAGINATION = """# Pagination (Django REST framework)
Pagination can be set globally with DEFAULT_PAGINATION_CLASS and PAGE_SIZE:

    REST_FRAMEWORK = {
        'DEFAULT_PAGINATION_CLASS': 'rest_framework.pagination.PageNumberPagination',
        'PAGE_SIZE': 100
    }

PageNumberPagination accepts a page number in the request query parameters."""

q = 'In Django REST framework, how do I paginate a list endpoint, and how do I let clients filter it by a field?'
add(
    'docs-008',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/encode/django-rest-framework', 'topic': 'pagination'}, DRF_PAGINATION),
        ],
        """## Pagination
Set it globally:
```python
REST_FRAMEWORK = {
    'DEFAULT_PAGINATION_CLASS': 'rest_framework.pagination.PageNumberPagination',
    'PAGE_SIZE': 100,
}
```
<source ref="https://www.django-rest-framework.org/api-guide/pagination/">Pagination can be set globally with DEFAULT_PAGINATION_CLASS and PAGE_SIZE</source>
Clients then pass `?page=2`. Confidence: high.""",
    ),
    rating(3, 3, 2, 'Filtering part ignored.'),
    failure='completeness',
)

q = 'How do I run a FastAPI background task after returning a response?'
FASTAPI_BG = """# Background Tasks
You can define background tasks to be run after returning a response. Import BackgroundTasks and define a
parameter in your path operation function with a type declaration of BackgroundTasks:

    @app.post('/send-notification/{email}')
    async def send_notification(email: str, background_tasks: BackgroundTasks):
        background_tasks.add_task(write_notification, email, message='some notification')
        return {'message': 'Notification sent in the background'}"""
add(
    'docs-009',
    'pydantic-ai',
    q,
    pydantic_ai(
        q,
        [
            ('context7_get_docs', {'library_id': '/fastapi/fastapi', 'topic': 'background tasks'}, FASTAPI_BG),
        ],
        """Hello! I'd be happy to help with that. Let me think about this...

Add a `BackgroundTasks` parameter and call `add_task`:
```python
background_tasks.add_task(write_notification, email, message='some notification')
```
<source ref="https://fastapi.tiangolo.com/tutorial/background-tasks/">You can define background tasks to be run after returning a response.</source>
I hope this helps! Confidence: high.""",
    ),
    rating(4, 4, 3, 'Correct but chatty.'),
    failure='agent_format',
)

PANDAS_MERGE = """# pandas.merge (pandas 2.2)
pandas.merge(left, right, how='inner', on=None, left_on=None, right_on=None, suffixes=('_x', '_y'),
indicator=False, validate=None)
validate: str, optional. If specified, checks if merge is of specified type: 'one_to_one', 'one_to_many',
'many_to_one', 'many_to_many'. indicator: If True, adds a column to the output DataFrame called '_merge'."""

q = 'In pandas 2.2, how do I check that a merge is one-to-one and see which rows matched?'
add(
    'docs-010',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/pandas-dev/pandas', 'topic': 'merge validate indicator 2.2'}, PANDAS_MERGE),
        ],
        """Pass `validate='one_to_one'` to raise if keys are duplicated, and `indicator=True` to get a `_merge` column
telling left_only / right_only / both:
```python
out = pd.merge(left, right, on='id', validate='one_to_one', indicator=True)
```
Confidence: high.""",
    ),
    rating(4, 5, 4, 'Right, but no references to check.'),
    failure='citation_quality',
)

REACT_ACTION_STATE = """# useActionState (React 19)
useActionState is a Hook that allows you to update state based on the result of a form action.

    const [state, formAction, isPending] = useActionState(fn, initialState, permalink?)

In earlier React Canary versions, this API was part of React DOM and called useFormState."""

q = 'In React 19, what replaced useFormState and what does it return?'
add(
    'docs-011',
    'openai',
    q,
    openai(
        q,
        [
            ('context7_get_docs', {'library_id': '/facebook/react', 'topic': 'useActionState react 19'}, REACT_ACTION_STATE),
        ],
        """`useActionState` replaced `useFormState` <source ref="https://react.dev/reference/react/useActionState"></source>.
It returns `[state, formAction, isPending]` <source ref="https://react.dev/reference/react/useActionState"/>.
Confidence: high.""",
    ),
    rating(4, 5, 4, 'Correct; citations are empty.'),
    failure='citation_quality',
)

TOKIO_BLOG = """Blog: "Async Rust for beginners" (2021) — To run work concurrently in tokio you call tokio::spawn with an
async block. The returned JoinHandle can be awaited to get the result."""

q = 'How do I spawn a task in tokio and get its result?'
add(
    'docs-012',
    'pydantic-ai',
    q,
    pydantic_ai(
        q,
        [
            ('tavily_search', {'query': 'tokio spawn task result'}, TOKIO_BLOG),
        ],
        """Call `tokio::spawn` with an async block and await the returned `JoinHandle`:
```rust
let handle = tokio::spawn(async { 42 });
let value = handle.await?;
```
<source ref="https://example-blog.dev/async-rust">The returned JoinHandle can be awaited to get the result.</source>
Confidence: medium (community source).""",
    ),
    rating(3, 4, 3, 'Fine, but from a 2021 blog instead of the docs.'),
    failure='tool_selection',
)

q = 'How do I make a typer option required?'
add(
    'docs-013',
    'openai',
    q,
    openai(
        q,
        [
            (
                'context7_get_docs',
                {'library_id': '/typer/typer', 'topic': 'required options'},
                "Error: library '/typer/typer' not found. Call context7_resolve_library_id first.",
            ),
            (
                'context7_get_docs',
                {'library_id': '/typer/typer', 'topic': 'required options'},
                "Error: library '/typer/typer' not found. Call context7_resolve_library_id first.",
            ),
        ],
        """Declare the option with no default using `Annotated[str, typer.Option()]`; typer then makes it required.
Confidence: high.""",
    ),
    rating(2, 4, 2, 'Gave up on the docs and answered from memory.'),
    failure='tool_parameters,research_depth',
)

# A long, clean run (~15k characters): truncation and prefix-cache benchmarks use it.
MIGRATION_SECTIONS = [
    (
        'Migration guide: BaseModel methods',
        """The following methods on BaseModel were renamed in Pydantic v2:
parse_obj -> model_validate; parse_raw -> model_validate_json; dict -> model_dump; json -> model_dump_json;
copy -> model_copy; schema -> model_json_schema; construct -> model_construct; update_forward_refs -> model_rebuild.
The old names still exist as deprecated aliases that emit a PydanticDeprecatedSince20 warning. """
        * 10,
    ),
    (
        'Migration guide: Config',
        """In Pydantic V2, to specify config on a model, set a class attribute called model_config to be a dict
with the key/value pairs you want to be used as the config. The Pydantic V1 behavior to create a class called
Config in the namespace of the parent BaseModel subclass is now deprecated. Settings renamed: orm_mode ->
from_attributes; allow_population_by_field_name -> populate_by_name; anystr_strip_whitespace ->
str_strip_whitespace; validate_all -> validate_default. """
        * 7,
    ),
    (
        'Migration guide: validators',
        """@validator and @root_validator are deprecated. Use @field_validator and @model_validator instead.
A @field_validator must be a classmethod; the `values` argument is replaced by `info: ValidationInfo`, whose
`data` attribute holds the fields validated so far. each_item=True has no direct replacement; put the
validator on the item type with Annotated instead. """
        * 7,
    ),
    (
        'bump-pydantic',
        """bump-pydantic is a tool to help users migrate their code from Pydantic V1 to V2. Install it with
pip install bump-pydantic and run bump-pydantic my_package. It rewrites imports, Config classes and many
method names, and leaves comments where a manual change is needed. """
        * 3,
    ),
]
q = 'I am migrating a large codebase from Pydantic v1 to v2: which BaseModel methods and Config options were renamed, and is there a tool to automate it?'
add(
    'docs-long-001',
    'openai',
    q,
    openai(
        q,
        [
            (
                'context7_get_docs',
                {'library_id': '/pydantic/pydantic', 'topic': f'v1 to v2 migration {title}'},
                f'# {title}\n{body}',
            )
            for title, body in MIGRATION_SECTIONS
        ],
        """## Renamed BaseModel methods
| v1 | v2 |
|---|---|
| `parse_obj` | `model_validate` |
| `parse_raw` | `model_validate_json` |
| `dict` / `json` | `model_dump` / `model_dump_json` |
| `copy` | `model_copy` |
<source ref="https://docs.pydantic.dev/latest/migration/">parse_obj -> model_validate; parse_raw -> model_validate_json; dict -> model_dump</source>

## Config
Replace the inner `Config` class with `model_config`; `orm_mode` became `from_attributes`, `allow_population_by_field_name` became `populate_by_name`.
<source ref="https://docs.pydantic.dev/latest/migration/">orm_mode -> from_attributes; allow_population_by_field_name -> populate_by_name</source>

## Automation
Run `bump-pydantic` on the package; it leaves comments where manual work remains.
<source ref="https://github.com/pydantic/bump-pydantic">bump-pydantic is a tool to help users migrate their code from Pydantic V1 to V2.</source>
Confidence: high (official migration guide).""",
    ),
    rating(5, 5, 5, 'Complete and well sourced.'),
)

# --------------------------------------------------------------------------------------------------
# TARSy investigations

alert1 = {
    'alert_type': 'PodCrashLooping',
    'severity': 'critical',
    'namespace': 'payments',
    'pod': 'payments-api-7f9c6d-x2k4p',
    'timestamp': '2026-10-03T08:14:00Z',
    'message': 'Pod payments-api-7f9c6d-x2k4p restarted 12 times in 30 minutes',
}
add(
    'tarsy-001',
    'tarsy',
    '',
    tarsy(
        alert1,
        [
            (
                'Check the pod state first.',
                'kubectl-get-pods',
                {'namespace': 'payments'},
                'NAME                          READY STATUS           RESTARTS AGE\npayments-api-7f9c6d-x2k4p     0/1   CrashLoopBackOff 12       41m',
            ),
            (
                'Describe the pod to see the last termination reason.',
                'kubectl-describe-pod',
                {'namespace': 'payments', 'pod': 'payments-api-7f9c6d-x2k4p'},
                'Last State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137\nLimits: memory: 256Mi\nEvents: Back-off restarting failed container',
            ),
            (
                'Read the logs of the previous container to confirm memory growth.',
                'kubectl-logs',
                {'namespace': 'payments', 'pod': 'payments-api-7f9c6d-x2k4p', 'previous': True},
                '08:13:51 INFO loading settlement batch 2026-10-02 (1.2M rows)\n08:13:58 WARN heap usage 241Mi/256Mi',
            ),
        ],
        'The container is OOMKilled (exit 137) while loading a 1.2M-row settlement batch into a 256Mi limit. Classification: '
        'resource exhaustion, not malicious. Confidence: MEDIUM — logs show heap at 241Mi just before the kill; I did not check '
        'whether the batch size changed recently. Recommendation: raise the memory limit or stream the batch.',
    ),
    None,
    alert=alert1,
)

alert2 = {
    'alert_type': 'SuspiciousProcess',
    'severity': 'high',
    'namespace': 'ci-runners',
    'pod': 'runner-5d8f-abc12',
    'timestamp': '2026-10-05T22:40:00Z',
    'message': 'Process "xmrig" observed in pod runner-5d8f-abc12',
}
add(
    'tarsy-002',
    'tarsy',
    '',
    tarsy(
        alert2,
        [
            (
                'Get the logs of the runner pod.',
                'kubectl-logs',
                {'namespace': 'ci-runners', 'pod': 'runner-5d8f-abc12'},
                'Error: pods "runner-5d8f-abc12" not found',
            ),
            (
                'Try the logs again.',
                'kubectl-logs',
                {'namespace': 'ci-runners', 'pod': 'runner-5d8f-abc12'},
                'Error: pods "runner-5d8f-abc12" not found',
            ),
        ],
        'The pod ran the xmrig crypto miner. Classification: MALICIOUS. Confidence: HIGH. Recommendation: ban the CI user.',
    ),
    rating(1, 3, 1, 'Verdict with no evidence.'),
    alert=alert2,
    failure='tool_parameters,research_depth',
)

alert3 = {
    'alert_type': 'HighCPU',
    'severity': 'warning',
    'namespace': 'search',
    'pod': 'indexer-0',
    'timestamp': '2026-10-06T03:05:00Z',
    'message': 'CPU above 95% for 20 minutes on indexer-0',
}
add(
    'tarsy-003',
    None,
    '',
    tarsy(
        alert3,
        [
            (
                'Check resource usage of the pod.',
                'kubectl-top-pod',
                {'namespace': 'search', 'pod': 'indexer-0'},
                'NAME       CPU(cores) MEMORY(bytes)\nindexer-0  1950m      1423Mi',
            ),
            (
                'Look at recent events in the namespace.',
                'kubectl-get-events',
                {'namespace': 'search'},
                '03:01 Normal ScalingReplicaSet deployment/indexer scaled to 1\n03:02 Normal Pulled image search/indexer:4.12.0',
            ),
        ],
        'CPU is high because indexer-0 is doing a full reindex after the 4.12.0 rollout scaled the deployment to one replica. '
        'Classification: expected load. Confidence: HIGH.',
    ),
    None,
    alert=alert3,
    failure='consistency (confidence above evidence)',
)

# the repo's copy for users to read, and the package's copy: the judge CLI's default wherever it runs
root = Path(__file__).resolve().parents[1]
text = ''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in RECORDS)
for out in (root / 'datasets' / 'sample.jsonl', root / 'sensei_eval' / 'data' / 'sample.jsonl'):
    out.write_text(text, encoding='utf-8')
    print(f'{len(RECORDS)} records -> {out}')
