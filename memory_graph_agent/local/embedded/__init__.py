"""Embedded Redis and PostgreSQL/pgvector servers, started on demand and shared machine-wide.

Used when ``REDIS_URL`` / ``DATABASE_URL`` are unset. As root, PostgreSQL runs as `SYSTEM_USER`;
permissions outside `data_home` are never changed (why the bundle's own launcher is not used).
"""

from __future__ import annotations

from memory_graph_agent.local.embedded.clients import (
    ServicesInUse,
    connected_clients,
    refuse_if_in_use,
    running,
)
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
from memory_graph_agent.local.embedded.logs import previous_log, rotate_log, watch_logs
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
    """Return the env's service URLs, else embedded servers' (reused or started); process-safe.

    Raises:
        EmbeddedServiceError: A server cannot be prepared, started or reached.
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
    watch_logs(layout)
    assert database_url is not None
    return ServiceURLs(redis_url=redis_url, database_url=database_url)


def stop_services(*, if_unused: bool = False) -> None:
    """Stop the embedded Redis and PostgreSQL of `data_home`, if running (never external ones).

    Args:
        if_unused: Raise `ServicesInUse` instead when other processes are connected
            (``memory-agent services down`` without ``--force``).
    """
    layout = _Layout(data_home())
    if not layout.home.is_dir():
        return
    with _exclusive_lock(layout):
        if if_unused:
            refuse_if_in_use(layout)
        _stop_redis(layout)
        _stop_postgres(layout)


def embedded_running() -> bool:
    """Whether every server `ensure_services` would embed runs (pid files only, no network)."""
    up = running(_Layout(data_home()))
    return all(
        up[name]
        for name, env in (("redis", "REDIS_URL"), ("postgres", "DATABASE_URL"))
        if _env_url(env) is None
    )


def status() -> dict[str, dict]:
    """Describe the Redis and PostgreSQL services in use, without starting anything.

    Returns:
        ``{"redis": {...}, "postgres": {...}}``: ``running``, ``external`` (from the env),
        ``url``, ``pid``, ``version``, ``data_dir``, ``error`` if unreachable, ``pgvector``.
    """
    layout = _Layout(data_home())
    return {"redis": _redis_status(layout), "postgres": _postgres_status(layout)}


__all__ = [
    "EmbeddedServiceError",
    "PG_BUNDLE",
    "SELFCHECK_APP",
    "SYSTEM_USER",
    "ServicesInUse",
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
    "connected_clients",
    "embedded_log",
    "embedded_running",
    "ensure_services",
    "native_binaries",
    "previous_log",
    "rotate_log",
    "status",
    "stop_services",
    "vector_selfcheck",
]
