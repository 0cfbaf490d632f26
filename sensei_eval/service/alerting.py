"""The service's degradation alerts: finished evaluations feed `alerts.AlertMonitor`; what it raises is stored,
pushed on the `alerts` WebSocket channel and POSTed to a webhook.

Every service process runs one `AlertWatcher`. It reads completed evaluations from the store in the order they
completed (with a short lag, so a row committed a moment late is not skipped) and feeds each to its own
monitor; at start-up it replays the stored evaluations the same way, so a restart (or a second process)
arrives at the same windows and the same alerts. Alert ids are derived from the run that fired them, so the
row is inserted once whichever process sees it first, and only that process publishes the event and calls
the webhook. Evaluations made by the embedded model (`smoke`) are left out: its verdicts prove the pipeline
runs, not how the agent does.

The agent is the session's `agent` (else the report's profile), the version the record's `prompt_version`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.exc import IntegrityError

from sensei_eval.core.errors import describe_error
from sensei_eval.core.reports import RecordReport
from sensei_eval.models.retry import with_retries
from sensei_eval.production.alerts import Alert, AlertEvent, AlertMonitor, JudgedRun, judged_run
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.events import EventHub
from sensei_eval.service.store import AlertRow, EvaluationRow, JobStatus, SessionRow, Store, now_us

__all__ = ('AlertWatcher', 'deliver_webhook')

log = logging.getLogger(__name__)

_BATCH = 500  # evaluations read per query


class AlertWatcher:
    """Feeds completed evaluations to the monitor and acts on its alerts."""

    def __init__(self, store: Store, hub: EventHub, settings: ServiceSettings) -> None:
        self.store = store
        self.hub = hub
        self.settings = settings
        self.monitor = AlertMonitor(settings.alert_rule)
        self._cursor: tuple[int, str] = (0, '')
        self._task: asyncio.Task[None] | None = None
        self._webhooks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Replay what is stored (silently: those alerts were acted on when they fired), then watch."""
        await asyncio.to_thread(self._catch_up, False)
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._webhooks:
            await asyncio.wait(self._webhooks, timeout=self.settings.alert_webhook_timeout_s)

    async def poll(self) -> list[AlertEvent]:
        """Read newly completed evaluations now and act on the alert events they cause (returned)."""
        events = await asyncio.to_thread(self._catch_up, True)
        for event in events:
            self._announce(event)
        return events

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.alert_poll_s)
            try:
                await self.poll()
            except Exception:
                log.exception('alert watcher: reading evaluations failed; retrying')

    def _catch_up(self, act: bool) -> list[AlertEvent]:
        events: list[AlertEvent] = []
        while True:
            runs = self._read_batch()
            if not runs:
                return events
            for cursor, run in runs:
                self._cursor = cursor
                for event in self.monitor.observe(run):
                    if self._store(event) and act:
                        events.append(event)

    def _read_batch(self) -> list[tuple[tuple[int, str], JudgedRun]]:
        done_before = now_us() - int(self.settings.alert_lag_s * 1_000_000)
        at, last_id = self._cursor
        query = (
            select(EvaluationRow, SessionRow.agent)
            .join(SessionRow, SessionRow.session_id == EvaluationRow.session_id)
            .where(
                EvaluationRow.status == JobStatus.COMPLETED.value,
                EvaluationRow.smoke.is_not(True),
                EvaluationRow.scoring.is_(None),  # evaluations: a scoring is the investigation score, not a verdict
                EvaluationRow.completed_at_us <= done_before,
                or_(
                    EvaluationRow.completed_at_us > at,
                    and_(EvaluationRow.completed_at_us == at, EvaluationRow.evaluation_id > last_id),
                ),
            )
            .order_by(EvaluationRow.completed_at_us, EvaluationRow.evaluation_id)
            .limit(_BATCH)
        )
        out: list[tuple[tuple[int, str], JudgedRun]] = []
        with self.store.read() as db:
            for row, agent in db.execute(query).all():
                cursor = (int(row.completed_at_us or 0), row.evaluation_id)
                if not row.report:
                    out.append((cursor, JudgedRun(agent or 'default', 'unversioned', {}, None)))
                    continue
                try:
                    report = RecordReport.model_validate(row.report)
                except ValueError as e:
                    log.warning('alert watcher: evaluation %s has an unreadable report (%s); skipped', row.evaluation_id, e)
                    out.append((cursor, JudgedRun(agent or 'default', 'unversioned', {}, None)))
                    continue
                run = judged_run(report, agent=agent)
                at_time = datetime.fromtimestamp(cursor[0] / 1_000_000, UTC)
                out.append((cursor, JudgedRun(run.agent, run.prompt_version, run.failed, run.score, at_time)))
        return out

    def _store(self, event: AlertEvent) -> bool:
        """Write the alert's row; True when this call changed it (the caller then publishes). A peer process
        that inserted the same alert first wins: this one then has nothing to announce."""
        try:
            return self._write_row(event.alert)
        except IntegrityError:
            return False

    def _write_row(self, alert: Alert) -> bool:
        with self.store.write() as db:
            row = db.get(AlertRow, alert.id, with_for_update=True)
            if row is None:
                db.add(_row(alert))
                return True
            metrics = [m.model_dump(mode='json') for m in alert.metrics]
            if row.status == alert.status and row.metrics == metrics:
                return False
            row.status, row.metrics, row.message = alert.status, metrics, alert.message[:2000]
            row.resolved_at_us = _us(alert.resolved_at)
            return True

    def _announce(self, event: AlertEvent) -> None:
        payload = {'type': f'alerts.{event.kind}', 'alert': event.alert.model_dump(mode='json')}
        self.hub.publish_alert(payload)
        if self.settings.alert_webhook_url:
            task = asyncio.create_task(self._webhook(payload, event.alert.id))
            self._webhooks.add(task)
            task.add_done_callback(self._webhooks.discard)

    async def _webhook(self, payload: dict[str, Any], alert_id: str) -> None:
        url = self.settings.alert_webhook_url
        assert url is not None
        status = await deliver_webhook(
            url,
            payload,
            attempts=self.settings.alert_webhook_attempts,
            backoff_s=self.settings.alert_webhook_backoff_s,
            timeout_s=self.settings.alert_webhook_timeout_s,
        )
        await asyncio.to_thread(self._record_webhook, alert_id, f'{payload["type"]}: {status}')

    def _record_webhook(self, alert_id: str, status: str) -> None:
        with self.store.write() as db:
            row = db.get(AlertRow, alert_id)
            if row is not None:
                row.webhook_status = status[:500]


