"""The JIT compiler's threads below the query's own on a local master.

On a machine of few cores the JVM's compiler threads compete with Spark's tasks and the
driver for the same cores, and they never rest: Catalyst's rules and Iceberg's metadata
code are wide and flat, so every merge takes more of it over the compile thresholds
(after 30 warm merges at 5M rows each still compiled for 0.4–1.6 s, ~1.6 s of a merge's
3.9 s of CPU on two cores; docs/merge-performance.md, "Where a warm merge's CPU goes").
Under a higher ``nice`` value the compiler still gets every idle moment, and yields the
cores while tasks wait for them. Measured in docs/merge-performance.md, "The JIT compiler
below the tasks".

Linux only, and only on a local master, where the executors are this JVM. Raising a
thread's ``nice`` value needs no privilege (lowering it back does). The JVM adds
compiler threads while it runs when its queues grow
(``UseDynamicNumberOfCompilerThreads``), so :data:`FIXED_COMPILER_THREADS` asks it to
start them all at once, and :func:`lower_compiler_priority` reaches them all.
"""

from __future__ import annotations

import os
from pathlib import Path

COMPILER_THREAD_NAMES = ("C1 CompilerThre", "C2 CompilerThre")
"""HotSpot's compiler threads (``C2 CompilerThread0``, …), cut to Linux's 15 characters."""

FIXED_COMPILER_THREADS = "-XX:-UseDynamicNumberOfCompilerThreads"
"""The driver JVM's option that starts every compiler thread with the JVM."""


def lower_compiler_priority(pid: int, nice: int, proc: Path = Path("/proc")) -> list[int]:
    """Set the ``nice`` value of the JVM ``pid``'s compiler threads; their thread ids.

    Nothing happens where ``proc`` has no such process (another system, a JVM on another
    host). A thread that ended meanwhile is skipped, and one that cannot be changed (a
    lower value without the privilege) keeps its priority: slower, never wrong.
    """
    tasks = proc / str(pid) / "task"
    if not tasks.is_dir():
        return []
    changed = []
    for task in tasks.iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        if not name.startswith(COMPILER_THREAD_NAMES):
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
        except OSError:
            continue
        changed.append(int(task.name))
    return sorted(changed)
