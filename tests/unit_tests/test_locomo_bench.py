"""The LoCoMo benchmark's pure parts: data, scoring, baselines."""

from __future__ import annotations

import json

import pytest

from bench.locomo_data import (
    Defects,
    canonical_id,
    load_locomo,
    parse_evidence,
    parse_session_date,
    safe_id,
)
from bench.locomo_scoring import (
    BM25,
    aggregate,
    bm25_tokens,
    evidence_recall,
    fill_budget,
    ranking,
    rrf,
)
from tests.builders import locomo_sample as _sample

KNOWN = {"D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D3:1", "D3:3", "D30:5"}


def kinds(parsed) -> list[str]:
    return [k for k, _ in parsed.defects]


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        ("D1:2", ("D1:2", None)),
        ("D30:05", ("D30:5", "zero_padded")),
        ("D:11:26", ("D11:26", "malformed_repaired")),
        ("D", (None, "malformed_dropped")),
        ("11:26", (None, "malformed_dropped")),
    ],
)
def test_canonical_id(piece, expected):
    assert canonical_id(piece) == expected


def test_clean_evidence_has_no_defect():
    parsed = parse_evidence(["D1:1", "D2:2"], KNOWN)
    assert parsed.ids == ("D1:1", "D2:2") and parsed.defects == ()


@pytest.mark.parametrize("entry", ["D1:1; D2:2", "D1:1 D2:2", "D1:1,D2:2"])
def test_joined_ids_are_split_and_counted(entry):
    parsed = parse_evidence([entry], KNOWN)
    assert parsed.ids == ("D1:1", "D2:2")
    assert parsed.defects == (("joined", entry),)


def test_zero_padded_id_is_normalised():
    parsed = parse_evidence(["D30:05"], KNOWN)
    assert parsed.ids == ("D30:5",)
    assert kinds(parsed) == ["zero_padded"]


def test_extra_separator_is_repaired():
    parsed = parse_evidence(["D:1:3"], KNOWN)
    assert parsed.ids == ("D1:3",) and kinds(parsed) == ["malformed_repaired"]


def test_bare_d_is_dropped_but_the_rest_is_kept():
    parsed = parse_evidence(["D1:1", "D", "D1:2"], KNOWN)
    assert parsed.ids == ("D1:1", "D1:2") and kinds(parsed) == ["malformed_dropped"]


@pytest.mark.parametrize("unknown", ["D1:9", "D7:1", "D3:2"])  # past the end, no session, gap
def test_unknown_ids_are_dropped(unknown):
    parsed = parse_evidence(["D1:1", unknown], KNOWN)
    assert parsed.ids == ("D1:1",) and kinds(parsed) == ["no_such_turn"]


def test_duplicates_count_once():
    parsed = parse_evidence(["D1:1", "D1:1"], KNOWN)
    assert parsed.ids == ("D1:1",) and kinds(parsed) == ["duplicate"]


@pytest.mark.parametrize("raw", [[], None])
def test_empty_evidence(raw):
    parsed = parse_evidence(raw, KNOWN)
    assert parsed.ids == () and kinds(parsed) == ["empty_evidence"]


def test_nothing_valid_left():
    parsed = parse_evidence(["D", "D1:99"], KNOWN)
    assert parsed.ids == ()
    assert kinds(parsed) == ["malformed_dropped", "no_such_turn", "no_valid_evidence"]


def test_defects_count_all_and_keep_few_examples():
    d = Defects(max_examples=2)
    for i in range(5):
        d.add("joined", f"q{i}", "D1:1;D1:2")
    assert d.count == 5 and len(d.examples) == 2


