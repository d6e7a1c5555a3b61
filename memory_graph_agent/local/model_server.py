"""The offline chat model's server: llama-cpp-python's OpenAI-compatible server, supervised.

The local model runs in a child process (``python -m llama_cpp.server`` on 127.0.0.1 and
a port of its own), never inside the agent: whatever llama.cpp does (a grammar it cannot
handle has made it segfault), the agent process lives on. One child per agent process,
started on first use, reached through ``langchain-openai`` like any OpenAI-compatible
server. If it dies, the call in flight fails like any model error (memory work falls
back to raw text, nothing is lost), one warning and one notice say so (the turn's
``memory_events``), and the next call restarts it on the same port.

The child ends with its parent: it polls its parent pid and exits when it changes, so a
killed agent leaves no model server behind.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0


class ModelServerError(RuntimeError):
    """The local model server cannot be started."""


@dataclass
class LocalModelServer:
    """One supervised ``llama_cpp.server`` child process serving one GGUF model.

    Attributes:
        model_path: The GGUF file.
        alias: The model name clients ask for.
        n_ctx: Context window in tokens (fixed at start).
        n_threads: llama.cpp generation threads; half the CPUs by default (its threads
            busy-wait, and the embeddings and databases share the machine).
        n_threads_batch: prompt-processing threads; all CPUs by default: the agent waits
            for the answer anyway, and a 1,000-token prompt takes 4.4 s instead of 7.5 s
            on 2 cores.
    """

    model_path: str
    alias: str
    n_ctx: int = 4096
    n_threads: int = field(default_factory=lambda: max((os.cpu_count() or 2) // 2, 1))
    n_threads_batch: int = field(default_factory=lambda: os.cpu_count() or 1)
    port: int = 0
    restarts: int = 0
    _death_reported: bool = False
    _proc: subprocess.Popen[bytes] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible endpoint (``http://127.0.0.1:<port>/v1``)."""
        if not self.port:
            self.port = _free_port()
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log_file(self) -> Path:
        """Where the server's output goes (appended by every process of the machine)."""
        from memory_graph_agent.local.embedded import (
            data_home,  # not in the child, which needs none of it
        )

        return data_home() / "run" / "local-model.log"

    def alive(self) -> bool:
        """Whether the child process is running."""
        return self._proc is not None and self._proc.poll() is None

    def ensure(self) -> str:
        """Start the server if it is not running (restart it if it died); return its URL.

        Raises:
            ModelServerError: It did not answer within `START_TIMEOUT_S`.
        """
        with self._lock:
            if self.alive():
                return self.base_url
            if self._proc is not None:  # it died since the last call
                self._report_death()
                self.restarts += 1
            self._start()
            return self.base_url

    def check(self, wait_s: float = 2.0) -> bool:
        """After a failed call: True (and reported once) if the child has died.

        A dying server drops its connections a moment before it can be reaped, so this
        waits up to ``wait_s`` for the process to end.
        """
        with self._lock:
            if self._proc is None:
                return False
            try:
                self._proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                return False
            self._report_death()
            return True

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 5 s)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def _report_death(self) -> None:
        proc = self._proc
        if proc is None or self._death_reported:
            return
        self._death_reported = True
        code = proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
        message = (
            f"the local model server crashed ({how}): the call failed like any model error "
            "(memory work falls back to raw text; nothing is lost) and the server is "
            f"restarted for the next call. Log: {self.log_file}"
        )
        log.warning(message)
        from memory_graph_agent.storage.outages import outages

        outages.notify(message)

    def _start(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "memory_graph_agent.local.model_server", str(os.getpid()),
            "--model", self.model_path, "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(self.port or _free_port()),
            "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads_batch), "--verbose", "false",
            # queue concurrent requests instead of cutting off the stream in progress
            "--interrupt_requests", "false",
            # keep logits of the last token only: 335 MB instead of 812 MB
            "--logits_all", "false",
        ]  # fmt: skip
        self.port = int(cmd[cmd.index("--port") + 1])
        self._death_reported = False
        with self.log_file.open("ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C goes to the agent, not here
                cwd=Path(__file__).resolve().parents[1],
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ModelServerError(
                    f"the local model server exited at start (exit {self._proc.returncode}); "
                    f"see {self.log_file}"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1).status_code == 200:
                    log.info("local model server %s on %s", self.alias, self.base_url)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self._proc.kill()
        raise ModelServerError(
            f"the local model server did not answer in time; see {self.log_file}"
        )


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_servers: dict[tuple[str, int], LocalModelServer] = {}
_servers_lock = threading.Lock()


def model_server(model_path: str, alias: str, n_ctx: int = 4096) -> LocalModelServer:
    """The process's server for ``model_path`` (created once, started on `ensure`)."""
    with _servers_lock:
        key = (model_path, n_ctx)
        if key not in _servers:
            _servers[key] = LocalModelServer(model_path=model_path, alias=alias, n_ctx=n_ctx)
        return _servers[key]


@atexit.register
def _stop_all() -> None:
    for server in list(_servers.values()):
        server.stop()


def _exit_with_parent(parent: int) -> None:
    """In the child: exit as soon as the agent process that started us is gone."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main() -> None:
    """Child entry point.

    ``python -m memory_graph_agent.local.model_server PARENT_PID <llama_cpp.server args>``.
    """
    import runpy

    parent = int(sys.argv[1])
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    main()
