"""The logs of the servers we start, bounded: each is its current file and the one before it.

Redis (``--logfile``), PostgreSQL (``pg_ctl -l``) and the local model server write to
``<home>/run/`` in append mode and never rotate, and the servers outlive the processes that
start them: a server left running for months would fill the disk. So a log is rotated when
its server starts (the log then covers this run; the one before, how the last run ended),
and, while it runs, once it passes `LOG_MAX_BYTES`: every process that uses the embedded
servers checks every `CHECK_EVERY_S`. Rotating copies the text to ``<log>.1`` (replacing
the one before) and empties the file in place, so a server holding it open goes on writing
from its start (append mode). A log thus takes at most about twice `LOG_MAX_BYTES`. A line
written between the copy and the emptying is lost (logrotate's ``copytruncate``); the
crash lines `diagnostics.crash_notice` looks for are read from the copy too.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

from memory_graph_agent.local.embedded.layout import (
    EmbeddedServiceError,
    _Layout,
    exclusive_file_lock,
)

logger = logging.getLogger(__name__)

LOG_MAX_BYTES = 10 * 1024 * 1024
"""Size past which a running server's log is rotated (kept: the current file and ``.1``)."""
CHECK_EVERY_S = 60.0
"""How often a process using the embedded servers checks their logs' size."""
_ROTATE_LOCK_TIMEOUT = 10.0


def previous_log(log: Path) -> Path:
    """Return where ``log``'s text goes when it is rotated: ``<log>.1``."""
    return log.with_name(log.name + ".1")


def server_logs(layout: _Layout) -> tuple[Path, ...]:
    """Return the logs of the servers of ``layout``'s data home."""
    return (layout.redis_log, layout.pg_log, layout.model_log)


def rotate_log(log: Path, over: int = 0) -> bool:
    """Move ``log``'s text to `previous_log` and empty it, if it holds more than ``over`` bytes.

    Serialized across processes by a lock file beside it; returns whether it rotated.
    """
    lock = log.with_name(".logs.lock")
    try:
        with exclusive_file_lock(lock, _ROTATE_LOCK_TIMEOUT, "another process rotating logs"):
            if log.stat().st_size <= over:
                return False
            copy = previous_log(log)
            partial = copy.with_name(f"{copy.name}.{os.getpid()}.tmp")
            # the logs hold SQL statements and model requests: as private as the originals
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as out, log.open("rb") as text:
                shutil.copyfileobj(text, out)
            os.replace(partial, copy)
            os.truncate(log, 0)
    except FileNotFoundError:
        return False  # no log yet (or its home was removed)
    except (OSError, EmbeddedServiceError) as exc:
        logger.warning("Cannot rotate %s: %s", log, exc)
        return False
    logger.info("Rotated %s (the text before is in %s)", log, copy)
    return True


def bound_logs(layout: _Layout) -> None:
    """Rotate each server log of ``layout`` that is over `LOG_MAX_BYTES`."""
    for log in server_logs(layout):
        rotate_log(log, over=LOG_MAX_BYTES)


_watched: set[Path] = set()
_watch_lock = threading.Lock()
_watcher: threading.Thread | None = None


def watch_logs(layout: _Layout) -> None:
    """Bound ``layout``'s logs now, and every `CHECK_EVERY_S` while this process runs."""
    global _watcher
    bound_logs(layout)
    with _watch_lock:
        _watched.add(layout.home)
        if _watcher is None or not _watcher.is_alive():
            _watcher = threading.Thread(target=_watch, name="memory-agent-logs", daemon=True)
            _watcher.start()


def _watch() -> None:
    while True:
        time.sleep(CHECK_EVERY_S)
        check_watched()


def check_watched() -> None:
    """One round of the watcher: bound the logs of every data home this process uses."""
    with _watch_lock:
        homes = list(_watched)
    for home in homes:
        if home.is_dir():
            bound_logs(_Layout(home))
        else:  # a throw-away home, removed since
            with _watch_lock:
                _watched.discard(home)
