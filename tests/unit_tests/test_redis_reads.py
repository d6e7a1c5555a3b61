"""A shared Redis pipeline's replies: each store raises only its own commands' errors."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from memory_graph_agent.storage.redis_reads import from_reply, split_replies


def test_the_borrowed_replies_keep_their_errors_for_their_readers():
    wrong = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    own, borrowed = split_replies([True, "u1", {"a": "1"}, wrong], 2)
    assert own == [True, "u1"]
    assert borrowed == [{"a": "1"}, wrong]
    assert from_reply(borrowed[0]) == {"a": "1"}
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        from_reply(borrowed[1])


def test_an_error_among_the_carriers_own_replies_is_raised():
    wrong = ResponseError("WRONGTYPE")
    with pytest.raises(ResponseError):
        split_replies([True, wrong, "summary"], 1)


def test_nothing_borrowed():
    assert split_replies([1, 2], 0) == ([1, 2], [])
