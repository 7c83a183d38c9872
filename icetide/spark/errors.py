"""The one boundary where JVM errors from py4j become icetide errors.

A py4j error's first line is only ``An error occurred while calling o59.sql.``; what
went wrong is further down, in the Java exception and its ``Caused by:`` chain. The
message shows the root cause, and the hint says whether a plain rerun can help: an
unreachable catalog comes back, a read-only warehouse does not until someone fixes it.
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from icetide.errors import (
    CatalogError,
    CatalogUnavailableError,
    CommitConflictError,
    GaveUp,
    IcetideError,
    StageError,
)

_UNREACHABLE = (
    "ConnectException",
    "UnknownHostException",
    "NoRouteToHostException",
    "SocketTimeoutException",
    "Connection refused",
    "Connection reset",
    "NoHttpResponseException",
    "RESTException",
    # The server went away during a commit: reading the progress again says whether
    # the commit landed, so the step is redone, never assumed lost or done.
    "CommitStateUnknownException",
)
_SERVER_FAILED = ("ServiceFailureException", "ServiceUnavailableException")
"""The REST catalog answered 5xx: it was reached, and it (or its store, or a proxy in
front of it) failed. Retried as an outage is, but said as what it is: the catalog
server's log, not the network, says why."""
_REFUSED = (
    "AccessDeniedException",
    "Permission denied",
    "Read-only file system",
    "Mkdirs failed",
    "NotAuthorizedException",
    "ForbiddenException",
    "ParentNotDirectoryException",
)
_NAMESPACE = ("NoSuchNamespaceException",)
_CONFLICT = ("CommitFailedException",)
# ValidationException also reports bad writes (incompatible schema): only these say that
# a concurrent commit got there first.
_CONFLICT_VALIDATION = (
    "conflict",
    "Cannot commit",
    "found new",
    "Found new",
    "Missing required files",
    "concurrent",
    "could not be found in the latest snapshot",  # rewrite_manifests racing an append
)

_CATALOG_FAILURES: tuple[tuple[tuple[str, ...], type[IcetideError], str, str], ...] = (
    (
        _REFUSED,
        CatalogError,
        "the Iceberg catalog or its storage refuses to be written",
        "make catalog.warehouse writable for this user (or fix the credentials in "
        "catalog.properties); nothing was committed by the failed step, and a rerun after "
        "the fix resumes where it stopped — rerunning before would fail again",
    ),
    (
        _SERVER_FAILED,
        CatalogUnavailableError,
        "the Iceberg catalog answered with a server error",
        "the catalog server, or a store or proxy behind it, failed (its log says why); "
        "nothing was lost, and the step is retried with backoff (or rerun the command once "
        "the catalog answers again)",
    ),
    (
        _UNREACHABLE,
        CatalogUnavailableError,
        "the Iceberg catalog or its storage is not reachable",
        "check catalog.uri / catalog.warehouse and the network; nothing was lost, and the "
        "step is retried with backoff (or rerun the command once the catalog is back)",
    ),
)
"""The catalog's failures told by a sign in the error's text, in the order they are
looked for (a refusal first: no retry helps it; a 5xx before a lost connection, as
the server was reached): the error, what it says happened, and what to do."""

_PY4J_HEADER = re.compile(r"^An error occurred while calling \S+\.?$")
_PY4J_MISSING = re.compile(r"^[\w.$]+ does not exist in the JVM$")
"""py4j's answer to a look-up of a class or member that got no answer: its reflection
call fails the same way when the JVM has gone as when the name is missing."""
_CAUSED_BY = "Caused by: "
_JAVA_CLASS = re.compile(r"^((?:[a-z_$][\w$]*\.)+)([A-Z][\w$]*(?:Exception|Error|Throwable)\b.*)$")


def root_cause(exc: BaseException) -> str:
    """The innermost cause of a JVM failure, on one line, without Java package names.

    >>> text = (
    ...     "An error occurred while calling o59.sql.\\n"
    ...     ": org.apache.iceberg.exceptions.RuntimeIOException: Failed to write\\n"
    ...     "\\tat org.apache.iceberg.Foo.bar(Foo.java:1)\\n"
    ...     "Caused by: java.io.IOException: Mkdirs failed to create file:/wh/t\\n"
    ...     "\\t... 12 more"
    ... )
    >>> root_cause(RuntimeError(text))
    'IOException: Mkdirs failed to create file:/wh/t'
    """
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        # PySpark's captured exceptions carry their Java cause chain as Python objects.
        return root_cause(cause)
    python = _python_error(str(exc))
    if python is not None:
        return python
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    causes = [line[len(_CAUSED_BY) :] for line in lines if line.startswith(_CAUSED_BY)]
    if causes:
        return _short(causes[-1])
    first = lines[0]
    if _PY4J_HEADER.match(first) and len(lines) > 1:
        first = lines[1].lstrip(": ").strip()
    return _short(first)


