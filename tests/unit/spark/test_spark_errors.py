"""JVM failures become icetide errors that say what happened and that nothing was lost."""

from __future__ import annotations

from icetide.errors import CatalogError, ConfigError, StageError
from icetide.spark.errors import translate


def test_unreachable_catalog_becomes_a_catalog_error_with_the_fix() -> None:
    exc = RuntimeError(
        "org.apache.iceberg.exceptions.RESTException: Error occurred\n"
        "Caused by: java.net.ConnectException: Connection refused"
    )
    err = translate(exc, "ledger stream")
    assert isinstance(err, CatalogError)
    assert err.message.startswith("ledger stream: the Iceberg catalog")
    assert "RESTException" in err.message
    assert err.hint is not None and "catalog.uri" in err.hint and "nothing was lost" in err.hint


def test_other_failures_become_stage_errors_naming_the_first_line() -> None:
    err = translate(ValueError("boom happened\n  at some.java.Frame"), "merge")
    assert isinstance(err, StageError)
    assert err.message == "merge failed: boom happened"


def test_icetide_errors_pass_through_unchanged() -> None:
    original = ConfigError("bad", path="tables[0]")
    assert translate(original, "merge") is original
