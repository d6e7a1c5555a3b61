"""``memory show``, ``memory redrive``, ``forget`` and ``maintain``: inspect and tidy memory."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from rich.markup import escape
from rich.table import Column, Table

from memory_graph_agent.cli.console import console
from memory_graph_agent.core.kinds import MemoryKind


async def _forget(args: argparse.Namespace) -> int:
    from memory_graph_agent.services.stores import services_session
    from memory_graph_agent.storage.forget import forget_user
    from memory_graph_agent.storage.server_threads import ServerThreads
    from memory_graph_agent.turn.validation import check_id

    user = check_id(args.user, "user_id")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ValueError(
                f"refusing to forget user {user!r} without confirmation: stdin is not a "
                "terminal; re-run with --yes"
            )
        console.print(
            f"This deletes everything stored about user [bold]{user}[/]: window, pending, "
            "profile, summaries, reflections, episodes and the checkpoints of their threads"
            + (f", and their threads on {args.server}." if args.server else ".")
        )
        answer = await asyncio.to_thread(input, "Type the user id to confirm: ")
        if answer.strip() != user:
            console.print("aborted; nothing was deleted")
            return 1
    server = ServerThreads(args.server) if args.server else None
    async with services_session() as services:
        report = await forget_user(
            user, redis=services.redis, db=services.db, prefix=services.keys.prefix, server=server
        )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    memories = sum(report["memories"].values())
    checkpoints = sum(report["checkpoints"].values())
    episodes = "no table" if report["episodes"] is None else report["episodes"]
    console.print(
        f"forgot user {user}: {report['redis_keys']} redis keys, {memories} memories, "
        f"episodes: {episodes}, {checkpoints} checkpoint rows of "
        f"{len(report['threads'])} threads"
        + (f", {len(report['server_threads'])} server threads" if server else "")
    )
    if report["shared_threads"]:
        console.print(
            "[yellow]warning:[/] these threads were also used by another user and their "
            f"checkpoints were deleted too: {', '.join(report['shared_threads'])}"
        )
    return 0


async def _memory_query(args: argparse.Namespace, context: Any, services: Any) -> int:
    """``memory show --query``: the recall node's retrieval for this user, with score parts."""
    from memory_graph_agent.recall.retrieval import retrieve
    from memory_graph_agent.settings import Settings

    settings = Settings.from_env()
    found = await retrieve(services, settings, context, args.query, "memory-show", touch=False)
    if args.json:
        out = {"user_id": context.user_id, "query": args.query, **vars(found)}
        print(json.dumps(out, default=str))
        return 0
    w = settings.recall.weights
    weights = (w.weight_relevance, w.weight_recency, w.weight_importance)
    console.print(f"recall for {args.query!r}: {found.describe()}")
    console.print(
        f"score = ({weights[0]} x relevance + {weights[1]} x recency + {weights[2]} x "
        f"importance) / {sum(weights)}"
    )

    def part(value: Any, fmt: str = ".3f") -> str:
        return "-" if value is None else format(value, fmt)

    for n, m in enumerate(found.items, 1):
        console.print(
            f"{n}. [{m['kind']}] score {part(m['score'])}: relevance {part(m['relevance'])} "
            f"(similarity {part(m['similarity'])}, dense rank {part(m['dense_rank'], 'd')}, "
            f"keyword rank {part(m['keyword_rank'], 'd')}), recency {part(m['recency'])}, "
            f"importance {part(m['importance'], '.2f')}; {m['tokens']} tokens",
            markup=False,
            soft_wrap=True,
        )
        console.print("   " + m["text"][:200], markup=False, highlight=False, soft_wrap=True)
    return 0


