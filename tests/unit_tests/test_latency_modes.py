"""`bench.latency`'s choice of agents, and the docs rendering of a run with the middleware."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest

from bench.harness import main
from bench.latency import MODES, baseline_of, parse_modes
from bench.render import speed

ROOT = Path(__file__).resolve().parents[2]


def test_modes_are_chosen_on_the_command_line_and_run_in_a_fixed_order() -> None:
    assert parse_modes("middleware_background, respond_only,background") == (
        "respond_only",
        "background",
        "middleware_background",
    )
    with pytest.raises(argparse.ArgumentTypeError, match="unknown modes"):
        parse_modes("respond_only,middleware")
    with pytest.raises(argparse.ArgumentTypeError, match="no mode"):
        parse_modes(" , ")
    with pytest.raises(SystemExit):
        main("latency", ["--modes", "everything"])


def test_memory_is_measured_against_its_own_memory_less_twin() -> None:
    assert baseline_of("background", MODES) == "respond_only"
    assert baseline_of("middleware_background", MODES) == "agent_only"
    assert baseline_of("middleware_background", ("respond_only", "middleware_background")) == (
        "respond_only"
    )
    assert baseline_of("respond_only", MODES) is None
    assert baseline_of("agent_only", MODES) is None
    assert baseline_of("background", ("background",)) is None


def test_a_run_with_the_middleware_renders_in_the_docs_tables(tmp_path: Path) -> None:
    data = json.loads((ROOT / "bench" / "results" / "latency.json").read_text())
    middleware = copy.deepcopy(data["modes"]["background"])
    middleware["memory_adds_to_ttft"]["p95"] = 987.6
    data["modes"]["agent_only"] = copy.deepcopy(data["modes"]["respond_only"])
    data["modes"]["middleware_background"] = {**middleware, "baseline": "agent_only"}
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "latency.json").write_text(json.dumps(data))
    table = speed.render_latency_table(tmp_path)
    assert "`create_agent` + `MemoryMiddleware` (background)" in table
    assert "`create_agent`, no middleware (no memory)" in table
    adds = speed.render_latency_adds(tmp_path)
    row = next(line for line in adds.splitlines() if "MemoryMiddleware" in line)
    assert "(against `create_agent`, no middleware (no memory))" in row and "987.6" in row
    assert "no middleware (no memory) |" not in adds  # a baseline adds nothing: no row
