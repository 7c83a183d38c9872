"""Schema-evolution benchmark: how long a source ``ADD COLUMN`` takes to converge while a
steady write load runs, and what the merge sustains meanwhile.

Starts a private MariaDB with one table (``--rows`` rows), bootstraps a pipeline, then
runs capture (following the binlog), the ledger stream (with change detection) and the
merge, all in this process, while a writer thread keeps ``--rate`` single-row writes per
second going (inserts and updates). Each round:

1. ``--window`` seconds of load with no schema change: merge throughput (events merged
   per second of merge time) is the baseline;
2. ``ALTER TABLE … ADD COLUMN cN INT`` at the source, the writer then filling ``cN``;
   the times from the DDL's commit to phase 1 (ledger and base ALTERed) and to full
   convergence (phase 3 recorded) are read from the tables' properties (the same figures
   ``icetide status`` shows), and the merge throughput during convergence is measured.

Prints medians over ``--repeat`` rounds, and the ratio of merge throughput during
convergence to without a change. This is a benchmark, not a test: it never fails on time.

    python bench/evolution_bench.py --rate 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from icetide.bootstrap.run import Bootstrap
from icetide.capture.runner import run_capture
from icetide.config import load_config
from icetide.devservers.mariadb import MariaDBServer
from icetide.evolution.detect import Detector, capturing_source
from icetide.evolution.source_schema import read_source_schema
from icetide.lake.alter import int_property, table_properties
from icetide.ledger.stage import LedgerStage
from icetide.merge.stage import MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract import phases as p
from icetide.schema.file import dump_schema_file
from icetide.spark.session import build_session


class Writer(threading.Thread):
    """Single-row writes at ``rate`` per second (70% updates, 30% inserts)."""

    def __init__(self, server: MariaDBServer, rate: int, rows: int) -> None:
        super().__init__(daemon=True)
        self.server, self.rate, self.next_id = server, rate, rows + 1
        self.stop = threading.Event()
        self.columns: list[str] = []
        self.written = 0

    def run(self) -> None:
        conn = self.server.connect("bench")
        rng = random.Random(7)
        with conn.cursor() as cur:
            started = time.monotonic()
            while not self.stop.is_set():
                extra = {c: rng.randint(0, 1000) for c in self.columns}
                if rng.random() < 0.3:
                    names = ["id", "v", *extra]
                    values = [self.next_id, "x", *extra.values()]
                    cur.execute(
                        f"INSERT INTO t ({', '.join(names)}) VALUES "
                        f"({', '.join(['%s'] * len(names))})",
                        values,
                    )
                    self.next_id += 1
                else:
                    sets = ", ".join(["v = %s", *[f"{c} = %s" for c in extra]])
                    cur.execute(
                        f"UPDATE t SET {sets} WHERE id = %s",
                        ["u", *extra.values(), rng.randint(1, self.next_id - 1)],
                    )
                conn.commit()
                self.written += 1
                lag = self.written / self.rate - (time.monotonic() - started)
                if lag > 0:
                    time.sleep(lag)
        conn.close()


def _config(root: Path, server: MariaDBServer) -> Path:
    doc: dict[str, Any] = {
        "pipeline": "evobench",
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(root / "warehouse"), "namespace": "bench"},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [
            {
                "name": "bench",
                "type": "mysql",
                "host": "127.0.0.1",
                "port": server.port,
                "user": server.user,
                "password": server.password or None,
                "server_id": 4999,
                "heartbeat": "1s",
            }
        ],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "schedule": {"stream_interval": "2s", "merge_interval": "2s"},
        "tables": [
            {"name": "t", "source": "bench.t", "schema": "schemas/t.yaml", "primary_key": ["id"]}
        ],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    table = config.table("t")
    dump_schema_file(
        read_source_schema(capturing_source(config, table), table), root / "schemas" / "t.yaml"
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="source writes per second")
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0, help="seconds of load per baseline")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, MariaDBServer() as server:
        root = Path(tmp)
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            cur.execute("USE bench")
            cur.execute("CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"INSERT INTO bench.t SELECT seq, 'seed' FROM seq_1_to_{int(args.rows)}")
            conn.commit()
        config = load_config(_config(root, server))
        spark = build_session(config)
        quiet = Reporter(Reporter.text(lambda line: None))
        ledger_pipe, merge_pipe = Pipeline(config, reporter=quiet), Pipeline(config, reporter=quiet)
        Bootstrap(spark, merge_pipe, config.sources[0]).run()
        stop = threading.Event()
        threading.Thread(
            target=run_capture,
            args=(config, config.sources[0]),
            kwargs={"follow": True, "should_stop": stop.is_set},
            daemon=True,
        ).start()
        ledger = LedgerStage(spark, ledger_pipe, on_signals=Detector(spark, ledger_pipe))
        query = ledger.start(once=False)
        merge = MergeStage(spark, merge_pipe)
        writer = Writer(server, args.rate, args.rows)
        writer.start()
        refs = merge_pipe.refs("t")

        def merge_for(seconds: float, until: Any = None) -> tuple[float, int, float]:
            """Merge in turns for ``seconds`` (or until ``until()``): events/s of merge time."""
            events, busy, began = 0, 0.0, time.monotonic()
            while time.monotonic() - began < seconds:
                result = merge.merge_table("t")
                ledger.tick()
                events += result.events
                busy += result.seconds
                if until is not None and until():
                    break
                time.sleep(0.5)
            return (events / busy if busy else 0.0), events, time.monotonic() - began

        baseline, during, to_phase1, to_done = [], [], [], []
        merge_for(args.window)  # warm up: catch up with the bootstrap hand-off
        for round_ in range(1, args.repeat + 1):
            rate, _, _ = merge_for(args.window)
            baseline.append(rate)
            column = f"c{round_}"
            version = merge_pipe.schema("t").version + 1
            with server.connect("bench") as conn, conn.cursor() as cur:
                cur.execute(f"ALTER TABLE t ADD COLUMN {column} INT")
            writer.columns.append(column)

            def converged(version: int = version) -> bool:
                base = table_properties(spark, refs.base)
                return (int_property(base, p.DATA_VERSION) or 0) >= version

            rate, _, _ = merge_for(600, converged)
            during.append(rate)
            ledger_props = table_properties(spark, refs.cdc)
            base_props = table_properties(spark, refs.base)
            source = int_property(ledger_props, p.SOURCE_TS) or 0
            phase1 = max(
                int_property(ledger_props, p.LEDGER_ALTERED) or 0,
                int_property(base_props, p.BASE_ALTERED) or 0,
            )
            to_phase1.append((phase1 - source) / 1000)
            to_done.append(((int_property(base_props, p.DATA_FILLED) or 0) - source) / 1000)
            print(
                f"round {round_}: DDL→phase 1 {to_phase1[-1]:.1f}s, DDL→converged "
                f"{to_done[-1]:.1f}s; merge {baseline[-1]:,.0f} ev/s without a change, "
                f"{during[-1]:,.0f} ev/s during convergence",
                flush=True,
            )
        writer.stop.set()
        writer.join()
        stop.set()
        query.stop()
        spark.stop()
    med = statistics.median
    print(
        f"\nmedians over {args.repeat} rounds at {args.rate} writes/s: "
        f"DDL→phase 1 {med(to_phase1):.1f}s, DDL→full convergence {med(to_done):.1f}s "
        "(the source DDL time has 1s resolution); merge throughput "
        f"{med(baseline):,.0f} ev/s without a change vs {med(during):,.0f} ev/s during "
        f"convergence (ratio {med(during) / med(baseline) if med(baseline) else 0:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
