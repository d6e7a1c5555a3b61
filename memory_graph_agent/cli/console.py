"""The one Rich console every command prints to."""

from rich.console import Console

console = Console()
