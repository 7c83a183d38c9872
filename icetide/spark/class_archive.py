"""A class-data archive that spares a new session's JVM most of its class loading.

Why: a fresh Spark JVM spends its first seconds loading, parsing and verifying tens of
thousands of classes, and every command, the demo and every restart of ``icetide run``
starts one. Measured in a fresh JVM, the session, the first job and the first Iceberg
create and insert took 4.0-5.0, 4.6-6.3 and 2.0-2.5 s without an archive and 3.2-3.9,
2.9-3.4 and 1.5 s with one; ``icetide demo`` 72 s and 66-67 s (docs/merge-performance.md,
"A class archive for every new JVM"). The one JVM that writes the archive runs ~1 s slower
in those steps.

How: the JDK's dynamic class-data sharing (JEP 350). A JVM started with
``-XX:+RecordDynamicDumpInfo`` writes the classes it has loaded into a file when asked
(the ``VM.cds dynamic_dump`` diagnostic command, JDK 17); one started with
``-XX:SharedArchiveFile=F`` maps them instead. JDK 17 cannot create the archive on its
own (``-XX:+AutoCreateSharedArchive`` came in JDK 19), so this module does that part:

- **One archive per JVM and classpath** (:func:`archive_key`): another JDK, another Spark
  or another set of jars gets its own archive; a JVM that still finds its archive does
  not match (another build) ignores it.
- **One writer per archive**, the session that takes the key's lock file. Only ``icetide
  run`` asks to write, and it writes as it stops (:func:`write`), after at least
  :data:`MIN_TRAINING_SECONDS`: the archive then holds the classes of streaming and
  merging, not of a status query or of start-up alone. A run stopped sooner writes
  nothing, and a later run tries again.
- **Only a complete archive gets its name.** The JVM writes to a temporary name, renamed
  once the dump returned: a JVM that maps a truncated archive dies of SIGBUS.
- **Quiet:** the JVM's ``cds`` log is off, since the JVM's stdout is the command's (where
  results go, ``status --output json``) and an archive it cannot use is no error.
- **Only on a local master:** on a cluster the executors are other JVMs, on other hosts.
- **Not beside a class-file hook.** A Java agent that transforms classes (the monitoring
  agents of OpenTelemetry, Datadog and the like), a JVMTI agent, or a flight recording
  started with the JVM (``-XX:StartFlightRecording``) installs a class-file load hook,
  and JDK 17 then dies of SIGSEGV at start-up as it maps the archive's first class
  (``KlassFactory::check_shared_class_file_load_hook``; seen with 17.0.15, a plain
  ``-javaagent`` whose transformer changes nothing is enough). Such a JVM starts without
  the archive: slower to start, never dead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

ARCHIVE_DIR_ENV = "ICETIDE_CLASS_ARCHIVE_DIR"
"""Where archives are kept, when set (default ``~/.cache/icetide/class-archive``)."""

QUIET = "-Xlog:cds*=off"
"""Silences the JVM's class-sharing log (an unusable archive, classes it skipped)."""

KEEP = 2
"""Archives kept in the folder: the newest; each is 100-200 MB."""

MIN_TRAINING_SECONDS = 30.0
"""A writer's JVM must have run this long to write: one stopped at once has loaded little
beyond start-up, and an archive, once written, is kept."""

_USER_FLAGS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare:off")
"""The user's own choice of class sharing: theirs wins."""

CLASS_FILE_HOOKS = ("-javaagent", "-agentlib", "-agentpath", "StartFlightRecording")
"""Options that install a class-file load hook, with which JDK 17 cannot map a dynamic
archive (see the module's doc)."""

JAVA_OPTIONS_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
"""Environment variables every JVM started here reads options from."""


