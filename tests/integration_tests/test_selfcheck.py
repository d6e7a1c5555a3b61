"""The pgvector self-check, and crash diagnoses that name the signal, the CPU and the log.

A real crash is made by sending SIGILL to the real backend that runs the self-check (what
an AVX-512 instruction does on a CPU without it): an event trigger holds that backend in
``pg_sleep`` at its first DDL statement while the test finds and kills it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from memory_graph_agent.core.records import event
from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded import SELFCHECK_APP, EmbeddedServiceError, postgres_server
from memory_graph_agent.storage.postgres import with_database

STALL = """
CREATE FUNCTION stall_selfcheck() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('application_name') = '{app}' THEN PERFORM pg_sleep(30); END IF;
END $$;
CREATE EVENT TRIGGER stall_selfcheck ON ddl_command_start EXECUTE FUNCTION stall_selfcheck();
"""


def _kill_selfcheck_backend(url: str, signo: int, done: threading.Event) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event = 'PgSleep'",
                (SELFCHECK_APP,),
            ).fetchone()
            if row:
                os.kill(row[0], signo)
                done.set()
                return
            time.sleep(0.05)


def _sigill_the_next_selfcheck(url: str) -> tuple[threading.Thread, threading.Event]:
    """Hold the next self-check's backend in ``pg_sleep`` and kill it with SIGILL."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(STALL.format(app=SELFCHECK_APP))
    killed = threading.Event()
    killer = threading.Thread(target=_kill_selfcheck_backend, args=(url, signal.SIGILL, killed))
    killer.start()
    return killer, killed


def test_started_servers_pass_the_selfcheck(
    private_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = embedded.vector_selfcheck

    def spy(url: str, log_file: Path | None = None) -> None:
        calls.append(url)
        real(url, log_file)

    monkeypatch.setattr(postgres_server, "vector_selfcheck", spy)  # what the start calls
    urls = embedded.ensure_services()
    assert calls == [urls.database_url], "a fresh start must run the self-check"
    embedded.ensure_services()
    assert len(calls) == 1, "a running server of the current binaries is not re-checked"


def test_a_crash_during_the_selfcheck_names_signal_cpu_and_log(private_home: Path) -> None:
    urls = embedded.ensure_services()
    killer, killed = _sigill_the_next_selfcheck(urls.database_url)
    log_file = private_home / "run" / "postgres.log"
    try:
        with pytest.raises(EmbeddedServiceError) as excinfo:
            embedded.vector_selfcheck(urls.database_url, log_file)
    finally:
        killer.join()
    assert killed.is_set()
    message = str(excinfo.value)
    assert "signal 4 (Illegal instruction)" in message
    assert "AVX-512: " in message and "CPU instructions this CPU does not have" in message
    assert str(log_file) in message

    # Memory writes that fail meanwhile get one sentence about it, with the log path.
    notice = embedded.crash_notice(urls.database_url)
    assert notice is not None and "signal 4" in notice and str(log_file) in notice
    assert embedded.crash_notice(urls.database_url) is None, "said once, not on every failure"


def test_a_failed_selfcheck_without_a_crash_says_what_failed(private_home: Path) -> None:
    """A role that may not create the extension, on a database that has none yet."""
    urls = embedded.ensure_services()
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE plain LOGIN")
        conn.execute('CREATE DATABASE "bare"')
    url = psycopg.conninfo.make_conninfo(with_database(urls.database_url, "bare"), user="plain")
    with pytest.raises(EmbeddedServiceError, match="self-check failed .*vector"):
        embedded.vector_selfcheck(url, private_home / "run" / "postgres.log")


async def test_the_demo_stops_within_a_minute_when_memory_cannot_be_stored(
    private_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memory_graph_agent.cli.demo import run_demo

    urls = embedded.ensure_services()
    killer, killed = _sigill_the_next_selfcheck(urls.database_url)
    started = time.monotonic()
    try:
        code = await run_demo(turns=30)
    finally:
        killer.join()
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == 1 and killed.is_set()
    assert elapsed < 60, f"took {elapsed:.0f} s"
    assert "FAILED stores" in out and "signal 4" in out and "stopping the demo" in out
    assert "turn  1" not in out, "no turn runs on a database that cannot store vectors"


def test_a_storage_failure_event_stops_the_demo() -> None:
    from memory_graph_agent.cli.demo import _storage_failure

    pushed = event("trim_window", "pushed", "window: +2 messages")
    assert _storage_failure([pushed]) is None
    crash = "notice: PostgreSQL crashed: a server process was terminated by signal 4"
    notice = event("trim_window", "notice", crash)
    assert _storage_failure([pushed, notice]) == crash
    failed = "consolidate: storage failed, batch retried later"
    failure = event("consolidate", "storage_failed", failed)
    assert _storage_failure([failure]) == failed


def test_a_crashed_backend_becomes_one_memory_event(private_home: Path) -> None:
    from memory_graph_agent.prompting.rendering import notices
    from memory_graph_agent.services.stores import crash_probe
    from memory_graph_agent.storage.outages import outages

    outages.crash_probe = crash_probe  # what open_services installs

    urls = embedded.ensure_services()
    outages.take_notices()
    embedded.crash_notice()  # whatever the log held before this test
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        os.kill(pid, signal.SIGILL)
        with pytest.raises(psycopg.OperationalError) as excinfo:
            conn.execute("SELECT 1")

    outages.failed("postgres", excinfo.value)  # what a store does with a failed write
    outages.failed("postgres", excinfo.value)  # and the next one
    events = [e["text"] for e in notices("trim_window")]
    crashes = [e for e in events if e.startswith("notice: PostgreSQL crashed")]
    assert len(crashes) == 1, events
    assert "signal 4 (Illegal instruction)" in crashes[0]
    assert str(private_home / "run" / "postgres.log") in crashes[0]
    assert notices("trim_window") == [], "said once"
    assert "signal 4" in embedded.status()["postgres"]["last_crash"]
    outages.ok("postgres")


def test_a_crash_from_before_the_process_started_is_not_news(private_home: Path) -> None:
    import subprocess
    import sys

    urls = embedded.ensure_services()
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        os.kill(conn.execute("SELECT pg_backend_pid()").fetchone()[0], signal.SIGILL)
    log = private_home / "run" / "postgres.log"
    deadline = time.monotonic() + 10  # the postmaster logs the death when it reaps the child
    while "signal 4" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "signal 4" in log.read_text()
    embedded._wait_postgres(urls.database_url, 10)  # recovered before the next process
    # A new process (the CLI started later) whose first Postgres call fails for another
    # reason must not report yesterday's crash as a new one.
    code = (
        "from memory_graph_agent.local import embedded; embedded.ensure_services(); "
        "print(embedded.crash_notice(None, 'server closed the connection unexpectedly'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "None"


def test_the_selfcheck_passes_on_a_database_without_the_extension_yet(
    memory_env: dict[str, str],
) -> None:
    """A fresh database (an external DATABASE_URL, or the tests' own) has no ``vector``
    extension until the stores open; the demo's pre-flight self-check runs before them and
    must not call that a broken pgvector."""
    admin = memory_env["DATABASE_URL"]
    db = f"fresh_{os.urandom(6).hex()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    try:
        embedded.vector_selfcheck(with_database(admin, db))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