def test_session_dates_and_ids():
    assert parse_session_date("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert parse_session_date("10:04 am on 19 December, 2023") == "2023-12-19T10:04:00"
    assert parse_session_date("2023-05-08T13:56:00") == "2023-05-08T13:56:00"
    assert parse_session_date("sometime in May") is None
    assert safe_id("locomo-conv 26/x") == "locomo-conv-26-x"
    assert safe_id("///").startswith("x")


def test_load_locomo_counts_every_defect_class(tmp_path):
    turns = [("Alice", "hi"), ("Bob", "hello"), ("Alice", "bye")]
    qa = [
        {"question": "ok", "answer": "a", "evidence": ["D1:1"], "category": 4},
        {"question": "joined", "answer": "a", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "padded", "answer": "a", "evidence": ["D2:03"], "category": 2},
        {"question": "repaired", "answer": "a", "evidence": ["D:1:3"], "category": 4},
        {"question": "bare", "answer": "a", "evidence": ["D", "D1:1"], "category": 4},
        {"question": "past end", "answer": "a", "evidence": ["D2:4"], "category": 1},
        {"question": "empty", "answer": "a", "evidence": [], "category": 3},
        {"question": "adversarial", "answer": "a", "evidence": ["D2:2"], "category": 5},
    ]
    sample = _sample("s1", {1: turns, 2: turns}, qa)
    sample["conversation"]["session_3_date_time"] = "3:00 pm on 3 May, 2023"  # no turns
    sample["conversation"]["session_2_date_time"] = "not a date"
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))

    (conv,), defects = load_locomo(path)
    assert sorted(e["kind"] for e in defects.examples) == [
        "empty_evidence",
        "joined",
        "malformed_dropped",
        "malformed_repaired",
        "no_such_turn",
        "no_valid_evidence",
        "unparsed_date",
        "zero_padded",
    ]
    assert defects.count == 8
    assert [t.dia_id for t in conv.turns][:4] == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert conv.turns[0].timestamp == "2023-05-01T13:00:00" and conv.turns[3].timestamp is None
    assert conv.sessions == 2
    scored = {q.text: q.evidence for q in conv.questions if q.scored}
    assert scored == {
        "ok": ("D1:1",),
        "joined": ("D1:2", "D2:1"),
        "padded": ("D2:3",),
        "repaired": ("D1:3",),
        "bare": ("D1:1",),
        "adversarial": ("D2:2",),
    }
    message = conv.turns[0].message()
    assert (message.name, message.id, message.content) == ("Alice", "D1:1", "hi")
    assert message.additional_kwargs == {"timestamp": "2023-05-01T13:00:00"}
    assert conv.turns[0].line() == "[2023-05-01T13:00] Alice: hi"


def test_evidence_recall():
    assert evidence_recall(["D1:1", "D1:2"], {"D1:1", "D9:9"}) == 0.5
    assert evidence_recall(["D1:1"], set()) == 0.0
    assert evidence_recall(["D1:1", "D1:2"], {"D1:2", "D1:1"}) == 1.0
    with pytest.raises(ValueError):
        evidence_recall([], {"D1:1"})


def test_aggregate_per_category_and_overall_1_to_4():
    def rec(category, recall, tokens):
        return {"category": category, "recall": {"m": recall}, "tokens": {"m": tokens}}

    records = [rec(1, 1.0, 100), rec(1, 0.0, 300), rec(2, 0.5, 200), rec(5, 0.0, 1000)]
    out = aggregate(records, ["m"])["m"]
    assert out["by_category"] == {"1": 0.5, "2": 0.5, "3": None, "4": None, "5": 0.0}
    assert out["overall_1_4"] == pytest.approx(0.5)  # micro over questions, category 5 out
    assert out["tokens_mean"] == pytest.approx(200)
    assert out["questions"] == {"1": 2, "2": 1, "3": 0, "4": 0, "5": 1}


def test_fill_budget_skips_what_does_not_fit():
    assert fill_budget([0, 1, 2, 3], [50, 80, 30, 10], 100) == [0, 2, 3]
    assert fill_budget([2, 0], [50, 80, 30], 10) == []


def test_ranking_and_rrf():
    assert ranking([0.1, 0.9, 0.5, 0.9]) == [1, 3, 2, 0]
    assert rrf([[0, 1, 2], [1, 2, 0]], k=60) == [1, 0, 2]  # 1st + 2nd beats 1st + 3rd
    assert rrf([[0, 1], [0, 1]]) == [0, 1]


def test_bm25_tokens_and_ranking():
    assert bm25_tokens("What did Caroline paint? She was painting sunsets!") == [
        "caroline",
        "paint",
        "paint",
        "sunset",
    ]
    bm = BM25(["Bob went hiking", "Caroline paints sunsets", "the weather was nice"])
    scores = bm.scores("What did Caroline paint?")
    assert ranking(scores)[0] == 1 and scores[0] == 0.0 == scores[2]


def test_a_partial_run_writes_its_results_and_says_which_tables_it_cannot_show(tmp_path, capsys):
    """A run of some modes only (``latency --modes background``) still writes its JSON."""
    from bench.harness import write_results

    data = {"memory_cost_per_turn": {"total": {}}}  # no ``--cost-conversations`` replays
    path, _ = write_results(tmp_path, "latency", data, show=("latency-cost",))
    assert path.exists()
    assert "latency-cost: not in this run" in capsys.readouterr().out
