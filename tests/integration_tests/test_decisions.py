"""DecisionLog on the real Postgres: first decision wins, per user, newest first."""

from __future__ import annotations

import uuid

import pytest

from memory_graph_agent.core.ids import InvalidIdError
from memory_graph_agent.storage.decisions import Decision


def _decision(user: str, item: str, action: str = "created", **kw) -> Decision:
    return Decision(user_id=user, item_kind="summary", item_id=item, action=action, **kw)


async def test_record_keeps_the_first_decision_of_an_item(services, user_id):
    first, fresh = await services.decisions.record(
        _decision(user_id, "m1", "merged", target_id="m0", detail={"reason": "same trip"})
    )
    assert fresh and first.action == "merged" and first.detail == {"reason": "same trip"}
    again, fresh = await services.decisions.record(_decision(user_id, "m1", "created"))
    assert not fresh and again.action == "merged" and again.target_id == "m0"
    assert (await services.decisions.get(user_id, "summary", "m1")).action == "merged"
    assert await services.decisions.get(user_id, "fact", "m1") is None
    # the same item id of another kind or user is another item
    _, fresh = await services.decisions.record(
        Decision(user_id=user_id, item_kind="fact", item_id="m1", action="created")
    )
    assert fresh


async def test_list_is_per_user_newest_first_and_filtered(services, user_id):
    other = f"u-{uuid.uuid4().hex[:10]}"
    for i, action in enumerate(["created", "discarded", "created"]):
        await services.decisions.record(_decision(user_id, f"m{i}", action))
    await services.decisions.record(_decision(other, "x", "created"))
    assert [d.item_id for d in await services.decisions.list(user_id)] == ["m2", "m1", "m0"]
    assert [d.item_id for d in await services.decisions.list(user_id, limit=1)] == ["m2"]
    assert [d.item_id for d in await services.decisions.list(user_id, action="discarded")] == ["m1"]
    assert await services.decisions.list(user_id, item_kind="fact") == []
    assert [d.item_id for d in await services.decisions.list(other)] == ["x"]
    with pytest.raises(InvalidIdError):
        await services.decisions.list("a:*")
