"""Judges as DSPy metrics, and the agent as a DSPy program, so DSPy's optimizers can use our judges.

* `JudgeMetric(judges, model)` is a DSPy metric over a prediction that carries the agent's run as a
  `QueryRecord` (`pred.record`). Called as `metric(example, pred, trace=None)` (Evaluate, bootstrap
  optimizers) it returns the record's overall score (`core.verdicts`, what `judge` and `validate`
  report); with `feedback=True` (or a `Routing`: how issues reach components) it takes GEPA's five arguments
  `(gold, pred, trace, pred_name, pred_trace)` and returns `dspy.Prediction(score=…, feedback=…)` whose
  feedback lists the issues routed to component `pred_name` (`sensei_eval.optimize.routing`: the user's map, else the
  profile's, else lexical similarity to the component texts the run used), or every issue when no
  component is named. The score is the run's overall score, the number `sensei-eval judge` and
  `validate` report for it. Judging is memoised per run, so GEPA asking for feedback per component
  doesn't judge the same run again.

  **Errors are never silent.** A judge that gave no verdict on a run — it errored (a model answering
  500), was inconclusive, or answered as a smoke test (`core.verdicts`) — is counted
  (`metric.failed_calls`, a message in `metric.errors`) and warned about (a `JudgeMetricWarning` per
  call), and `check()` / `compile_checked` fail when more than `max_error_rate` of the calls had one
  (default: any). What the call itself returns is the policy `on_error`: `'raise'` (default) — raise
  `JudgeError`, which DSPy counts as a failed example (`dspy.Evaluate` scores it its `failure_score` and
  logs it); `'skip'` — score the run from the judges that did judge (a run no judge judged still
  raises); `'zero'` — score the run 0.0. A run with no overall score (`not judged`, no judge judged it)
  is never a 0 or a 1 under `'raise'` and `'skip'`.
* `AgentProgram(components, runner)` is the agent as a `dspy.Module` with one `dspy.Predict` per prompt
  component, whose signature instructions *are* the component text. `forward(query=…)` assembles the
  system prompt from those instructions, runs the real agent, and records one trace entry per component
  (the run is what each component shaped), which is what GEPA's reflective dataset reads. The
  predictors are never called as LMs: they are the named, optimisable texts. So `dspy.GEPA(metric=
  JudgeMetric(..., feedback=True), component_selector="round_robin")` optimises the same components as
  the sequential loop.

DSPy calls metrics and programs synchronously, from worker threads; the async agent and judges run on
one private event loop in a background thread (`run_sync`), so HTTP clients are never shared across
event loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

import dspy

from sensei_eval.agents.components import PromptComponents
from sensei_eval.agents.runner import AgentRunner, Query, run_query
from sensei_eval.core.errors import ConfigError, ModelCallError, describe_error
from sensei_eval.core.records import ExpectedToolCall, QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.verdicts import is_judged, is_missing_verdict, judge_status, mode_verdicts
from sensei_eval.evaluators.base import Judge, JudgeError
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import DEFAULT_PROFILE, Profile
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.optimize.evaluate import issue_summary
from sensei_eval.optimize.routing import Routing, resolve_routing

__all__ = (
    'AgentProgram',
    'JudgeMetric',
    'JudgeMetricWarning',
    'MetricError',
    'OnError',
    'RecordAdapter',
    'compile_checked',
    'judge_modes',
    'judges_for_component',
    'prediction_record',
    'run_score',
    'run_sync',
    'with_reference',
)

T = TypeVar('T')


class _LoopThread:
    """One event loop on a daemon thread; coroutines from any thread run there."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name='sensei-eval-loop', daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


