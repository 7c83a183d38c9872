"""The JIT compiler's threads below the tasks on a local master (spark/jit_priority.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from icetide.spark.jit_priority import FIXED_COMPILER_THREADS, lower_compiler_priority
from icetide.spark.session import spark_conf
from tests.unit.spark.spark_configs import config

OPTIONS = "spark.driver.extraJavaOptions"


def test_a_local_master_starts_every_compiler_thread_with_the_jvm() -> None:
    """The threads :func:`lower_compiler_priority` changes once must be all there are."""
    assert FIXED_COMPILER_THREADS in spark_conf(config(master="local[2]"))[OPTIONS].split()
    assert "-Duser.timezone=UTC" in spark_conf(config(master="local[2]"))[OPTIONS].split()


def test_a_users_jvm_flags_join_icetides_after_them() -> None:
    """A user's own flags (a GC log, a stack size) no longer take away the UTC default
    or the fixed compiler threads; set after them, the user's win where they conflict
    (the JVM takes the last of two)."""
    user = {
        OPTIONS: "-Xlog:gc -Duser.timezone=Europe/Paris",
        "spark.executor.extraJavaOptions": " -Xss4m ",
        "spark.sql.ansi.enabled": "true",
    }
    conf = spark_conf(config(master="local[2]", conf=user))
    assert conf[OPTIONS].split() == [
        "-Duser.timezone=UTC",
        FIXED_COMPILER_THREADS,
        "-Xlog:gc",
        "-Duser.timezone=Europe/Paris",
    ]
    assert conf["spark.executor.extraJavaOptions"] == "-Duser.timezone=UTC -Xss4m"
    assert conf["spark.sql.ansi.enabled"] == "true"
    blank = spark_conf(config(master="local[2]", conf={OPTIONS: " "}))
    assert blank[OPTIONS] == spark_conf(config(master="local[2]"))[OPTIONS]


@pytest.mark.parametrize(
    "spark", [{"master": "spark://127.0.0.1:7077"}, {"master": "local[2]", "compiler_nice": 0}]
)
def test_a_cluster_or_a_nice_of_0_leaves_the_jvm_as_it_starts(spark: dict[str, Any]) -> None:
    assert FIXED_COMPILER_THREADS not in spark_conf(config(**spark))[OPTIONS]


@pytest.mark.parametrize("nice", [-1, 20])
def test_a_nice_value_outside_0_to_19_is_refused_naming_the_field(nice: int) -> None:
    with pytest.raises(ValidationError, match="compiler_nice"):
        config(compiler_nice=nice)


def test_no_such_process_changes_nothing(tmp_path: Path) -> None:
    """Another system (no ``/proc``) or a JVM that is not on this host."""
    assert lower_compiler_priority(2**22 + 1, 19) == []
    assert lower_compiler_priority(1, 19, proc=tmp_path) == []


def test_both_compilers_threads_are_lowered_and_no_other(tmp_path: Path) -> None:
    """C1's and C2's threads by their names as Linux cuts them, and nothing else: the
    tests' own JVMs run the quick compiler only (tests/integration/conftest.py), so no C2
    thread of a real JVM is seen there. Real threads of this process stand behind a
    folder laid out as ``/proc`` (a thread may lower its own priority)."""
    names = ["C1 CompilerThre", "C2 CompilerThre", "Executor task l", "C2 Compiler", "main"]
    started, done = threading.Barrier(len(names) + 1), threading.Event()
    ids: list[int] = []

    def thread() -> None:
        ids.append(threading.get_native_id())
        started.wait()
        done.wait()

    workers = [threading.Thread(target=thread) for _ in names]
    for worker in workers:
        worker.start()
    started.wait()
    try:
        for tid, name in zip(ids, names, strict=True):
            (tmp_path / "7" / "task" / str(tid)).mkdir(parents=True)
            (tmp_path / "7" / "task" / str(tid) / "comm").write_text(name + "\n")
        before = {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in ids}
        assert lower_compiler_priority(7, 19, proc=tmp_path) == sorted(ids[:2])
        assert [os.getpriority(os.PRIO_PROCESS, tid) for tid in ids[:2]] == [19, 19]
        assert {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in ids[2:]} == {
            tid: before[tid] for tid in ids[2:]
        }
    finally:
        done.set()
        for worker in workers:
            worker.join()
