"""Fixtures of the integration tests that start their own embedded servers."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_graph_agent.local import embedded


@pytest.fixture
def private_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throw-away data home the system user can reach, stopped and removed afterwards.

    ``REDIS_URL``/``DATABASE_URL`` are unset for the test, so the embedded servers of
    this home are the ones used.
    """
    parent = Path(tempfile.mkdtemp(prefix="ma-test-", dir="/tmp"))
    parent.chmod(0o755)  # our own folder; mkdtemp makes it 0700
    home = parent / "home"
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    try:
        yield home
    finally:
        embedded.stop_services()
        shutil.rmtree(parent, ignore_errors=True)
