"""The session's JIT compiler threads run below its tasks (icetide/spark/jit_priority.py)."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from icetide.devservers.java import QUICK_COMPILER
from icetide.spark.jit_priority import FIXED_COMPILER_THREADS
from icetide.spark.jvm import jvm_class


def _nice_by_thread(pid: int) -> dict[str, set[int]]:
    threads: dict[str, set[int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            nice = os.getpriority(os.PRIO_PROCESS, int(task.name))
        except OSError:  # the thread ended meanwhile
            continue
        threads.setdefault(name, set()).add(nice)
    return threads


def test_the_compilers_run_at_nice_19_and_the_tasks_at_0(spark: SparkSession) -> None:
    """Every compiler thread, started with the JVM, at the configured ``nice`` (19, the
    default); Spark's task threads, and everything else the query runs on, at the JVM's own."""
    runtime = jvm_class("java.lang.management.ManagementFactory").getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert FIXED_COMPILER_THREADS in arguments
    assert spark.range(100_000).selectExpr("sum(id * 2)").first()[0] == 9_999_900_000

    pid = int(jvm_class("java.lang.ProcessHandle").current().pid())
    threads = _nice_by_thread(pid)
    compilers = {name: nice for name, nice in threads.items() if "CompilerThre" in name}
    # The tests' JVMs run the quick compiler only (tests/integration/conftest.py).
    quick_only = QUICK_COMPILER in arguments
    assert sorted(compilers) == ["C1 CompilerThre"] + ([] if quick_only else ["C2 CompilerThre"])
    assert set().union(*compilers.values()) == {19}
    # The JVM's own priority (0 unless the test run itself was started under ``nice``).
    started_at = os.getpriority(os.PRIO_PROCESS, pid)
    assert started_at < 19
    tasks = {name: nice for name, nice in threads.items() if name.startswith("Executor task")}
    assert tasks and set().union(*tasks.values()) == {started_at}
