"""Memory formation: what leaves the window becomes summaries and insights.

Summaries of the overflow, consolidation with similar memories, storing a summary with
its provenance, reflection into insights, and the guarded, schema-constrained model
calls they share.
"""