_LOOP = _LoopThread()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code (DSPy's metric and module calls)."""
    return _LOOP.run(coro)


def judges_for_component(component: str, judges: Sequence[Judge], routing: Routing) -> list[str]:
    """The judges whose failures `routing` can send to `component`: by failure mode with a map, every judge
    with lexical routing (there, each issue is routed by its own text)."""
    modes = routing.modes_for(component)
    return [j.name for j in judges if modes is None or any((m or '') in modes for m in judge_modes(j))]


def judge_modes(judge: Judge) -> tuple[str | None, ...]:
    """The failure modes a judge reports findings of: its `failure_modes` when it declares several (the
    reference check), else its one `failure_mode`."""
    declared = tuple(getattr(judge, 'failure_modes', ()) or ())
    return declared or (judge.failure_mode,)


def run_score(report: RecordReport) -> float | None:
    """The run's score as `sensei-eval judge` and `validate` report it: its overall score from the verdict
    model (`core.verdicts`; None: not judged)."""
    return report.overall_score


class MetricError(ModelCallError):
    """The metric's calls failed beyond what it tolerates (`max_error_rate`; the errors say why)."""


class JudgeMetricWarning(UserWarning):
    """A call of `JudgeMetric` in which a judge errored or was inconclusive (one warning per call)."""


# What a metric call returns when a judge errored or was inconclusive on the run (see `JudgeMetric`).
OnError = Literal['raise', 'skip', 'zero']
# Example fields that carry a reference answer (DSPy's usual label names, most specific first).
_REFERENCE_FIELDS = ('reference_answer', 'expected_answer', 'reference', 'answer', 'response', 'output')


RecordAdapter = Callable[[Any, Any], QueryRecord]


def prediction_record(example: Any, pred: Any) -> QueryRecord:
    """The record a judge reads, from any DSPy program's prediction (the default `JudgeMetric` adapter).

    * a prediction with a `record` (`AgentProgram`) is used as it is;
    * else the query is the example's `query` / `question` input (else all its inputs, `name: value`
      lines), the answer the prediction's `answer` / `response` / `output` field (else all its fields),
      and a ReAct `trajectory` (`thought_i`, `tool_name_i`, `tool_args_i`, `observation_i`) becomes the
      tool calls and results between them. The query id is the example's `query_id`, else a hash of the
      query. Anything else: pass your own `record_adapter(example, pred) -> QueryRecord`.

    The example's reference comes along (`with_reference`), so the reference check runs inside DSPy as it
    does in `sensei-eval judge`: its `expected_tool_calls` become the record's (a program that calls
    nothing then fails it instead of scoring 1.0), and its label (`reference_answer`, `expected_answer`,
    `reference`, else `answer` / `response` / `output` when it is not an input) goes in
    `metadata['reference_answer']`; `tools`, `reference_check` and `profile` fields go in the metadata
    under their names, as in a dataset line.
    """
    record = getattr(pred, 'record', None)
    if isinstance(record, QueryRecord):
        return with_reference(record, example)
    inputs = _fields(example, inputs_only=True)
    query = str(inputs.get('query') or inputs.get('question') or '\n'.join(f'{k}: {v}' for k, v in inputs.items()))
    outputs = _fields(pred)
    trajectory = outputs.pop('trajectory', None)
    answer = next((outputs[k] for k in ('answer', 'response', 'output') if k in outputs), None)
    if answer is None:
        answer = '\n'.join(f'{k}: {v}' for k, v in outputs.items() if k not in ('reasoning', 'record'))
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': query}]
    if isinstance(trajectory, dict):
        i = 0
        while f'tool_name_{i}' in trajectory:
            name = str(trajectory[f'tool_name_{i}'])
            if name != 'finish':
                args = trajectory.get(f'tool_args_{i}') or {}
                call = {'id': f'c{i}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args, default=str)}}
                content = trajectory.get(f'thought_{i}')
                messages.append({'role': 'assistant', 'content': content, 'tool_calls': [call]})
                messages.append({'role': 'tool', 'tool_call_id': f'c{i}', 'content': str(trajectory.get(f'observation_{i}', ''))})
            i += 1
    messages.append({'role': 'assistant', 'content': str(answer)})
    query_id = str(
        inputs.get('query_id') or getattr(example, 'query_id', None) or 'q-' + hashlib.sha256(query.encode()).hexdigest()[:10]
    )
    return with_reference(QueryRecord(query_id=query_id, query=query, messages=messages), example)


def with_reference(record: QueryRecord, example: Any) -> QueryRecord:
    """`record` with the reference `example` carries (see `prediction_record`); what the record already
    has is kept. An `expected_tool_calls` that is not a list of calls is a `ValueError` naming the field."""
    labels = _labels(example)
    update: dict[str, Any] = {}
    expected = labels.get('expected_tool_calls')
    if expected is not None and record.expected_tool_calls is None:
        if not isinstance(expected, list):
            raise ConfigError(f'example field expected_tool_calls: a list of tool calls, not {type(expected).__name__}')
        update['expected_tool_calls'] = [
            e if isinstance(e, ExpectedToolCall) else ExpectedToolCall.model_validate(e) for e in expected
        ]
    metadata = dict(record.metadata)
    reference = next((labels[k] for k in _REFERENCE_FIELDS if labels.get(k) not in (None, '')), None)
    if reference is not None:
        metadata.setdefault('reference_answer', str(reference))
    for key in ('tools', 'reference_check', 'profile'):
        if labels.get(key) is not None:
            metadata.setdefault(key, labels[key])
    if metadata != record.metadata:
        update['metadata'] = metadata
    return record.model_copy(update=update) if update else record


def _labels(example: Any) -> dict[str, Any]:
    """The example's fields that are not inputs (its labels); every field when it declares no inputs,
    except the query itself."""
    everything = _fields(example)
    inputs = _fields(example, inputs_only=True)
    labels = everything if inputs == everything else {k: v for k, v in everything.items() if k not in inputs}
    if 'expected_tool_calls' in everything:
        labels['expected_tool_calls'] = everything['expected_tool_calls']  # a reference even when passed as an input
    return labels


def _fields(obj: Any, *, inputs_only: bool = False) -> dict[str, Any]:
    if obj is None:
        return {}
    if inputs_only and hasattr(obj, 'inputs'):
        with contextlib.suppress(ValueError):  # an example without declared inputs: all its fields
            obj = obj.inputs()
    if hasattr(obj, 'toDict'):
        return dict(obj.toDict())
    if isinstance(obj, Mapping):
        return dict(obj)
    return {k: v for k, v in vars(obj).items() if not k.startswith('_')} if hasattr(obj, '__dict__') else {}


class JudgeMetric:
    """Our judges as a DSPy metric (and, with `feedback=True`, a GEPA feedback metric).

    Works on any DSPy program: `record_adapter(example, pred)` turns a prediction into the record the
    judges read (default `prediction_record`, which carries the example's reference along). The score is
    the run's overall score. A judge that errored or was inconclusive is counted, warned about and handled
    by `on_error` (module docstring): `'raise'` (default), `'skip'` or `'zero'`. DSPy's optimizers count a
    metric that raises as a failed example and go on, so after compiling `check()` raises `MetricError`
    when more than `max_error_rate` of the calls had an error, or none scored (`compile_checked` does both).
    """

    def __init__(
        self,
        judges: Sequence[Judge],
        judge_model: JudgeModel | None,
        *,
        feedback: bool | Routing = False,
        cache: JudgeCache | None = None,
        profile: Profile = DEFAULT_PROFILE,
        record_adapter: RecordAdapter | None = None,
        on_error: OnError = 'raise',
        max_error_rate: float = 0.0,
    ) -> None:
        if on_error not in ('raise', 'skip', 'zero'):
            raise ConfigError(f"on_error: 'raise', 'skip' or 'zero', not {on_error!r}")
        if not 0.0 <= max_error_rate <= 1.0:
            raise ConfigError(f'max_error_rate: a fraction between 0 and 1, not {max_error_rate!r}')
        self.judges = list(judges)
        self.record_adapter = record_adapter or prediction_record
        self.on_error: OnError = on_error
        self.max_error_rate = max_error_rate
        self.scored = 0
        self.profile = profile  # for runs whose query names no profile of its own (metadata.profile)
        # how issues reach components for feedback (`feedback` given as a `Routing`); None: the profile's map,
        # else lexical (resolved per run)
        self.routing = feedback if isinstance(feedback, Routing) else None
        self.judge_model = judge_model
        self.feedback = feedback is not False
        self.cache = cache
        self.calls = 0  # runs judged (memoised: a run asked for again is not judged again)
        self.metric_calls = 0  # calls of the metric
        self.failed_calls = 0  # calls in which a judge errored or was inconclusive, or nothing could be scored
        self.judge_requests = 0
        self.errors: list[str] = []
        self._memo: dict[str, RecordReport] = {}
        self._lock = threading.Lock()

    def __call__(
        self,
        example: Any,
        pred: Any,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> float | dspy.Prediction:
        with self._lock:
            self.metric_calls += 1
        try:
            record = self.record_adapter(example, pred)
        except Exception as e:
            self._failed(f'the record adapter could not turn the prediction into a record: {describe_error(e)}')
            raise
        report = self.report(record)
        score = run_score(report)
        # every judge that gave no verdict (error, inconclusive, smoke: `core.verdicts`), named with why
        problems = [
            f'{name}: {status}: {r.error or "no reason given"}'
            for name, r in report.judges.items()
            if is_missing_verdict(status := judge_status(r))  # not applicable (nothing to inspect) is no problem
        ]
        if problems or score is None:
            what = '; '.join(problems) if problems else 'no judge applied to the run'
            label = report.coverage.label if report.coverage is not None else 'not judged'
            coverage = '' if label == 'not judged' else f' ({label})'
            judged = f'not judged{coverage}' if score is None else f'judged in part{coverage}, overall {score:.3f}'
            message = f'{record.query_id}: {judged}: {what}'
            self._failed(message)
            warnings.warn(f'JudgeMetric (on_error={self.on_error!r}): {message}', JudgeMetricWarning, stacklevel=2)
            if self.on_error == 'zero':
                score = 0.0
            elif self.on_error == 'raise' or score is None:
                raise JudgeError(message)
        assert score is not None
        with self._lock:
            self.scored += 1
        if not self.feedback:
            return score
        texts = getattr(pred, 'components', None)
        return dspy.Prediction(score=score, feedback=self.feedback_text(report, pred_name, texts))

    def _failed(self, message: str) -> None:
        with self._lock:
            self.failed_calls += 1
            self.errors.append(message)

    @property
    def error_rate(self) -> float:
        """Share of the metric's calls that had an error (0 before any call)."""
        return self.failed_calls / self.metric_calls if self.metric_calls else 0.0

    def check(self) -> None:
        """Raise `MetricError` when calls had errors beyond `max_error_rate`, or none produced a score."""
        if not self.errors:
            return
        shown = '; '.join(dict.fromkeys(self.errors[-3:]))
        if self.scored == 0:
            raise MetricError(f'the judge metric failed on every call ({len(self.errors)} error(s)); last: {shown}')
        if self.error_rate > self.max_error_rate:
            raise MetricError(
                f'the judge metric had errors in {self.failed_calls} of {self.metric_calls} call(s) '
                f'(max_error_rate {self.max_error_rate:g}, on_error={self.on_error!r}); last: {shown}'
            )

    def report(self, record: QueryRecord) -> RecordReport:
        """The judges' report on one run, judged once however often it is asked for."""
        # the run and its reference: the same transcript against another expected answer is another verdict
        judged = [record.messages, record.model_dump(mode='json', include={'expected_tool_calls', 'metadata'})]
        key = hashlib.sha256(json.dumps(judged, sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            hit = self._memo.get(key)
        if hit is not None:
            return hit
        options = JudgeRunOptions(self.judges, self.judge_model, cache=self.cache, profile=self.profile)
        report = run_sync(judge_records([record], options, run_id='dspy-metric'))[0]
        with self._lock:
            self.calls += 1
            self.judge_requests += sum(r.requests for r in report.judges.values() if not r.cached)
            self._memo[key] = report
        return report

    def feedback_text(self, report: RecordReport, component: str | None, components: Mapping[str, str] | None = None) -> str:
        """The judges' findings on one run for the component being rewritten (`components`: the texts the run
        used, which lexical routing compares each issue with)."""
        texts = dict(components or {})
        if component and component not in texts:
            texts[component] = ''
        routing = self.routing or resolve_routing(list(texts), profile_map=self.profile.component_map, profile=self.profile.name)
        names = [j.name for j in self.judges]
        verdicts = mode_verdicts(report)
        lines = []
        for name in names:
            result = report.judges.get(name)
            if result is None:
                continue
            status = judge_status(result)
            if status == 'not_applicable':  # it had nothing to inspect in this run: nothing to say
                continue
            if not is_judged(status):
                lines.append(f'- {name}: the judge gave no verdict ({status}: {result.error})')
                continue
            # each finding is routed by its own mode (`core.verdicts.mode_verdicts`), not the judge's class constant
            issues = [
                (mode, issue)
                for (judge, mode), verdict in verdicts.items()
                if judge == name
                for issue in verdict.issues
                if not component or component in routing.route(mode, f'{name} {mode or ""} {issue_summary(issue)}', texts)
            ]
            # the mode is named when it is not the judge's own (the reference check's tool_parameters findings)
            lines.extend(
                f'- {name} ({mode}): {issue_summary(issue)}'
                if mode and mode != result.failure_mode
                else f'- {name}: {issue_summary(issue)}'
                for mode, issue in issues
            )
            mapped = not component or name in judges_for_component(component, self.judges, routing)
            if not result.issues and mapped:
                lines.append(f'- {name}: no issue')
        shown = [n for n in names if any(line.startswith((f'- {n}:', f'- {n} (')) for line in lines)]
        if not lines:
            lines.append('- no issue routed to this component')
        head = f'Judged by {", ".join(shown or names)}' + (
            f' (the issues routed to {component}: {routing.source})' if component else ''
        )
        return head + ':\n' + '\n'.join(lines)


def compile_checked(optimizer: Any, student: Any, metric: JudgeMetric, **kwargs: Any) -> Any:
    """`optimizer.compile(student, **kwargs)`, then `metric.check()`: a compile in which the metric never
    scored raises `MetricError` instead of returning the program unchanged ("Bootstrapped 0 full traces")."""
    compiled = optimizer.compile(student, **kwargs)
    metric.check()
    return compiled


class _Shared(Generic[T]):
    """A value every copy of a module shares: `Module.deepcopy` deep-copies what it can, and a live agent
    (HTTP clients, locks) can't and shouldn't be."""

    def __init__(self, value: T) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> _Shared[T]:
        return self


class _Counter:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n

    def __deepcopy__(self, memo: dict[int, Any]) -> _Counter:
        return self  # shared on purpose: every copy of the program counts into the same total


class AgentProgram(dspy.Module):  # type: ignore[misc]
    """The agent as a DSPy program whose predictors' instructions are the prompt components."""

    def __init__(self, components: PromptComponents, runner: AgentRunner, queries: Sequence[Query] = ()) -> None:
        super().__init__()
        self._components = components
        self._runner = _Shared(runner)  # the agent is shared by every copy DSPy makes, never copied
        # DSPy examples carry only the query text and id; the rest of a query (expected calls, metadata such
        # as its agent profile) is looked up here by id, so the judges see the same record as elsewhere
        self._queries = _Shared({q.query_id: q for q in queries})
        self._usage = _Counter()  # shared by the copies DSPy makes (Module.deepcopy copies only parameters)
        for name in components.names:
            signature = dspy.Signature('query -> answer').with_instructions(components[name])
            setattr(self, name, dspy.Predict(signature))

    @property
    def agent_requests(self) -> int:
        return self._usage.value

    def current_components(self) -> PromptComponents:
        components = self._components
        for name in components.names:
            components = components.with_text(name, getattr(self, name).signature.instructions)
        return components

    def forward(self, query: str, query_id: str | None = None) -> dspy.Prediction:
        components = self.current_components()
        known = self._queries.value.get(query_id) if query_id else None
        q = (
            known
            if known is not None and known.query == query
            else Query(query_id or 'q-' + hashlib.sha256(query.encode()).hexdigest()[:10], query)
        )
        record = run_sync(run_query(self._runner.value, components.build(), q))
        self._usage.add(int(record.metadata.get('agent_requests', 0) or 0))
        answer = record.final_answer() or ''
        trace = dspy.settings.trace
        if trace is not None:
            for name in components.names:
                trace.append((getattr(self, name), {'query': query}, dspy.Prediction(answer=answer)))
        # the component texts this run used: lexical routing of the feedback compares issues with them
        return dspy.Prediction(answer=answer, record=record, components=components.as_dict())
