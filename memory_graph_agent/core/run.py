"""What the domain reads of a run's context: whose memory, and which chat model.

`graph.context.Context` is the run's context; the domain types against this Protocol so
that it never imports the graph. The deployment's settings are
`memory_graph_agent.settings.Settings`, handed in separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class RunContext(Protocol):
    """The run's choices the domain reads (`graph.context.Context` has them)."""

    @property
    def user_id(self) -> str:
        """Whose memory the run reads and writes."""
        ...

    @property
    def model(self) -> str:
        """The chat model, as ``provider:model``."""
        ...


@dataclass(frozen=True)
class UserRun:
    """A run's context for one user: maintenance goes through users one by one."""

    user_id: str
    model: str


def for_user(ctx: RunContext, user_id: str) -> RunContext:
    """``ctx`` as it would be for ``user_id`` (same model)."""
    return UserRun(user_id=user_id, model=ctx.model)
