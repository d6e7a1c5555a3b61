"""The LoCoMo benchmark end to end on the real servers."""

from __future__ import annotations

import json
import uuid

from bench.harness import args
from bench.locomo import run
from tests.builders import locomo_sample as _sample

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


async def test_end_to_end_memory_finds_evidence_that_left_the_window(
    memory_env, tmp_path, monkeypatch
):
    # the window bounded by its count alone (20 turns), which the assertions count on
    monkeypatch.setenv("WINDOW_TOKEN_SHARE", "1.0")
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

    servers = {"database_url": memory_env["DATABASE_URL"], "redis_url": memory_env["REDIS_URL"]}
    servers["key_prefix"] = memory_env["MEMORY_KEY_PREFIX"]
    flags = ["--budget", "450", "--quiet"]  # the window (~300) and a summary fit
    report = await run(args("locomo", flags, data=path, out=tmp_path / "out", **servers))

    assert (tmp_path / "out" / "locomo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "locomo.json").read_text())["llm_calls"] == 0
    assert report["llm_calls"] == 0
    assert report["data"]["turns"] == 36 and report["data"]["scored_questions"] == 3
    kinds = sorted(e["kind"] for e in report["defects"]["examples"])
    assert kinds == ["empty_evidence", "joined", "no_such_turn"]
    assert report["defects"]["count"] == 3

    (conv,) = report["conversations"]
    assert conv["window_matches_last_turns"] and conv["summaries"] == 3  # (36 - 20) // 5
    assert conv["turns_outside_window_and_memory"] == 1
    by_question = {q["index"]: q for q in report["questions"]}
    dog = by_question[0]
    # D1:2 left the window (the last 20 turns) long ago...
    assert dog["recall"]["memory_in_budget"] == 1.0  # ...and recall brings it back
    assert dog["recall"]["full"] == 1.0 and dog["tokens"]["full"] > 450
    assert dog["tokens"]["memory_in_budget"] <= max(450, conv["window_tokens"])
    assert dog["tokens"]["hybrid"] <= 450 and dog["recall"]["hybrid"] == 1.0
    assert by_question[1]["recall"]["memory_in_budget"] == 1.0  # the last turn is in the window
    assert by_question[3]["evidence"] == ["D1:2"]
    results = report["results"]
    assert results["full"]["overall_1_4"] == 1.0
    assert results["memory_in_budget"]["questions"] == {"1": 1, "2": 0, "3": 0, "4": 1, "5": 1}
    assert report["config"]["recall_context"]["summary_mode"] == "raw"
    # the config is flat plain values, the recall weights' members included (render_docs reads them)
    assert report["config"]["recall_context"]["neighbour_weight"] == 0.5
    assert "recall_weights" not in report["config"]["recall_context"]
