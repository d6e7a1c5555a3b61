"""The dense turn search's statement with speaker turns (`EpisodeIndex.dense_statements`)."""

from __future__ import annotations

import pytest

from graph.context import Context
from memory_graph_agent.storage.episode_index import MAX_SPEAKER_WORDS, SPEAKER_SQL
from memory_graph_agent.storage.episodes import EpisodeLog

VECTOR = [0.1] * 384


def _sql(speakers, speaker_k):
    log = EpisodeLog(db=None, dim=384)  # building a statement needs no server
    *options, (sql, params) = log.dense_statements("u1", VECTOR, 20, speakers, speaker_k)
    return options, sql, params


def test_without_speakers_the_statement_is_the_plain_knn():
    plain = _sql((), 0)
    assert "UNION" not in plain[1] and "speakers" not in plain[2]
    assert _sql(["melanie"], 0) == plain  # speaker turns off
    assert _sql(["", ""], 40) == plain  # no word to try


def test_speaker_turns_are_a_second_scan_in_the_same_statement():
    options, sql, params = _sql(["melanie", "read", "melanie"], 40)
    assert sql.count("ORDER BY embedding <=>") == 2 and ") UNION (" in sql
    assert sql.count(SPEAKER_SQL.replace("content", "s.content")) == 1  # the probe
    assert params["speakers"] == ["melanie", "read"] and params["speaker_k"] == 40
    assert params["k"] == 20 and params["user_id"] == "u1"


def test_the_words_tried_as_speakers_are_capped():
    _, _, params = _sql([f"w{i}" for i in range(MAX_SPEAKER_WORDS + 10)], 40)
    assert len(params["speakers"]) == MAX_SPEAKER_WORDS


def test_speaker_turns_must_not_be_negative():
    with pytest.raises(ValueError, match="speaker_turns must be >= 0"):
        Context(user_id="u1", speaker_turns=-1)
    assert Context(user_id="u1", speaker_turns=0).speaker_turns == 0
