"""The embedded PostgreSQL: initdb, start, pgvector, reuse, stop, status."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import subprocess
import time
from typing import Any

import psycopg

from memory_graph_agent.local.embedded.diagnostics import (
    _copy_of,
    _crash_offsets,
    _scan_crashes,
    vector_selfcheck,
)
from memory_graph_agent.local.embedded.layout import (
    PG_PORT,
    STOP_TIMEOUT,
    SYSTEM_USER,
    EmbeddedServiceError,
    _env_url,
    _Layout,
    _PgContext,
)
from memory_graph_agent.local.embedded.logs import rotate_log
from memory_graph_agent.local.embedded.postgres_bundle import (
    _check_cluster_version,
    _install_postgres,
)
from memory_graph_agent.local.embedded.processes import (
    _check_reachable,
    _check_socket_path,
    _chown_if_needed,
    _ensure_system_user,
    _live_pid,
    _log_tail,
    _pid_alive,
    _process_binary,
    _run,
    _wait_pid_exit,
)

logger = logging.getLogger(__name__)

MIN_PGVECTOR = (0, 8)
PG_START_TIMEOUT = 60
INITDB_TIMEOUT = 180
PG_FAST_STOP_TIMEOUT = 10.0
MIB = 1024 * 1024


def shared_buffers_mb(total_bytes: int | None = None) -> int:
    """The embedded server's ``shared_buffers``: an eighth of the RAM, 128 MB to 1 GB.

    The RAM is the container's limit where that is lower than the machine's (`memory_bytes`).

    PostgreSQL's default (128 MB) holds the vector indexes of a few thousand memories;
    past that, every search reads index pages through the kernel (1.6 ms of a 2.1 ms turn
    search at 10k memories). ``MEMORY_AGENT_PG_SHARED_BUFFERS_MB`` sets it.
    """
    if os.environ.get("MEMORY_AGENT_PG_SHARED_BUFFERS_MB", "").strip():
        return int(os.environ["MEMORY_AGENT_PG_SHARED_BUFFERS_MB"])
    if total_bytes is None:
        total_bytes = memory_bytes()
    return max(128, min(1024, total_bytes // 8 // MIB))


CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is (cgroup v2, then v1); "max" or a huge number: none."""


def memory_bytes(limits: tuple[str, ...] = CGROUP_LIMITS) -> int:
    """The RAM this process may use: the machine's, or its container's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in limits:
        try:
            with open(path) as limit:  # noqa: PTH123 - a one-line kernel file
                text = limit.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def _prepare_postgres(layout: _Layout) -> _PgContext:
    """Prepare the system user, folders and binaries PostgreSQL needs, without starting it."""
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
    """Return the environment of the PostgreSQL binaries."""
    # Drop PG* so that a caller's PGPORT/PGDATA cannot redirect them; lib/ has `_bundled_libs`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(ctx.install / "lib"), env.get("LD_LIBRARY_PATH")) if p
    )
    env["LC_ALL"] = "C"
    if ctx.owner is not None:
        env["HOME"] = str(ctx.layout.pg_dir)
        env["USER"] = env["LOGNAME"] = SYSTEM_USER
    return env


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
    """Create the cluster in ``<home>/pg/data`` unless it exists."""
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
    return _live_pid(layout.pgdata / "postmaster.pid", layout.pgdata)


def _remove_stale_lockfiles(layout: _Layout) -> None:
    """Remove pid/lock files left by a postmaster that is gone (its pid maybe reused)."""
    socket_lock = layout.run_dir / f"{layout.pg_socket.name}.lock"
    for lockfile in (layout.pgdata / "postmaster.pid", socket_lock):
        if lockfile.exists():
            logger.warning("Removing stale PostgreSQL lock file %s", lockfile)
            lockfile.unlink(missing_ok=True)


def _pg_accepting(url: str, timeout: int = 3) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=timeout, autocommit=True):
            return True
    except psycopg.Error:
        return False


def _wait_postgres(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not _pg_accepting(url):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _start_postgres(ctx: _PgContext) -> None:
    """Initialize if needed and start PostgreSQL on its unix socket only (no TCP)."""
    layout = ctx.layout
    _initdb(ctx)
    _remove_stale_lockfiles(layout)
    options = (
        f"-h '' -k {shlex.quote(str(layout.run_dir))} -p {PG_PORT} "
        f"-c shared_buffers={shared_buffers_mb()}MB"
    )
    args = ["-w", "-t", str(PG_START_TIMEOUT), "-D", str(layout.pgdata), "-l", str(layout.pg_log)]
    rotate_log(layout.pg_log)  # this run's log; the one before keeps how the last ended
    logger.info("Starting embedded PostgreSQL in %s", layout.pgdata)
    proc = _pg_run(ctx, "pg_ctl", [*args, "-o", options, "start"], timeout=PG_START_TIMEOUT + 30)
    if proc.returncode != 0 or not _wait_postgres(layout.pg_url, 10):
        raise EmbeddedServiceError(
            f"Embedded PostgreSQL did not start (pg_ctl exit {proc.returncode}):\n"
            f"{proc.stderr.strip()}\n--- {layout.pg_log} ---\n{_log_tail(layout.pg_log)}"
        )
    logger.info("Embedded PostgreSQL started (pid %s)", _postmaster_pid(layout))


def _ensure_vector(url: str) -> str:
    """Create the ``vector`` extension if missing, update it, and return its version.

    The update brings the SQL objects of a cluster written by an older bundle to the
    installed library's version. Raises if it is older than `MIN_PGVECTOR`.
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


