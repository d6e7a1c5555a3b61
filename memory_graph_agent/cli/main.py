"""The ``memory-agent`` console script.

Commands: ``chat``, ``send``, ``demo``, ``memory show``, ``forget``, ``maintain``,
``services up|down|status``, ``metrics``. ``chat`` and ``demo`` take
``--metrics-port N`` to serve Prometheus metrics on ``http://127.0.0.1:N/metrics``
while they run. Bad arguments or input print ``error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import uuid
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()

METRICS_PORT_HELP = "serve Prometheus metrics on http://127.0.0.1:PORT/metrics"


def _quiet_libraries(verbose: bool) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("LANGSMITH_TRACING", os.environ.get("LANGSMITH_TRACING", "false"))
    # Memory fallbacks are shown as per-turn events; -v adds the library logs.
    level = logging.INFO if verbose else logging.ERROR
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _serve_metrics(port: int | None) -> Any:
    """Start the Prometheus endpoint on 127.0.0.1 when ``--metrics-port`` was given.

    Returns the HTTP server (``None`` without a port); it runs in a daemon thread.
    """
    if port is None:
        return None
    from memory_graph_agent.metrics import start_metrics_server

    server, _ = start_metrics_server(port)
    console.print(f"[dim]metrics on http://127.0.0.1:{server.server_port}/metrics[/]")
    return server


def _metrics() -> int:
    from memory_graph_agent.metrics import exposition

    sys.stdout.write(exposition().decode())
    return 0


async def _chat(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.cli.session import check_thread_owner, end_session, open_agent, run_turn
    from memory_graph_agent.validation import InvalidInputError, check_id

    context = Context(user_id=args.user)
    thread = check_id(args.thread or f"t-{uuid.uuid4().hex[:8]}", "thread_id")
    console.print(
        f"[bold]user[/] {context.user_id}  [bold]thread[/] {thread}  [bold]model[/] {context.model}"
    )
    console.print(
        "Type a message; '/new' archives this thread into memory and starts a new one, "
        "'/quit' exits."
    )
    async with open_agent() as (agent, services):
        if args.thread:
            await check_thread_owner(services, context, thread)
        while True:
            try:
                text = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
            if text.strip() == "/quit":
                break
            if text.strip() == "/new":  # archive this thread into memory, then start fresh
                try:
                    archive = await end_session(agent, context, thread)
                except InvalidInputError as exc:
                    console.print(f"[red]error:[/] {escape(str(exc))} (thread not archived)")
                    continue
                for event in archive.get("memory_events", []):
                    console.print(f"  [dim]{escape(event['text'])}[/]")
                console.print(_archive_note(thread, archive))
                thread = f"t-{uuid.uuid4().hex[:8]}"
                console.print(f"[dim]new thread {thread}[/]")
                continue
            if not text.strip():
                console.print("[yellow]empty message ignored[/]")
                continue
            try:
                state = await run_turn(agent, context, thread, text)
            except InvalidInputError as exc:
                console.print(f"[red]error:[/] {escape(str(exc))} (message not sent)")
                continue
            console.print(f"[green]agent>[/] {escape(str(state['messages'][-1].content))}")
            for event in state.get("memory_events", []):
                console.print(f"  [dim]{escape(event['text'])}[/]")
    return 0


def _read_message(arg: str) -> str:
    """The message of ``send``: the argument, or stdin (strict UTF-8) when it is ``-``."""
    from memory_graph_agent.validation import InvalidInputError

    if arg != "-":
        return arg
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"stdin is not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        ) from None


def _archive_note(thread: str, state: dict[str, Any]) -> str:
    """One line on the outcome of an `end_session` run (rich markup)."""
    from memory_graph_agent.cli.session import archived

    if archived(state):
        return f"[dim]thread {thread} archived into long-term memory[/]"
    return (
        f"[yellow]thread {thread} not fully archived[/] (a service is down; its "
        f"{state.get('pending_count', 0)} waiting messages are kept): retry with "
        f"memory-agent send --end-session --thread {thread} --user ..."
    )


async def _send(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.cli.session import (
        archived,
        check_thread_owner,
        check_turn,
        end_session,
        open_agent,
        run_turn,
    )
    from memory_graph_agent.validation import check_id

    context = Context(user_id=args.user)
    if args.message is None and not (args.end_session and args.thread):
        raise ValueError("send needs a message, or --end-session --thread ID to archive a thread")
    thread = check_id(args.thread or f"t-{uuid.uuid4().hex[:8]}", "thread_id")
    text = None
    if args.message is not None:  # validated before any service starts
        text = check_turn(context, thread, _read_message(args.message))
    state = archive = None
    async with open_agent() as (agent, services):
        if args.thread:
            await check_thread_owner(services, context, thread)
        if text is not None:
            state = await run_turn(agent, context, thread, text)
        if args.end_session:
            archive = await end_session(agent, context, thread)
    reply = state["messages"][-1] if state else None
    if args.json:
        out: dict[str, Any] = {
            "user_id": context.user_id,
            "thread_id": thread,
            "reply": reply.text if reply else None,
        }
        if archive is not None:
            out["archived"] = archived(archive)
        print(json.dumps(out))
    else:
        console.print(f"[dim]thread {thread}[/]")
        if reply is not None:
            console.print(escape(str(reply.content)))
        if archive is not None:
            console.print(_archive_note(thread, archive))
    return 1 if archive is not None and not archived(archive) else 0


async def _forget(args: argparse.Namespace) -> int:
    from memory_graph_agent.cli.session import forget
    from memory_graph_agent.validation import check_id

    user = check_id(args.user, "user_id")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ValueError(
                f"refusing to forget user {user!r} without confirmation: stdin is not a "
                "terminal; re-run with --yes"
            )
        console.print(
            f"This deletes everything stored about user [bold]{user}[/]: window, pending, "
            "profile, summaries, reflections, episodes and the checkpoints of their threads."
        )
        answer = await asyncio.to_thread(input, "Type the user id to confirm: ")
        if answer.strip() != user:
            console.print("aborted; nothing was deleted")
            return 1
    report = await forget(user)
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
    )
    if report["shared_threads"]:
        console.print(
            "[yellow]warning:[/] these threads were also used by another user and their "
            f"checkpoints were deleted too: {', '.join(report['shared_threads'])}"
        )
    return 0


async def _memory_query(args: argparse.Namespace, context: Any, services: Any) -> int:
    """``memory show --query``: the recall node's retrieval for this user, with score parts."""
    from memory_graph_agent.retrieval import retrieve

    found = await retrieve(services, context, args.query, "memory-show", touch=False)
    if args.json:
        out = {"user_id": context.user_id, "query": args.query, **vars(found)}
        print(json.dumps(out, default=str))
        return 0
    weights = (context.weight_relevance, context.weight_recency, context.weight_importance)
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
    from memory_graph_agent.services import services_session

    context = Context(user_id=args.user)
    async with services_session() as services:
        return await _show(args, context, services)