async def deliver_webhook(
    url: str,
    payload: dict[str, Any],
    *,
    attempts: int = 5,
    backoff_s: float = 1.0,
    timeout_s: float = 10.0,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> str:
    """POST the event under the one retry policy (`sensei_eval.models.retry`: connection errors, 5xx and 429 are
    retried, the receiver's Retry-After honoured; another refusal is final). Returns what happened."""
    import httpx2

    tries = 0
    async with httpx2.AsyncClient(timeout=timeout_s) as client:

        async def post() -> httpx2.Response:
            nonlocal tries
            tries += 1
            response = await client.post(url, json=payload)
            response.raise_for_status()  # anything but 2xx: the policy decides whether it may change
            return response

        try:
            response = await with_retries(post, attempts=attempts, base_s=backoff_s, sleep=sleep)
        except httpx2.HTTPStatusError as e:
            last = f'HTTP {e.response.status_code}'
        except httpx2.HTTPError as e:
            last = describe_error(e)
        else:
            return f'delivered (HTTP {response.status_code}, attempt {tries})'
    log.error('alert webhook %s failed after %d attempt(s): %s', url, tries, last)
    return f'failed: {last}'


def _row(alert: Alert) -> AlertRow:
    return AlertRow(
        alert_id=alert.id,
        agent=alert.agent,
        prompt_version=alert.prompt_version,
        baseline_version=alert.baseline_version,
        status=alert.status,
        metrics=[m.model_dump(mode='json') for m in alert.metrics],
        message=alert.message[:2000],
        fired_at_us=_us(alert.fired_at) or 0,
        resolved_at_us=_us(alert.resolved_at),
    )


def _us(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1_000_000)
