"""`memory_graph_agent.testing`, the public fake: its example runs as written."""

from __future__ import annotations

import doctest
import os

import memory_graph_agent.testing as testing
from memory_graph_agent.testing import environment


def test_the_docstring_example_runs():
    result = doctest.testmod(testing, raise_on_error=False)
    assert result.attempted >= 4 and result.failed == 0


def test_environment_sets_then_restores(monkeypatch):
    monkeypatch.setenv("MGA_KEPT", "before")
    monkeypatch.delenv("MGA_NEW", raising=False)
    with environment({"MGA_KEPT": "during", "MGA_NEW": "x"}):
        assert os.environ["MGA_KEPT"] == "during" and os.environ["MGA_NEW"] == "x"
    assert os.environ["MGA_KEPT"] == "before" and "MGA_NEW" not in os.environ
