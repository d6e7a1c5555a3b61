"""The embedded servers' logs stay bounded, and stay useful for diagnosing a crash.

Real servers in a throw-away home: each start begins a fresh log and keeps the last run's
as ``.1``; a log over the cap is emptied in place while its server keeps writing to it;
a backend crash is reported once whether or not the log was rotated in between.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis

from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded import _Layout, logs


def _log_markers(urls: embedded.ServiceURLs) -> str:
    """Make both servers write a line of their own into their logs; return its text."""
    marker = f"marker-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(urls.redis_url)
    try:
        client.execute_command("DEBUG", "LOG", marker)
    finally:
        client.close()
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute(f"DO $$ BEGIN RAISE LOG '{marker}'; END $$")
    return marker


def _wait_for(path: Path, text: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def test_each_start_begins_a_fresh_log_and_keeps_the_last_run_s(private_home: Path) -> None:
    layout = _Layout(private_home)
    urls = embedded.ensure_services()
    first = _log_markers(urls)
    for log in (layout.redis_log, layout.pg_log):
        assert _wait_for(log, first), log.read_text()
    embedded.stop_services()
    urls = embedded.ensure_services()
    second = _log_markers(urls)
    for log in (layout.redis_log, layout.pg_log):
        assert _wait_for(log, second)
        assert first not in log.read_text(errors="replace"), "the last run's lines moved out"
        assert first in logs.previous_log(log).read_text(errors="replace"), log
    embedded.stop_services()
    embedded.ensure_services()
    for log in (layout.redis_log, layout.pg_log):
        before = logs.previous_log(log).read_text(errors="replace")
        assert second in before and first not in before, "one previous log is kept"


def test_a_running_server_s_log_past_the_cap_is_emptied_in_place(
    private_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _Layout(private_home)
    urls = embedded.ensure_services()
    early = _log_markers(urls)
    for log in (layout.redis_log, layout.pg_log):
        assert _wait_for(log, early)
    monkeypatch.setattr(logs, "LOG_MAX_BYTES", 0)
    logs.check_watched()  # the round every process using the servers runs each minute
    late = _log_markers(urls)
    for log in (layout.redis_log, layout.pg_log):
        assert _wait_for(log, late), f"{log} is no longer written to"
        text = log.read_bytes()
        assert early.encode() not in text and b"\0" not in text, "written from the start"
        assert early in logs.previous_log(log).read_text(errors="replace")
    assert embedded.status()["redis"]["running"] and embedded.status()["postgres"]["running"]


def _crash_a_backend(url: str, log: Path) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        os.kill(conn.execute("SELECT pg_backend_pid()").fetchone()[0], signal.SIGILL)
    assert _wait_for(log, "was terminated by signal 4"), log.read_text()
    assert embedded._wait_postgres(url, 30), "recovered"


def test_a_crash_is_reported_once_across_a_rotation(private_home: Path) -> None:
    layout = _Layout(private_home)
    urls = embedded.ensure_services()
    assert embedded.crash_notice(urls.database_url) is None

    # logged, then rotated before anyone asked: read from the copy
    _crash_a_backend(urls.database_url, layout.pg_log)
    assert logs.rotate_log(layout.pg_log)
    notice = embedded.crash_notice(urls.database_url)
    assert notice is not None and "signal 4" in notice
    assert embedded.crash_notice(urls.database_url) is None, "said once"

    # rotated first, then logged in the emptied file (below the offset read before)
    _log_markers(urls)
    assert embedded.crash_notice(urls.database_url) is None
    assert logs.rotate_log(layout.pg_log)
    _crash_a_backend(urls.database_url, layout.pg_log)
    notice = embedded.crash_notice(urls.database_url)
    assert notice is not None and "signal 4" in notice
    assert embedded.crash_notice(urls.database_url) is None, "said once"


def test_the_local_model_server_s_log_past_the_cap_is_rotated_at_its_start(
    private_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shared by every agent process of the machine, so it is rotated by size only."""
    from memory_graph_agent.local.model_server import LocalModelServer, ModelServerError

    server = LocalModelServer(model_path=str(private_home / "no-such.gguf"), alias="none")
    server.log_file.parent.mkdir(parents=True)
    server.log_file.write_text("an earlier process's requests\n")
    with pytest.raises(ModelServerError):
        server.ensure()  # within the cap: appended to
    assert server.log_file.read_text().startswith("an earlier process's requests\n")
    assert not logs.previous_log(server.log_file).exists()
    monkeypatch.setattr(logs, "LOG_MAX_BYTES", 10)
    with pytest.raises(ModelServerError):
        server.ensure()  # past it: rotated first
    assert "an earlier process's requests" in logs.previous_log(server.log_file).read_text()
    assert "an earlier process's requests" not in server.log_file.read_text()
