"""Entity keys of a turn, the score entity links lend, and speaker links (pure)."""

from __future__ import annotations

import math

from memory_graph_agent.core.entities import (
    MAX_KEYS,
    ROLE_SPEAKERS,
    entity_bonus,
    entity_keys,
    names,
    query_keys,
    speaker_named,
    speaker_names,
)
from memory_graph_agent.recall.entity_linking import link_entities, link_speakers
from memory_graph_agent.storage.episode_index import _SPEAKERS


def test_names_and_multi_word_proper_nouns_are_keys_lower_cased():
    keys = entity_keys("Melanie: We camped at Lake Tahoe with Priya and the kids.")
    assert keys == ["lake tahoe", "lake", "tahoe", "priya"]


def test_the_speaker_is_not_a_key_of_what_they_said():
    assert "melanie" not in entity_keys("Melanie: I love pottery.")
    assert entity_keys("Melanie: I love pottery.") == []


def test_a_plain_word_starting_a_sentence_is_no_name_but_a_name_is():
    assert names("Thanks! Great to see you. Paris was lovely.") == ["paris"]
    assert names("Hey Jon, wow.") == ["jon"]
    assert names("I went there. I did.") == []


def test_possessives_plurals_months_and_days_are_normalised_or_dropped():
    assert entity_keys("Gina: Charlotte's Web, on Monday in May.") == [
        "charlotte web",
        "charlotte",
        "web",
    ]
    assert entity_keys("x: The Smiths played.") == ["smith"]


def test_keys_are_deterministic_distinct_and_bounded():
    text = "A: " + " ".join(f"Name{i}x" for i in range(100))
    keys = entity_keys(text)
    assert keys == entity_keys(text) and len(keys) == MAX_KEYS == len(set(keys))
    assert entity_keys("") == []


def test_query_keys_cover_its_words_and_names():
    assert {"priya", "hiking", "where"} <= query_keys("Where did Priya go hiking?")


def test_a_seed_lends_by_idf_split_over_its_keys_not_to_itself_nor_for_asked_keys():
    seeds = [("s", 0.2, ["priya", "denver", "asked"])]
    reached = {"a": {"priya"}, "b": {"priya", "denver"}, "s": {"priya"}, "c": {"asked"}}
    df = {"priya": 2, "denver": 4, "asked": 2}
    bonus = entity_bonus(seeds, reached, df, 16, {"asked"}, 0.5)
    total = math.log(8) + math.log(4)
    assert set(bonus) == {"a", "b"}
    assert math.isclose(bonus["a"], 0.5 * 0.2 * math.log(8) / total)
    assert math.isclose(bonus["b"], 0.5 * 0.2)
    assert entity_bonus(seeds, reached, {"priya": 16}, 16, set(), 0.5) == {}


def test_link_entities_adds_only_turns_no_search_found():
    found = [
        {"id": "t:1", "kind": "episode", "rrf": 0.3},
        {"id": "t:2", "kind": "episode", "rrf": 0.1},
    ]
    new = {"id": "t:9", "kind": "episode", "text": "x", "source_ids": ["9"]}
    out = link_entities(found, {"t:2": ({"id": "t:2"}, 0.5), "t:9": (new, 0.2)})
    assert [m["id"] for m in out] == ["t:1", "t:9", "t:2"]
    assert out[1]["via"] == "entity" and out[1]["rrf"] == 0.2 and out[2]["rrf"] == 0.1
    assert link_entities(found, {}) is found


def test_speaker_named_reads_the_turns_speaker_against_the_query():
    assert speaker_named("Melanie: I read a book.", "What books has Melanie read?")
    assert speaker_named("Melanie: hi", "What is Melanie's dog called?")
    assert not speaker_named("Jon: I dance.", "What does Gina sell?")
    assert not speaker_named("no speaker here", "no speaker here")


def test_speaker_names_are_the_capitalised_words_that_are_no_plain_words():
    assert speaker_names("What books has Melanie read?") == ["melanie"]
    assert speaker_names("What is Melanie's dog called?") == ["melanie's", "melanie"]
    assert speaker_names("Did Jon and Gina meet?") == ["jon", "gina"]  # in the order said
    # the role of a message without a name is no person asked about
    assert speaker_names("Assistant, what did the User say about Rust?") == ["rust"]
    # no name: nothing to search (the question's first word, "I", "You" are plain words)
    assert speaker_names("What did I tell you about cooking?") == []
    assert speaker_names("what did melanie read?") == []
    assert speaker_names("") == []
    # lower() of a C-locale database lowers ASCII letters only: both forms are tried
    assert speaker_names("What did Émile say?") == ["émile", "Émile"]


def test_the_role_speakers_are_the_speakers_of_messages_without_a_name():
    assert ROLE_SPEAKERS == frozenset(_SPEAKERS.values())


def test_link_speakers_multiplies_the_named_speakers_turns():
    items = [
        {"id": "a", "kind": "episode", "text": "Jon: a dance studio", "rrf": 0.2},
        {"id": "b", "kind": "episode", "text": "Gina: my store", "rrf": 0.15},
        {"id": "s", "kind": "summary", "text": "Gina: a summary", "rrf": 0.1},
    ]
    out = link_speakers(items, "What does Gina sell?", 1.0)
    assert [m["id"] for m in out] == ["b", "a", "s"]
    assert out[0]["rrf"] == 0.3 and out[0]["speaker_named"] and "speaker_named" not in out[2]
    assert link_speakers(items, "What does Gina sell?", 0.0) is items
