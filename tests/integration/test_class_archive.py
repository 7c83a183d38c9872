"""A session's JVM saves its classes as ``icetide run`` stops, and the next JVM maps them
(icetide/spark/class_archive.py). Two child processes: an archive is read only by a
JVM that starts after it exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from icetide.demo.run import write_pipeline
from icetide.spark.class_archive import ARCHIVE_DIR_ENV

CHILD = """
import sys
from pathlib import Path
from icetide.config import load_config
from icetide.spark import class_archive
from icetide.spark.session import build_session, stop_session
class_archive.MIN_TRAINING_SECONDS = 0  # this child stands for a long run
spark = build_session(load_config(Path(sys.argv[1])), writes_class_archive=True)
assert spark.range(1000).selectExpr("sum(id)").first()[0] == 499500
print("saved:", stop_session(spark), file=sys.stderr)
"""


def start_a_session(
    work: Path, archives: Path, class_log: Path
) -> subprocess.CompletedProcess[str]:
    config = write_pipeline(work)
    doc = yaml.safe_load(config.read_text())
    doc.setdefault("spark", {})["master"] = "local[1]"
    doc["spark"].setdefault("conf", {})["spark.driver.extraJavaOptions"] = (
        f"-Xlog:class+load=info:file={class_log}"
    )
    config.write_text(yaml.safe_dump(doc))
    env = {**os.environ, ARCHIVE_DIR_ENV: str(archives)}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def shared(class_log: Path) -> list[str]:
    """Classes the JVM mapped from the dynamic archive (the "top" layer)."""
    return [
        line for line in class_log.read_text().splitlines() if "shared objects file (top)" in line
    ]


def test_the_next_jvm_maps_the_classes_the_first_one_saved(tmp_path: Path) -> None:
    archives = tmp_path / "archives"
    first = start_a_session(tmp_path / "first", archives, tmp_path / "first.log")
    assert first.returncode == 0, first.stderr[-3000:]
    saved = sorted(archives.iterdir())
    assert [p.suffix for p in saved] == [".jsa"], saved  # no lock or partial file left
    assert f"saved: {saved[0]}" in first.stderr
    assert saved[0].stat().st_size > 50_000_000  # Spark's classes, not a handful
    # The JDK announces the dump on System.out, which is the command's stdout: muted.
    assert "dump" not in first.stdout.lower()
    assert shared(tmp_path / "first.log") == []

    second = start_a_session(tmp_path / "second", archives, tmp_path / "second.log")
    assert second.returncode == 0, second.stderr[-3000:]
    mapped = shared(tmp_path / "second.log")
    assert any("] org.apache.spark.SparkContext source:" in line for line in mapped), mapped[:5]
    assert len(mapped) > 5000
    assert "saved: None" in second.stderr  # a user of the archive writes nothing
    assert sorted(archives.iterdir()) == saved
