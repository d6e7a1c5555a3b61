"""`contextual_vectors`: a turn's own vector plus a share of its adjacent turns', unit length."""

from __future__ import annotations

import numpy as np
import pytest

from memory_graph_agent.storage.episode_index import contextual_vectors


def test_weight_zero_keeps_every_vector():
    own = [[1.0, 0.0], [0.0, 1.0]]
    assert contextual_vectors(own, [0.6, 0.8], [0.6, 0.8], 0.0) == own


def test_each_turn_gets_its_neighbours_share_then_unit_length():
    own = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    out = np.array(contextual_vectors(own, None, None, 0.5))
    first = np.array([1.0, 0.5, 0.0]) / np.linalg.norm([1.0, 0.5, 0.0])
    middle = np.array([0.5, 1.0, 0.5]) / np.linalg.norm([0.5, 1.0, 0.5])
    last = np.array([0.0, 0.5, 1.0]) / np.linalg.norm([0.0, 0.5, 1.0])
    assert np.allclose(out, [first, middle, last])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)


def test_the_turns_just_outside_the_batch_count_as_neighbours():
    own = [[0.0, 1.0]]
    out = contextual_vectors(own, before=[1.0, 0.0], after=[-1.0, 0.0], weight=0.3)
    assert np.allclose(out, [[0.0, 1.0]])  # the two neighbours cancel
    out = contextual_vectors(own, before=[1.0, 0.0], after=None, weight=1.0)
    assert np.allclose(out, [[2**-0.5, 2**-0.5]])


def test_a_batch_gives_the_same_vectors_as_its_turns_one_by_one():
    rng = np.random.default_rng(3)
    own = rng.normal(size=(6, 8)).tolist()
    whole = contextual_vectors(own, None, None, 0.25)
    for i in range(6):
        alone = contextual_vectors(
            own[i : i + 1], own[i - 1] if i else None, own[i + 1] if i < 5 else None, 0.25
        )
        assert np.allclose(alone[0], whole[i])


def test_a_sum_of_zero_keeps_the_turns_own_vector():
    assert contextual_vectors([[1.0, 0.0]], [-1.0, 0.0], [-1.0, 0.0], 0.5) == [[1.0, 0.0]]


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="weight must be >= 0"):
        contextual_vectors([[1.0]], None, None, -0.1)
