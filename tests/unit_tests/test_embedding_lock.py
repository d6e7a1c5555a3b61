"""The local embeddings' lock: a turn's query never queues behind memory's batches."""

from __future__ import annotations

import threading
import time

from memory_graph_agent.services.models import QueriesFirstLock


def _waiter(lock: QueriesFirstLock, query: bool, order: list[str], name: str) -> threading.Thread:
    def run() -> None:
        with lock.hold(query=query):
            order.append(name)
            time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_waiting_query_goes_before_batches_that_waited_longer():
    lock, order = QueriesFirstLock(), []
    with lock.hold(query=False):  # memory is encoding a chunk
        batches = [_waiter(lock, False, order, f"batch{i}") for i in range(3)]
        time.sleep(0.05)
        query = _waiter(lock, True, order, "query")
        time.sleep(0.05)
    for thread in [*batches, query]:
        thread.join(5)
    assert order[0] == "query" and sorted(order[1:]) == ["batch0", "batch1", "batch2"]


def test_one_holder_at_a_time():
    lock, inside, peak = QueriesFirstLock(), [0], [0]

    def run(query: bool) -> None:
        for _ in range(20):
            with lock.hold(query=query):
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
                time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=run, args=(i % 2 == 0,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert peak[0] == 1
