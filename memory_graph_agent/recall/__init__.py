"""Recall: the search behind the recall node, `search_memory` and the CLI.

Fusion and the memory score, and the links (entities, topics, summaries, newer
statements) that lift turns found by the query.
"""
