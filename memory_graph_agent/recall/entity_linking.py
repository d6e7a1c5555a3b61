"""Entity links at recall: the best turns reach the user's other turns that share their keys.

The keys were stored with each turn (`storage.entity_links`); the best fused turns lend
score to the turns with their rarer keys that no search found (`entities.entity_bonus`,
``via`` ``entity``); a turn already found is left to topic links, which weigh the words
it shares inside the candidates. The statement runs beside the summary and neighbour
links, on a connection of its own: no extra wait. Turns said by someone the query
names count more (`link_speakers`).
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.core.entities import (
    entity_bonus,
    entity_keys,
    named_in,
    query_keys,
    said_by,
)
from memory_graph_agent.core.kinds import is_turn
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_index import keyword_hits

ENTITY_SEEDS = 3
"""How many of the best turns lend their keys."""


def seed_turns(items: list[dict[str, Any]], n: int = ENTITY_SEEDS) -> list[dict[str, Any]]:
    """The ``n`` best-fused raw turns."""
    return [m for m in items if is_turn(m["kind"])][:n]


async def reach_entities(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    fused: list[dict[str, Any]],
    query: str,
    weight: float | None = None,
) -> dict[str, tuple[dict[str, Any], float]]:
    """Each turn the best turns' keys reach, as an item, and the score it is lent.

    ``weight``: the share of a seed's RRF lent (``None``: ``entity_weight``).
    """
    store = services.episodes.entities
    weight = settings.recall.weights.entity_weight if weight is None else weight
    seeds = seed_turns(fused)
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
    items = {f"{h.thread_id}:{h.message_id}": episode_item(h) for h in keyword_hits(rows)}
    reached = {f"{r['thread_id']}:{r['message_id']}": set(r["shared"]) for r in rows}
    bonus = entity_bonus(lent, reached, df, n, asked, weight)
    return {key: (items[key], b) for key, b in bonus.items()}


def link_entities(
    items: list[dict[str, Any]], reached: dict[str, tuple[dict[str, Any], float]]
) -> list[dict[str, Any]]:
    """Add the reached turns no search found, with their lent score as RRF; best RRF first."""
    if not reached:
        return items
    by_key = {m["id"]: m for m in items}
    for key, (item, bonus) in reached.items():
        if key in by_key:  # found already: topic links weigh what it shares
            continue
        found = by_key[key] = dict(item)
        found.update(similarity=None, keyword_score=None, dense_rank=None, keyword_rank=None)
        found.update(rrf=round(bonus, 6), entity_bonus=round(bonus, 6), via="entity")
    return sorted(by_key.values(), key=lambda m: -m["rrf"])


def link_speakers(items: list[dict[str, Any]], query: str, weight: float) -> list[dict[str, Any]]:
    """Multiply the RRF of turns said by someone the query names by ``1 + weight``.

    The speaker is a turn's first link: "What books has Melanie read?" asks for what
    Melanie said, which rarely repeats the question's words. Best RRF first.
    """
    if weight <= 0:
        return items
    named, out = named_in(query), []  # the query's words, once for every candidate
    for m in items:
        if is_turn(m.get("kind")) and said_by(str(m.get("text", "")), named):
            m = {**m, "rrf": round(m["rrf"] * (1 + weight), 6), "speaker_named": True}
        out.append(m)
    return sorted(out, key=lambda m: -m["rrf"])
