"""The CLI while Postgres (memory *and* its checkpointer) is down, on servers of the test's own."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from memory_graph_agent.cli.main import main
from memory_graph_agent.local import embedded
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.testing import ScriptedChatModel


@pytest.fixture
def fast_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_CONNECT_TIMEOUT_S", "1")
    monkeypatch.setenv("DATABASE_STATEMENT_TIMEOUT_S", "2")
    model = register_chat_model(f"cli-{uuid.uuid4().hex[:6]}", ScriptedChatModel())
    monkeypatch.setenv("MODEL", model)


async def _window(user: str, thread: str) -> list[str]:
    from memory_graph_agent.services.stores import services_session

    async with services_session("local:all-minilm-l6-v2") as services:
        return [m.content for m in await services.window.window(user, thread)]


def test_chat_keeps_a_message_while_postgres_is_down_and_sends_it_when_back(
    private_home: Path, fast_timeouts, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    embedded.ensure_services()
    layout = embedded._Layout(private_home)
    user, thread = f"u-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:6]}"

    def postgres_down() -> str:
        embedded._stop_postgres(layout)
        return "said while the database is down"

    def postgres_back() -> str:
        embedded.ensure_services()
        return ""  # Enter: send the kept message again

    def end() -> str:
        raise EOFError

    lines = iter([lambda: "My sister Anna lives in Oslo.", postgres_down, postgres_back, end])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines)())

    code = main(["chat", "--user", user, "--thread", thread])

    out = capsys.readouterr().out
    assert code == 0, out
    assert "database is unavailable" in out and "kept" in out, out
    said = asyncio.run(_window(user, thread))
    assert said.count("said while the database is down") == 1, said
    assert said[0] == "My sister Anna lives in Oslo." and len(said) == 4  # each answered


@pytest.mark.slow  # waits out a 17.5 s outage
def test_chat_sends_a_kept_message_when_postgres_is_back_after_a_longer_outage(
    private_home: Path, fast_timeouts, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Postgres back 17.5 s after it stopped: the kept message is sent at the first Enter.

    The checkpointer's pool reconnects in the background from the failed turn on, backing
    off 1, 2, 4, 8, 16 s (±10% each): attempts at ~0, 1, 3, 7, 15, 31 s. With
    psycopg_pool's default ``reconnect_timeout`` (5 min) none falls between the restart
    (after 17.5 s) and the resent turn's deadline (8 s later here), so that turn failed
    with Postgres up and the message stayed kept.
    """
    embedded.ensure_services()
    layout = embedded._Layout(private_home)
    user, thread = f"u-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:6]}"
    stopped = 0.0

    def postgres_down() -> str:
        nonlocal stopped
        embedded._stop_postgres(layout)
        stopped = time.monotonic()  # the failing turn starts the pool's reconnects now
        return "said while the database is down"

    def postgres_back() -> str:
        time.sleep(max(0.0, stopped + 17.5 - time.monotonic()))  # past the ~15 s attempt
        embedded.ensure_services()
        return ""

    def end() -> str:
        raise EOFError

    lines = iter([lambda: "My sister Anna lives in Oslo.", postgres_down, postgres_back, end])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines)())

    code = main(["chat", "--user", user, "--thread", thread])

    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("database is unavailable") == 1, out
    said = asyncio.run(_window(user, thread))
    assert said.count("said while the database is down") == 1, said
    assert len(said) == 4, said


def test_send_says_the_database_is_down_instead_of_a_traceback(
    private_home: Path, fast_timeouts, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    urls = embedded.ensure_services()
    embedded._stop_postgres(embedded._Layout(private_home))
    # as with an external database: nobody starts it again
    monkeypatch.setenv("REDIS_URL", urls.redis_url)
    monkeypatch.setenv("DATABASE_URL", urls.database_url)

    code = main(["send", "--user", f"u-{uuid.uuid4().hex[:8]}", "hello"])

    out = capsys.readouterr().out
    assert code == 1, out
    assert "database is unavailable" in out and "not sent" in out, out
