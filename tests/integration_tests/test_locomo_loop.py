"""The fast LoCoMo loop (`bench.locomo_loop`) scores what the full benchmark scores."""

from __future__ import annotations

import json
import uuid

from bench import locomo_loop
from bench.locomo import run_benchmark
from tests.builders import locomo_sample

FILLER = [
    "The bus was late again this morning, so I walked.",
    "I finished the quarterly report at work today.",
    "We should try the new bakery on Elm Street soon.",
    "My sister is visiting next month with her kids.",
]


async def test_the_loop_recalls_within_the_budget_as_the_benchmark_does(
    memory_env, tmp_path, monkeypatch
):
    """The window is left out of the budget once, by the recall node (it was also taken
    off the loop's budget before: recall got the budget less twice the window)."""
    monkeypatch.setenv("WINDOW_TOKEN_SHARE", "1.0")  # a window of 20 turns, by count alone
    session_1 = [("Alice", "We adopted a dog, a golden retriever called Biscuit.")]
    session_1 += [("Bob" if i % 2 else "Alice", FILLER[i % len(FILLER)]) for i in range(5)]
    session_2 = [("Alice" if i % 2 else "Bob", FILLER[(i + 1) % len(FILLER)]) for i in range(24)]
    question = {"question": "What is the name of Alice's dog?", "answer": "Biscuit"}
    qa = [{**question, "evidence": ["D1:1"], "category": 4}]
    path = tmp_path / "synthetic.json"
    path.write_text(
        json.dumps(
            [locomo_sample(f"loop-{uuid.uuid4().hex[:8]}", {1: session_1, 2: session_2}, qa)]
        )
    )
    budget = 700  # the window (20 filler turns) costs about half of it

    report = await run_benchmark(
        path,
        tmp_path / "out",
        budget=budget,
        database_url=memory_env["DATABASE_URL"],
        redis_url=memory_env["REDIS_URL"],
        key_prefix=memory_env["MEMORY_KEY_PREFIX"],
        progress=False,
        quiet=True,
    )
    (conv,) = report["conversations"]
    # once, the window leaves recall room for the dog; twice, it leaves none
    assert conv["window_tokens"] + 50 <= budget <= 2 * conv["window_tokens"]
    (record,) = report["questions"]
    assert record["recall"]["memory_in_budget"] == 1.0

    db = f"loop_{uuid.uuid4().hex[:10]}"
    await locomo_loop.prepare(db, str(path), None)
    try:
        found = await locomo_loop.ask(db, str(path), None, [""], budget)
    finally:
        await locomo_loop.drop(db)
    assert found["variants"][""]["by_category"]["4"] == 1.0
