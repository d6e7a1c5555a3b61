"""The ``memory-agent`` console script.

Commands: ``chat``, ``send``, ``demo``, ``doctor``, ``memory show|graph|redrive``, ``forget``,
``maintain``, ``services up|down|status``, ``metrics``. ``chat`` and ``demo`` take
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
from typing import Any

from rich.markup import escape

from memory_graph_agent.cli.console import console
from memory_graph_agent.cli.conversation import _chat, _send, unavailable_note
from memory_graph_agent.cli.doctor import _doctor
from memory_graph_agent.cli.memory import (
    _forget,
    _maintain,
    _memory_graph,
    _memory_redrive,
    _memory_show,
)
from memory_graph_agent.drawing.model import MAX_MEMORIES, MAX_TURNS

METRICS_PORT_HELP = "serve Prometheus metrics on http://127.0.0.1:PORT/metrics"
COMMANDS = {
    "chat": _chat,
    "send": _send,
    "forget": _forget,
    "maintain": _maintain,
    "doctor": _doctor,
}
MEMORY_COMMANDS = {"show": _memory_show, "graph": _memory_graph, "redrive": _memory_redrive}


def _quiet_libraries(verbose: bool) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("LANGSMITH_TRACING", os.environ.get("LANGSMITH_TRACING", "false"))
    # Memory fallbacks are shown as per-turn events; -v adds the library logs.
    level = logging.INFO if verbose else logging.ERROR
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _serve_metrics(port: int | None) -> Any:
    """Serve Prometheus metrics on 127.0.0.1 from a daemon thread; return the server (or None)."""
    if port is None:
        return None
    from memory_graph_agent.core.metrics import start_metrics_server

    server, _ = start_metrics_server(port)
    console.print(f"[dim]metrics on http://127.0.0.1:{server.server_port}/metrics[/]")
    return server


def _metrics() -> int:
    from memory_graph_agent.core.metrics import exposition

    sys.stdout.write(exposition().decode())
    return 0


def _services(args: argparse.Namespace) -> int:
    from memory_graph_agent.local import embedded

    if args.action == "up":
        urls = embedded.ensure_services()
        console.print(f"REDIS_URL={urls.redis_url}\nDATABASE_URL={urls.database_url}")
    elif args.action == "down":
        try:
            embedded.stop_services(if_unused=not args.force)
        except embedded.ServicesInUse as exc:
            console.print(f"error: {exc}")
            return 1
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
    demo = sub.add_parser(
        "demo", help="run the scripted demo (11 turns, a new thread, another user)"
    )
    demo.add_argument("--turns", type=int, default=6, help="unrelated turns after the introduction")
    demo.add_argument("--window-size", type=int, default=6, help="messages kept in the window")
    demo.add_argument("--metrics-port", type=int, default=None, help=METRICS_PORT_HELP)
    doctor = sub.add_parser(
        "doctor",
        help="check that the stores, the embeddings and the chat model each do real work "
        "(exit 1 if one fails, naming what died and what to do)",
    )
    doctor.add_argument("--model", default=None, help="chat model to check (default: the agent's)")
    doctor.add_argument("--json", action="store_true")
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
    graph = msub.add_parser(
        "graph", help="draw the user's facts, reflections, summaries and turns to a PNG"
    )
    graph.add_argument("--user", required=True)
    graph.add_argument(
        "--out", default="memory.png", help="the PNG to write (default: %(default)s)"
    )
    graph.add_argument(
        "--turns", type=_positive_int, default=MAX_TURNS,
        help="newest turns drawn; earlier ones are folded per thread (default: %(default)s)",
    )  # fmt: skip
    graph.add_argument(
        "--memories", type=_positive_int, default=MAX_MEMORIES,
        help="newest summaries and reflections drawn; the rest are folded (default: %(default)s)",
    )  # fmt: skip
    graph.add_argument("--json", action="store_true", help="print the nodes and edges instead")
    redrive = msub.add_parser("redrive", help="put dead-lettered batches back on the queue")
    redrive.add_argument("--user", required=True)
    redrive.add_argument("--thread", default=None)
    forget = sub.add_parser(
        "forget", help="delete everything stored about one user (asks for confirmation)"
    )
    forget.add_argument("--user", required=True)
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    forget.add_argument("--json", action="store_true", help="print the counts as JSON")
    forget.add_argument(
        "--server",
        default=os.environ.get("LANGGRAPH_SERVER_URL"),
        help="also delete the user's threads on this LangGraph server / `langgraph dev` "
        "(default: $LANGGRAPH_SERVER_URL; unset: none)",
    )
    maintain = sub.add_parser(
        "maintain",
        help="expire, evict and compact memories, prune old checkpoints (the maintenance graph)",
    )
    who = maintain.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="maintain this user's memories")
    who.add_argument("--all-users", action="store_true", help="maintain every user")
    maintain.add_argument("--dry-run", action="store_true", help="report, change nothing")
    maintain.add_argument("--json", action="store_true", help="print the final state as JSON")
    services = sub.add_parser("services", help="embedded Redis and Postgres")
    services.add_argument("action", choices=["up", "down", "status"])
    services.add_argument(
        "--force", action="store_true", help="down: stop even while clients are connected"
    )
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
        if args.command == "demo":
            from memory_graph_agent.cli.demo import run_demo

            return asyncio.run(run_demo(args.turns, args.window_size))
        if args.command == "memory":
            return asyncio.run(MEMORY_COMMANDS[args.memory_command](args))
        return asyncio.run(COMMANDS[args.command](args))
    except ConnectionError as exc:  # StoreUnavailable: nothing stored, the caller may retry
        console.print(f"{unavailable_note(exc)}: the message was not sent; retry when it is back")
        return 1
    except (ValueError, RuntimeError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
