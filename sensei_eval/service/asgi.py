"""The ASGI types our two raw middlewares (the request guard and the body limit) are written against.

Starlette's own aliases live in a private module; these five lines are all either middleware needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ('ASGIApp', 'Message', 'Receive', 'Scope', 'Send')

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
