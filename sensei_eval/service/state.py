"""What every router shares: `ServiceState` (settings, store, event hub, judge model, worker) and the
dependencies that hand it, and the writing user, to a handler.

Routers (`routers/`) and the dashboard import this module; `api.create_app` builds one `ServiceState`
per app and stores it as `app.state.service`. Nothing here imports the app or a router.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from sensei_eval.core.errors import describe_error
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.service import repository
from sensei_eval.service.alerting import AlertWatcher
from sensei_eval.service.body_budget import Parsing
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.events import EventHub
from sensei_eval.service.guard import ANONYMOUS
from sensei_eval.service.schemas import ScoreOut
from sensei_eval.service.scoring import ScoringWorker
from sensei_eval.service.store import SessionStatus, Store

__all__ = ('AUTO_SCORE_USER', 'ServiceState', 'State', 'Writer', 'auto_score', 'get_state')

log = logging.getLogger(__name__)

# Who triggered a scoring when the service itself did.
AUTO_SCORE_USER = 'auto-score'


class ServiceState:
    """What the handlers share: settings, store, event hub, the threads request bodies are parsed on
    (`body_budget.Parsing`, shared with the guard) and (once started) the worker."""

    def __init__(self, settings: ServiceSettings, judge_model: JudgeModel | None) -> None:
        self.settings = settings
        self.store = Store(settings.db_url)
        self.hub = EventHub()
        self.parsing = Parsing(settings.parse_concurrency)
        self.judge_model = judge_model
        self.worker: ScoringWorker | None = None
        self.alerts: AlertWatcher | None = None

    def wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()


async def get_state(connection: HTTPConnection) -> ServiceState:
    """The app's `ServiceState` (async: no thread hop, HTTP and WebSocket alike)."""
    state: ServiceState = connection.app.state.service
    return state


def _writer(connection: HTTPConnection) -> str:
    """Who is writing (the dependency of every write endpoint): decided by `Guard`, which ran first."""
    return str(getattr(connection.state, 'user', ANONYMOUS))


State = Annotated[ServiceState, Depends(get_state)]
Writer = Annotated[str, Depends(_writer)]


def auto_score(state: ServiceState, session_id: str, status: str, agent: str | None) -> tuple[ScoreOut | None, str | None]:
    """Score a session that turned completed, when its agent is auto-scored; fail-open: any problem is
    reported in the answer, never raised."""
    if status != SessionStatus.COMPLETED.value or not state.settings.auto_scores(agent):
        return None, None
    try:
        result = repository.request_score(
            state.store,
            session_id,
            force=False,
            user=AUTO_SCORE_USER,
            variant=state.settings.scorer,
            owner=state.settings.worker_id,
        )
    except Exception as e:
        log.error('auto-scoring session %s failed to start: %s', session_id, e)
        return None, f'auto-scoring could not start: {describe_error(e)}'
    if result.created:
        state.wake()
    return result.score, None
