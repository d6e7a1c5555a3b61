"""MemoryStore on the real Postgres + pgvector (no mocks)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_graph_agent.core.ids import InvalidIdError
from memory_graph_agent.storage.memories import Memory, memory_id

DIM = 384


def _uid() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"


def unit(v) -> list[float]:
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).tolist()


def summary(user: str, text: str, sources: list[str] | None = None, **kw) -> Memory:
    return Memory(
        user_id=user,
        kind=kw.pop("kind", "summary"),
        text=text,
        importance=kw.pop("importance", 0.5),
        source_ids=sources or [uuid.uuid4().hex[:8]],
        thread_id=kw.pop("thread_id", "t1"),
        **kw,
    )


async def test_search_is_filtered_by_user(services, user_id):
    other = _uid()
    query = "What does my sister do for a living?"
    texts = {
        user_id: "The user's sister Anna works as a marine biologist in Oslo.",
        other: "What does my sister do for a living? She is a marine biologist.",  # nearer
    }
    for owner, text in texts.items():
        await services.memories.add(summary(owner, text))
    await services.memories.add(summary(user_id, "The user likes sourdough bread."))
    vec = services.embeddings.embed_query(query)
    hits = await services.memories.search(user_id, vec, k=10)
    assert hits and all(h.user_id == user_id for h in hits)
    assert texts[other] not in [h.text for h in hits]
    assert hits[0].text == texts[user_id]
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    other_hits = await services.memories.search(other, vec, k=10)
    assert [h.text for h in other_hits] == [texts[other]]
    assert other_hits[0].similarity > hits[0].similarity


async def test_search_returns_provenance_fields(services, user_id):
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    mem = summary(
        user_id,
        "The user plays the cello.",
        ["m1", "m2"],
        thread_id="t-x",
        importance=0.7,
        created_at=created,
    )
    await services.memories.add(mem)
    (hit,) = await services.memories.search(user_id, services.embeddings.embed_query("cello"), k=3)
    assert hit.id == mem.id
    assert (hit.kind, hit.thread_id, hit.importance, hit.source_ids) == (
        "summary",
        "t-x",
        0.7,
        ["m1", "m2"],
    )
    assert hit.created_at == created
    d = hit.as_dict()
    assert d["id"] == mem.id and d["created_at"].startswith("2026-01-02")
    assert 0.0 <= d["similarity"] <= 1.0


async def test_deterministic_id_makes_re_add_an_upsert(services, user_id):
    first = summary(user_id, "The user lives in Lisbon.", ["a", "b"])
    retry = summary(user_id, "The user lives in Lisbon (retry).", ["a", "b"])
    assert first.id == retry.id == memory_id(user_id, "t1", "summary", ["a", "b"])
    assert await services.memories.add(first) == first.id
    assert await services.memories.add(retry) == first.id
    assert await services.memories.add(retry) == first.id
    assert await services.memories.count(user_id) == {"summary": 1}
    (stored,) = await services.memories.list(user_id)
    assert stored.text == "The user lives in Lisbon (retry)."
    # a different source set, kind, thread or user is a different row
    assert memory_id(user_id, "t1", "summary", ["a"]) != first.id
    assert memory_id(user_id, "t1", "reflection", ["a", "b"]) != first.id
    assert memory_id(user_id, "t2", "summary", ["a", "b"]) != first.id
    assert memory_id(_uid(), "t1", "summary", ["a", "b"]) != first.id


async def test_min_similarity_filters_hits(services, user_id):
    await services.memories.add(summary(user_id, "The user is allergic to peanuts."))
    await services.memories.add(summary(user_id, "Quarterly tax filing deadlines in Norway."))
    vec = services.embeddings.embed_query("Is the user allergic to peanuts?")
    # unrelated MiniLM texts can have a (slightly) negative cosine: -1 disables the filter
    everything = await services.memories.search(user_id, vec, k=10, min_similarity=-1.0)
    assert len(everything) == 2
    top, low = everything
    threshold = (top.similarity + low.similarity) / 2
    kept = await services.memories.search(user_id, vec, k=10, min_similarity=threshold)
    assert [m.text for m in kept] == [top.text]
    assert all(m.similarity >= threshold for m in kept)
    assert await services.memories.search(user_id, vec, k=10, min_similarity=0.999) == []


async def test_touch_increments_access_count(services, user_id):
    a = summary(user_id, "memory a")
    b = summary(user_id, "memory b")
    for m in (a, b):
        await services.memories.add(m)
    await services.memories.touch(user_id, [a.id])
    await services.memories.touch(user_id, [a.id, b.id])
    await services.memories.touch(user_id, [])
    by_id = {m.id: m for m in await services.memories.list(user_id)}
    assert by_id[a.id].access_count == 2 and by_id[b.id].access_count == 1
    assert by_id[a.id].last_accessed_at is not None
    # touching under another user id changes nothing
    await services.memories.touch(_uid(), [a.id])
    by_id = {m.id: m for m in await services.memories.list(user_id)}
    assert by_id[a.id].access_count == 2


async def test_summaries_since_reflection(services, user_id):
    other = _uid()
    assert await services.memories.summaries_since_reflection(user_id) == []
    s1, s2 = summary(user_id, "s1"), summary(user_id, "s2")
    for m in (s1, s2):
        await services.memories.add(m)
    assert [m.text for m in await services.memories.summaries_since_reflection(user_id)] == [
        "s1",
        "s2",
    ]
    await services.memories.add(
        Memory(
            user_id=user_id, kind="reflection", text="r1", importance=0.9, source_ids=[s1.id, s2.id]
        )
    )
    assert await services.memories.summaries_since_reflection(user_id) == []
    # created_at in the past must not matter: ordering is by storage time
    s3 = summary(user_id, "s3", created_at=datetime.now(UTC) - timedelta(days=365))
    s4 = summary(user_id, "s4")
    for m in (s3, s4):
        await services.memories.add(m)
    # another user's summaries and reflections don't count
    await services.memories.add(summary(other, "o1"))
    await services.memories.add(
        Memory(user_id=other, kind="reflection", text="ro", importance=0.9, source_ids=["x"])
    )
    since = await services.memories.summaries_since_reflection(user_id)
    assert [m.text for m in since] == ["s3", "s4"]
    assert all(m.kind == "summary" for m in since)
    assert [m.text for m in await services.memories.summaries_since_reflection(other)] == []
    # re-storing an older summary (idempotent retry) doesn't move it past the reflection
    await services.memories.add(s1)
    assert [m.text for m in await services.memories.summaries_since_reflection(user_id)] == [
        "s3",
        "s4",
    ]


async def test_list_and_count_per_kind(services, user_id):
    await services.memories.add(summary(user_id, "s1"))
    await services.memories.add(summary(user_id, "s2"))
    await services.memories.add(
        Memory(user_id=user_id, kind="reflection", text="r", importance=0.9, source_ids=["z"])
    )
    assert await services.memories.count(user_id) == {"summary": 2, "reflection": 1}
    assert [m.text for m in await services.memories.list(user_id)] == ["r", "s2", "s1"]
    assert [m.text for m in await services.memories.list(user_id, kind="summary", limit=1)] == [
        "s2"
    ]
    assert await services.memories.count(_uid()) == {}


async def _crowd(services, rng, query, n: int = 200, users: int = 20) -> list[str]:
    """n memories of other users, all much nearer ``query`` than anything else."""
    others = [_uid() for _ in range(users)]
    crowd = [summary(others[i % users], f"crowd {i}") for i in range(n)]
    vecs = [unit(np.asarray(query) + 0.05 * rng.normal(size=DIM)) for _ in crowd]
    await asyncio.gather(*(services.memories.add(m, v) for m, v in zip(crowd, vecs, strict=True)))
    return others


@pytest.mark.parametrize("correlated", [True, False])
async def test_user_with_k_memories_among_many_gets_k(services, user_id, correlated):
    rng = np.random.default_rng(7 if correlated else 8)
    query = np.asarray(unit(rng.normal(size=DIM)))
    others = await _crowd(services, rng, query.tolist())
    mine = [summary(user_id, f"mine {i}") for i in range(5)]
    if correlated:  # clearly positive similarity, far below the crowd's
        mine_vecs = [unit(0.3 * query + rng.normal(size=DIM) / np.sqrt(DIM)) for _ in mine]
    else:  # random unit vectors: cosine around 0, often negative
        mine_vecs = [unit(rng.normal(size=DIM)) for _ in mine]
    await asyncio.gather(
        *(services.memories.add(m, v) for m, v in zip(mine, mine_vecs, strict=True))
    )
    floor = 0.0 if correlated else -1.0
    hits = await services.memories.search(user_id, query.tolist(), k=5, min_similarity=floor)
    assert sorted(h.text for h in hits) == sorted(m.text for m in mine)
    assert all(h.user_id == user_id for h in hits)
    hits = await services.memories.search(user_id, query.tolist(), k=50, min_similarity=floor)
    assert len(hits) == 5
    assert (
        len(await services.memories.search(user_id, query.tolist(), k=3, min_similarity=floor)) == 3
    )
    assert len(await services.memories.search(others[0], query.tolist(), k=5)) == 5


async def test_default_search_is_plain_top_k(services, user_id):
    rng = np.random.default_rng(9)
    mine = [summary(user_id, f"mine {i}") for i in range(5)]
    for m in mine:
        await services.memories.add(m, unit(rng.normal(size=DIM)))
    query = unit(rng.normal(size=DIM))
    assert len(await services.memories.search(user_id, query, k=5)) == 5


async def test_real_embedding_batch_vectors_are_normalised(services, user_id):
    texts = [f"The user mentioned topic number {i}." for i in range(8)]
    vecs = services.embeddings.embed_documents(texts)
    assert len(vecs) == 8 and all(len(v) == DIM for v in vecs)
    assert all(abs(np.linalg.norm(v) - 1.0) < 1e-3 for v in vecs)
    for text, vec in zip(texts, vecs, strict=True):
        await services.memories.add(summary(user_id, text), vec)
    (hit,) = await services.memories.search(user_id, vecs[3], k=1)
    assert hit.text == texts[3] and hit.similarity == pytest.approx(1.0, abs=1e-3)


async def test_invalid_user_ids_rejected(services):
    vec = [0.0] * (DIM - 1) + [1.0]
    with pytest.raises(InvalidIdError):
        await services.memories.search("'; DROP TABLE x;--", vec, k=1)
    with pytest.raises(InvalidIdError):
        Memory(user_id="a:*", kind="summary", text="x", importance=0.5, source_ids=[])
    for call in (
        services.memories.list("*"),
        services.memories.count("../x"),
        services.memories.summaries_since_reflection(""),
    ):
        with pytest.raises(InvalidIdError):
            await call


async def test_re_add_keeps_access_statistics(services, user_id):
    m = summary(user_id, "The user keeps bees.", ["bee"])
    await services.memories.add(m)
    await services.memories.touch(user_id, [m.id])
    await services.memories.add(m)  # e.g. consolidate replayed after a lost ack
    (stored,) = await services.memories.list(user_id)
    assert stored.access_count == 1


# ---------------------------------------------------------------- lifecycle


async def test_search_and_reflection_progress_skip_superseded_and_expired(services, user_id):
    live = summary(user_id, "The user grows tomatoes on the balcony.", importance=0.5)
    gone = summary(user_id, "The user grows tomatoes on a balcony.", importance=0.7)
    stale = summary(
        user_id,
        "The user grows tomatoes in pots.",
        importance=0.9,
        expires_at=datetime.now(UTC) - timedelta(minutes=1),
    )
    for m in (live, gone, stale):
        await services.memories.add(m)
    # the expired one counts for nothing already
    assert (await services.memories.reflection_progress(user_id))[1] == pytest.approx(1.2)
    assert await services.memories.supersede(user_id, [gone.id], live.id) == 1
    vec = services.embeddings.embed_query("tomatoes")
    assert [m.id for m in await services.memories.search(user_id, vec, k=10)] == [live.id]
    count, importance = await services.memories.reflection_progress(user_id)
    assert count == 1 and importance == pytest.approx(0.5)
    assert [m.id for m in await services.memories.summaries_since_reflection(user_id)] == [live.id]
    assert len(await services.memories.list(user_id)) == 3  # every status by default
    assert [m.id for m in await services.memories.list(user_id, active_only=True)] == [live.id]
    (row,) = await services.memories.get(user_id, [gone.id])
    assert (row.status, row.superseded_by) == ("superseded", live.id)
    assert [m.id for m in await services.memories.expired(user_id)] == [stale.id]


async def test_similar_by_kind_and_excluding_ids(services, user_id):
    s = summary(user_id, "The user sings in a choir.")
    r = summary(user_id, "The user loves choir music.", kind="reflection")
    for m in (s, r):
        await services.memories.add(m)
    vec = services.embeddings.embed_query("choir")
    found = await services.memories.similar(user_id, vec, 5, 0.0, kind="summary")
    assert [m.id for m in found] == [s.id]
    found = await services.memories.similar(user_id, vec, 5, 0.0, exclude_ids=[s.id])
    assert [m.id for m in found] == [r.id]
    assert await services.memories.similar(user_id, vec, 5, 0.99) == []


async def test_strengthen_caps_at_one_and_pins_are_never_superseded(services, user_id):
    m = summary(user_id, "The user runs marathons.", importance=0.95)
    pinned = summary(user_id, "The user's passport number ends in 42.", pinned=True)
    for x in (m, pinned):
        await services.memories.add(x)
    assert await services.memories.strengthen(user_id, m.id, 0.1) == 1.0
    assert (
        await services.memories.strengthen(user_id, "00000000-0000-0000-0000-000000000000", 0.1)
        is None
    )
    assert await services.memories.supersede(user_id, [pinned.id], m.id) == 0
    by_id = {x.id: x for x in await services.memories.list(user_id)}
    assert by_id[m.id].access_count == 1 and by_id[m.id].last_accessed_at is not None
    assert by_id[pinned.id].status == "active"


async def test_set_pinned_delete_and_users(services, user_id):
    m = summary(user_id, "The user keeps a diary.", expires_at=datetime.now(UTC) - timedelta(1))
    await services.memories.add(m)
    assert [x.id for x in await services.memories.expired(user_id)] == [m.id]
    assert await services.memories.set_pinned(user_id, m.id, True, None) is True
    assert await services.memories.expired(user_id) == []
    assert await services.memories.set_pinned(_uid(), m.id, True, None) is False  # not theirs
    later = datetime.now(UTC) + timedelta(days=7)
    assert await services.memories.set_pinned(user_id, m.id, False, later) is True
    (row,) = await services.memories.list(user_id)
    assert not row.pinned and row.expires_at == later
    # a replayed write keeps the pin
    await services.memories.set_pinned(user_id, m.id, True, None)
    await services.memories.add(m)
    (row,) = await services.memories.list(user_id)
    assert row.pinned and row.expires_at is None
    assert user_id in await services.memories.users()
    assert await services.memories.delete(_uid(), [m.id]) == 0
    assert await services.memories.delete(user_id, [m.id]) == 1
    assert await services.memories.list(user_id) == []


async def test_evictable_and_duplicate_pairs(services, user_id):
    old = datetime.now(UTC) - timedelta(days=400)
    trivia = summary(user_id, "Weather small talk.", importance=0.05, created_at=old)
    recent = summary(user_id, "More weather small talk.", importance=0.05)
    a = summary(user_id, "The user adopted a grey cat named Miso.", importance=0.5)
    b = summary(user_id, "The user adopted a grey cat named Miso.", importance=0.5)
    r = summary(user_id, "The user adopted a grey cat named Miso.", kind="reflection")
    for m in (trivia, recent, a, b, r):
        await services.memories.add(m)
    evictable = await services.memories.evictable(user_id, 0.1, 180)
    assert [m.id for m in evictable] == [trivia.id]
    pairs = await services.memories.duplicate_pairs(user_id, 0.95)
    assert [tuple(sorted((x, y))) for x, y, _ in pairs] == [tuple(sorted((a.id, b.id)))]
    assert pairs[0][2] == pytest.approx(1.0)  # one kind only: the reflection is no pair


async def test_a_replayed_write_never_revives_or_weakens_a_memory(services, user_id):
    # consolidate stored S, its ack was lost; meanwhile S was merged away and a duplicate
    # strengthened it; the re-claimed batch writes S again with its original metadata
    s = summary(user_id, "The user sails on weekends.", ["sail"], importance=0.5)
    s.expires_at = datetime.now(UTC) + timedelta(days=30)
    await services.memories.add(s)
    newer = summary(user_id, "The user sails every weekend on a small boat.", ["boat"])
    await services.memories.add(newer)
    year = datetime.now(UTC) + timedelta(days=365)
    await services.memories.strengthen(user_id, s.id, 0.2, expires_at=year)
    assert await services.memories.supersede(user_id, [s.id], newer.id) == 1
    replay = summary(user_id, "The user sails on weekends.", ["sail"], importance=0.5)
    replay.expires_at = datetime.now(UTC) + timedelta(days=30)
    await services.memories.add(replay)
    (row,) = await services.memories.get(user_id, [s.id])
    assert (row.status, row.superseded_by) == ("superseded", newer.id)
    assert row.importance == pytest.approx(0.7) and row.expires_at == year


async def test_maintenance_never_removes_superseded_provenance(services, user_id):
    old = datetime.now(UTC) - timedelta(days=400)
    keep = summary(user_id, "The user learned to knit.", ["k1"], importance=0.05, created_at=old)
    keep.expires_at = datetime.now(UTC) - timedelta(days=1)
    newer = summary(user_id, "The user knits scarves.", ["k2"])
    for m in (keep, newer):
        await services.memories.add(m)
    await services.memories.supersede(user_id, [keep.id], newer.id)
    assert await services.memories.expired(user_id) == []
    assert await services.memories.evictable(user_id, 0.1, 180) == []
