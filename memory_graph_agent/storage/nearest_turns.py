"""The SQL of the nearest turns of one user: an exact sort of few, an HNSW walk of many.

Used by `episode_index.EpisodeIndex.dense_statements` and ``speaker_statements``.
"""

from __future__ import annotations

from memory_graph_agent.storage.halfvec import DISTANCE

_KNN_SQL = (
    f"SELECT thread_id, message_id, content, ts, {DISTANCE} AS distance "
    'FROM "{table}" WHERE user_id = :user_id {where}'
    f"ORDER BY {DISTANCE} LIMIT :k"
)
"""The nearest turns of a user, maybe only some (``{where}``): `EpisodeIndex.speaker_statements`."""
EXACT_TURNS = 2000
"""Up to this many indexed turns, a user's dense search reads them all and sorts them.

The planner would rather walk the HNSW graph once the table is large, but filtered by
user it visits every user's turns to find one user's k: with 1,000 turns each among 10
users, 12 ms and 5,000 buffers per search, against 1.4 ms and 300 to read and sort the
user's own (`bench.growth`, the read path's rise). Sorting is exact, and grows with the
user's turns: beyond this many the graph is cheaper.
"""
_USER_TURNS = 'COALESCE((SELECT c.n FROM "{table}_corpus" c WHERE c.user_id = :user_id), 0)'
_DENSE_SQL = (
    "("
    + _KNN_SQL.replace("{where}", f"AND {_USER_TURNS} > :exact ")
    + ") UNION ALL ("
    # ``+ 0``: an order the HNSW index cannot give, so the user's rows are read and sorted
    + _KNN_SQL.replace("{where}", f"AND {_USER_TURNS} <= :exact ").replace(
        f"ORDER BY {DISTANCE}", f"ORDER BY ({DISTANCE}) + 0"
    )
    + ")"
)
"""The nearest turns of a user (`EpisodeIndex.dense_statements`): the user's count of
turns (`corpus_stats`) chooses one branch, the other is never executed."""
