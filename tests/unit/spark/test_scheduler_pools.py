"""The fair scheduler and the ledger's pool: a ledger micro-batch stores several tables at
once, and first come, first served would queue the merge's jobs behind all of them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from icetide.spark.session import LEDGER_POOL, SCHEDULER_POOLS, spark_conf
from tests.unit.spark.spark_configs import config


def test_sessions_schedule_fairly_between_the_ledgers_pool_and_the_default_one() -> None:
    conf = spark_conf(config(master="local[2]"))
    assert conf["spark.scheduler.mode"] == "FAIR"
    assert conf["spark.scheduler.allocation.file"] == str(SCHEDULER_POOLS)
    # The file is in the package, and declares the pool (else Spark warns on the console
    # at the first ledger job, and creates the pool with its defaults).
    pools = ET.parse(SCHEDULER_POOLS).getroot().findall("pool")
    assert [p.get("name") for p in pools] == [LEDGER_POOL]
    (ledger,) = pools
    assert ledger.findtext("schedulingMode") == "FIFO"
    assert ledger.findtext("weight") == "1"
