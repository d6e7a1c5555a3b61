"""The LongMemEval benchmark end to end on the real servers, on a synthetic haystack."""

from __future__ import annotations

import json
import uuid

from bench.harness import args
from bench.longmemeval import load_longmemeval, run

FILLER = [
    ("user", "Can you suggest a recipe for a quick weeknight dinner?"),
    ("assistant", "Sure: a stir-fry with vegetables, garlic, soy sauce and rice. " * 6),
    ("user", "What are good stretches after running?"),
    ("assistant", "Try hamstring, quad and calf stretches, each held for thirty seconds. " * 6),
]


def _session(*turns: tuple[str, str], answer: bool = False) -> list[dict]:
    out = [{"role": r, "content": c} for r, c in turns]
    if answer:
        out[0]["has_answer"] = True
    return out


def _item(kind: str) -> dict:
    sessions = [
        _session(
            ("user", "I keep my bike in the garage of my flat in Lyon."), *FILLER, answer=True
        ),
        _session(*FILLER),
        _session(
            ("user", "I moved to Porto last month and my bike is in the hallway."),
            *FILLER,
            answer=True,
        ),
        _session(*FILLER),
        _session(*FILLER, *FILLER),
    ]
    dates = [f"2023/05/{d:02d} (Mon) 10:00" for d in (1, 3, 8, 9, 12)]
    return {
        "question_id": f"q-{uuid.uuid4().hex[:8]}",
        "question_type": kind,
        "question": "Where do I keep my bike?",
        "question_date": "2023/06/01 (Thu) 09:00",
        "answer": "in the hallway in Porto",
        "answer_session_ids": ["a1", "a3"],
        "haystack_session_ids": ["a1", "f2", "a3", "f4", "f5"],
        "haystack_dates": dates,
        "haystack_sessions": sessions,
    }


def test_a_haystack_is_replayed_in_date_order_with_its_evidence(tmp_path):
    item = _item("knowledge-update")
    item["haystack_dates"] = list(
        reversed(item["haystack_dates"])
    )  # the file's order is not time's
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([item]))
    (hay,) = load_longmemeval(path)
    assert [s.session_id for s in hay.sessions] == ["f5", "f4", "a3", "f2", "a1"]
    assert hay.thread_id not in {s.thread_id for s in hay.sessions}  # a session of its own
    assert [e[0].role for e in hay.sessions[0].exchanges()] == ["user", "user", "user", "user"]
    newest, stale = hay.newest_and_stale()
    assert newest.startswith("a1") and all(s.startswith("a3") for s in stale)


async def test_end_to_end_memory_finds_evidence_of_old_sessions(memory_env, tmp_path):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([_item("knowledge-update"), _item("single-session-user")]))
    servers = {"database_url": memory_env["DATABASE_URL"], "redis_url": memory_env["REDIS_URL"]}
    servers["key_prefix"] = memory_env["MEMORY_KEY_PREFIX"]
    flags = ["--budget", "600", "--quiet"]
    report = await run(args("longmemeval", flags, data=path, out=tmp_path / "out", **servers))
    assert (tmp_path / "out" / "longmemeval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "longmemeval.json").read_text())["llm_calls"] == 0
    results = report["results"]
    # the config is flat plain values, the recall weights' members included (render_docs reads them)
    assert report["config"]["context"]["neighbour_weight"] == 0.5
    assert "recall_weights" not in report["config"]["context"]
    memory = results["memory_in_budget"]
    # both evidence turns left their sessions' windows long ago, and are recalled
    assert memory["turn_recall"]["overall"] == 1.0
    assert memory["session_recall"]["overall"] == 1.0
    # asked in the last session's thread: its window and the recalled memories together
    # stay within the budget, and the evidence of the old sessions is still recalled
    thread = results["memory_in_thread"]
    assert thread["turn_recall"]["overall"] == 1.0
    for record in report["questions"]:
        assert record["methods"]["memory_in_thread"]["tokens"] <= 600
        assert record["methods"]["hybrid_in_thread"]["tokens"] <= 600
        assert record["methods"]["memory_in_budget"]["tokens"] <= 600
    assert set(memory["newest_in"]) == {"knowledge-update", "overall"}
    ingestion = report["ingestion"]
    assert ingestion["turns"] == 2 * 26 and ingestion["turns_per_s"] > 0