async def _show(args: argparse.Namespace, context: Any, services: Any) -> int:
    if getattr(args, "query", None):
        return await _memory_query(args, context, services)
    profile = await services.profile.get(context.user_id)
    history = await services.profile.history(context.user_id)
    memories = await services.memories.list(context.user_id, limit=args.limit)
    decisions = await services.decisions.list(context.user_id, limit=args.limit)
    threads = await services.window.threads(context.user_id)
    pending = {t: await services.queue.backlog(context.user_id, t) for t in threads}
    dead = {}
    for thread in threads:
        for entry in await services.queue.dead_letters(context.user_id, thread):
            dead.setdefault(thread, []).append(
                {
                    "error": entry.get("error"),
                    "attempts": entry.get("attempts"),
                    "message_ids": [m.id for m in entry["items"]],
                }
            )
    if args.json:
        print(
            json.dumps(
                {
                    "user_id": context.user_id,
                    "profile": profile,
                    "profile_history": history,
                    "memories": [m.as_dict() for m in memories],
                    "decisions": [d.as_dict() for d in decisions],
                    "pending": pending,
                    "dead_letters": dead,
                },
                indent=2,
                default=str,
            )
        )
        return 0
    table = Table(title=f"profile of {context.user_id} (past values under each key)")
    past: dict[str, list[dict]] = {}
    for entry in history:
        past.setdefault(entry["key"], []).append(entry)
    keys = [*profile, *(k for k in past if k not in profile)]
    table.add_column("key", min_width=min(48, max(map(len, keys), default=3)))
    for col in ("value", "imp.", "valid", "source"):
        table.add_column(col)
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
    table = Table(title="summaries and reflections (newest first)")
    for col in ("kind", "created", "imp.", "thread", "text", "sources"):
        table.add_column(col)
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
    console.print(f"threads: {threads or 'none'}  pending per thread: {pending}")
    for thread, entries in dead.items():
        for entry in entries:
            console.print(
                f"[red]dead letter[/] thread {thread}: {len(entry['message_ids'])} messages, "
                f"{entry['attempts']} attempts, last error {escape(str(entry['error']))} "
                f"(re-drive: memory-agent memory redrive --user {context.user_id})"
            )
    return 0


def _print_decisions(decisions: list[Any]) -> None:
    """The memory decision log (consolidation, reflection, facts, maintenance), newest first."""
    table = Table(title="memory decisions (newest first)")
    for col in ("when", "item", "action", "target", "detail"):
        table.add_column(col)
    for d in decisions:
        detail = d.detail.get("reason") or d.detail.get("new_value") or ""
        table.add_row(
            d.decided_at.isoformat()[:19],
            f"{d.item_kind} {d.item_id[:8] if d.item_kind != 'fact' else d.item_id[-24:]}",
            d.action,
            (d.target_id or "-")[:24],
            escape(str(detail)[:80]),
        )
    console.print(table)


