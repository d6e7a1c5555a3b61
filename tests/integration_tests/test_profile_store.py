"""ProfileStore on the real Redis (no mocks): facts, history, expiry, pins, concurrency."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memory_graph_agent.core.ids import InvalidIdError
from memory_graph_agent.settings import parse_ttl_policy
from memory_graph_agent.storage.profile import Fact, FactChange, normalize_fact_key
from memory_graph_agent.storage.window import parse_ts

DAY = 86400


def policy(text: str = "0.9:never,0.5:30,0:7"):
    """A ``ttl_days(importance, pinned)`` like `Context.ttl_days`, for a policy string."""
    rules = parse_ttl_policy(text)

    def ttl_days(importance: float, pinned: bool = False) -> float | None:
        if pinned:
            return None
        return next((days for t, days in rules if importance >= t), rules[-1][1])

    return ttl_days


TTL = policy()
BLINK = policy("0.9:never,0:0.000005")  # below 0.9 a fact lives ~0.4 s


def values(profile: dict) -> dict[str, str]:
    return {k: v["value"] for k, v in profile.items()}


async def test_upsert_get_round_trip_ordered_by_importance(services, user_id):
    changes = await services.profile.upsert(
        user_id,
        [
            Fact("city", "Berlin", 0.8, source_ids=["m1"]),
            Fact("name", "Zhang San", 0.95, source_ids=["m1", "m2"]),
            Fact("hobby", "chess", 0.55),
        ],
        ttl_days=TTL,
    )
    assert changes == [
        FactChange("city", "created", None, "Berlin", 0.8),
        FactChange("name", "created", None, "Zhang San", 0.95),
        FactChange("hobby", "created", None, "chess", 0.55),
    ]
    profile = await services.profile.get(user_id)
    assert list(profile) == ["name", "city", "hobby"]
    name = profile["name"]
    assert (name["value"], name["importance"], name["source_ids"]) == (
        "Zhang San",
        0.95,
        ["m1", "m2"],
    )
    assert name["pinned"] is False and name["expires_at"] is None  # >= 0.9: never expires
    assert name["valid_from"] == name["updated_at"] and name["updated_at"].startswith("20")
    assert profile["hobby"]["source_ids"] == []
    expires = parse_ts(profile["city"]["expires_at"]) - datetime.now(UTC)
    assert timedelta(days=29.9) < expires <= timedelta(days=30)
    assert await services.profile.history(user_id) == []


async def test_a_changed_value_wins_and_the_old_one_goes_to_history(services, user_id):
    await services.profile.upsert(
        user_id, [Fact("preferred_language", "Java", 0.7, ["s1"])], ttl_days=TTL
    )
    first = (await services.profile.get(user_id))["preferred_language"]
    changes = await services.profile.upsert(
        user_id, [Fact("Preferred Language", "Go", 0.6, ["s2"])], ttl_days=TTL
    )
    assert changes == [FactChange("preferred_language", "updated", "Java", "Go", 0.6)]
    now = (await services.profile.get(user_id))["preferred_language"]
    assert (now["value"], now["importance"], now["source_ids"]) == ("Go", 0.6, ["s2"])
    (old,) = await services.profile.history(user_id, "preferred_language")
    assert old == {
        "key": "preferred_language",
        "value": "Java",
        "importance": 0.7,
        "valid_from": first["valid_from"],
        "valid_to": now["valid_from"],
        "source_ids": ["s1"],
        "reason": "updated",
        "replaced_by": "Go",
    }
    assert parse_ts(old["valid_from"]) <= parse_ts(old["valid_to"])
    (change,) = await services.profile.recent_changes(user_id, since_days=7)
    assert change == {
        "key": "preferred_language",
        "old": "Java",
        "new": "Go",
        "at": old["valid_to"],
    }
    assert await services.profile.history(user_id, "city") == []


async def test_within_one_call_the_last_fact_of_a_key_wins(services, user_id):
    changes = await services.profile.upsert(
        user_id, [Fact("Home City", "Oslo", 0.7), Fact("home_city", "Bergen", 0.7)], ttl_days=TTL
    )
    assert [c.new_value for c in changes] == ["Bergen"]
    assert values(await services.profile.get(user_id)) == {"home_city": "Bergen"}
    assert await services.profile.history(user_id) == []


async def test_same_value_again_strengthens_and_a_replay_changes_nothing(services, user_id):
    await services.profile.upsert(user_id, [Fact("city", "Berlin", 0.6, ["s1"])], ttl_days=TTL)
    before = (await services.profile.get(user_id))["city"]
    changes = await services.profile.upsert(
        user_id, [Fact("city", " berlin ", 0.5, ["s2"])], ttl_days=TTL
    )
    assert changes == [FactChange("city", "strengthened", "Berlin", "Berlin", 0.65)]
    after = (await services.profile.get(user_id))["city"]
    assert after["source_ids"] == ["s1", "s2"] and after["valid_from"] == before["valid_from"]
    assert after["updated_at"] > before["updated_at"]
    # capped at 1; a strengthened fact past 0.9 never expires under the default policy
    await services.profile.upsert(user_id, [Fact("city", "Berlin", 0.98, ["s3"])], ttl_days=TTL)
    top = (await services.profile.get(user_id))["city"]
    assert (top["importance"], top["expires_at"]) == (1.0, None)
    # the same sources again (a retried batch) are not counted twice
    replay = await services.profile.upsert(
        user_id, [Fact("city", "Berlin", 0.98, ["s3"])], ttl_days=TTL
    )
    assert [c.action for c in replay] == ["unchanged"]
    assert (await services.profile.get(user_id))["city"] == top
    assert await services.profile.history(user_id) == []


async def test_a_fact_stated_before_the_stored_one_goes_to_history_only(services, user_id):
    now = datetime.now(UTC)
    await services.profile.upsert(
        user_id, [Fact("city", "Rome", 0.8, ["late"], (now - timedelta(hours=1)).isoformat())], TTL
    )
    said_earlier = (now - timedelta(days=2)).isoformat()
    changes = await services.profile.upsert(
        user_id, [Fact("city", "Paris", 0.8, ["early"], said_earlier)], TTL
    )
    assert [c.action for c in changes] == ["unchanged"]
    assert values(await services.profile.get(user_id)) == {"city": "Rome"}
    (entry,) = await services.profile.history(user_id)
    assert (entry["value"], entry["reason"], entry["valid_from"]) == (
        "Paris",
        "superseded",
        said_earlier,
    )
    assert await services.profile.recent_changes(user_id, 7) == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("name", "name"),
        ("Home City", "home_city"),
        ("  Preferred-Language ", "preferred_language"),
        ("customer.tier!!", "customer_tier"),
        ("__x__", "x"),
        ("a  --  b", "a_b"),
        ("!!!", ""),
        ("k" * 100, "k" * 48),
    ],
)
def test_normalize_fact_key(raw, expected):
    assert normalize_fact_key(raw) == expected


async def test_values_are_stripped_and_capped(services, user_id):
    await services.profile.upsert(
        user_id, [Fact("bio", "  " + "x" * 800 + "  ", 0.5), Fact("imp", "v", 0.123456)], TTL
    )
    profile = await services.profile.get(user_id)
    assert profile["bio"]["value"] == "x" * 500
    assert profile["imp"]["importance"] == 0.123


async def test_expired_facts_are_not_returned_and_move_to_history(services, user_id):
    await services.profile.upsert(
        user_id,
        [Fact("name", "Ada", 0.95), Fact("city", "Oslo", 0.6), Fact("team", "Core", 0.6)],
        ttl_days=BLINK,
    )
    assert await services.profile.set_pinned(user_id, "team", True, BLINK)
    await asyncio.sleep(0.6)
    assert values(await services.profile.get(user_id)) == {"name": "Ada", "team": "Core"}
    (gone,) = await services.profile.history(user_id)
    assert (gone["key"], gone["value"], gone["reason"]) == ("city", "Oslo", "expired")
    assert not await services.redis.hexists(services.profile.key(user_id), "city")
    # the next get finds nothing more to move
    assert values(await services.profile.get(user_id)) == {"name": "Ada", "team": "Core"}
    assert len(await services.profile.history(user_id)) == 1
    # an expired fact is not a thing to pin
    await services.profile.upsert(user_id, [Fact("city", "Oslo", 0.6)], ttl_days=BLINK)
    await asyncio.sleep(0.6)
    assert await services.profile.set_pinned(user_id, "city", True, BLINK) is False


async def test_upserting_over_an_expired_fact_creates_it_anew(services, user_id):
    await services.profile.upsert(user_id, [Fact("city", "Oslo", 0.6)], ttl_days=BLINK)
    await asyncio.sleep(0.6)
    changes = await services.profile.upsert(user_id, [Fact("city", "Oslo", 0.6)], ttl_days=TTL)
    assert [c.action for c in changes] == ["created"]
    assert [e["reason"] for e in await services.profile.history(user_id)] == ["expired"]


async def test_pin_and_unpin(services, user_id):
    assert await services.profile.set_pinned(user_id, "city", True, TTL) is False
    await services.profile.upsert(user_id, [Fact("city", "Oslo", 0.6)], ttl_days=TTL)
    assert await services.profile.set_pinned(user_id, "City", True, TTL) is True
    fact = (await services.profile.get(user_id))["city"]
    assert (fact["pinned"], fact["expires_at"]) == (True, None)
    # a pin is on the key: the new value of a pinned key stays pinned
    await services.profile.upsert(user_id, [Fact("city", "Rome", 0.6)], ttl_days=TTL)
    fact = (await services.profile.get(user_id))["city"]
    assert (fact["value"], fact["pinned"], fact["expires_at"]) == ("Rome", True, None)
    assert await services.profile.set_pinned(user_id, "city", False, TTL) is True
    fact = (await services.profile.get(user_id))["city"]
    assert fact["pinned"] is False
    left = parse_ts(fact["expires_at"]) - datetime.now(UTC)
    assert timedelta(days=29.9) < left <= timedelta(days=30)


async def test_forget_moves_the_value_to_history_and_hides_its_changes(services, user_id):
    assert await services.profile.forget(user_id, "employer") is None
    await services.profile.upsert(user_id, [Fact("employer", "Acme", 0.8, ["s1"])], TTL)
    await services.profile.upsert(user_id, [Fact("employer", "Initech", 0.8, ["s2"])], TTL)
    assert len(await services.profile.recent_changes(user_id, 7)) == 1
    gone = await services.profile.forget(user_id, "Employer")
    assert (gone["key"], gone["value"], gone["source_ids"]) == ("employer", "Initech", ["s2"])
    assert await services.profile.get(user_id) == {}
    history = await services.profile.history(user_id, "employer")
    assert [(e["value"], e["reason"]) for e in history] == [
        ("Acme", "updated"),
        ("Initech", "forgotten"),
    ]
    # a forgotten value never comes back through a change note
    assert await services.profile.recent_changes(user_id, 7) == []
    assert await services.profile.forget(user_id, "employer") is None


async def test_recent_changes_only_within_the_window(services, user_id):
    long_ago = datetime.now(UTC) - timedelta(days=30)
    await services.profile.upsert(
        user_id, [Fact("city", "Oslo", 0.8, [], (long_ago - timedelta(days=1)).isoformat())], TTL
    )
    await services.profile.upsert(
        user_id, [Fact("city", "Rome", 0.8, [], long_ago.isoformat())], TTL
    )
    await services.profile.upsert(user_id, [Fact("city", "Kyiv", 0.8)], TTL)
    assert [(c["old"], c["new"]) for c in await services.profile.recent_changes(user_id, 7)] == [
        ("Rome", "Kyiv")
    ]
    assert len(await services.profile.recent_changes(user_id, 60)) == 2


async def test_concurrent_upserts_of_one_key_lose_no_history(services, user_id):
    await services.profile.upsert(user_id, [Fact("language", "v0", 0.7)], TTL)
    written = [f"v{i}" for i in range(1, 21)]
    # each upsert holds its own pooled connection: the 20 transactions really interleave
    results = await asyncio.gather(
        *(services.profile.upsert(user_id, [Fact("language", v, 0.7)], TTL) for v in written)
    )
    assert all(r[0].action == "updated" for r in results)
    current = (await services.profile.get(user_id))["language"]["value"]
    history = await services.profile.history(user_id, "language")
    assert sorted([e["value"] for e in history] + [current]) == sorted(["v0", *written])
    # one unbroken chain: each value was replaced by the next, with no gap or overlap
    for before, after in zip(history, history[1:], strict=False):
        assert before["replaced_by"] == after["value"]
        assert before["valid_to"] == after["valid_from"]
    assert history[-1]["replaced_by"] == current


async def test_empty_key_or_value_ignored(services, user_id):
    key = services.profile.key(user_id)
    changes = await services.profile.upsert(
        user_id, [Fact("", "x", 0.9), Fact("name", "   ", 0.9), Fact("!!!", "y", 0.9)], TTL
    )
    assert changes == []
    assert await services.profile.get(user_id) == {}
    assert not await services.redis.exists(key)  # nothing written, no empty key
    changes = await services.profile.upsert(
        user_id, [Fact("", "x", 0.9), Fact("name", "Ada", 0.9)], TTL
    )
    assert [c.key for c in changes] == ["name"]


async def test_a_legacy_profile_is_read_and_its_hash_ttl_dropped_on_write(services, user_id):
    key = services.profile.key(user_id)
    legacy = {"value": "Ada", "importance": 0.9, "updated_at": "2026-01-01T00:00:00+00:00"}
    await services.redis.hset(key, "name", json.dumps(legacy))
    await services.redis.expire(key, 3 * DAY)  # the old whole-hash TTL
    fact = (await services.profile.get(user_id))["name"]
    assert fact["valid_from"] == legacy["updated_at"] and fact["pinned"] is False
    await services.profile.upsert(user_id, [Fact("city", "Oslo", 0.6)], TTL)
    assert await services.redis.ttl(key) == -1  # facts now expire one by one


async def test_users_are_isolated(services, user_id):
    other = f"u-{uuid.uuid4().hex[:10]}"
    await services.profile.upsert(user_id, [Fact("name", "Ada", 0.9)], TTL)
    await services.profile.upsert(other, [Fact("name", "Bob", 0.9), Fact("city", "Kyiv", 0.8)], TTL)
    await services.profile.upsert(other, [Fact("name", "Bo", 0.9)], TTL)
    assert values(await services.profile.get(user_id)) == {"name": "Ada"}
    assert values(await services.profile.get(other)) == {"name": "Bo", "city": "Kyiv"}
    assert await services.profile.history(user_id) == []
    assert await services.profile.get(f"u-{uuid.uuid4().hex[:10]}") == {}
    assert services.profile.history_key(other).endswith(f":profile_history:{other}")


async def test_stored_format_is_json_per_field(services, user_id):
    await services.profile.upsert(user_id, [Fact("name", "Zoë", 0.9)], TTL)
    raw = await services.redis.hget(services.profile.key(user_id), "name")
    data = json.loads(raw)
    assert set(data) == {
        "value",
        "importance",
        "updated_at",
        "valid_from",
        "source_ids",
        "pinned",
        "expires_at",
    }
    assert "Zoë" in raw  # not ascii-escaped


@pytest.mark.parametrize("bad", ["a:*", "*", "../x", "", "a b"])
async def test_hostile_user_ids_rejected(services, bad):
    calls = [
        services.profile.get(bad),
        services.profile.upsert(bad, [Fact("name", "x", 0.9)], TTL),
        services.profile.history(bad),
        services.profile.recent_changes(bad, 7),
        services.profile.forget(bad, "name"),
        services.profile.set_pinned(bad, "name", True, TTL),
    ]
    for call in calls:
        with pytest.raises(InvalidIdError):
            await call


def test_normalized_key_never_ends_with_underscore_after_truncation():
    key = normalize_fact_key("a" * 47 + " b")
    assert len(key) <= 48 and not key.endswith("_")


async def test_a_forgotten_fact_is_not_brought_back_by_a_late_batch(services, user_id):
    said = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    store = services.profile
    await store.upsert(user_id, [Fact("city", "Paris", 0.8, ["s1"], said)], policy())
    assert (await store.forget(user_id, "city"))["value"] == "Paris"
    # the batch that held "I live in Paris" is summarized only now (stated before forget)
    late = await store.upsert(user_id, [Fact("city", "Paris", 0.8, ["s2"], said)], policy())
    assert late == [] and "city" not in await store.get(user_id)
    # stating it again afterwards is a new fact
    again = await store.upsert(user_id, [Fact("city", "Lyon", 0.8, ["s3"])], policy())
    assert [(c.key, c.action, c.new_value) for c in again] == [("city", "created", "Lyon")]
    assert store.forgotten_key(user_id).endswith(f":profile_forgotten:{user_id}")


async def test_one_round_trip_read_is_get_then_recent_changes(services, user_id):
    """`get_with_changes` (a turn's start) is `get` then `recent_changes`, expiry included."""
    store = services.profile
    await store.upsert(user_id, [Fact("city", "Berlin", 0.95), Fact("pet", "cat", 0.5)], BLINK)
    await store.upsert(user_id, [Fact("city", "Paris", 0.95), Fact("pet", "dog", 0.5)], BLINK)
    fresh = await store.get_with_changes(user_id, 1)
    assert [c["key"] for c in fresh[1]] == ["city", "pet"]
    assert fresh == (await store.get(user_id), await store.recent_changes(user_id, 1))

    await asyncio.sleep(0.6)  # the pet fact expires: its change note goes with it
    profile, changes = await store.get_with_changes(user_id, 1)
    assert values(profile) == {"city": "Paris"}
    assert [c["key"] for c in changes] == ["city"]
    assert (profile, changes) == (await store.get(user_id), await store.recent_changes(user_id, 1))