async def _memory_show(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.services.stores import services_session

    context = Context(user_id=args.user)
    user = context.user_id
    async with services_session() as services:
        if getattr(args, "query", None):
            return await _memory_query(args, context, services)
        profile = await services.profile.get(user)
        history = await services.profile.history(user)
        memories = await services.memories.list(user, limit=args.limit)
        decisions = await services.decisions.list(user, limit=args.limit)
        threads = await services.window.threads(user)
        cost = await services.costs.get(user)
        pending = {t: await services.queue.backlog(user, t) for t in threads}
        dead: dict[str, list[dict[str, Any]]] = {}
        for thread in threads:
            for entry in await services.queue.dead_letters(user, thread):
                ids = [m.id for m in entry["items"]]
                item = {"error": entry.get("error"), "attempts": entry.get("attempts")}
                dead.setdefault(thread, []).append({**item, "message_ids": ids})
    if args.json:
        out = {
            "user_id": user,
            "profile": profile,
            "profile_history": history,
            "memories": [m.as_dict() for m in memories],
            "decisions": [d.as_dict() for d in decisions],
            "pending": pending,
            "dead_letters": dead,
            "memory_cost": cost,
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    past: dict[str, list[dict]] = {}
    for entry in history:
        past.setdefault(entry["key"], []).append(entry)
    keys = [*profile, *(k for k in past if k not in profile)]
    key_column = Column("key", min_width=min(48, max(map(len, keys), default=3)))
    title = f"profile of {user} (past values under each key)"
    table = Table(key_column, "value", "imp.", "valid", "source", title=title)
    for key in keys:
        fact = profile.get(key)
        if fact:
            expiry = "pinned" if fact["pinned"] else f"expires {fact['expires_at'] or 'never'}"
            table.add_row(
                key,
                escape(fact["value"]),
                str(fact["importance"]),
                f"since {fact['valid_from'][:10]}, {expiry[:18]}",
                ",".join(s[:8] for s in fact.get("source_ids", [])),
            )
        else:
            table.add_row(key, "[dim](none now)[/]", "", "", "")
        for old in reversed(past.get(key, [])):  # newest first, right under the key
            table.add_row(
                "",
                f"[dim]was {escape(old['value'])}[/]",
                str(old["importance"]),
                f"{old['valid_from'][:10]} → {old['valid_to'][:10]} ({old['reason']})",
                ",".join(s[:8] for s in old.get("source_ids", [])),
            )
    console.print(table)
    headers = ("kind", "created", "imp.", "thread", "text", "sources")
    table = Table(*headers, title="summaries and reflections (newest first)")
    for m in memories:
        table.add_row(
            m.kind,
            m.created_at.isoformat()[:19],
            f"{m.importance:.2f}",
            m.thread_id or "-",
            escape(m.text[:160]),
            f"{len(m.source_ids)}: " + ",".join(s[:8] for s in m.source_ids[:3]),
        )
    console.print(table)
    _print_decisions(decisions)
    _print_cost(cost)
    console.print(f"threads: {threads or 'none'}  pending per thread: {pending}")
    for thread, entries in dead.items():
        for entry in entries:
            console.print(
                f"[red]dead letter[/] thread {thread}: {len(entry['message_ids'])} messages, "
                f"{entry['attempts']} attempts, last error {escape(str(entry['error']))} "
                f"(re-drive: memory-agent memory redrive --user {user})"
            )
    return 0


async def _memory_graph(args: argparse.Namespace) -> int:
    """``memory graph``: draw the user's memory to a PNG (or print its nodes and edges)."""
    from memory_graph_agent.drawing.reading import read_memory_graph
    from memory_graph_agent.services.stores import services_session
    from memory_graph_agent.turn.validation import check_id

    user = check_id(args.user, "user_id")
    if not args.json:  # before any server is touched: a missing extra costs nothing
        from memory_graph_agent.drawing.render import require_draw_libraries

        require_draw_libraries()
    async with services_session() as services:
        graph = await read_memory_graph(
            services, user, max_turns=args.turns, max_memories=args.memories
        )
    if args.json:
        print(json.dumps(graph.as_dict(), indent=2))
        return 0
    from memory_graph_agent.drawing.render import draw_memory_graph

    await asyncio.to_thread(draw_memory_graph, graph, args.out)
    console.print(
        f"wrote {args.out}: {graph.title}, {len(graph.nodes)} nodes, {len(graph.edges)} edges "
        f"({graph.hidden_turns} earlier turns and {graph.hidden_memories} earlier memories "
        "folded)",
        markup=False,
    )
    return 0


def _print_cost(cost: dict[str, dict[str, int]]) -> None:
    """Memory's own model calls and tokens for this user, by purpose."""
    table = Table("purpose", "calls", "input tokens", "output tokens", title="memory's model cost")
    for purpose, counts in sorted(cost.items()):
        table.add_row(purpose, str(counts["calls"]), str(counts["input"]), str(counts["output"]))
    total = {k: sum(c[k] for c in cost.values()) for k in ("calls", "input", "output")}
    table.add_row("[bold]total[/]", *(f"[bold]{total[k]}[/]" for k in ("calls", "input", "output")))
    console.print(table)


def _print_decisions(decisions: list[Any]) -> None:
    """The memory decision log (consolidation, reflection, facts, maintenance), newest first."""
    table = Table(
        "when", "item", "action", "target", "detail", title="memory decisions (newest first)"
    )
    for d in decisions:
        detail = d.detail.get("reason") or d.detail.get("new_value") or ""
        table.add_row(
            d.decided_at.isoformat()[:19],
            f"{d.item_kind} {d.item_id[:8] if d.item_kind != MemoryKind.FACT else d.item_id[-24:]}",
            d.action,
            (d.target_id or "-")[:24],
            escape(str(detail)[:80]),
        )
    console.print(table)


async def _maintain(args: argparse.Namespace) -> int:
    from graph.context import Context
    from graph.maintenance import build_maintenance_graph
    from memory_graph_agent.services.stores import open_checkpointer, services_session
    from memory_graph_agent.storage.checkpoints import SaverCheckpoints

    context = Context(user_id=args.user) if args.user else Context()
    async with (
        services_session() as services,
        open_checkpointer(services.database_url) as saver,
    ):
        state = await build_maintenance_graph(services, SaverCheckpoints(saver)).ainvoke(
            {"user_id": context.user_id, "all_users": args.all_users, "dry_run": args.dry_run},
            context=context,
        )
    report = state["report"]
    if args.json:
        print(json.dumps(state, indent=2, default=str))
        return 0
    verb = "would remove/supersede" if report["dry_run"] else "removed/superseded"
    console.print(
        f"maintenance of {report['users']} user(s), {verb}: {report['expired']} expired, "
        f"{report['evicted']} evicted, {report['compacted']} compacted duplicates; "
        f"checkpoints ({report['retention']}): {report['checkpoints_pruned']} threads pruned "
        f"to their latest, {report['checkpoints_held']} held whole; decisions "
        f"({report['decision_retention']}): {report['decisions_pruned']} pruned; idle threads "
        f"({report['idle_threads']}): {report['threads_archived']} archived, "
        f"{report['threads_held']} held"
    )
    for action in ("expired", "evicted", "compacted"):
        for e in state.get(action, []):
            kept = f" (kept {e['kept'][:8]})" if "kept" in e else ""
            console.print(
                f"  [dim]{action} {e['user_id']} {e['id'][:8]} imp {e['importance']:.2f}"
                f"{kept}: {escape(e['text'][:60])}[/]"
            )
    for e in state.get("pruned", []):
        why = f" ({e['reason']})" if e["action"] == "held" else ""
        console.print(
            f"  [dim]checkpoints {e['action']}{why}: {e['user_id']} {e['kind']} thread "
            f"{e['id']} of {e['thread_id']}[/]"
        )
    for e in state.get("archived", []):
        what = f"held ({e['reason']})" if e["action"] == "held" else "archived"
        console.print(
            f"  [dim]idle thread {what}: {e['user_id']} {e['thread_id']}, last turn "
            f"{e['idle_since'][:10]}, {e['messages'] or 0} window messages to memory[/]"
        )
    for e in state.get("decisions", []):
        held = f", kept for pending memory work: {', '.join(e['held_threads'])}"
        console.print(
            f"  [dim]decisions before {e['before'][:10]}: {e['user_id']} {e['pruned']} pruned"
            f"{held if e['held_threads'] else ''}[/]"
        )
    return 0


async def _memory_redrive(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.services.stores import services_session

    context = Context(user_id=args.user)
    async with services_session() as services:
        user = context.user_id
        threads = [args.thread] if args.thread else await services.window.threads(user)
        moved = {t: await services.queue.redrive(user, t) for t in threads}
    console.print(f"re-queued dead-lettered messages per thread: {moved}")
    return 0
