"""bench.growth's simulated days: the timestamp shift, and how a run with days renders."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest

from bench import growth
from bench.growth import shift_fields, shift_iso
from bench.harness import args
from bench.render import longrun

ROOT = Path(__file__).resolve().parents[2]


def test_a_timestamp_moves_back_by_days_and_a_naive_one_is_utc() -> None:
    assert shift_iso("2026-03-31T12:00:00+00:00", 30.5) == "2026-03-01T00:00:00+00:00"
    assert shift_iso("2026-03-31T12:00:00", 1) == "2026-03-30T12:00:00+00:00"
    assert shift_iso("2026-03-31T12:00:00+02:00", 1) == "2026-03-30T12:00:00+02:00"


def test_a_timestamp_that_cannot_be_read_is_an_error_not_left_young() -> None:
    with pytest.raises(ValueError, match="not an ISO timestamp"):
        shift_iso("yesterday", 1)


def test_a_fact_moves_back_but_its_empty_and_never_times_stay() -> None:
    fact = {"value": "Lisbon", "updated_at": "", "valid_from": "2026-03-31T00:00:00+00:00"}
    fact["expires_at"] = None
    aged = json.loads(shift_fields(json.dumps(fact), ("expires_at", "updated_at", "valid_from"), 2))
    assert aged == {**fact, "valid_from": "2026-03-29T00:00:00+00:00"}


@pytest.mark.parametrize("days", [-1.0, float("nan"), float("inf")])
def test_growth_refuses_days_that_are_not_a_number_of_days(days: float, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="days_per_pass"):
        asyncio.run(
            growth.run(args("growth", users=1, turns=1, every=1, out=tmp_path, days_per_pass=days))
        )
    assert not any(tmp_path.iterdir())  # refused before anything ran


def _results(tmp_path: Path, data: dict) -> Path:
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "growth.json").write_text(json.dumps(data))
    return tmp_path


def test_a_growth_run_with_days_renders_them_and_its_memories(tmp_path: Path) -> None:
    data = json.loads((ROOT / "bench" / "results" / "growth.json").read_text())
    data["days_per_pass"] = 20
    for run in data["runs"]:
        for i, sample in enumerate(run["samples"]):
            sample["day"] = 20 * (i + 1)
            sample["memories_per_user"] = {"rows": 9 + i, "active": 3.5, "superseded": 1}
    table = longrun.render_growth_table(_results(tmp_path, data))
    last = len(data["runs"][1]["samples"])
    assert f"(day 20 → {20 * last})" in table.splitlines()[0]
    assert f"| memories, active of all rows | 3.5 of 9 → 3.5 of {8 + last} |" in table
    assert "20 simulated days before each pass" in table


def test_a_growth_run_without_days_says_so_and_an_old_one_renders_as_before(
    tmp_path: Path,
) -> None:
    old = json.loads((ROOT / "bench" / "results" / "growth.json").read_text())
    before = longrun.render_growth_table(ROOT)
    data = copy.deepcopy(old)
    data["days_per_pass"] = 0
    for run in data["runs"]:
        for sample in run["samples"]:
            sample["day"] = 0
            sample["memories_per_user"] = {"rows": 2, "active": 2, "superseded": 0}
    table = longrun.render_growth_table(_results(tmp_path, data))
    assert "(day" not in table and "no simulated time" in table
    if "days_per_pass" not in old:  # the committed run predates simulated time
        assert "simulated" not in before and "memories" not in before
