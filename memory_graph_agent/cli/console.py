"""The one Rich console every command prints to, and the printer of streamed replies."""

from __future__ import annotations

from rich.console import Console

console = Console()


class ReplyPrinter:
    """Prints a reply as its tokens stream in, after ``prefix``; the callback of `run_turn`.

    At most ``limit`` characters are shown (all when ``None``). `close` ends the line; it
    prints ``final`` instead when nothing streamed (a reply that was not a model stream).
    """

    def __init__(self, prefix: str, limit: int | None = None) -> None:
        self.prefix = prefix
        self.limit = limit
        self.shown = 0
        self.streamed = False

    def __call__(self, token: str) -> None:
        """Print one token (plain text, no markup)."""
        if not self.streamed:
            console.print(self.prefix, end="")
            self.streamed = True
        if self.limit is not None:
            token = token[: max(0, self.limit - self.shown)]
        self.shown += len(token)
        if token:
            console.print(token, end="", markup=False, highlight=False, soft_wrap=True)

    def close(self, final: str = "") -> None:
        """End the reply's line (printing ``final`` if no token came)."""
        if not self.streamed:
            text = final if self.limit is None else final[: self.limit]
            console.print(self.prefix, end="")
            console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        console.print()
