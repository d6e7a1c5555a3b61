"""``chat`` and ``send``: talk to the agent from a terminal or a script."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

from rich.markup import escape

from memory_graph_agent.cli.console import ReplyPrinter, console


def _new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _print_events(state: dict[str, Any]) -> None:
    for event in state.get("memory_events", []):
        console.print(f"  [dim]{escape(event['text'])}[/]")


def _print_memory_reports(memory: Any) -> None:
    """What the background memory runs finished since the last call did."""
    for report in memory.reports():
        _print_events(report)


def unavailable_note(exc: Exception) -> str:
    """Why a turn could not run, for the terminal (rich markup)."""
    what = "the database is" if getattr(exc, "service", "") == "postgres" else "Redis is"
    return f"[red]error:[/] {what} unavailable ({escape(str(exc.__cause__ or exc)[:300])})"


async def _turn(
    agent: Any, memory: Any, settings: Any, context: Any, thread: str, text: str
) -> bool:
    """One chat line: print the reply; False when the message could not be sent."""
    from memory_graph_agent.cli.session import run_turn
    from memory_graph_agent.storage.outages import StoreUnavailable
    from memory_graph_agent.turn.validation import InvalidInputError

    printer = ReplyPrinter("[green]agent>[/] ")
    try:
        state = await run_turn(agent, context, thread, text, on_token=printer, settings=settings)
    except InvalidInputError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))} (message not sent)")
        return True  # rejected for good: nothing to keep
    except StoreUnavailable as exc:
        console.print(
            f"{unavailable_note(exc)}; your message was not sent and is kept: press Enter "
            "to send it again"
        )
        return False
    printer.close(str(state["messages"][-1].content))
    _print_events(state)
    return True


async def _chat(args: argparse.Namespace) -> int:
    from graph.context import Context
    from memory_graph_agent.cli.session import check_thread_owner, end_session, open_agent
    from memory_graph_agent.settings import Settings
    from memory_graph_agent.turn.validation import InvalidInputError, check_id

    context, settings = Context(user_id=args.user), Settings.from_env()
    thread = check_id(args.thread or _new_thread(), "thread_id")
    kept: list[str] = []  # lines not sent because a store was down, oldest first
    async with open_agent(settings) as (agent, services, memory):
        if args.thread:
            await check_thread_owner(services, context, thread)
        console.print(
            f"[bold]user[/] {context.user_id}  [bold]thread[/] {thread}  [bold]model[/] "
            f"{context.model}\nType a message; '/new' archives this thread into memory and "
            "starts a new one, '/quit' exits."
        )
        while True:
            _print_memory_reports(memory)
            try:
                text = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
            if text.strip() == "/quit":
                break
            if text.strip() == "/new":  # archive this thread into memory, then start fresh
                try:
                    archive = await end_session(agent, context, thread, memory)
                except InvalidInputError as exc:
                    console.print(f"[red]error:[/] {escape(str(exc))} (thread not archived)")
                    continue
                _print_events(archive)
                console.print(_archive_note(thread, archive))
                thread = _new_thread()
                console.print(f"[dim]new thread {thread}[/]")
                continue
            if not text.strip() and not kept:
                console.print("[yellow]empty message ignored[/]")
                continue
            kept += [text] if text.strip() else []
            while kept and await _turn(agent, memory, settings, context, thread, kept[0]):
                kept.pop(0)
        if memory.pending():
            console.print("[dim]finishing memory work...[/]")
        await memory.drain()
        _print_memory_reports(memory)
    if kept:
        console.print(f"[yellow]{len(kept)} kept message(s) not sent[/]")
    return 0


def _read_message(arg: str) -> str:
    """The message of ``send``: the argument, or stdin (strict UTF-8) when it is ``-``."""
    from memory_graph_agent.turn.validation import InvalidInputError

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
    from memory_graph_agent.cli import session
    from memory_graph_agent.settings import Settings
    from memory_graph_agent.turn.validation import check_id

    context, settings = Context(user_id=args.user), Settings.from_env()
    if args.message is None and not (args.end_session and args.thread):
        raise ValueError("send needs a message, or --end-session --thread ID to archive a thread")
    thread = check_id(args.thread or _new_thread(), "thread_id")
    text = None
    if args.message is not None:  # validated before any service starts
        text = session.check_turn(settings, thread, _read_message(args.message))
    state = archive = None
    printer = None if args.json else ReplyPrinter("")
    async with session.open_agent(settings) as (agent, services, memory):
        if args.thread:
            await session.check_thread_owner(services, context, thread)
        if not args.json:
            console.print(f"[dim]thread {thread}[/]")
        if text is not None:
            state = await session.run_turn(
                agent, context, thread, text, on_token=printer, settings=settings
            )
            if printer is not None:  # the reply is shown before memory work finishes
                printer.close(str(state["messages"][-1].content))
        if args.end_session:
            archive = await session.end_session(agent, context, thread, memory)
        await memory.drain()
    reply = state["messages"][-1] if state else None
    done = archive is None or session.archived(archive)
    if args.json:
        out = {"user_id": context.user_id, "thread_id": thread, "reply": reply and reply.text}
        print(json.dumps(out if archive is None else {**out, "archived": done}))
    elif archive is not None:
        console.print(_archive_note(thread, archive))
    return 0 if done else 1
