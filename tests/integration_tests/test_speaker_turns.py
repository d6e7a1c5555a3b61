"""Speaker turns (`speaker_turns`): when the query names someone who spoke, the speaker turns
channel adds that speaker's nearest turns to the dense turns' ranking. Real Postgres;
the turns' vectors are set by a small embeddings class so that which turn is near is
known exactly (the model is not under test here)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from graph.context import Context
from memory_graph_agent.core.entities import named_in
from memory_graph_agent.recall.channels import CHANNELS
from memory_graph_agent.recall.channels.base import Search, search_channels
from memory_graph_agent.recall.retrieval import rankings, retrieve
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_index import MAX_SPEAKER_WORDS
from memory_graph_agent.storage.window import StoredMessage
from tests.builders import turns_table_record, without_component
from tests.conftest import say

DIM = 384
QUERY = "What did Melanie read as a kid?"
TARGET = "Charlotte's Web was the first chapter book I finished on my own, at nine."


def _axis(i: int, cos: float) -> list[float]:
    """A unit vector with cosine ``cos`` to the query's (axis 0), the rest on axis ``i``."""
    v = np.zeros(DIM)
    v[0], v[i] = cos, np.sqrt(1 - cos**2)
    return v.tolist()


def _onto(query: list[float]):
    """The reflection that maps axis 0 onto ``query`` (cosines to the query are kept)."""
    q = np.asarray(query) / np.linalg.norm(query)
    v = np.zeros(DIM)
    v[0] = 1.0
    v -= q
    return lambda x: (np.asarray(x) - 2 * v * (v @ x) / (v @ v)).tolist()


