"""The dashboard tests reuse the service tests' throwaway PostgreSQL server (one per test session)."""

from __future__ import annotations

from tests.service.conftest import pg_server, pg_url

__all__ = ('pg_server', 'pg_url')
