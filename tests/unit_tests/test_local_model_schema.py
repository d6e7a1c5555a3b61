"""Schemas sent to the local model's grammar engine keep bounds it can take."""

from memory_graph_agent.local.chat_model import GRAMMAR_MAX_LENGTH, grammar_safe_schema
from memory_graph_agent.prompting.schemas import ConsolidationDecision, FactList, ReflectionOut


def _bounds(node, key: str) -> list[int]:
    if isinstance(node, dict):
        own = [node[key]] if isinstance(node.get(key), int) else []
        return own + [b for v in node.values() for b in _bounds(v, key)]
    if isinstance(node, list):
        return [b for v in node for b in _bounds(v, key)]
    return []


def test_long_string_bounds_are_lowered_short_ones_kept() -> None:
    full = ConsolidationDecision.model_json_schema()
    assert max(_bounds(full, "maxLength")) == 2000  # what crashed llama.cpp
    safe = grammar_safe_schema(full)
    assert max(_bounds(safe, "maxLength")) == GRAMMAR_MAX_LENGTH
    assert safe["properties"]["target_id"]["maxLength"] == 64


def test_every_string_and_array_of_every_schema_stays_bounded() -> None:
    for schema in (ConsolidationDecision, FactList, ReflectionOut):
        safe = grammar_safe_schema(schema.model_json_schema())
        assert all(b <= GRAMMAR_MAX_LENGTH for b in _bounds(safe, "maxLength"))
        assert _bounds(safe, "maxItems") == _bounds(schema.model_json_schema(), "maxItems")


def test_enum_and_numeric_bounds_survive() -> None:
    safe = grammar_safe_schema(ConsolidationDecision.model_json_schema())
    assert safe["properties"]["action"]["enum"][0] == "created"
    fact = grammar_safe_schema(ReflectionOut.model_json_schema())["$defs"]["ExtractedFact"]
    importance = fact["properties"]["importance"]
    assert importance["enum"] == [i / 10 for i in range(11)]  # a bound the grammar enforces
    assert "maximum" not in importance and "type" not in importance