_PYTHON_PROXY = "An exception was raised by the Python Proxy"
_PYTHON_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Exit)\b.*)$")


def _python_error(text: str) -> str | None:
    r"""The Python exception a JVM failure carries, when Python code that Spark called
    back (a streaming batch's ``foreachBatch``) raised it: the last exception line of its
    traceback, without the module path; None when the failure did not come from there.

    >>> _python_error(
    ...     "py4j.Py4JException: An exception was raised by the Python Proxy. Return "
    ...     "Message: Traceback (most recent call last):\n"
    ...     '  File "x.py", line 3, in call\n    raise SchemaError(m)\n'
    ...     "icetide.errors.SchemaError: primary_key: needs at least one column\n"
    ...     "\tat py4j.Protocol.getReturnValue(Protocol.java:476)"
    ... )
    'SchemaError: primary_key: needs at least one column'
    """
    if _PYTHON_PROXY not in text:
        return None
    found = None
    for line in text.split(_PYTHON_PROXY, 1)[1].splitlines():
        match = _PYTHON_RAISED.match(line.rstrip())
        if match and not line.startswith((" ", "\t")):
            found = match.group(1)
    return found


def _short(line: str) -> str:
    """``java.io.IOException: msg`` → ``IOException: msg`` (the package says nothing)."""
    match = _JAVA_CLASS.match(line)
    return match.group(2) if match else line


_USERINFO = re.compile(r"(\b[a-zA-Z][\w+.-]*://)[^/\s@]+@")


