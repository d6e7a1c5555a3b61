"""Who uses the embedded servers: connected clients and whether the servers still run.

`stop_services` asks before stopping servers other processes (a running ``langgraph dev``,
the CLI, a notebook) are connected to; `server_services` asks whether they still run.
"""

from __future__ import annotations

import psycopg
import redis

from memory_graph_agent.local.embedded.layout import _Layout
from memory_graph_agent.local.embedded.postgres_server import _postmaster_pid
from memory_graph_agent.local.embedded.processes import _live_pid
from memory_graph_agent.local.embedded.redis_server import _redis_client

_PG_CLIENTS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


class ServicesInUse(RuntimeError):
    """The embedded servers have clients; stopping them would break those processes."""


def running(layout: _Layout) -> dict[str, bool]:
    """Whether the embedded Redis and PostgreSQL of ``layout`` run (pid files, no network)."""
    return {
        "redis": _live_pid(layout.redis_pidfile, layout.redis_dir) is not None,
        "postgres": _postmaster_pid(layout) is not None,
    }


def connected_clients(layout: _Layout) -> dict[str, int]:
    """Clients connected to each running embedded server, not counting this question's own."""
    up = running(layout)
    counts = {"redis": 0, "postgres": 0}
    if up["redis"]:
        client = _redis_client(layout)
        try:
            counts["redis"] = max(0, len(client.client_list()) - 1)
        except (redis.RedisError, OSError):
            pass  # not answering: nobody can be using it
        finally:
            client.close()
    if up["postgres"]:
        try:
            with psycopg.connect(layout.pg_url, connect_timeout=5, autocommit=True) as conn:
                row = conn.execute(_PG_CLIENTS).fetchone()
            counts["postgres"] = int(row[0]) if row else 0
        except psycopg.Error:
            pass
    return counts


def refuse_if_in_use(layout: _Layout) -> None:
    """Raise `ServicesInUse`, naming the clients, when any process uses the servers."""
    counts = connected_clients(layout)
    if any(counts.values()):
        raise ServicesInUse(
            f"refusing to stop the embedded services of {layout.home}: "
            f"{counts['redis']} Redis and {counts['postgres']} PostgreSQL clients are "
            "connected (a running langgraph dev, chat, notebook or test?). Stop them first, "
            "or re-run with --force"
        )
