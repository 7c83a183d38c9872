"""Where a benchmark's CPU goes: the processes of a run, grouped by what they do, read
from ``/proc`` while the run is under load.

A sampler thread reads every process's own CPU time (``utime + stime`` of
``/proc/<pid>/stat``, threads included: a JVM is one process) every ``interval``
seconds, and the machine's busy time from ``/proc/stat``. Each process is put in a group
by :func:`group_of` (its place under the benchmark or under ``icetide run``, and whether
it is a JVM) and its CPU counted from the first sample that saw it (or from zero, for a
process started after the window opened) to the last. Children's reaped time
(``cutime``) is not counted: a pyspark daemon's workers are counted while they live, and
adding their reaped time would count them twice. A process that lives less than one
interval is missed; PySpark reuses its Python workers (``spark.python.worker.reuse``),
so little is.

Linux only (``/proc``); the figures are CPU-seconds over the window and, divided by its
wall time, cores.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    cpu_s: float
    rss_bytes: int


PAGE = os.sysconf("SC_PAGE_SIZE")


def read_procs() -> dict[int, Proc]:
    """Every live process's parent, name, own CPU seconds and resident memory."""
    procs: dict[int, Proc] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:  # gone between the listing and the read
            continue
        # comm is in parentheses and may hold spaces: the fields after its last ")"
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        # rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15, rss 24 (pages)
        cpu = (int(rest[11]) + int(rest[12])) / TICKS
        procs[int(entry.name)] = Proc(
            int(entry.name), int(rest[1]), comm, cpu, int(rest[21]) * PAGE
        )
    return procs


def tree(pid: int, procs: dict[int, Proc]) -> list[int]:
    """``pid`` and every process under it.

    >>> procs = {p.pid: p for p in [Proc(1, 0, "init", 0, 0), Proc(2, 1, "a", 0, 0),
    ...     Proc(3, 2, "b", 0, 0), Proc(4, 1, "c", 0, 0)]}
    >>> sorted(tree(2, procs)), sorted(tree(1, procs))
    ([2, 3], [1, 2, 3, 4])
    """
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def machine_busy_s() -> tuple[float, float]:
    """The machine's busy and total CPU seconds since boot (all cores)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user
    return (total - idle) / TICKS, total / TICKS


def ancestors(pid: int, procs: dict[int, Proc]) -> list[int]:
    """``pid``'s parents up to init, nearest first."""
    chain: list[int] = []
    while pid in procs and procs[pid].ppid not in (0, pid):
        pid = procs[pid].ppid
        chain.append(pid)
    return chain


def group_of(pid: int, procs: dict[int, Proc], run_pid: int, bench_pid: int) -> str | None:
    """What a process is to the run: ``icetide run``'s Python driver, its JVM, its
    Python workers (PySpark's daemon and the workers it forks), the benchmark itself
    (delivery), a JVM the benchmark started (the Kafka broker); None for the rest.

    >>> procs = {p.pid: p for p in [Proc(1, 0, "init", 0, 0), Proc(10, 1, "python", 0, 0),
    ...     Proc(20, 10, "python", 0, 0), Proc(30, 20, "java", 0, 0),
    ...     Proc(40, 30, "python3", 0, 0), Proc(41, 40, "python3", 0, 0),
    ...     Proc(50, 10, "java", 0, 0), Proc(60, 1, "bash", 0, 0)]}
    >>> [group_of(p, procs, run_pid=20, bench_pid=10) for p in (10, 20, 30, 40, 41, 50, 60)]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['benchmark (delivery)', 'icetide driver (Python)', 'Spark JVM', 'Python workers',
     'Python workers', 'broker JVM', None]
    """
    if pid == run_pid:
        return "icetide driver (Python)"
    if pid == bench_pid:
        return "benchmark (delivery)"
    up = ancestors(pid, procs)
    java = procs[pid].comm == "java"
    if run_pid in up:
        return "Spark JVM" if java else "Python workers"
    if bench_pid in up:
        return "broker JVM" if java else "benchmark (delivery)"
    return None


@dataclass
class CpuSplit:
    """Samples the run's processes between :meth:`start` and :meth:`stop`."""

    run_pid: int
    bench_pid: int = field(default_factory=os.getpid)
    interval: float = 1.0
    _first: dict[int, float] = field(default_factory=dict)
    _last: dict[int, float] = field(default_factory=dict)
    _group: dict[int, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _window: tuple[float, float, float] = (0.0, 0.0, 0.0)
    _busy: tuple[float, float] = (0.0, 0.0)

    def _sample(self, *, opening: bool = False) -> None:
        procs = read_procs()
        for pid, proc in procs.items():
            if pid not in self._group:
                group = group_of(pid, procs, self.run_pid, self.bench_pid)
                if group is None:
                    continue
                self._group[pid] = group
                self._first[pid] = proc.cpu_s if opening else 0.0
            self._last[pid] = proc.cpu_s

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> None:
        self._sample(opening=True)
        busy, total = machine_busy_s()
        self._window = (time.monotonic(), busy, total)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """CPU-seconds per group over the window, with ``wall_s``, the machine's
        ``busy_s`` (every process) and ``all_cores_s`` (wall × cores)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        began, busy0, total0 = self._window
        busy1, total1 = machine_busy_s()
        split: dict[str, float] = {}
        for pid, group in self._group.items():
            split[group] = split.get(group, 0.0) + self._last[pid] - self._first[pid]
        split["wall_s"] = time.monotonic() - began
        split["busy_s"] = busy1 - busy0
        split["all_cores_s"] = total1 - total0
        return split


def render(split: dict[str, float]) -> list[str]:
    """Markdown lines: each group's cores and share of the machine's busy time."""
    wall, busy = split["wall_s"], split["busy_s"]
    cores = split["all_cores_s"] / wall if wall else 0.0
    named = {k: v for k, v in split.items() if k not in ("wall_s", "busy_s", "all_cores_s")}
    rows = sorted(named.items(), key=lambda kv: -kv[1])
    rows.append(("anything else on the machine", max(busy - sum(named.values()), 0.0)))
    lines = [
        f"- CPU over the {wall:.0f} s of delivery: the machine {busy / wall:.2f} of its "
        f"{cores:.0f} cores busy",
        "",
        "| process | cores | share of busy |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {s / wall:.2f} | {s / busy:.0%} |" for name, s in rows if busy]
    return lines
