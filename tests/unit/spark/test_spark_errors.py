"""JVM failures become icetide errors that say what happened and that nothing was lost."""

from __future__ import annotations

import pytest

from icetide.errors import (
    CatalogError,
    CatalogUnavailableError,
    CommitConflictError,
    ConfigError,
    StageError,
    Transient,
)
from icetide.spark.errors import translate


def test_unreachable_catalog_becomes_a_transient_catalog_error_with_the_fix() -> None:
    exc = RuntimeError(
        "org.apache.iceberg.exceptions.RESTException: Error occurred\n"
        "Caused by: java.net.ConnectException: Connection refused"
    )
    err = translate(exc, "ledger stream")
    assert isinstance(err, CatalogUnavailableError) and isinstance(err, Transient)
    assert err.message.startswith("ledger stream: the Iceberg catalog")
    assert err.message.endswith("not reachable: ConnectException: Connection refused")
    assert err.hint is not None and "catalog.uri" in err.hint and "nothing was lost" in err.hint


def test_a_catalog_server_error_is_retried_and_said_as_a_server_error() -> None:
    """A REST catalog that answered 500 or 503 was reached: the error says it failed
    (its log says why), not that the network lost it; it is retried all the same."""
    for java, http in [
        ("ServiceFailureException: Server error: SQLException: database is locked", 500),
        ("ServiceUnavailableException: Service unavailable: try later", 503),
    ]:
        exc = RuntimeError(
            f"An error occurred while calling o70.sql.\n: org.apache.iceberg.exceptions.{java}\n"
        )
        err = translate(exc, "merge of items")
        assert isinstance(err, CatalogUnavailableError) and isinstance(err, Transient), http
        assert (
            err.message
            == f"merge of items: the Iceberg catalog answered with a server error: {java}"
        )
        assert err.hint is not None and "its log says why" in err.hint and "retried" in err.hint


def test_other_failures_become_stage_errors_naming_the_first_line() -> None:
    err = translate(ValueError("boom happened\n  at some.java.Frame"), "merge")
    assert isinstance(err, StageError)
    assert err.message == "merge failed: boom happened"


def test_icetide_errors_pass_through_unchanged() -> None:
    original = ConfigError("bad", path="tables[0]")
    assert translate(original, "merge") is original


# What py4j's str() gives for a failed ``spark.sql`` on a read-only warehouse: a header
# naming the proxy call, then the Java stack trace with its causes.
READ_ONLY_WAREHOUSE = """An error occurred while calling o59.sql.
: org.apache.iceberg.exceptions.RuntimeIOException: Failed to create file: file:/ro/wh/v1.json
\tat org.apache.iceberg.hadoop.HadoopOutputFile.createOrOverwrite(HadoopOutputFile.java:87)
\tat org.apache.iceberg.TableMetadataParser.internalWrite(TableMetadataParser.java:129)
Caused by: java.io.IOException: Mkdirs failed to create file:/ro/wh/m (exists=false, cwd=file:/w)
\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:515)
\t... 42 more
"""


def test_a_read_only_warehouse_shows_the_root_cause_and_no_false_promise() -> None:
    err = translate(RuntimeError(READ_ONLY_WAREHOUSE), "merge of customers")
    assert isinstance(err, CatalogError)
    assert "An error occurred while calling" not in err.message
    assert err.message.endswith(
        "IOException: Mkdirs failed to create file:/ro/wh/m (exists=false, cwd=file:/w)"
    )
    assert err.hint is not None and "catalog.warehouse" in err.hint
    assert "rerunning before would fail again" in err.hint


def test_without_causes_the_java_exception_under_the_py4j_header_is_shown() -> None:
    text = "An error occurred while calling o12.sql.\n: java.lang.IllegalStateException: boom\n"
    err = translate(RuntimeError(text), "merge")
    assert isinstance(err, StageError)
    assert err.message == "merge failed: IllegalStateException: boom"
    assert err.hint is not None and "otherwise fix it first" in err.hint


def test_a_failed_streaming_batch_shows_the_python_error_it_raised_first() -> None:
    # What query.exception() says when the ledger's foreachBatch raised (the cause used
    # to be deep in the trace, under py4j's "raised by the Python Proxy").
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: An exception "
        "was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/py4j/clientserver.py", line 617, in _call_proxy\n'
        "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        '  File "/icetide/ledger/stage.py", line 250, in process_batch\n'
        "    raise AnalysisException(msg)\n"
        "pyspark.errors.exceptions.captured.AnalysisException: [FIELDS_ALREADY_EXISTS] "
        "Cannot add column, because `_after`.`c` already exists\n"
        "\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n"
        "Caused by: py4j.Py4JException: An exception was raised by the Python Proxy. "
        "Return Message: Traceback (most recent call last):\n"
        "\t... 20 more"
    )
    error = translate(RuntimeError(text), "ledger stream")
    first = error.message.splitlines()[0]
    assert first.startswith("ledger stream failed: AnalysisException: [FIELDS_ALREADY_EXISTS]")


@pytest.mark.parametrize(
    "text",
    [
        # The REST server answered 503 / 500 (a proxy in front of it, its own store down).
        "org.apache.iceberg.exceptions.ServiceUnavailableException: Service unavailable: x",
        "org.apache.iceberg.exceptions.ServiceFailureException: Server error: SQLException",
        # It went away during the commit: the outcome is read back, never assumed.
        "org.apache.iceberg.exceptions.CommitStateUnknownException: Service failed: 500\n"
        "Cannot determine whether the commit was successful or not",
    ],
)
def test_server_errors_and_unknown_commits_are_outages_not_conflicts(text: str) -> None:
    err = translate(RuntimeError(text), "merge of t")
    assert isinstance(err, CatalogUnavailableError)
    assert not isinstance(err, CommitConflictError | CatalogError)


def test_bad_credentials_stay_permanent() -> None:
    text = "org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: bad token"
    err = translate(RuntimeError(text), "merge of t")
    assert isinstance(err, CatalogError) and not isinstance(err, Transient)


def test_credentials_in_a_url_of_the_message_are_masked() -> None:
    text = (
        "org.apache.iceberg.exceptions.RESTException: Error\n"
        "Caused by: java.net.ConnectException: Connect to http://ann:s3cret@cat:8181 failed: "
        "Connection refused"
    )
    err = translate(RuntimeError(text), "merge of t")
    assert "s3cret" not in err.render() and "http://***@cat:8181" in err.message
