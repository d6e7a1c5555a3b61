"""Entity links at recall: the best turns reach the user's other turns that share their keys.

The keys were stored with each turn (`storage.entity_links`); the best fused turns lend
score to every turn with their rarer keys (`entities.entity_bonus`), added to what it
has or, for a turn no search found, as its score (``via`` ``entity``). The statement
runs beside the summary and neighbour links, on a connection of its own: no extra wait.
"""

from __future__ import annotations

import re
from typing import Any

from memory_graph_agent.entities import entity_bonus, entity_keys, query_keys
from memory_graph_agent.linking import episode_item
from memory_graph_agent.services import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_index import _hit

_WORDS = re.compile(r"[^\W_]+")
ENTITY_SEEDS = 3
"""How many of the best turns lend their keys."""


def seed_turns(items: list[dict[str, Any]], n: int = ENTITY_SEEDS) -> list[dict[str, Any]]:
    """The ``n`` best-fused raw turns."""
    return [m for m in items if m["kind"] == "episode"][:n]


async def reach_entities(
    services: Services, ctx: Settings, fused: list[dict[str, Any]], query: str
) -> dict[str, tuple[dict[str, Any], float]]:
    """Each turn the best turns' keys reach, as an item, and the score it is lent."""
    weight, store, seeds = ctx.entity_weight, services.episodes.entities, seed_turns(fused)
    if weight <= 0 or store is None or not seeds:
        return {}
    asked = query_keys(query)
    lent = [(m["id"], m["rrf"], entity_keys(str(m.get("text", "")))) for m in seeds]
    keys = [k for _, _, ks in lent for k in ks if k not in asked]
    rows = await store.reach(ctx.user_id, keys)
    if not rows:
        return {}
    df = {k: d for r in rows for k, d in zip(r["shared"], r["dfs"], strict=True)}
    n = int(rows[0]["n"] or 0)
    items = {f"{r['thread_id']}:{r['message_id']}": episode_item(_hit(r)) for r in rows}
    reached = {f"{r['thread_id']}:{r['message_id']}": set(r["shared"]) for r in rows}
    bonus = entity_bonus(lent, reached, df, n, asked, weight)
    return {key: (items[key], b) for key, b in bonus.items()}


def link_entities(
    items: list[dict[str, Any]], reached: dict[str, tuple[dict[str, Any], float]]
) -> list[dict[str, Any]]:
    """Add each reached turn's lent score to its RRF (a new turn enters); best RRF first."""
    if not reached:
        return items
    by_key = {m["id"]: m for m in items}
    for key, (item, bonus) in reached.items():
        found = by_key.get(key)
        if found is None:
            found = by_key[key] = dict(item)
            found.update(similarity=None, keyword_score=None, dense_rank=None, keyword_rank=None)
            found.update(rrf=0.0, via="entity")
        else:
            found = by_key[key] = dict(found)
        found["rrf"] = round(found["rrf"] + bonus, 6)
        found["entity_bonus"] = round(bonus, 6)
    return sorted(by_key.values(), key=lambda m: -m["rrf"])


def link_speakers(items: list[dict[str, Any]], query: str, weight: float) -> list[dict[str, Any]]:
    """Raise the RRF of turns said by someone the query names by ``1 + weight``."""
    named = {w.lower() for w in _WORDS.findall(query)}
    if weight <= 0 or not named:
        return items
    out = []
    for m in items:
        said_by = str(m.get("text", "")).partition(": ")[0].lower()
        if m.get("kind") == "episode" and said_by in named:
            m = {**m, "rrf": round(m["rrf"] * (1 + weight), 6), "speaker_named": True}
        out.append(m)
    return sorted(out, key=lambda m: -m["rrf"])
