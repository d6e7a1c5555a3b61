"""bench.locomo: evidence parsing and defect counting, the metric, the baselines' pieces,
and a tiny end-to-end run on a synthetic conversation against the real Redis/Postgres."""

from __future__ import annotations

import json
import uuid

import pytest

from bench.locomo import run_benchmark
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

KNOWN = {"D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D3:1", "D3:3", "D30:5"}


def kinds(parsed) -> list[str]:
    return [k for k, _ in parsed.defects]


# ------------------------------------------------------------------- evidence parsing


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


def test_unknown_ids_are_dropped_by_reason():
    assert kinds(parse_evidence(["D1:1", "D1:9"], KNOWN)) == ["past_end"]
    assert kinds(parse_evidence(["D1:1", "D7:1"], KNOWN)) == ["unknown_session"]
    assert kinds(parse_evidence(["D1:1", "D3:2"], KNOWN)) == ["missing_turn"]


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
    assert kinds(parsed) == ["malformed_dropped", "past_end", "no_valid_evidence"]


def test_defects_reject_unknown_kinds_and_keep_few_examples():
    d = Defects(max_examples=2)
    for i in range(5):
        d.add("joined", f"q{i}", "D1:1;D1:2")
    assert d.counts["joined"] == 5 and len(d.examples) == 2
    assert d.as_dict()["counts"]["past_end"] == 0
    with pytest.raises(ValueError):
        d.add("typo", "q", "")


def test_session_dates_and_ids():
    assert parse_session_date("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert parse_session_date("10:04 am on 19 December, 2023") == "2023-12-19T10:04:00"
    assert parse_session_date("2023-05-08T13:56:00") == "2023-05-08T13:56:00"
    assert parse_session_date("sometime in May") is None
    assert safe_id("locomo-conv 26/x") == "locomo-conv-26-x"
    assert safe_id("///").startswith("x")


def _sample(sample_id: str, sessions: dict[int, list[tuple[str, str]]], qa: list[dict]) -> dict:
    conversation = {"speaker_a": "Alice", "speaker_b": "Bob"}
    for n, turns in sessions.items():
        conversation[f"session_{n}_date_time"] = f"{n}:00 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": speaker, "dia_id": f"D{n}:{i}", "text": text}
            for i, (speaker, text) in enumerate(turns, start=1)
        ]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


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
    counts = defects.as_dict()["counts"]
    assert {k: v for k, v in counts.items() if v} == {
        "joined": 1,
        "zero_padded": 1,
        "malformed_repaired": 1,
        "malformed_dropped": 1,
        "past_end": 1,
        "no_valid_evidence": 1,
        "empty_evidence": 1,
        "unparsed_date": 1,
    }
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


# ----------------------------------------------------------------------------- metric


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


# -------------------------------------------------------------------------- retrieval


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


# ------------------------------------------------------------------------ end to end

FILLER = [
    "The bus was late again this morning.",
    "I finished the quarterly report at work.",
    "We should try the new bakery on Elm Street.",
    "My sister is visiting next month.",
    "The football match went to extra time.",
    "I repainted the kitchen cabinets.",
    "The train tickets were cheaper than expected.",
    "I started reading a novel about sailors.",
]


async def test_end_to_end_memory_finds_evidence_that_left_the_window(memory_env, tmp_path):
    session_1 = [("Bob", "How was your weekend?")]
    session_1.append(("Alice", "Great! We adopted a dog, a golden retriever called Biscuit."))
    session_1 += [("Bob" if i % 2 else "Alice", FILLER[i % len(FILLER)]) for i in range(8)]
    session_2 = [("Alice" if i % 2 else "Bob", FILLER[(i + 3) % len(FILLER)]) for i in range(26)]
    qa = [
        {
            "question": "What is the name of Alice's dog?",
            "answer": "Biscuit",
            "evidence": ["D1:2"],
            "category": 4,
        },
        {
            "question": "What did Alice say recently?",
            "answer": "x",
            "evidence": ["D2:26"],
            "category": 5,
        },
        {"question": "Is Alice happy?", "answer": "yes", "evidence": [], "category": 3},
        {
            "question": "Who adopted a dog?",
            "answer": "Alice",
            "evidence": ["D1:2; D9:1"],
            "category": 1,
        },
    ]
    sample_id = f"synthetic-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps([_sample(sample_id, {1: session_1, 2: session_2}, qa)]))

    report = await run_benchmark(
        path,
        tmp_path / "out",
        budget=300,
        database_url=memory_env["DATABASE_URL"],
        redis_url=memory_env["REDIS_URL"],
        key_prefix=memory_env["MEMORY_KEY_PREFIX"],
        progress=False,
        quiet=True,
    )

    assert (tmp_path / "out" / "locomo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "locomo.json").read_text())["llm_calls"] == 0
    assert report["llm_calls"] == 0
    assert report["data"]["turns"] == 36 and report["data"]["scored_questions"] == 3
    counts = report["defects"]["counts"]
    assert counts["empty_evidence"] == 1 and counts["joined"] == 1
    assert counts["unknown_session"] == 1

    (conv,) = report["conversations"]
    assert conv["window_matches_last_turns"] and conv["summaries"] == 3  # (36 - 20) // 5
    assert conv["turns_outside_window_and_memory"] == 1
    by_question = {q["index"]: q for q in report["questions"]}
    dog = by_question[0]
    assert dog["recall"]["window"] == 0.0  # D1:2 left the window long ago...
    assert dog["recall"]["memory"] == 1.0  # ...and recall brings it back via provenance
    assert dog["recall"]["full"] == 1.0 and dog["tokens"]["full"] > 300
    assert dog["tokens"]["memory"] <= 300 + conv["window_tokens"]
    assert dog["tokens"]["memory_in_budget"] <= max(300, conv["window_tokens"])
    assert dog["tokens"]["dense"] <= 300 and dog["recall"]["dense"] == 1.0
    assert by_question[1]["recall"]["window"] == 1.0  # the last turn is in the window
    assert by_question[3]["evidence"] == ["D1:2"]
    results = report["results"]
    assert results["full"]["overall_1_4"] == 1.0
    assert results["memory"]["questions"] == {"1": 1, "2": 0, "3": 0, "4": 1, "5": 1}
    assert report["config"]["recall_context"]["summary_mode"] == "raw"
