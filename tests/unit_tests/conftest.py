"""Unit tests run without servers: each one fails if it started Redis or Postgres.

The environment of every unit test points at a data home that does not exist and has no
``REDIS_URL``/``DATABASE_URL``: any attempt to reach a server would start the embedded
ones there, and the home would appear.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def no_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path / "no-server-home"
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    yield
    assert not home.exists(), "a unit test started an embedded server; move it to integration"