def _ensure_postgres(ctx: _PgContext) -> str:
    """Reuse the embedded PostgreSQL if it runs, else start it; return its URL."""
    layout = ctx.layout
    url = layout.pg_url
    with contextlib.suppress(OSError):  # crashes logged before this process are not news
        _crash_offsets.setdefault(
            layout.pg_log, (layout.pg_log.stat().st_size, _copy_of(layout.pg_log))
        )
    selfcheck = False  # only for a server we start, or one running other binaries
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
            selfcheck = True
    elif (pid := _postmaster_pid(layout)) is not None:
        logger.info("Embedded PostgreSQL (pid %s) is running but not accepting yet; waiting", pid)
        if not _wait_postgres(url, PG_START_TIMEOUT):
            raise EmbeddedServiceError(
                f"Embedded PostgreSQL (pid {pid}) runs but does not accept connections on "
                f"{layout.run_dir}.\n--- {layout.pg_log} ---\n{_log_tail(layout.pg_log)}"
            )
    else:
        _start_postgres(ctx)
        selfcheck = True
    _ensure_vector(url)
    if selfcheck:
        vector_selfcheck(url, layout.pg_log)
    return url


def _stop_postgres(layout: _Layout) -> None:
    """Stop the embedded PostgreSQL with ``pg_ctl -m fast stop`` if it runs."""
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
    _wait_postgres(layout.pg_url, 5)
    args = ["-D", str(layout.pgdata), "-w", "-t", str(int(PG_FAST_STOP_TIMEOUT)), "stop"]
    proc = _pg_run(ctx, "pg_ctl", [*args, "-m", "fast"], timeout=STOP_TIMEOUT + 30)
    if proc.returncode != 0 and _pid_alive(pid):
        # Still up after all: immediate mode stops it (the next start replays the WAL).
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
        "url": external or layout.pg_url,
        "pid": None if external else _postmaster_pid(layout),
        "version": None,
        "pgvector": None,
        "data_dir": None if external else str(layout.pgdata),
    }
    if external is None:
        info["log"] = str(layout.pg_log)
        crash = _scan_crashes(layout.pg_log, wait=False)[0] if layout.pg_log.exists() else None
        if crash is not None:
            info["last_crash"] = (
                f"a server process was terminated by signal {crash[0]} ({crash[1]})"
            )
        if info["pid"] is None:
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
