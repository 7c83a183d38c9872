"""Crash soak: kill -9 capture, ledger and merge many times under a live workload; nothing
lost, nothing duplicated.

The soak-sized run of ``tests/integration/capture/test_capture_crash.py`` (which kills
each stage a few times, to cover each kind of kill point once). A private MariaDB runs
the live shop workload (statements, transactions, rollbacks, a key update, a 10,000-row
transaction); the tables are bootstrapped; then ``icetide capture``, ``stream`` and
``merge`` run as processes of their own, each in its own process group, and are SIGKILLed
(Python and JVM together) and restarted at once: capture 0.5–4 s after each start; the
ledger and the merge in turn 4–20 s after their start (Spark starting, tables being
created) and 0–3 s after they first stored work (a new snapshot of the customers ledger
or base table: mid-work). The loop runs
until ``--kills`` kills in all, ``--each`` of each stage, and ``--seconds`` have passed.
Then the writes stop, capture reads to the end of the binlog, the last events are
streamed and merged, and ``verify`` must find every base table equal to its MariaDB
table. Prints the kills per stage and the verdicts; exits 1 on a mismatch.

Each restart of a Spark stage starts a JVM: on a 2-core machine a run takes minutes.

    python bench/crash_soak.py                       # 20 kills, 3 of each stage at least
    python bench/crash_soak.py --kills 60 --each 10 --seconds 300 --seed 7
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' kill loop

from icetide.config import load_config  # noqa: E402
from icetide.demo.live import write_live_pipeline  # noqa: E402
from icetide.devservers.mariadb import MariaDBServer  # noqa: E402
from icetide.spark.session import build_session  # noqa: E402
from tests.integration.capture.kill_loop import Stage, crash_run, crash_stages  # noqa: E402

# python-mysql-replication opens its schema connection with pymysql's deprecated "db" key.
warnings.filterwarnings("ignore", "'db' is deprecated", DeprecationWarning)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills in all, at least")
    parser.add_argument("--each", type=int, default=3, help="kills of each stage, at least")
    parser.add_argument("--seconds", type=float, default=40.0, help="kill for this long at least")
    parser.add_argument("--seed", type=int, default=20, help="workload and kill moments")
    args = parser.parse_args()
    began = time.monotonic()
    until = began + args.seconds

    def enough(stages: list[Stage]) -> bool:
        kills = [s.kills for s in stages]
        return time.monotonic() >= until and sum(kills) >= args.kills and min(kills) >= args.each

    with tempfile.TemporaryDirectory(prefix="crash-soak-") as folder, MariaDBServer() as server:
        root, warehouse = Path(folder) / "pipeline", Path(folder) / "warehouse"
        stages = crash_stages(warehouse, None, spark_kills=None)
        spark = build_session(load_config(write_live_pipeline(root, server, warehouse=warehouse)))
        try:
            counts, verdicts = crash_run(
                root,
                warehouse,
                server,
                spark,
                stages,
                enough=enough,
                seed=args.seed,
                timeout=args.seconds * 20 + 600,
            )
        finally:
            spark.stop()
    for stage in stages:
        print(f"{stage.name}: {stage.kills} kills ({stage.kills_after_work} after stored work)")
    print(f"workload: {counts.statements:,} statements, {counts.transactions:,} transactions")
    for verdict in verdicts:
        print(verdict)
    print(f"{time.monotonic() - began:.0f}s")
    return 0 if verdicts and all(v.matches for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
