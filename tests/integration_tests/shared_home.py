"""The machine-wide data home's servers serve other processes too: no test may stop them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_graph_agent.local import embedded

STOPPERS = ("_stop_redis", "_stop_postgres")  # what `stop_services` and fault tests call


def refusing(stop: Callable[[embedded._Layout], None], shared: Path) -> Callable:
    """``stop`` for any home but ``shared``; for ``shared``, an `AssertionError` instead."""

    def stop_unless_shared(layout: embedded._Layout) -> None:
        if layout.home.resolve() == shared.resolve():
            raise AssertionError(
                f"a test tried to stop the embedded servers of the shared home {shared}; "
                "other processes use them: start servers of your own with `private_home`"
            )
        stop(layout)

    return stop_unless_shared


@contextlib.contextmanager
def shared_servers_never_stopped(shared: Path) -> Iterator[None]:
    """While active, stopping the servers of ``shared`` fails the test instead."""
    with pytest.MonkeyPatch.context() as patch:
        for name in STOPPERS:
            patch.setattr(embedded, name, refusing(getattr(embedded, name), shared))
        yield
