"""Recall: the search behind the recall node, `search_memory` and the CLI.

Its channels (`recall.channels`: one module per search, `CHANNELS` the one list), their
fusion and the memory score (`retrieval`, `ranking`), and the links (entities, topics,
summaries, newer statements) that lift turns found by the query.
"""
