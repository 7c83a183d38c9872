"""Every secret of a loaded config is known to the scrubber that filters the CLI's output."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from icetide.config import Config
from icetide.config.secrets import ScrubbedStream, Scrubber, secret_values


def test_secret_values_finds_env_values_credential_options_and_passwords(
    load: Callable[[str], Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASTER", "spark://m-7f3q:7077")
    monkeypatch.setenv("DB_HOST", "db-7f3q.internal")
    monkeypatch.setenv("DB_PASSWORD", "pw-7f3q")
    config = load(
        """
        pipeline: shop
        spark: {master: "${MASTER}"}
        catalog: {properties: {token: plain-token-7f3q}}
        sources:
          - {name: shop, type: mysql, host: "${DB_HOST}", user: app,
             password: "${DB_PASSWORD}", tables: [customers]}
          - {name: old, type: mysql, user: app, password: literal-pw-7f3q, tables: [orders]}
        tables:
          - {name: customers, source: shop.customers, schema: c.yaml}
          - {name: orders, source: shop.orders, schema: o.yaml}
        """
    )
    assert secret_values(config) == {
        "spark://m-7f3q:7077",
        "db-7f3q.internal",
        "pw-7f3q",
        "plain-token-7f3q",
        "literal-pw-7f3q",  # a password is one even when written in the file
    }


def test_an_env_value_inside_a_longer_value_is_a_secret_on_its_own(
    load: Callable[[str], Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A driver error may quote the host alone: it must be masked even then.
    monkeypatch.setenv("SPARK_HOST", "m-9k2w.internal")
    monkeypatch.setenv("PORT", "7077")
    monkeypatch.setenv("ID", "7")
    config = load(
        """
        pipeline: shop
        spark: {master: "spark://${SPARK_HOST}:${PORT}/${ID}"}
        tables:
          - {name: customers, source: shop.customers, schema: c.yaml}
        """
    )
    found = secret_values(config)
    assert {"spark://m-9k2w.internal:7077/7", "m-9k2w.internal", "7077"} <= found
    assert "7" not in found  # too short to mask alone without garbling every line


def test_scrubber_masks_every_secret_longest_first() -> None:
    scrub = Scrubber()
    scrub.add(["db-7f3q", "db-7f3q.internal", ""])
    assert scrub("connect db-7f3q.internal / db-7f3q") == "connect *** / ***"


def test_scrubbed_stream_filters_everything_written(tmp_path: Path) -> None:
    scrub = Scrubber()
    scrub.add(["hunter2"])
    target = io.StringIO()
    stream = ScrubbedStream(target, scrub)
    print("password hunter2", file=stream)  # type: ignore[arg-type]
    stream.writelines(["a hunter2\n"])
    assert target.getvalue() == "password ***\na ***\n"
