"""Embedded servers shared by several processes: nobody stops them from under the others.

Every test here runs its own servers in `private_home`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
import redis

from memory_graph_agent.cli.main import main
from memory_graph_agent.local import embedded


def _pids() -> tuple[int | None, int | None]:
    info = embedded.status()
    return info["redis"]["pid"], info["postgres"]["pid"]


def test_services_down_refuses_while_clients_are_connected(private_home: Path, capsys) -> None:
    urls = embedded.ensure_services()
    pids = _pids()
    client = redis.Redis.from_url(urls.redis_url)
    client.ping()
    conn = psycopg.connect(urls.database_url, autocommit=True)
    try:
        assert main(["services", "down"]) == 1
        out = capsys.readouterr().out
        assert "refusing" in out and "--force" in out, out
        assert _pids() == pids and None not in pids, "the servers were stopped"
        assert client.ping() and conn.execute("SELECT 1").fetchone() == (1,)

        assert main(["services", "down", "--force"]) == 0
        assert _pids() == (None, None)
    finally:
        client.close()
        conn.close()


def test_services_down_stops_servers_nobody_uses(private_home: Path) -> None:
    embedded.ensure_services()
    assert main(["services", "down"]) == 0
    assert _pids() == (None, None)


async def test_server_services_restart_embedded_servers_stopped_under_them(
    private_home: Path,
) -> None:
    """`langgraph dev` caches its services: after a `services down` they must come back."""
    from memory_graph_agent.services.stores import close_server_services, server_services

    services = await server_services()
    try:
        assert await services.redis.ping()
        await asyncio.to_thread(embedded.stop_services)
        assert _pids() == (None, None)

        again = await server_services()
        assert None not in _pids(), "the embedded servers were not restarted"
        assert await again.redis.ping()
        assert await again.db.query("SELECT 1 AS one") == [{"one": 1}]
    finally:
        await close_server_services()


def test_no_test_can_stop_the_shared_home(shared_home: Path, tmp_path: Path) -> None:
    """The session's guard (conftest): checked on a stand-in stopper, never on the real one."""
    from tests.integration_tests.shared_home import STOPPERS, refusing

    stopped: list[Path] = []
    stop = refusing(lambda layout: stopped.append(layout.home), shared_home)
    with pytest.raises(AssertionError, match="shared home"):
        stop(embedded._Layout(shared_home))
    stop(embedded._Layout(tmp_path))
    assert stopped == [tmp_path]
    for name in STOPPERS:  # and the guard is what stop_services calls
        assert getattr(embedded, name).__name__ == "stop_unless_shared"
