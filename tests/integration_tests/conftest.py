"""Fixtures of the integration tests: the real Redis and Postgres.

The embedded servers (or ``REDIS_URL``/``DATABASE_URL``) are started once per session,
with a fresh database and key prefix; `services` and `agent` are opened on them. Tests
that start servers of their own use `private_home`.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from graph.builder import build_graph
from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded import ensure_services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.postgres import Database, with_database
from memory_graph_agent.testing import environment
from tests.conftest import EMBEDDING
from tests.integration_tests.dev_server import Credentials, DevServer, client, running_dev_server
from tests.integration_tests.shared_home import shared_servers_never_stopped


@pytest.fixture
def private_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throw-away data home the system user can reach, stopped and removed afterwards.

    ``REDIS_URL``/``DATABASE_URL`` are unset for the test, so the embedded servers of
    this home are the ones used.
    """
    parent = Path(tempfile.mkdtemp(prefix="ma-test-", dir="/tmp"))
    parent.chmod(0o755)  # our own folder; mkdtemp makes it 0700
    home = parent / "home"
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    try:
        yield home
    finally:
        embedded.stop_services()
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def shared_home() -> Iterator[Path]:
    """The machine-wide data home: its servers are never stopped by a test."""
    home = embedded.data_home()
    with shared_servers_never_stopped(home):
        yield home


@pytest.fixture(scope="session", autouse=True)
def memory_env(shared_home: Path) -> Iterator[dict[str, str]]:
    """Real servers (embedded unless REDIS_URL/DATABASE_URL are set), a fresh database."""
    urls = ensure_services()
    db = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    env = {
        "REDIS_URL": urls.redis_url,
        "DATABASE_URL": with_database(urls.database_url, db),
        "MEMORY_KEY_PREFIX": f"test-{db}",
    }
    try:
        with environment(env):
            yield env
    finally:
        import redis

        r = redis.Redis.from_url(urls.redis_url)
        for key in r.scan_iter(match=f"{env['MEMORY_KEY_PREFIX']}:*", count=1000):
            r.delete(key)
        r.close()
        with psycopg.connect(urls.database_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


@pytest.fixture
async def fresh_db(memory_env):
    """A database of its own (dropped afterwards), for a schema made from scratch."""
    url = memory_env["DATABASE_URL"]
    name = f"cs_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    db = Database.connect(with_database(url, name))
    try:
        yield db
    finally:
        await db.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
async def checkpointer(memory_env: dict[str, str]) -> AsyncIterator:
    from memory_graph_agent.services.stores import open_checkpointer

    async with open_checkpointer(memory_env["DATABASE_URL"]) as saver:
        yield saver


@pytest.fixture(scope="session")
async def services(memory_env: dict[str, str]) -> AsyncIterator:
    """The session's stores, opened once (on the session's event loop) and closed at the end."""
    from memory_graph_agent.services.stores import services_session

    async with services_session(EMBEDDING) as opened:
        yield opened


@pytest.fixture(scope="session")
def graph_for(services, checkpointer):
    """The memory agent compiled with given `Settings` (once per settings), memory inline."""
    graphs: dict = {}

    def build(settings: Settings | None = None):
        settings = Settings() if settings is None else settings
        if settings not in graphs:
            graphs[settings] = build_graph(services, checkpointer=checkpointer, settings=settings)
        return graphs[settings]

    return build


@pytest.fixture(scope="session")
def agent(graph_for):
    """The memory agent with the default settings."""
    return graph_for()


@pytest.fixture(scope="session")
def server_credentials() -> Credentials:
    """The API keys (two users, one admin) and JWT secret the test server accepts."""
    return Credentials()


SERVER_KNOBS = {"WINDOW_SIZE": "2", "SUMMARY_BATCH": "2", "SUMMARY_MODE": "raw"}
"""The operator's knobs of the session's server, set the way a deployment sets them (its
environment; clients may not): a small window and batch so two turns form memory, and raw
summaries (no model call) to keep the runs short."""


@pytest.fixture(scope="session")
def dev_server(memory_env: dict[str, str], server_credentials: Credentials) -> Iterator[DevServer]:
    """One authenticated `langgraph dev` for the session, on the session's Redis/Postgres."""
    env = {**memory_env, **server_credentials.env(), **SERVER_KNOBS}
    with running_dev_server(env) as server:
        yield server


@pytest.fixture
def alice(dev_server: DevServer, server_credentials: Credentials):
    """An SDK client of the session's server with Alice's API key."""
    return client(dev_server.url, key=server_credentials.keys[server_credentials.alice])


@pytest.fixture
def bob(dev_server: DevServer, server_credentials: Credentials):
    """An SDK client of the session's server with Bob's API key."""
    return client(dev_server.url, key=server_credentials.keys[server_credentials.bob])


@pytest.fixture
def admin(dev_server: DevServer, server_credentials: Credentials):
    """An SDK client of the session's server with the admin's API key."""
    return client(dev_server.url, key=server_credentials.keys[server_credentials.admin])


@pytest.fixture
def webapp(monkeypatch: pytest.MonkeyPatch):
    """The `/memory/*` app, imported as a server imports it: with its auth configured.

    Importing it loads the auth (a deployment whose auth cannot load refuses to start),
    so the test gives it a key, as the server's environment would.
    """
    import importlib

    monkeypatch.setenv("MEMORY_AGENT_API_KEYS", f"webapp-test-key-{uuid.uuid4().hex}:someone")
    return importlib.import_module("memory_graph_agent.webapp").app