async def _maintain(args: argparse.Namespace) -> int:
    from graph.context import Context
    from graph.maintenance import build_maintenance_graph
    from memory_graph_agent.services import services_session

    context = Context(user_id=args.user) if args.user else Context()
    async with services_session() as services:
        state = await build_maintenance_graph(services).ainvoke(
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
        f"{report['evicted']} evicted, {report['compacted']} compacted duplicates"
    )
    for action in ("expired", "evicted", "compacted"):
        for e in state.get(action, []):
            kept = f" (kept {e['kept'][:8]})" if "kept" in e else ""
            console.print(
                f"  [dim]{action} {e['user_id']} {e['id'][:8]} imp {e['importance']:.2f}"
                f"{kept}: {escape(e['text'][:60])}[/]"
            )
    return 0


async def _memory_redrive(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.services import services_session

    context = Context(user_id=args.user)
    async with services_session() as services:
        user = context.user_id
        threads = [args.thread] if args.thread else await services.window.threads(user)
        moved = {t: await services.queue.redrive(user, t) for t in threads}
    console.print(f"re-queued dead-lettered messages per thread: {moved}")
    return 0


def _services(args: argparse.Namespace) -> int:
    from memory_graph_agent.local import embedded

    if args.action == "up":
        urls = embedded.ensure_services()
        console.print(f"REDIS_URL={urls.redis_url}\nDATABASE_URL={urls.database_url}")
    elif args.action == "down":
        embedded.stop_services()
        console.print("embedded services stopped")
    else:
        console.print_json(json.dumps(embedded.status(), default=str))
    return 0


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the console script."""
    parser = argparse.ArgumentParser(prog="memory-agent", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs")
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="talk to the agent interactively")
    chat.add_argument("--user", required=True)
    chat.add_argument("--thread", default=None, help="default: a new thread")
    chat.add_argument("--metrics-port", type=int, default=None, help=METRICS_PORT_HELP)
    send = sub.add_parser("send", help="send one message and print the reply")
    send.add_argument("--user", required=True)
    send.add_argument("--thread", default=None, help="default: a new thread")
    send.add_argument("--json", action="store_true")
    send.add_argument(
        "--end-session",
        action="store_true",
        help="then archive the whole thread into long-term memory (no message needed "
        "with --thread)",
    )
    send.add_argument(
        "message", nargs="?", default=None, help="the message; '-' reads it from stdin (UTF-8)"
    )
    demo = sub.add_parser("demo", help="run the scripted 30+ turn demo")
    demo.add_argument(
        "--turns", type=int, default=30, help="unrelated turns after the introduction"
    )
    demo.add_argument("--window-size", type=int, default=10, help="messages kept in the window")
    demo.add_argument("--metrics-port", type=int, default=None, help=METRICS_PORT_HELP)
    memory = sub.add_parser("memory", help="inspect stored memory")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    show = msub.add_parser("show", help="profile, summaries and reflections with provenance")
    show.add_argument("--user", required=True)
    show.add_argument("--limit", type=_positive_int, default=50)
    show.add_argument("--json", action="store_true")
    show.add_argument(
        "--query",
        default=None,
        help="run the recall node's retrieval for this text and print each item's score parts",
    )
    redrive = msub.add_parser("redrive", help="put dead-lettered batches back on the queue")
    redrive.add_argument("--user", required=True)
    redrive.add_argument("--thread", default=None)
    forget = sub.add_parser(
        "forget", help="delete everything stored about one user (asks for confirmation)"
    )
    forget.add_argument("--user", required=True)
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    forget.add_argument("--json", action="store_true", help="print the counts as JSON")
    maintain = sub.add_parser(
        "maintain", help="expire, evict and compact long-term memories (the maintenance graph)"
    )
    who = maintain.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="maintain this user's memories")
    who.add_argument("--all-users", action="store_true", help="maintain every user")
    maintain.add_argument("--dry-run", action="store_true", help="report, change nothing")
    maintain.add_argument("--json", action="store_true", help="print the final state as JSON")
    services = sub.add_parser("services", help="embedded Redis and Postgres")
    services.add_argument("action", choices=["up", "down", "status"])
    sub.add_parser("metrics", help="print the Prometheus text exposition of this process")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``memory-agent``."""
    args = build_parser().parse_args(argv)
    _quiet_libraries(args.verbose)
    try:
        if args.command == "services":
            return _services(args)
        if args.command == "metrics":
            return _metrics()
        if args.command in ("chat", "demo"):
            _serve_metrics(args.metrics_port)
        if args.command == "chat":
            return asyncio.run(_chat(args))
        if args.command == "send":
            return asyncio.run(_send(args))
        if args.command == "forget":
            return asyncio.run(_forget(args))
        if args.command == "maintain":
            return asyncio.run(_maintain(args))
        if args.command == "memory" and args.memory_command == "redrive":
            return asyncio.run(_memory_redrive(args))
        if args.command == "memory":
            return asyncio.run(_memory_show(args))
        from memory_graph_agent.cli.demo import run_demo

        return asyncio.run(run_demo(args.turns, args.window_size))
    except (ValueError, RuntimeError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
