"""Cross-validation over LoCoMo and LongMemEval together (`bench.joint_cv`), on made-up rows."""

from __future__ import annotations

import pytest

from bench.joint_cv import GRID, cross_validate, default_key, grid_points, parse_grid, point_key


def _rows(prefix: str, n: int, a: float, b: float) -> list[dict]:
    return [{"fold": f"{prefix}:{i}", "grid": {"a": a, "b": b}} for i in range(n)]


def test_a_point_that_helps_one_dataset_and_hurts_the_other_more_is_not_chosen():
    locomo = _rows("locomo", 4, a=0.80, b=0.82)  # b helps LoCoMo by 2 points
    lme = _rows("lme", 6, a=0.80, b=0.70)  # and costs LongMemEval 10
    result = cross_validate(locomo, lme, default="b")
    assert result["best_in_sample"] == "a"
    assert result["chosen_in_folds"] == {"a": 10}
    assert result["cross_validated"] == {"locomo": 0.8, "longmemeval": 0.8}


def test_ties_go_to_the_default_and_each_fold_scores_only_what_it_held_out():
    locomo = [{"fold": "locomo:x", "grid": {"a": 1.0, "b": 0.0}}]
    locomo += [{"fold": "locomo:y", "grid": {"a": 0.0, "b": 1.0}}]
    lme = _rows("lme", 2, a=0.5, b=0.5)
    result = cross_validate(locomo, lme, default="b")
    assert result["best_in_sample"] == "b"  # a tie in sample
    # holding out x leaves y, which prefers b: x is scored at b (0.0); and the other way
    assert result["cross_validated"]["locomo"] == 0.0


def test_the_default_must_have_been_probed():
    with pytest.raises(ValueError, match="not probed"):
        cross_validate(_rows("locomo", 1, 0.5, 0.5), [], default="c")


def test_the_grid_takes_recall_time_settings_only():
    grid = parse_grid("neighbour_weight=0,0.5; newest_first=true")
    assert grid == {"neighbour_weight": (0.0, 0.5), "newest_first": (True,)}
    with pytest.raises(ValueError, match="recall-time"):
        parse_grid("turn_context_weight=0,0.25")  # the replay's: re-indexing is gone
    with pytest.raises(ValueError, match="recall-time"):
        parse_grid("no_such_setting=1")


def test_a_reach_is_probed_only_where_there_are_neighbours():
    points = grid_points({"neighbour_weight": (0.0, 0.5), "neighbour_reach": (1, 2)})
    assert points == [
        {"neighbour_weight": 0.0, "neighbour_reach": 1},
        {"neighbour_weight": 0.5, "neighbour_reach": 1},
        {"neighbour_weight": 0.5, "neighbour_reach": 2},
    ]
    assert default_key() in {point_key(p) for p in grid_points(GRID)}
