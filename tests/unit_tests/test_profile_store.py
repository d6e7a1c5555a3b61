"""ProfileStore on the real Redis (no mocks)."""

from __future__ import annotations

import json
import uuid

import pytest

from stores.ids import InvalidIdError
from stores.profile import Fact, normalize_fact_key

DAY = 86400


async def test_upsert_get_round_trip_ordered_by_importance(services, user_id):
    written = await services.profile.upsert(
        user_id,
        [
            Fact("city", "Berlin", 0.8, source_ids=["m1"]),
            Fact("name", "Zhang San", 0.95, source_ids=["m1", "m2"]),
            Fact("hobby", "chess", 0.55),
        ],
        ttl_days=30,
    )
    assert sorted(written) == ["city", "hobby", "name"]
    profile = await services.profile.get(user_id)
    assert list(profile) == ["name", "city", "hobby"]
    assert profile["name"]["value"] == "Zhang San"
    assert profile["name"]["importance"] == 0.95
    assert profile["name"]["source_ids"] == ["m1", "m2"]
    assert profile["hobby"]["source_ids"] == []
    assert profile["city"]["updated_at"].startswith("20")


async def test_newer_value_of_a_key_wins(services, user_id):
    await services.profile.upsert(user_id, [Fact("city", "Berlin", 0.8)], ttl_days=1)
    await services.profile.upsert(user_id, [Fact("City", "Lisbon", 0.6)], ttl_days=1)
    profile = await services.profile.get(user_id)
    assert list(profile) == ["city"]
    assert (profile["city"]["value"], profile["city"]["importance"]) == ("Lisbon", 0.6)
    # within one call the last fact of a key wins
    await services.profile.upsert(
        user_id, [Fact("Home City", "Oslo", 0.7), Fact("home_city", "Bergen", 0.7)], ttl_days=1
    )
    assert (await services.profile.get(user_id))["home_city"]["value"] == "Bergen"


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


async def test_keys_are_normalised_on_write(services, user_id):
    written = await services.profile.upsert(
        user_id, [Fact("  Preferred Language ", "Go", 0.7)], ttl_days=1
    )
    assert written == ["preferred_language"]
    assert (await services.profile.get(user_id))["preferred_language"]["value"] == "Go"


async def test_values_are_stripped_and_capped(services, user_id):
    await services.profile.upsert(
        user_id, [Fact("bio", "  " + "x" * 800 + "  ", 0.5), Fact("imp", "v", 0.123456)], ttl_days=1
    )
    profile = await services.profile.get(user_id)
    assert profile["bio"]["value"] == "x" * 500
    assert profile["imp"]["importance"] == 0.123


async def test_ttl_is_set_and_refreshed_on_write(services, user_id):
    key = services.profile.key(user_id)
    await services.profile.upsert(user_id, [Fact("name", "Ada", 0.9)], ttl_days=3)
    ttl = await services.redis.ttl(key)
    assert 3 * DAY - 5 <= ttl <= 3 * DAY
    await services.redis.expire(key, 100)
    await services.profile.upsert(user_id, [Fact("city", "Paris", 0.8)], ttl_days=3)
    ttl = await services.redis.ttl(key)
    assert 3 * DAY - 5 <= ttl <= 3 * DAY
    # a different ttl_days on a later write replaces the expiry
    await services.profile.upsert(user_id, [Fact("city", "Rome", 0.8)], ttl_days=1)
    assert DAY - 5 <= await services.redis.ttl(key) <= DAY


async def test_empty_key_or_value_ignored(services, user_id):
    key = services.profile.key(user_id)
    written = await services.profile.upsert(
        user_id, [Fact("", "x", 0.9), Fact("name", "   ", 0.9), Fact("!!!", "y", 0.9)], ttl_days=1
    )
    assert written == []
    assert await services.profile.get(user_id) == {}
    assert not await services.redis.exists(key)  # nothing written, no empty key with a TTL
    # an ignored fact beside a good one doesn't block the write
    written = await services.profile.upsert(
        user_id, [Fact("", "x", 0.9), Fact("name", "Ada", 0.9)], ttl_days=1
    )
    assert written == ["name"]
    # an all-ignored write leaves the existing profile and its TTL alone
    await services.redis.expire(key, 100)
    assert await services.profile.upsert(user_id, [Fact("name", "", 0.9)], ttl_days=1) == []
    assert (await services.profile.get(user_id))["name"]["value"] == "Ada"
    assert await services.redis.ttl(key) <= 100


async def test_users_are_isolated(services, user_id):
    other = f"u-{uuid.uuid4().hex[:10]}"
    await services.profile.upsert(user_id, [Fact("name", "Ada", 0.9)], ttl_days=1)
    await services.profile.upsert(
        other, [Fact("name", "Bob", 0.9), Fact("city", "Kyiv", 0.8)], ttl_days=1
    )
    assert {k: v["value"] for k, v in (await services.profile.get(user_id)).items()} == {
        "name": "Ada"
    }
    assert {k: v["value"] for k, v in (await services.profile.get(other)).items()} == {
        "name": "Bob",
        "city": "Kyiv",
    }
    assert await services.profile.get(f"u-{uuid.uuid4().hex[:10]}") == {}


async def test_stored_format_is_json_per_field(services, user_id):
    await services.profile.upsert(user_id, [Fact("name", "Zoë", 0.9)], ttl_days=1)
    raw = await services.redis.hget(services.profile.key(user_id), "name")
    data = json.loads(raw)
    assert set(data) == {"value", "importance", "updated_at", "source_ids"}
    assert "Zoë" in raw  # not ascii-escaped


@pytest.mark.parametrize("bad", ["a:*", "*", "../x", "", "a b"])
async def test_hostile_user_ids_rejected(services, bad):
    with pytest.raises(InvalidIdError):
        await services.profile.get(bad)
    with pytest.raises(InvalidIdError):
        await services.profile.upsert(bad, [Fact("name", "x", 0.9)], ttl_days=1)


def test_normalized_key_never_ends_with_underscore_after_truncation():
    key = normalize_fact_key("a" * 47 + " b")
    assert len(key) <= 48 and not key.endswith("_")
