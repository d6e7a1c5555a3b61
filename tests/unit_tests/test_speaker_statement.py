"""The speaker turns' statement (`EpisodeIndex.speaker_statements`), beside the dense one."""

from __future__ import annotations

import pytest

from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_index import MAX_SPEAKER_WORDS, SPEAKER_SQL
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.nearest_turns import _KNN_SQL

VECTOR = [0.1] * 384
LOG = EpisodeLog(db=None, dim=384)  # building a statement needs no server


def _sql(speakers, speaker_k):
    statements = LOG.speaker_statements("u1", VECTOR, 20, speakers, speaker_k)
    if statements is None:
        return None
    *options, (sql, params) = statements
    return options, sql, params


def test_without_speakers_there_is_no_speaker_search():
    assert _sql(["melanie"], 0) is None  # speaker turns off
    assert _sql(["", ""], 40) is None  # no word to try
    assert _sql((), 40) is None
    *_, (plain, params) = LOG.dense_statements("u1", VECTOR, 20)
    assert "speakers" not in params and "split_part" not in plain


def test_speaker_turns_are_one_scan_with_the_dense_searchs_options():
    options, sql, params = _sql(["melanie", "read", "melanie"], 40)
    *dense_options, (knn, _) = LOG.dense_statements("u1", VECTOR, 20)
    assert options == dense_options  # the same ef_search (of the dense search's k)
    assert sql.count("ORDER BY embedding <=>") == 1 and "UNION" not in sql
    assert sql.count(SPEAKER_SQL.replace("content", "s.content")) == 1  # the probe
    # the dense search's kNN, narrowed (the dense search picks it or an exact sort by count)
    assert sql.startswith(_KNN_SQL.format(table=LOG.vector_table, where="").split(" ORDER BY")[0])
    assert knn.count("UNION ALL") == 1 and params["user_id"] == "u1"
    assert params["speakers"] == ["melanie", "read"] and params["k"] == 40
    assert params["user_id"] == "u1"


def test_the_words_tried_as_speakers_are_capped():
    _, _, params = _sql([f"w{i}" for i in range(MAX_SPEAKER_WORDS + 10)], 40)
    assert len(params["speakers"]) == MAX_SPEAKER_WORDS


def test_speaker_turns_must_not_be_negative():
    with pytest.raises(ValueError, match="speaker_turns"):
        Settings().override(speaker_turns=-1)
    assert Settings().override(speaker_turns=0).recall.speaker_turns == 0
