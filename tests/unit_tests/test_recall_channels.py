"""Recall's channels and their fusion (`recall.channels`, `retrieval.fuse`): no server."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_graph_agent.recall.channels import CHANNELS
from memory_graph_agent.recall.channels.base import Found, Hit, Hits, Search
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.recall.retrieval import fuse, rankings
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_index import EpisodeHit

DAY = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
SEARCH = Search(Settings(), "u", "What did Ann say?", depth=20)


def turn_row(i: int, similarity: float | None = None, score: float | None = None) -> dict:
    row = {"thread_id": "t", "message_id": f"m{i}", "content": f"Ann: turn {i}", "ts": DAY}
    if similarity is not None:
        row["distance"] = 1.0 - similarity
    if score is not None:
        row["score"] = score
    return row


def found(channels=CHANNELS, **rows: list[dict]) -> Found:
    """What the channels would read from these rows (by channel name; none: no rows)."""
    return Found.of({c.name: c.read(rows.get(c.name, []), SEARCH) for c in channels})


def test_every_channel_is_named_once_and_owns_or_joins_a_ranking():
    names = [c.name for c in CHANNELS]
    assert names == ["summaries", "dense_turns", "speaker_turns", "keyword_turns"]
    owners = {c.ranking for c in CHANNELS}
    for channel in CHANNELS:  # a joined ranking's owner comes before the channel joining it
        assert channel.ranking in names[: names.index(channel.name) + 1]
    assert owners == {"summaries", "dense_turns", "keyword_turns"}


def test_fuse_ranks_with_the_given_rrf_constant():
    dense = [turn_row(i, similarity=0.9 - i / 10) for i in range(3)]
    keyword = [turn_row(0, score=1.0)]
    for k in (5, 60):
        out = fuse(found(dense_turns=dense, keyword_turns=keyword), 0.2, k)
        assert [m["id"] for m in out] == ["t:m0", "t:m1", "t:m2"]
        assert abs(out[0]["rrf"] - 2 / (k + 1)) < 1e-6 and abs(out[1]["rrf"] - 1 / (k + 2)) < 1e-6
        assert out[0]["dense_rank"] == 1 and out[0]["keyword_rank"] == 1
        assert out[1]["keyword_rank"] is None and out[1]["keyword_score"] is None


def test_speaker_turns_join_the_dense_ranking_by_similarity_once_each():
    dense = [turn_row(i, similarity=0.9 - i / 10) for i in range(3)]  # 0.9, 0.8, 0.7
    speaker = [turn_row(7, similarity=0.85), turn_row(1, similarity=0.8), turn_row(8, 0.3)]
    lists = rankings(found(dense_turns=dense, speaker_turns=speaker))
    assert "speaker_turns" not in lists  # no ranking of its own
    assert [h.key for h in lists["dense_turns"]] == ["t:m0", "t:m7", "t:m1", "t:m2", "t:m8"]
    out = fuse(found(dense_turns=dense, speaker_turns=speaker), 0.2)
    ranks = {m["id"]: m["dense_rank"] for m in out}
    assert ranks == {"t:m0": 1, "t:m7": 2, "t:m1": 3, "t:m2": 4, "t:m8": 5}
    assert [m["similarity"] for m in out] == [0.9, 0.85, 0.8, 0.7, 0.3]


def test_a_candidate_only_similarity_rankings_found_must_pass_the_floor():
    dense = [turn_row(0, similarity=0.9), turn_row(1, similarity=0.1)]
    keyword = [turn_row(2, score=2.0)]  # no similarity at all: kept, keyword is no floor
    out = fuse(found(dense_turns=dense, keyword_turns=keyword), 0.2)
    assert sorted(m["id"] for m in out) == ["t:m0", "t:m2"]


@dataclass
class Pinned:
    """A channel of the test's own: it 'finds' the turns it was given, in order."""

    turns: list[EpisodeHit]
    name = "pinned_turns"
    ranking = "pinned_turns"
    rank_field = "keyword_rank"
    score_field = "pin_score"
    floor = False
    needs_vector = False

    def statements(self, services: Any, search: Search) -> None:
        return None

    def read(self, rows: list[dict], search: Search) -> Hits:
        hits = [Hit(f"{t.thread_id}:{t.message_id}", t, 1.0, episode_item) for t in self.turns]
        return Hits(hits=hits)


def test_a_new_channel_is_one_class_added_to_the_list():
    pinned = Pinned([EpisodeHit("t", "m9", "Ann: pinned", DAY)])
    channels = (*CHANNELS, pinned)
    dense = [turn_row(0, similarity=0.9)]
    out = fuse(found(channels, dense_turns=dense), 0.2, 5, channels)
    by_id = {m["id"]: m for m in out}
    assert set(by_id) == {"t:m0", "t:m9"}
    # ranked first by its own ranking; a tie with the dense turn goes to the earlier channel
    assert [m["id"] for m in out] == ["t:m0", "t:m9"]
    assert by_id["t:m9"]["pin_score"] == 1.0 and by_id["t:m0"]["pin_score"] is None
    assert by_id["t:m9"]["keyword_rank"] == 1 and by_id["t:m9"]["dense_rank"] is None
    assert abs(by_id["t:m9"]["rrf"] - 1 / 6) < 1e-6
