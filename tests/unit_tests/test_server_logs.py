"""Bounded server logs, on plain files: rotation by copy and emptying in place, the watcher.

The servers' side (they go on writing into the emptied file) is
``tests/integration_tests/test_server_logs.py``, against the real embedded servers.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memory_graph_agent.local.embedded import _Layout, logs


def _appender(path: Path) -> int:
    """A file descriptor like a server's: opened once, in append mode, and kept."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def test_rotation_keeps_the_text_before_and_the_writer_goes_on_from_the_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    fd = _appender(log)
    try:
        os.write(fd, b"first run\n" * 100)
        assert logs.rotate_log(log)
        assert logs.previous_log(log).read_bytes() == b"first run\n" * 100
        assert log.stat().st_size == 0
        os.write(fd, b"after\n")
        assert log.read_bytes() == b"after\n", "written from the start: no hole, no old text"
    finally:
        os.close(fd)
    assert stat.S_IMODE(logs.previous_log(log).stat().st_mode) == 0o600


def test_a_log_within_the_cap_is_left_alone_and_a_missing_one_is_no_error(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    assert not logs.rotate_log(log), "no log yet"
    log.write_bytes(b"x" * 10)
    assert not logs.rotate_log(log, over=10)
    assert log.read_bytes() == b"x" * 10 and not logs.previous_log(log).exists()
    assert logs.rotate_log(log, over=9)


def test_only_one_previous_log_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    for run in ("one", "two", "three"):
        log.write_text(run)
        logs.rotate_log(log)
    assert logs.previous_log(log).read_text() == "three"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "server.log",
        "server.log.1",
    ]


def test_the_watcher_bounds_every_log_of_the_homes_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "LOG_MAX_BYTES", 100)
    monkeypatch.setattr(logs, "_watched", set())
    layout = _Layout(tmp_path / "home")
    layout.run_dir.mkdir(parents=True)
    logs.watch_logs(layout)  # what ensure_services does
    assert logs._watcher is not None and logs._watcher.is_alive()
    for log in logs.server_logs(layout):
        log.write_bytes(b"y" * 101)
    layout.redis_log.write_bytes(b"y" * 100)  # at the cap: kept as it is
    logs.check_watched()  # a round of the watcher
    assert layout.redis_log.stat().st_size == 100
    assert not logs.previous_log(layout.redis_log).exists()
    for log in (layout.pg_log, layout.model_log):
        assert log.stat().st_size == 0 and logs.previous_log(log).stat().st_size == 101

    other = _Layout(tmp_path / "gone")
    other.run_dir.mkdir(parents=True)
    logs.watch_logs(other)
    (other.run_dir).rename(tmp_path / "elsewhere")
    other.home.rmdir()
    logs.check_watched()
    assert logs._watched == {layout.home}, "a removed home is forgotten"
