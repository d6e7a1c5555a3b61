"""Topic links: the best turns lend score to turns that share their rarer words (pure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from memory_graph_agent.recall.topics import link_topics, topic_words


def turn(mid: str, text: str, rrf: float) -> dict:
    return {"id": f"t:{mid}", "kind": "episode", "text": f"Ann: {text}", "rrf": rrf}


def test_topic_words_are_the_content_words_after_the_speaker():
    assert topic_words("Ann: I took Rex to the Lakeside park, really fun!") == {
        "took",
        "lakeside",
        "park",
        "fun",
    } - {"fun"}  # 3 letters: too short
    assert topic_words("no speaker here") == {"speaker", "here"} - {"here"}  # common word


def test_a_turn_sharing_a_rare_word_with_the_best_hit_moves_up():
    items = [
        turn("a", "We adopted a puppy named Biscuit", 0.2),
        turn("b", "The weather was grey all week", 0.05),
        turn("c", "Biscuit chewed my running shoes", 0.04),
        turn("d", "Work has been grey and busy", 0.045),
    ]
    out = link_topics(items, "Did Ann adopt a puppy?", 0.5, seeds=1)
    assert [m["id"] for m in out] == ["t:a", "t:c", "t:b", "t:d"]
    assert out[1]["topic_bonus"] > 0 and "topic_bonus" not in out[0]
    # the query's own words link nothing (the channels already found them)
    assert link_topics(items, "Biscuit adopted named puppy", 0.5, seeds=1) == sorted(
        items, key=lambda m: -m["rrf"]
    )


def test_weight_zero_or_one_turn_changes_nothing():
    items = [turn("a", "Biscuit the puppy", 0.2), turn("c", "Biscuit again", 0.01)]
    assert link_topics(items, "q", 0.0) is items
    assert link_topics(items[:1], "q", 1.0) == items[:1]


_RANKED_IN_A_CHILD = """
import json, sys
from memory_graph_agent.recall.topics import link_topics
items = json.loads(sys.stdin.read())
print(json.dumps(link_topics(items, "What did Ann plan?", 0.5, seeds=1)))
"""


def test_the_bonuses_do_not_depend_on_the_process_hash_seed():
    # the best turn lends 0.5 x 0.267857 split over its words by rarity: summed in set
    # order, the last bit (and so the rounded bonus) differed from one process to the next
    texts = [
        "violin ferry lindos pottery saturday harbour marathon",
        "violin ferry lindos pottery saturday harbour marathon",
        "pottery violin island camping lindos",
        "saturday pottery marathon harbour",
        "biscuit harbour orchard pottery ferry",
        "camping pottery violin lindos harbour",
        "violin island garden ferry",
        "harbour lindos biscuit violin",
        "island orchard",
    ]
    rrfs = [0.267857, 0.01] + [0.001] * 7
    items = json.dumps([turn(str(i), t, r) for i, (t, r) in enumerate(zip(texts, rrfs))])
    runs = {
        subprocess.run(
            [sys.executable, "-c", _RANKED_IN_A_CHILD],
            input=items,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(10)
    }
    assert len(runs) == 1


def test_topic_words_are_cached_by_text_and_the_same():
    text = "Ann: We took the ferry to the island of Lindos"
    first = topic_words(text)
    assert topic_words(text) is first  # the second time from the cache
    assert first == {"took", "ferry", "island", "lindos"}
