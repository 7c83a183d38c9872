"""The class archive's bookkeeping: one writer, only complete archives named, stale
locks taken over, the user's own flags respected (icetide/spark/class_archive.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from icetide.spark import class_archive
from icetide.spark.class_archive import Plan, archive_key, plan, write
from icetide.spark.session import uses_class_archive
from tests.unit.spark.spark_configs import config

KEY = "0123456789abcdef"


def trained(done: Plan) -> Plan:
    """``done`` as if its JVM had run long enough to write."""
    return Plan(
        option=done.option,
        final=done.final,
        writing=done.writing,
        lock=done.lock,
        started=done.started - class_archive.MIN_TRAINING_SECONDS,
    )


def fake_dump(path: Path) -> None:
    path.write_bytes(b"classes")


def test_the_first_writer_records_and_holds_the_lock_others_wait(tmp_path: Path) -> None:
    first = plan(tmp_path, KEY, write=True)
    assert first is not None and first.writing is not None and first.lock is not None
    assert "-XX:+RecordDynamicDumpInfo" in first.option.split()
    assert class_archive.QUIET in first.option.split()
    assert first.lock.read_text() == str(os.getpid())
    # The lock's holder (this process) is alive: nobody else writes, nobody uses anything.
    assert plan(tmp_path, KEY, write=True) is None
    assert plan(tmp_path, KEY, write=False) is None


def test_a_written_archive_is_named_and_then_used(tmp_path: Path) -> None:
    writer = plan(tmp_path, KEY, write=True)
    assert writer is not None and writer.writing is not None and writer.lock is not None
    assert write(trained(writer), fake_dump) is True
    assert (tmp_path / f"{KEY}.jsa").read_bytes() == b"classes"
    assert not writer.writing.exists() and not writer.lock.exists()
    user = plan(tmp_path, KEY, write=True)
    assert user is not None and user.writing is None
    assert f"-XX:SharedArchiveFile={tmp_path / f'{KEY}.jsa'}" in user.option.split()


def test_a_short_run_writes_nothing_and_frees_the_lock(tmp_path: Path) -> None:
    writer = plan(tmp_path, KEY, write=True)
    assert writer is not None
    dumped: list[Path] = []
    assert write(writer, dumped.append) is False
    assert dumped == [] and sorted(tmp_path.iterdir()) == []
    assert plan(tmp_path, KEY, write=True) is not None  # the next run may write


def test_a_failed_dump_leaves_no_archive_and_no_partial_file(tmp_path: Path) -> None:
    """A half-written archive must never get the name: a JVM that maps one dies."""
    writer = plan(tmp_path, KEY, write=True)
    assert writer is not None

    def half(path: Path) -> None:
        path.write_bytes(b"clas")
        raise RuntimeError("jcmd: the JVM went away")

    assert write(trained(writer), half) is False
    assert sorted(tmp_path.iterdir()) == []


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f"{KEY}.lock").write_text(str(gone.pid))
    (tmp_path / f"{KEY}.{gone.pid}.writing").write_bytes(b"cl")
    writer = plan(tmp_path, KEY, write=True)
    assert writer is not None and writer.lock is not None
    assert writer.lock.read_text() == str(os.getpid())
    assert write(trained(writer), fake_dump) is True
    # The dead writer's partial file went with it.
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{KEY}.jsa"]


def test_only_the_newest_archives_are_kept(tmp_path: Path) -> None:
    for age, name in enumerate(["old", "older", "oldest"]):
        archive = tmp_path / f"{name}.jsa"
        archive.write_bytes(b"x")
        stamp = time.time() - 100 * (age + 1)
        os.utime(archive, (stamp, stamp))
    writer = plan(tmp_path, KEY, write=True)
    assert writer is not None
    assert write(trained(writer), fake_dump) is True
    kept = sorted(p.name for p in tmp_path.glob("*.jsa"))
    assert kept == sorted([f"{KEY}.jsa", "old.jsa"][: class_archive.KEEP])


def test_the_key_follows_the_jars(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_bytes(b"jvm")
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    before = archive_key(java, [jar])
    assert archive_key(java, [jar]) == before
    jar.write_bytes(b"other")
    assert archive_key(java, [jar]) != before
    assert archive_key(java, [jar, tmp_path / "b.jar"]) != archive_key(java, [jar])


@pytest.mark.parametrize(
    "flags", ["-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/x.jsa", "-Xshare:off"]
)
def test_the_users_own_class_sharing_flags_win(tmp_path: Path, flags: str) -> None:
    conf = {"spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {flags}"}
    assert class_archive.for_session(conf, write=True, folder=tmp_path) is None
    assert class_archive.for_session({}, write=True, folder=tmp_path) is not None


@pytest.mark.parametrize(
    "flags",
    [
        "-javaagent:/opt/otel/opentelemetry-javaagent.jar",
        "-agentpath:/opt/profiler/libasyncProfiler.so=start",
        "-agentlib:jdwp=transport=dt_socket,server=y,suspend=n",
        "-XX:StartFlightRecording=filename=/tmp/run.jfr",
    ],
)
def test_a_jvm_with_a_class_file_hook_starts_without_the_archive(
    tmp_path: Path, flags: str
) -> None:
    """JDK 17 dies of SIGSEGV mapping a dynamic archive beside a class-file load hook:
    an agent or a flight recording, in the driver's options or in the environment the
    JVM reads options from."""
    for conf, environ in [
        ({"spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {flags}"}, {}),
        ({"spark.driver.defaultJavaOptions": flags}, {}),
        ({}, {"JAVA_TOOL_OPTIONS": flags}),
        ({}, {"JDK_JAVA_OPTIONS": flags}),
    ]:
        found = class_archive.for_session(conf, write=True, folder=tmp_path, environ=environ)
        assert found is None, (conf, environ)
    plain = {"JAVA_TOOL_OPTIONS": "-Dfile.encoding=UTF-8"}
    assert class_archive.for_session({}, write=True, folder=tmp_path, environ=plain) is not None


def test_only_a_local_master_with_the_setting_on_uses_an_archive() -> None:
    assert uses_class_archive(config(master="local[2]"))
    assert not uses_class_archive(config(master="local[2]", class_archive=False))
    assert not uses_class_archive(config(master="spark://127.0.0.1:7077"))
