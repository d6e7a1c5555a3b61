"""The offline chat model's server: llama-cpp-python's OpenAI-compatible server, supervised.

It runs in a child process on 127.0.0.1, never inside the agent, so a llama.cpp crash (a
grammar it cannot handle has made it segfault) fails one call like any model error; the
next call restarts it. The child polls its parent pid and exits with the agent.

A death is reported as such (`ServerDeath`): the signal or exit status, where the kernel
says it crashed (library and function, `crash_site`), the last lines of the server's log
and the remedy. The child refuses to start on a llama.cpp build with AMX code, which
crashes on the first prompt on recent Xeons (llama.cpp issue 20824): a wheel compiled
with ``-march=native`` before the README's portable flags, kept by pip's cache.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memory_graph_agent.core import metrics
from memory_graph_agent.core.install import REBUILD_LLAMA
from memory_graph_agent.local.crash_site import CrashSite, crash_site

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
EXIT_UNPORTABLE = 78
"""The child's exit status when its llama.cpp build holds AMX code (EX_CONFIG)."""
LOG_TAIL_LINES = 8


def unportable_build(system_info: str) -> str | None:
    """Why a llama.cpp build (``llama_print_system_info()``) must not run, or None.

    AMX kernels crash in ``ggml_backend_amx_mul_mat`` (llama.cpp issue 20824); the README's
    build (``GGML_NATIVE=OFF``) has none.
    """
    features = {
        name.strip(): value.strip()
        for part in system_info.split("|")
        if "=" in part
        for name, value in [part.split(":")[-1].split("=", 1)]
    }
    amx = sorted(
        name for name, value in features.items() if name.startswith("AMX") and value == "1"
    )
    if not amx:
        return None
    return (
        f"llama-cpp-python was compiled for this machine's CPU with {', '.join(amx)} "
        "(-march=native), whose kernels crash at the first prompt on this CPU "
        f"(llama.cpp issue 20824). Rebuild it portably: {REBUILD_LLAMA}"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class ServerDeath:
    """How the local model server ended, where it crashed, what it said last, what to do."""

    returncode: int
    log_tail: list[str]
    site: CrashSite | None = None
    log_file: Path | None = None

    @property
    def signal_name(self) -> str | None:
        """``SIGSEGV`` and the like when a signal killed it, else None."""
        return _signal_name(-self.returncode) if self.returncode < 0 else None

    @property
    def how(self) -> str:
        """``killed by signal 11 (SIGSEGV)`` or ``exited with status 78``."""
        if self.returncode < 0:
            return f"killed by signal {-self.returncode} ({self.signal_name})"
        return f"exited with status {self.returncode}"

    @property
    def remedy(self) -> str:
        """What the user can do about it."""
        function = (self.site.function or "").lower() if self.site else ""
        if self.returncode == EXIT_UNPORTABLE or "amx" in function:
            return f"rebuild llama-cpp-python portably: {REBUILD_LLAMA}"
        if self.returncode == -signal.SIGILL:
            return (
                "llama.cpp uses an instruction this CPU lacks; rebuild it portably: "
                f"{REBUILD_LLAMA}"
            )
        return (
            "it is restarted for the next call; if it dies again, run `memory-agent doctor` "
            "or set MODEL to a hosted model"
        )

    def describe(self) -> str:
        """One paragraph for an error, a notice or a run's error."""
        where = f" with a {self.site}" if self.site else ""
        tail = " | ".join(self.log_tail) or "(nothing)"
        return (
            f"the local model server (llama.cpp) {self.how}{where}. Its last log lines: "
            f"{tail}. Remedy: {self.remedy}." + (f" Log: {self.log_file}" if self.log_file else "")
        )


class ModelServerError(RuntimeError):
    """The local model server cannot be started."""


@dataclass
class LocalModelServer:
    """One supervised ``llama_cpp.server`` child process serving one GGUF model."""

    model_path: str
    alias: str  # the model name clients ask for
    n_ctx: int = 4096
    # Generation threads busy-wait beside the embeddings and databases: half the CPUs.
    # Prompt processing gets all (the agent waits): 1,000 tokens take 4.4 s, not 7.5 s, on 2 cores.
    n_threads: int = field(default_factory=lambda: max((os.cpu_count() or 2) // 2, 1))
    n_threads_batch: int = field(default_factory=lambda: os.cpu_count() or 1)
    port: int = 0
    restarts: int = 0
    death: ServerDeath | None = None
    """How the last child ended (None while it runs, or before the first start)."""
    _death_reported: bool = False
    _proc: subprocess.Popen[bytes] | None = None
    _started_at: float = 0.0  # time.monotonic() at the child's start
    _log_offset: int = 0  # where the child's own lines start in the shared log
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """Return the OpenAI-compatible endpoint (``http://127.0.0.1:<port>/v1``)."""
        if not self.port:
            self.port = _free_port()
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log_file(self) -> Path:
        """Return where the server's output goes (appended by every process of the machine)."""
        from memory_graph_agent.local.embedded import _Layout, data_home  # not for the child

        return _Layout(data_home()).model_log

    def alive(self) -> bool:
        """Return whether the child process is running."""
        return self._proc is not None and self._proc.poll() is None

    def ensure(self) -> str:
        """Start the server if it is not running (restart it if it died); return its URL."""
        with self._lock:
            if self.alive():
                return self.base_url
            if self._proc is not None:  # it died since the last call
                self._report_death()
                self.restarts += 1
            self._start()
            return self.base_url

    def check(self, wait_s: float = 2.0) -> bool:
        """After a failed call, return True (and report it once) if the child has died.

        Waits up to ``wait_s``: a dying server drops its connections before it can be reaped.
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
        if proc is None or self._death_reported or proc.returncode is None:
            return
        self._death_reported = True
        self.death = self._death_of(proc.returncode)
        cause = self.death.signal_name or "exit"
        metrics.MODEL_SERVER_DEATHS.labels(
            cause=cause if cause in metrics.DEATH_CAUSES else "other"
        ).inc()
        message = (
            f"local model server crashed: {self.death.describe()} The call failed like any "
            "model error (memory work falls back to raw text; nothing is lost)."
        )
        log.warning(message)
        from memory_graph_agent.storage.outages import outages

        outages.notify(message)

    def _death_of(self, returncode: int) -> ServerDeath:
        """Read how the child ended: the kernel's crash line and its log's last lines."""
        site = None
        if returncode < 0 and returncode != -signal.SIGKILL:  # SIGKILL leaves no trap line
            site = crash_site(self._started_at, _library_folders())
        return ServerDeath(returncode, self._log_tail(), site, self.log_file)

    def _log_tail(self) -> list[str]:
        try:
            with self.log_file.open("rb") as fh:
                fh.seek(self._log_offset)
                text = fh.read()[-16_000:].decode(errors="replace")
        except OSError:
            return []
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-LOG_TAIL_LINES:]

    def _start(self) -> None:
        from memory_graph_agent.local.embedded import logs

        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        logs.rotate_log(self.log_file, over=logs.LOG_MAX_BYTES)  # shared: by size only
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
        self.death = None
        self._started_at = time.monotonic()
        with self.log_file.open("ab") as out:
            self._log_offset = out.tell()
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
                self._report_death()
                assert self.death is not None
                raise ModelServerError(f"at its start, {self.death.describe()}")
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


def _library_folders() -> list[Path]:
    """Where llama-cpp-python keeps its shared libraries (to name a crash's function)."""
    spec = importlib.util.find_spec("llama_cpp")
    roots = list(spec.submodule_search_locations or []) if spec else []
    return [Path(root) / "lib" for root in roots]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_servers: dict[tuple[str, int], LocalModelServer] = {}
_servers_lock = threading.Lock()


def model_server(model_path: str, alias: str, n_ctx: int = 4096) -> LocalModelServer:
    """Return the process's server for ``model_path`` (created once, started on `ensure`)."""
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
    """Run ``llama_cpp.server`` in the child: ``python -m ... PARENT_PID <server args>``."""
    import runpy

    parent = int(sys.argv[1])
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    import llama_cpp

    if refused := unportable_build(llama_cpp.llama_print_system_info().decode(errors="replace")):
        print(f"refusing to start: {refused}", file=sys.stderr, flush=True)
        sys.exit(EXIT_UNPORTABLE)
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    main()
