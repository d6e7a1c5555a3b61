"""`turns.batch_cut`: a summary batch taken from the durable queue is whole turns."""

from __future__ import annotations

from memory_graph_agent.core.turns import batch_cut, turn_starts
from tests.builders import msg, tc, tool_conversation


def tool_turn(n: str) -> list:
    """``[human, ai(tool_calls), tool, ai]``."""
    call = msg("ai", f"call{n}", tool_calls=[tc(f"c{n}")])
    return [msg("human", f"h{n}"), call, msg("tool", f"r{n}", tool_call_id=f"c{n}"), msg("ai")]


def plain_turn(n: str) -> list:
    return [msg("human", f"h{n}"), msg("ai", f"a{n}")]


def test_a_batch_extends_to_the_end_of_the_turn_it_cuts_into():
    queue = tool_turn("0") + tool_turn("1")
    assert batch_cut(queue, 2, 50, ends_turn=True) == 4  # not [human, ai-call]
    assert batch_cut(plain_turn("0") + tool_turn("1"), 3, 50, ends_turn=True) == 6


def test_a_batch_that_ends_on_a_turn_boundary_takes_exactly_its_size():
    queue = plain_turn("0") + plain_turn("1") + tool_turn("2")
    assert batch_cut(queue, 2, 50, ends_turn=True) == 2
    assert batch_cut(queue, 4, 4, ends_turn=True) == 4


def test_past_what_fits_it_stops_at_the_last_turn_end_within():
    queue = plain_turn("0") + tool_turn("1") + plain_turn("2")
    assert batch_cut(queue, 3, 5, ends_turn=True) == 2
    # draining: as many whole turns as fit
    assert batch_cut(queue, 7, 7, ends_turn=True) == 6


def test_a_single_turn_longer_than_what_fits_is_taken_whole():
    long_turn = [*tool_turn("0")[:3], *tool_turn("1")[1:]]  # two tool rounds, one human
    assert [m.role for m in long_turn] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert batch_cut(long_turn + plain_turn("2"), 2, 2, ends_turn=True) == 6
    assert batch_cut(long_turn + plain_turn("2"), 1, 1, ends_turn=False) == 6


def test_the_end_of_the_queue_is_a_boundary_only_when_its_turn_is_whole():
    """The rest of the last turn may still be in the window: the queue waits for it."""
    assert batch_cut(tool_turn("0"), 2, 50, ends_turn=False) == 0
    assert batch_cut(tool_turn("0"), 2, 50, ends_turn=True) == 4
    # the turn the batch cuts into is incomplete: the whole turns before it are taken
    queue = plain_turn("0") + tool_turn("1")[:3]
    assert batch_cut(queue, 3, 50, ends_turn=False) == 2
    assert batch_cut([], 2, 50, ends_turn=True) == 0


def test_no_size_and_fit_ever_splits_a_turn():
    queue = [m for turn in tool_conversation() for m in turn]
    cuts = (set(turn_starts(queue)) | {len(queue)}) - {0}
    for size in range(1, len(queue) + 2):
        for fits in range(1, len(queue) + 2):
            cut = batch_cut(queue, size, fits, ends_turn=True)
            assert cut in cuts, (size, fits, cut)
            # it reaches its size, or stays within what fits, or is the first turn whole
            assert cut >= min(size, len(queue)) or cut <= fits or cut == min(cuts)
