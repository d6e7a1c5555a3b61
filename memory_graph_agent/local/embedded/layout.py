"""Where the embedded servers live: constants, the data home and its layout, the start-up lock."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


SYSTEM_USER = "memory-agent"
"""Unprivileged user that runs PostgreSQL when the caller is root."""


PG_PORT = 5432
"""Port number in the PostgreSQL socket name (``.s.PGSQL.5432``); there is no TCP listener."""


MIN_PGVECTOR = (0, 8)


REDIS_START_TIMEOUT = 10.0


REDIS_LOAD_TIMEOUT = 120.0


PG_START_TIMEOUT = 60


INITDB_TIMEOUT = 180


STOP_TIMEOUT = 60.0


PG_FAST_STOP_TIMEOUT = 10.0


LOCK_TIMEOUT = 300.0


_SOCKET_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux


_INSTALL_MARKER = ".installed.json"


_LOG_TAIL_LINES = 40


class EmbeddedServiceError(RuntimeError):
    """An embedded server cannot be prepared, started, reached or stopped."""


@dataclass(frozen=True)
class ServiceURLs:
    """Connection URLs of the Redis and PostgreSQL services in use."""

    redis_url: str
    database_url: str


@dataclass(frozen=True)
class _Layout:
    """Paths under one data home."""

    home: Path

    @property
    def lock_file(self) -> Path:
        return self.home / ".lock"

    @property
    def redis_dir(self) -> Path:
        return self.home / "redis"

    @property
    def pg_dir(self) -> Path:
        return self.home / "pg"

    @property
    def pgdata(self) -> Path:
        return self.pg_dir / "data"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def redis_socket(self) -> Path:
        return self.run_dir / "redis.sock"

    @property
    def redis_pidfile(self) -> Path:
        return self.run_dir / "redis.pid"

    @property
    def redis_log(self) -> Path:
        return self.run_dir / "redis.log"

    @property
    def pg_socket(self) -> Path:
        return self.run_dir / f".s.PGSQL.{PG_PORT}"

    @property
    def pg_log(self) -> Path:
        return self.run_dir / "postgres.log"


@dataclass(frozen=True)
class _PgContext:
    """What is needed to run the PostgreSQL binaries for one data home.

    Attributes:
        layout: Paths of the data home.
        install: The private copy of the PostgreSQL tree (``bin/``, ``lib/``, ``share/``).
        owner: ``(uid, gid)`` to run the binaries as, or None to run as the caller.
    """

    layout: _Layout
    install: Path
    owner: tuple[int, int] | None


def data_home() -> Path:
    """Return the data home of the embedded servers.

    ``MEMORY_AGENT_HOME`` if set; otherwise ``/var/lib/memory-agent`` for root (the
    unprivileged PostgreSQL user must be able to traverse to it, which it cannot under
    ``/root``) and ``~/.local/share/memory-agent`` for other users.
    """
    env = os.environ.get("MEMORY_AGENT_HOME", "").strip()
    if env:
        return Path(env).expanduser().absolute()
    if os.geteuid() == 0:
        return Path("/var/lib/memory-agent")
    return Path.home() / ".local" / "share" / "memory-agent"


def _env_url(name: str) -> str | None:
    """Return the environment variable ``name`` if set and non-empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def _prepare_home(layout: _Layout) -> None:
    """Create the data home (0755 if we create it) and its ``redis``/``run`` folders.

    Raises:
        EmbeddedServiceError: The home cannot be created.
    """
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
def _exclusive_lock(layout: _Layout, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<home>/.lock`` (shared with other processes).

    Raises:
        EmbeddedServiceError: The lock was not obtained within ``timeout`` seconds.
    """
    fd = os.open(layout.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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
                        f"Timed out after {timeout:.0f}s waiting for {layout.lock_file}, "
                        "held by another process starting or stopping the embedded servers."
                    ) from None
                if not waiting_logged:
                    logger.info("Waiting for another process to finish with %s", layout.lock_file)
                    waiting_logged = True
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)
