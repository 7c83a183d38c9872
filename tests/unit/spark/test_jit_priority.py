"""The JIT compiler's threads below the tasks on a local master (spark/jit_priority.py)."""

from __future__ import annotations

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