def without_userinfo(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it masked: a JVM message
    naming the catalog's URI must not print a secret written into it.

    >>> without_userinfo("Connect to http://ann:s3cret@cat:8181/v1 failed")
    'Connect to http://***@cat:8181/v1 failed'
    """
    return _USERINFO.sub(r"\1***@", text)


def translate(exc: BaseException, action: str) -> IcetideError:
    """Map a Spark/py4j exception raised while doing ``action`` to an icetide error."""
    if isinstance(exc, IcetideError):
        return exc
    text = str(exc)
    cause = without_userinfo(root_cause(exc))
    for signs, kind, what, hint in _CATALOG_FAILURES:
        if any(sign in text for sign in signs):
            return kind(f"{action}: {what}: {cause}", hint=hint)
    if is_commit_conflict(text):
        return CommitConflictError(
            f"{action}: a concurrent commit won the race: {cause}",
            hint="nothing of this step was committed; it is retried (or rerun the command)",
        )
    if any(sign in text for sign in _NAMESPACE):
        return CatalogError(
            f"{action}: {cause}",
            hint="check catalog.name and catalog.namespace; nothing was lost",
        )
    return StageError(
        f"{action} failed: {cause}",
        hint="nothing was committed by the failed step; if the cause above is temporary a "
        "rerun resumes where it stopped, otherwise fix it first (it would fail again)",
    )


def is_commit_conflict(text: str) -> bool:
    """True when a JVM error's text says another commit got there first.

    >>> is_commit_conflict("org.apache.iceberg.exceptions.ValidationException: "
    ...     "Cannot commit, found new position delete for replaced data file")
    True
    >>> is_commit_conflict("ValidationException: Deleted manifest m0.avro could not be "
    ...     "found in the latest snapshot 61024")
    True
    >>> is_commit_conflict("ValidationException: Cannot write incompatible dataset")
    False
    """
    if any(sign in text for sign in _CONFLICT):
        return True
    return "ValidationException" in text and any(sign in text for sign in _CONFLICT_VALIDATION)


SPARK_OOM_EXIT = 52
"""The exit code of a Spark JVM that an ``OutOfMemoryError`` ended (``SparkExitCode.OOM``:
Spark's handler of uncaught errors exits with it)."""


JVM_EXIT_WAIT = 2.0
"""Seconds to wait for the JVM's exit status after a failure on py4j's socket: a killed
JVM's sockets close a moment before its exit can be read, so the first failures of a
JVM being killed would otherwise pass for an outage."""


def jvm_exit_code(wait: float = 0.0) -> int | None:
    """The exit status of the Spark JVM this process started, once it has exited (waiting
    up to ``wait`` seconds for it); None while it runs, or when no JVM was started here
    (``Popen``'s status: a signal's number, negated, for a JVM a signal ended)."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        return int(proc.wait(wait)) if wait > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None


def jvm_exit_reason(code: int) -> tuple[str, str]:
    """Why a Spark JVM that exited with ``code`` did, and what to do: for people.

    >>> jvm_exit_reason(52)[0]
    'code 52: it ran out of memory (OutOfMemoryError)'
    >>> jvm_exit_reason(-9)[0]
    'killed by SIGKILL'
    """
    again = "everything committed is kept, and a restart resumes where it stopped"
    if code == SPARK_OOM_EXIT:
        return (
            f"code {code}: it ran out of memory (OutOfMemoryError)",
            "give the driver more memory (spark.conf: {spark.driver.memory: 8g} in the "
            "config; a local master's default is a quarter of the machine's memory, at "
            "most 4g, shared with its executors) or "
            "make micro-batches smaller (transport.max_messages_per_trigger or "
            f"max_files_per_trigger); {again}",
        )
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return (
            f"killed by {name}",
            "something outside icetide ended it (the kernel's out-of-memory killer sends "
            f"SIGKILL: see dmesg); {again}",
        )
    return f"code {code}", f"the JVM's own lines above say why; {again}"


def jvm_exited(action: str, wait: float = 0.0) -> GaveUp | None:
    """The failure to report when this process's Spark JVM has exited (waiting up to
    ``wait`` seconds for that), else None.

    Every later call into Spark fails alike (``Connection refused`` on py4j's socket,
    which reads like a catalog outage) and no restart inside this process brings the JVM
    back: a long-running command must end, saying why.
    """
    code = jvm_exit_code(wait)
    if code is None:
        return None
    reason, hint = jvm_exit_reason(code)
    return GaveUp(f"{action}: the Spark JVM has exited ({reason})", hint=hint)


def on_py4j_socket(exc: BaseException) -> bool:
    """True when ``exc``, or an error it was raised from, is a failure of py4j's socket
    (not a Java exception the JVM sent back): what a call into a JVM that has gone sees.

    That is a network error, or py4j's bare ``Py4JError`` for a call that got no answer:
    py4j catches the socket's error itself (and logs it), answers the call with its
    error code alone, and raises only "An error occurred while calling o71.catalog",
    with no Java trace and no cause; or, for a look-up of a class or its member
    (``jvm.org.….Spark3Util.loadIcebergTable``), "… does not exist in the JVM". A name
    that is really missing reads the same: :func:`jvm_behind` then waits for an exit
    that does not come, and the failure is handled as any other.

    >>> from py4j.protocol import Py4JError
    >>> on_py4j_socket(ValueError("x")), on_py4j_socket(ConnectionRefusedError(111, "no"))
    (False, True)
    >>> on_py4j_socket(Py4JError("An error occurred while calling o71.catalog"))
    True
    >>> on_py4j_socket(Py4JError("An error occurred while calling o7.x. Trace: boom"))
    False
    >>> on_py4j_socket(Py4JError("org.example.Util.load does not exist in the JVM"))
    True
    """
    from py4j.protocol import Py4JError, Py4JNetworkError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, Py4JNetworkError | ConnectionError):
            return True
        if type(current) is Py4JError and (
            _PY4J_HEADER.match(str(current)) or _PY4J_MISSING.match(str(current))
        ):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def jvm_behind(failure: BaseException, action: str) -> GaveUp | None:
    """:func:`jvm_exited` when ``failure`` is one a JVM that has gone causes (waiting
    :data:`JVM_EXIT_WAIT` for its exit status then), else None at once."""
    return jvm_exited(action, JVM_EXIT_WAIT if on_py4j_socket(failure) else 0.0)


@contextmanager
def jvm_boundary(action: str) -> Iterator[None]:
    """Run a block of Spark work; re-raise JVM failures as icetide errors."""
    try:
        yield
    except IcetideError:
        raise
    except Exception as exc:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        gone = jvm_behind(exc, action)
        if gone is not None:
            raise gone from exc
        if isinstance(exc, Py4JError | PySparkException):
            raise translate(exc, action) from exc
        raise
