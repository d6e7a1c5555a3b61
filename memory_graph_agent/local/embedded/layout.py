"""Where the embedded servers live: the data home and its layout, the start-up lock.

`exclusive_file_lock` is also the ONNX export's lock (`memory_graph_agent.local.onnx_minilm`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

logger = logging.getLogger(__name__)

SYSTEM_USER = "memory-agent"  # unprivileged user that runs PostgreSQL when the caller is root
PG_PORT = 5432  # only names the socket (``.s.PGSQL.5432``): there is no TCP listener
STOP_TIMEOUT = 60.0
LOCK_TIMEOUT = 300.0


class EmbeddedServiceError(RuntimeError):
    """An embedded server cannot be prepared, started, reached or stopped."""


@dataclass(frozen=True)
class ServiceURLs:
    """Connection URLs of the Redis and PostgreSQL services in use."""

    redis_url: str
    database_url: str


class _Layout:
    """Paths under one data home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.lock_file = home / ".lock"
        self.redis_dir = home / "redis"  # Redis data (AOF, RDB)
        self.pg_dir = home / "pg"  # with run_dir, all that is handed to the system user
        self.pgdata = self.pg_dir / "data"
        self.run_dir = home / "run"  # unix sockets, pid files, logs (bounded: `logs`)
        self.redis_socket = self.run_dir / "redis.sock"
        self.redis_pidfile = self.run_dir / "redis.pid"
        self.redis_log = self.run_dir / "redis.log"
        self.pg_socket = self.run_dir / f".s.PGSQL.{PG_PORT}"
        self.pg_log = self.run_dir / "postgres.log"
        self.model_log = self.run_dir / "local-model.log"
        self.redis_url = "unix://" + quote(str(self.redis_socket))
        self.pg_url = f"postgresql://postgres@/postgres?host={quote(str(self.run_dir))}"


@dataclass(frozen=True)
class _PgContext:
    """What is needed to run the PostgreSQL binaries for one data home."""

    layout: _Layout
    install: Path  # the private copy of the bundled tree (bin/, lib/, share/)
    owner: tuple[int, int] | None  # (uid, gid) to run as; None runs as the caller


def data_home() -> Path:
    """Return ``MEMORY_AGENT_HOME``, else the default data home of the embedded servers.

    Root's is not under ``/root``, which the unprivileged PostgreSQL user cannot traverse.
    """
    env = os.environ.get("MEMORY_AGENT_HOME", "").strip()
    if env:
        return Path(env).expanduser().absolute()
    if os.geteuid() == 0:
        return Path("/var/lib/memory-agent")
    return Path.home() / ".local" / "share" / "memory-agent"


def _env_url(name: str) -> str | None:
    return os.environ.get(name, "").strip() or None


def _prepare_home(layout: _Layout) -> None:
    """Create the data home (0755 if we create it) and its ``redis``/``run`` folders."""
    home = layout.home
    try:
        if not home.is_dir():
            try:
                home.mkdir(parents=True)
            except FileExistsError:
                pass
            else:
                home.chmod(0o755)
                logger.info("Created data home %s", home)
        layout.redis_dir.mkdir(mode=0o700, exist_ok=True)
        layout.run_dir.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise EmbeddedServiceError(
            f"Cannot create the data home {home}: {exc}. "
            "Set MEMORY_AGENT_HOME to a writable directory."
        ) from exc


@contextlib.contextmanager
def exclusive_file_lock(path: Path, timeout: float, holder: str) -> Iterator[None]:
    """Hold the exclusive ``flock`` on ``path`` (created if missing), waiting up to ``timeout``.

    ``holder`` says who else may hold it, for the log and the timeout error.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        waiting_logged = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EmbeddedServiceError(
                        f"Timed out after {timeout:.0f}s waiting for {path}, held by {holder}."
                    ) from None
                if not waiting_logged:
                    logger.info("Waiting for %s to finish with %s", holder, path)
                    waiting_logged = True
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _exclusive_lock(
    layout: _Layout, timeout: float = LOCK_TIMEOUT
) -> contextlib.AbstractContextManager[None]:
    """Hold the exclusive ``flock`` on ``<home>/.lock`` that serializes start and stop."""
    return exclusive_file_lock(
        layout.lock_file, timeout, "another process starting or stopping the embedded servers"
    )