def default_folder() -> Path:
    """``$ICETIDE_CLASS_ARCHIVE_DIR``, else ``~/.cache/icetide/class-archive``."""
    configured = os.environ.get(ARCHIVE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "icetide" / "class-archive"


@dataclass(frozen=True)
class Plan:
    """What one session's JVM does with the archive of its key."""

    option: str
    """The JVM flags to add to ``spark.driver.extraJavaOptions``."""
    final: Path
    """The archive's path once complete."""
    writing: Path | None = None
    """The temporary file this session's JVM writes to (the writer only)."""
    lock: Path | None = None
    """The writer's lock file, removed by :func:`write`."""
    started: float = 0.0
    """When the writer's JVM started (``time.monotonic``)."""


def java_binary() -> Path | None:
    """The ``java`` that ``spark-submit`` runs: ``$JAVA_HOME/bin/java``, else PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found else None


def archive_key(java: Path, classpath: list[Path]) -> str:
    """A name for the archive of this JVM and these jars: their paths, sizes and times.

    The JVM checks the same itself and ignores an archive that does not match; the key
    keeps two setups from taking turns overwriting one archive.
    """
    digest = hashlib.sha256()
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    for path in [java, libjvm, *classpath]:
        digest.update(str(path).encode())
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f":{stat.st_size}:{stat.st_mtime_ns}".encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def spark_classpath(conf: dict[str, str]) -> list[Path]:
    """Every jar the session's JVM loads classes from: the driver's extra class path,
    Spark's own jars and ``spark.jars``, in that order."""
    import pyspark

    extra = [Path(p) for p in conf.get("spark.driver.extraClassPath", "").split(":") if p]
    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    jars = [Path(p) for p in conf.get("spark.jars", "").split(",") if p]
    return extra + spark_jars + jars


def plan(folder: Path, key: str, *, write: bool) -> Plan | None:
    """Use the archive of ``key`` when it exists; else, when ``write`` and no other
    session is writing it, write it; else nothing (None). Never raises for a folder it
    cannot create or write: the session then runs without an archive."""
    final = folder / f"{key}.jsa"
    if final.is_file():
        return Plan(option=f"{QUIET} -XX:SharedArchiveFile={final}", final=final)
    if not write:
        return None
    lock = folder / f"{key}.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not _take(lock):
            return None
    except OSError:
        return None
    return Plan(
        option=f"{QUIET} -XX:+RecordDynamicDumpInfo",
        final=final,
        writing=folder / f"{key}.{os.getpid()}.writing",
        lock=lock,
        started=time.monotonic(),
    )


def _take(lock: Path) -> bool:
    """Create ``lock`` holding our pid; a lock whose process is gone is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _holder_alive(lock):
                return False
            with contextlib.suppress(OSError):
                lock.unlink()
            continue
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return True
    return False


def _holder_alive(lock: Path) -> bool:
    try:
        return _alive(int(lock.read_text().strip() or "0"))
    except (OSError, ValueError):
        return False


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write(done: Plan, dump: Callable[[Path], None]) -> bool:
    """As the writer's session stops: ``dump`` the JVM's classes to the temporary file and
    name it, when the JVM ran :data:`MIN_TRAINING_SECONDS`; release the lock in any case.
    True when the archive now exists. A no-op for a session that only used an archive.

    A failed dump leaves no archive and is not an error: the next run tries again.
    """
    if done.writing is None or done.lock is None:
        return done.final.is_file()
    try:
        if time.monotonic() - done.started < MIN_TRAINING_SECONDS:
            return False
        dump(done.writing)
        done.writing.replace(done.final)
        _prune(done.final.parent, keep=done.final)
        return True
    except Exception:  # noqa: BLE001 - the run is stopping; an archive is only a speed-up
        return False
    finally:
        release(done)


def release(done: Plan) -> None:
    """Remove a writer's partial file and lock, the archive unwritten (its JVM is gone)."""
    for leftover in (done.writing, done.lock):
        if leftover is not None:
            with contextlib.suppress(OSError):
                leftover.unlink()


def dump_classes(pid: int, path: Path, timeout: float = 120) -> None:
    """Ask the JVM ``pid`` to write its loaded classes to ``path``: ``jcmd``'s ``VM.cds
    dynamic_dump`` (JDK 17), from the same JDK as the JVM. Raises when it did not."""
    java = java_binary()
    jcmd = java.parent / "jcmd" if java else None
    if jcmd is None or not jcmd.is_file():
        raise FileNotFoundError("no jcmd next to java (a JRE without the JDK's tools)")
    done = subprocess.run(
        [str(jcmd), str(pid), "VM.cds", "dynamic_dump", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0 or not path.is_file():
        raise RuntimeError(f"jcmd wrote no class archive: {done.stdout}{done.stderr}".strip())


def _prune(folder: Path, keep: Path) -> None:
    """Remove all but the :data:`KEEP` newest archives (``keep`` always stays), and
    partial files whose writer is gone (killed while dumping)."""
    archives = sorted(folder.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [a for a in archives if a != keep][KEEP - 1 :]:
        with contextlib.suppress(OSError):
            old.unlink()
    for stale in folder.glob("*.*.writing"):  # <key>.<pid of its writer>.writing
        pid = stale.name.split(".")[1]
        if not pid.isdigit() or not _alive(int(pid)):
            with contextlib.suppress(OSError):
                stale.unlink()


def for_session(
    conf: dict[str, str],
    *,
    write: bool,
    folder: Path | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Plan | None:
    """The archive plan for a session of this Spark ``conf`` (a local master's), or None
    where the user's own flags already choose class sharing, where the JVM will have a
    class-file hook (:data:`CLASS_FILE_HOOKS`, in the driver's options or in ``environ``'s
    :data:`JAVA_OPTIONS_ENV`), or where no ``java`` is found."""
    options = " ".join(
        [
            conf.get("spark.driver.defaultJavaOptions", ""),
            conf.get("spark.driver.extraJavaOptions", ""),
            *(environ.get(name, "") for name in JAVA_OPTIONS_ENV),
        ]
    )
    if any(flag in options for flag in (*_USER_FLAGS, *CLASS_FILE_HOOKS)):
        return None
    java = java_binary()
    if java is None:
        return None
    return plan(folder or default_folder(), archive_key(java, spark_classpath(conf)), write=write)
