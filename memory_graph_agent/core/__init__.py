"""Core types and rules every layer may use.

Ids, records, entity keys, token counting, the turn-boundary rule, metrics and how a
configuration knob is declared (`knobs`: its tier and bounds). Imports nothing above it.
"""
