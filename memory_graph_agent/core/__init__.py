"""Core types and rules every layer may use.

Ids, records, entity keys, token counting, the turn-boundary rule, metrics and the
settings protocol. Imports nothing above it.
"""
