"""Run one step for each of several items in threads of the one SparkSession.

The stages overlap small Spark jobs and catalog commits this way (one job's planning,
commits and Python work on the driver overlap another's tasks): the merge merges
tables two at a time, the ledger stores a micro-batch's chunks of tables four at a
time, and creating a run's tables goes two at a time. Every such place wants the same
things, kept here once: every item ends before the call returns (no thread outlives
the step that started it), the results come back in the items' order, and the first
item's failure, in that order, is raised once all have ended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from pyspark.util import inheritable_thread_target

I = TypeVar("I")  # noqa: E741 - an item
T = TypeVar("T")


def run_all(
    step: Callable[[I], T],
    items: Sequence[I],
    threads: int,
    name: str,
    carry_properties: bool = False,
) -> list[T]:
    """``step`` of each of ``items``, at most ``threads`` at once; the results in order.

    With one thread (or one item) the items run one after another in the caller's
    thread. ``carry_properties`` gives each thread the caller's Spark job properties
    (its job group, description and scheduler pool), so the jobs it runs count as the
    caller's: a streaming query's micro-batch, for one.
    """
    workers = min(threads, len(items))
    if workers <= 1:
        return [step(item) for item in items]
    task = inheritable_thread_target(step) if carry_properties else step
    with ThreadPoolExecutor(workers, thread_name_prefix=name) as pool:
        futures = [pool.submit(task, item) for item in items]
        wait(futures)
    return [future.result() for future in futures]
