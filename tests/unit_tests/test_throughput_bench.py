"""`bench.throughput`'s pure parts: the engines it is asked for, the CPU it counts, and the
fake model's answers to the project's structured calls."""

from __future__ import annotations

import argparse

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from bench.fake_model import schema_answer
from bench.throughput import busiest, cpu_used, parse_engines
from memory_graph_agent.prompting.schemas import ConsolidationDecision, FactList, ReflectionOut


def test_engines_are_dev_or_aegra_with_a_replica_count() -> None:
    assert parse_engines("dev, aegra:1,aegra:4") == ["dev", "aegra:1", "aegra:4"]
    for wrong in ("aegra", "aegra:0", "aegra:x", "server", " , "):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_engines(wrong)


def test_cpu_is_counted_per_group_from_each_process_first_snapshot() -> None:
    before = {"servers": {1: 10.0, 2: 5.0}, "postgres": {7: 1.0}, "machine": {0: 100.0}}
    after = {"servers": {1: 12.5, 3: 0.75}, "postgres": {7: 1.5, 8: 0.25}, "machine": {0: 110.0}}
    # a process that started meanwhile counts from 0; one that ended is not in `after`
    assert cpu_used(before, after) == {"servers": 3.25, "postgres": 0.75, "machine": 10.0}


def test_the_busiest_process_group_is_named_beside_the_rest_of_the_machine() -> None:
    cpu = {"servers": 6.0, "postgres": 2.0, "redis": 0.5, "model": 0.5, "client": 1.0,
           "machine": 14.0}  # fmt: skip
    assert busiest(cpu, elapsed_s=5.0) == {
        "group": "servers", "cores": 1.2, "machine_cores": 2.8, "others_cores": 0.8,
    }  # fmt: skip
    cpu["machine"] = 9.0  # the machine's counters and the processes' disagree a little
    assert busiest(cpu, elapsed_s=5.0)["others_cores"] == 0.0


@pytest.mark.parametrize("schema", [FactList, ConsolidationDecision, ReflectionOut])
def test_the_fake_model_answers_each_structured_call_with_what_its_schema_accepts(schema) -> None:
    parameters = convert_to_openai_tool(schema)["function"]["parameters"]
    assert schema.model_validate(schema_answer(parameters))
    assert schema.model_validate(schema_answer(schema.model_json_schema()))
