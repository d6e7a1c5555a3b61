"""`_live_pid` of the embedded launcher: a pid file names our server only if the process is ours."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_graph_agent.local.embedded import processes

NOBODY = 65534


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A process whose cwd is ``tmp_path``/data (what a server's data directory looks like)."""
    data = tmp_path / "data"
    data.mkdir()
    proc = subprocess.Popen(["sleep", "60"], cwd=data)
    try:
        yield proc, data
    finally:
        proc.kill()
        proc.wait()


def _pidfile(tmp_path: Path, pid: int) -> Path:
    path = tmp_path / "server.pid"
    path.write_text(f"{pid}\n")
    return path


def _cwd_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an unprivileged user sees for another user's process: no readable cwd link."""
    real = os.readlink

    def readlink(path, *args, **kwargs):
        if str(path).startswith("/proc/") and str(path).endswith("/cwd"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(processes.os, "readlink", readlink)


def test_a_process_in_the_data_directory_is_ours(tmp_path, sleeper) -> None:
    proc, data = sleeper
    assert processes._live_pid(_pidfile(tmp_path, proc.pid), data) == proc.pid


def test_a_process_elsewhere_is_not_ours(tmp_path, sleeper) -> None:
    proc, _ = sleeper
    assert processes._live_pid(_pidfile(tmp_path, proc.pid), tmp_path) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another user needs root")
def test_another_users_process_with_an_unreadable_cwd_is_not_ours(tmp_path, monkeypatch) -> None:
    """A stale pid file whose pid now belongs to another user's process."""
    proc = subprocess.Popen(["sleep", "60"], cwd="/", user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        _cwd_unreadable(monkeypatch)
        data = tmp_path / "data"
        data.mkdir()
        assert processes._live_pid(_pidfile(tmp_path, proc.pid), data) is None
    finally:
        proc.kill()
        proc.wait()


def test_our_own_process_with_an_unreadable_cwd_is_still_found(
    tmp_path, sleeper, monkeypatch
) -> None:
    """Same owner as the data directory: the best evidence left says it is ours."""
    proc, data = sleeper
    _cwd_unreadable(monkeypatch)
    assert processes._live_pid(_pidfile(tmp_path, proc.pid), data) == proc.pid
