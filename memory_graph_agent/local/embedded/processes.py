"""Processes of the embedded servers: pid files, waits, subprocess runs, the system user."""

from __future__ import annotations

import logging
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from memory_graph_agent.local.embedded.layout import SYSTEM_USER, EmbeddedServiceError

logger = logging.getLogger(__name__)

_SOCKET_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_LOG_TAIL_LINES = 40


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
    """Return the pid in ``pidfile`` if that process is alive and is ours."""
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
    except OSError:  # another user's process: ours only if it runs as the directory's owner
        return pid if _same_owner(pid, expected_cwd) else None
    # Redis and the postmaster chdir into their data directory: elsewhere, the pid was reused.
    return pid if cwd == expected_cwd.resolve() else None


def _same_owner(pid: int, path: Path) -> bool:
    """Whether process ``pid`` runs as the owner of ``path`` (False when either is unknown).

    Our servers run as the owner of their data directory, so a pid reused by a process of
    another user is told apart even when its cwd link cannot be read.
    """
    try:
        return Path(f"/proc/{pid}").stat().st_uid == path.stat().st_uid
    except OSError:
        return False


def _process_binary(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def _wait_pid_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _check_socket_path(path: Path) -> None:
    size = len(os.fsencode(path))
    if size > _SOCKET_PATH_MAX:
        raise EmbeddedServiceError(
            f"Unix socket path {path} is {size} bytes, over the {_SOCKET_PATH_MAX}-byte "
            "limit. Set MEMORY_AGENT_HOME to a shorter path."
        )


def _ensure_system_user() -> tuple[int, int]:
    """Return ``(uid, gid)`` of `SYSTEM_USER`, creating it with ``useradd`` if missing."""
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
    """Raise, naming the first directory it cannot traverse, if ``owner`` cannot reach ``home``."""
    if _can_traverse(home, owner):
        return
    path = [*reversed(home.parents), home]
    blocker = next((folder for folder in path if not _can_traverse(folder, owner)), home)
    try:
        st = blocker.stat()
        detail = f"mode {st.st_mode & 0o7777:04o}, owner uid {st.st_uid}"
    except OSError as exc:
        detail = str(exc)
    raise EmbeddedServiceError(
        f"PostgreSQL refuses to run as root, so it runs as the system user {SYSTEM_USER!r}, "
        f"which cannot traverse {blocker} ({detail}) to reach the data home {home}. Set "
        "MEMORY_AGENT_HOME to a directory it can reach (e.g. the default /var/lib/memory-agent "
        "when unset). Permissions outside the data home are never changed."
    )


def _chown_if_needed(path: Path, owner: tuple[int, int]) -> None:
    """Give ``path`` (not its contents) to ``owner`` if it belongs to someone else."""
    st = path.stat()
    if (st.st_uid, st.st_gid) != owner:
        os.chown(path, *owner)


def _run(
    cmd: list[str], *, cwd: Path, timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own session, capturing output through temporary files.

    Not pipes: a daemon inheriting them would keep the call from returning.
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