class Planted(Embeddings):
    """Each text's vector is the one planted for the first key it contains (turned so that
    axis 0 is ``around``, when given: a real query's embedding)."""

    def __init__(self, planted: dict[str, list[float]], around: list[float] | None = None) -> None:
        turn = _onto(around) if around is not None else (lambda x: x)
        self.planted = {k: turn(v) for k, v in planted.items()}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [next(v for k, v in self.planted.items() if k in t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _axis(1, 1.0)


async def _seed(
    services, user: str, target_cos: float = 0.5, name: str = "Melanie", around=None
) -> None:
    """25 of Caroline's turns nearer the query than Melanie's answer, and 25 of Melanie's
    short turns that are far from it (and outrank the answer by keyword); the answer in a
    thread of its own, so that it is no neighbour of a found turn."""
    start = datetime(2023, 7, 1, 9, tzinfo=UTC)
    turns = [("Caroline", f"Near turn number {i} about painting.") for i in range(25)]
    turns += [(name, f"Far {i}.") for i in range(25)]
    planted = {TARGET: _axis(1, target_cos)}
    planted |= {f"Near turn number {i} ": _axis(2 + i, 0.9 - 0.005 * i) for i in range(25)}
    planted |= {f"Far {i}.": _axis(40 + i, 0.2 - 0.005 * i) for i in range(25)}
    for day, part in ((0, turns), (1, [(name, TARGET)])):
        thread = f"t-{uuid.uuid4().hex[:8]}"
        messages = [
            StoredMessage(
                f"m{i:02d}", "human", text, (start + timedelta(days=day, minutes=i)).isoformat(),
                name=name,
            )
            for i, (name, text) in enumerate(part)
        ]  # fmt: skip
        await services.episodes.append(user, thread, messages)
        await services.episodes.index(user, thread, messages, Planted(planted, around))


def _query() -> list[float]:
    return _axis(1, 1.0)


def _asking(services):
    """``services`` whose query embedding is `_query` (`Planted.embed_query`)."""
    return replace(services, embeddings=Planted({}))


async def _ranked(services, user: str, question: str, speaker_k: int, k: int = 20) -> list:
    """The dense turns' ranking: the ``k`` nearest, and the speaker turns joined to it."""
    settings = Settings().override(recall_k=3, speaker_turns=speaker_k)
    ctx = Context(user_id=user)
    found = await search_channels(
        services, Search(settings, ctx.user_id, question, k), _query(), CHANNELS
    )
    return [h.record for h in rankings(found)["dense_turns"]]


async def _dense(services, user: str, question: str, speaker_k: int, k: int = 20) -> list[str]:
    return [h.content for h in await _ranked(services, user, question, speaker_k, k)]


async def _speaker_rows(services, user: str, words: list[str], speaker_k: int) -> list[dict]:
    statements = services.episodes.speaker_statements(user, _query(), 20, words, speaker_k)
    return [] if statements is None else await services.db.run(*statements)


@pytest.fixture
async def user(services, user_id) -> str:
    await _seed(services, user_id)
    return user_id


async def test_the_named_speakers_nearest_turns_join_the_dense_list(services, user):
    plain = await _dense(services, user, QUERY, 0)
    assert len(plain) == 20 and all(c.startswith("Caroline: ") for c in plain)
    named = await _dense(services, user, QUERY, 2)
    # the 20 nearest of everyone's, then Melanie's 2 nearest: her answer first
    assert named[:20] == plain
    assert named[20:] == [f"Melanie: {TARGET}", "Melanie: Far 0."]


async def test_a_query_that_names_nobody_who_spoke_searches_as_before(services, user):
    plain = await _dense(services, user, QUERY, 0)
    assert await _dense(services, user, "What did Oscar read?", 40) == plain
    assert await _dense(services, user, QUERY.replace("Melanie", "melanie"), 40) == plain


async def test_a_turn_already_among_the_nearest_is_not_returned_twice(services, user):
    everyone = await _dense(services, user, QUERY, 40, k=60)
    assert len(everyone) == len(set(everyone)) == 51  # every turn of the user, once
    assert everyone.index(f"Melanie: {TARGET}") == 25


async def test_another_users_turns_by_the_same_speaker_are_never_returned(services, user_id):
    mine, other = f"{user_id}-a", f"{user_id}-b"
    await _seed(services, mine)
    await _seed(services, other, target_cos=0.99)  # the other user's answer is nearer
    found = await _ranked(services, mine, QUERY, 40)
    rows = await services.db.query(
        f'SELECT thread_id, message_id FROM "{services.episodes.vector_table}" WHERE user_id = :u',
        {"u": mine},
    )  # the two users' message ids are alike, their thread ids are not
    assert {(h.thread_id, h.message_id) for h in found} <= {
        (r["thread_id"], r["message_id"]) for r in rows
    }
    assert len(found) == 46  # 20 nearest + Melanie's 26 turns, all of them mine


async def test_many_query_words_are_capped(services, user):
    words = [f"w{i}" for i in range(MAX_SPEAKER_WORDS + 50)] + ["melanie"]
    # "melanie" is past the cap: tried as no speaker, so the scan finds nothing
    assert await _speaker_rows(services, user, words, 2) == []
    assert len(await _speaker_rows(services, user, ["melanie", *words], 2)) == 2


@pytest.mark.parametrize("speaker_turns", [0, 40])
async def test_recall_brings_the_named_speakers_answer_only_with_speaker_turns(
    services, user, speaker_turns
):
    settings = Settings().override(speaker_turns=speaker_turns, recall_candidate_tokens=1000)
    ctx = Context(user_id=user)
    found = await retrieve(_asking(services), settings, ctx, QUERY, "no-window", touch=False)
    texts = [m["text"] for m in found.items]
    # depth 20: the dense list holds Caroline's turns, the keyword list Melanie's short ones
    assert (f"Melanie: {TARGET}" in texts) is (speaker_turns > 0), texts


async def test_recall_searches_a_speakers_turns_only_for_a_name_the_query_capitalises(
    services, user
):
    settings = Settings().override(speaker_turns=40, recall_candidate_tokens=1000)
    ctx = Context(user_id=user)
    lower = QUERY.replace("Melanie", "melanie")
    found = await retrieve(_asking(services), settings, ctx, lower, "no-window", touch=False)
    assert f"Melanie: {TARGET}" not in [m["text"] for m in found.items]


async def test_a_database_made_before_gets_the_speaker_index(services):
    table = services.episodes.vector_table
    exists = "SELECT count(*) AS n FROM pg_indexes WHERE tablename = :t AND indexname = :i"
    params = {"t": table, "i": f"{table}_speaker"}
    assert (await services.db.query(exists, params))[0]["n"] == 1
    before = await turns_table_record(services)
    async with without_component(services, f"{table}_speaker", f'DROP INDEX "{table}_speaker"'):
        pass
    assert (await services.db.query(exists, params))[0]["n"] == 1
    # only the index was made: the table's own DDL (and its statistics' recount) did not
    # run (its record would have been written anew)
    assert await turns_table_record(services) == before


async def test_no_speaker_scan_runs_when_the_query_names_nobody_who_spoke(services, user):
    async def plan(question: str) -> str:
        *options, (sql, params) = services.episodes.speaker_statements(
            user, _query(), 20, sorted(named_in(question)), 40
        )
        rows = await services.db.run(*options, ("EXPLAIN (ANALYZE, COSTS OFF) " + sql, params))
        return "\n".join(next(iter(r.values())) for r in rows)

    # the probe of the speaker index finds no turn by "oscar": the scan is never executed
    assert "never executed" in await plan("What did Oscar read?")
    assert "never executed" not in await plan(QUERY)


async def test_a_name_with_letters_beyond_ascii_is_found(services, user_id):
    """The embedded server lowers every letter (builtin ``C.UTF-8``); `speaker_names` also
    tries the ASCII-only form for a server whose locale is plain ``C`` (a unit test)."""
    await _seed(services, user_id, name="Émile")
    question = "What did Émile read as a kid?"
    found = await _dense(services, user_id, question, 2)
    assert found[20] == f"Émile: {TARGET}"


@pytest.mark.parametrize("speaker_turns", [0, 40])
async def test_a_turn_of_the_graph_recalls_the_named_speakers_answer_with_speaker_turns(
    graph_for, make_context, services, speaker_turns
):
    """Through the compiled graph: the turns are planted around the real embedding of the
    question, which the graph embeds itself."""
    settings = Settings().override(speaker_turns=speaker_turns, recall_candidate_tokens=1000)
    ctx = make_context()
    agent = graph_for(settings)
    await _seed(services, ctx.user_id, around=await services.embeddings.aembed_query(QUERY))
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", QUERY)
    texts = [m["text"] for m in state["recalled"] if m["score"] is not None]  # scored
    assert len(texts) > 20  # the recall ran and filled the prompt
    assert (f"Melanie: {TARGET}" in texts) is (speaker_turns > 0), texts


async def test_the_speaker_query_shares_the_dense_searchs_connection(services, user, monkeypatch):
    """As one statement did before: three connections, not four, and one round trip."""
    sent: list[list] = []
    pipeline = services.db.pipeline

    async def recorded(*statements):
        sent.append([s for s in statements if not isinstance(s, str)])  # the queries
        return await pipeline(*statements)

    monkeypatch.setattr(services.db, "pipeline", recorded)
    assert len(await _ranked(services, user, QUERY, 40)) == 46
    assert sorted(len(queries) for queries in sent) == [1, 1, 2]
    (dense, speaker), *_ = [q for q in sent if len(q) == 2]
    assert "split_part" not in dense[0] and "split_part" in speaker[0]
