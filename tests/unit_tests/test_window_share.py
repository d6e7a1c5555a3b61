"""`bench.window_share`: the window's share, read from full runs and cross-validated."""

from __future__ import annotations

import json

import pytest

from bench.window_share import read_run, summarize
from memory_graph_agent.settings import Settings

DEFAULT = Settings().window.token_share


def _run(share: float, locomo_recall: list[float], lme_recall: list[float], lme_share=None):
    locomo = {
        "config": {"replay_context": {"window_token_share": share}},
        "results": {"memory_in_budget": {"overall_1_4": 0.0}, "hybrid": {"by_category": {}}},
        "questions": [
            {"sample_id": f"conv-{i % 2}", "index": i, "category": 1 + i % 4}
            | {"recall": {"memory_in_budget": r}}
            for i, r in enumerate(locomo_recall)
        ]
        + [{"sample_id": "conv-0", "index": 99, "category": 5, "recall": {"memory_in_budget": 0}}],
    }
    lme = {
        "config": {"context": {"window_token_share": share if lme_share is None else lme_share}},
        "results": {"memory_in_thread": {}, "memory_in_budget": {}, "hybrid": {}},
        "questions": [
            {"question_id": f"q{i}", "methods": {"memory_in_thread": {"turn_recall": r}}}
            for i, r in enumerate(lme_recall)
        ],
    }
    return share, locomo, lme


def test_a_share_better_on_both_datasets_is_chosen_in_every_fold():
    runs = [_run(DEFAULT, [0.5] * 8, [0.5] * 3), _run(0.1, [1.0] * 8, [0.6] * 3)]
    cv = summarize(runs)["cross_validated"]
    assert cv["chosen_in_folds"] == {"0.1": 2 + 3}  # two conversations, three questions
    assert cv["cross_validated"] == {"locomo": 1.0, "longmemeval": 0.6}
    assert cv["in_sample_at_default"] == {"locomo": 0.5, "longmemeval": 0.5}


def test_adversarial_questions_are_not_scored():
    runs = [_run(DEFAULT, [0.5] * 8, [0.5]), _run(0.1, [0.5] * 8, [0.5])]
    runs[1][1]["questions"][-1]["recall"]["memory_in_budget"] = 1.0  # category 5
    assert summarize(runs)["cross_validated"]["chosen_in_folds"] == {str(DEFAULT): 3}


def test_runs_of_different_shares_in_one_folder_are_refused(tmp_path):
    _, locomo, lme = _run(0.1, [1.0], [1.0], lme_share=0.2)
    (tmp_path / "locomo.json").write_text(json.dumps(locomo))
    (tmp_path / "longmemeval.json").write_text(json.dumps(lme))
    with pytest.raises(ValueError, match="different shares"):
        read_run(tmp_path)


def test_the_default_share_must_be_among_the_runs():
    with pytest.raises(ValueError, match="default share"):
        summarize([_run(0.1, [1.0], [1.0])])
