"""The driver heap of a local master: sized from the machine unless the config says."""

from __future__ import annotations

from icetide.spark.session import local_driver_memory, machine_memory, spark_conf
from tests.unit.spark.spark_configs import config

MEMORY = "spark.driver.memory"


def test_a_local_master_gets_a_quarter_of_the_machine_within_1g_and_4g() -> None:
    assert spark_conf(config(master="local[2]"))[MEMORY] == local_driver_memory(machine_memory())
    assert [local_driver_memory(g * 2**30) for g in (0, 3, 6, 12, 64)] == [
        "1024m",
        "1024m",
        "1536m",
        "3072m",
        "4096m",
    ]


def test_the_config_sizes_it_and_a_cluster_keeps_its_own() -> None:
    """``spark.conf`` wins; on a cluster the deployment sizes the driver (spark-submit's
    ``--driver-memory``), so icetide sets nothing."""
    assert spark_conf(config(master="local[2]", conf={MEMORY: "12g"}))[MEMORY] == "12g"
    assert MEMORY not in spark_conf(config(master="spark://127.0.0.1:7077"))
