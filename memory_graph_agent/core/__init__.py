"""Core types and rules every layer may use.

Ids, records, entity keys, token counting, the turn-boundary rule, metrics, and what the
domain reads of a run's context (`run`). Imports nothing above it.
"""
