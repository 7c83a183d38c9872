"""Run Spark SQL so that its Iceberg commit carries snapshot summary properties.

This is how a stage's watermark lands in the same Iceberg snapshot as its data: a crash
between "wrote" and "remembered" cannot happen. Spark SQL statements (MERGE, DELETE)
take no write options, so the properties go through Iceberg's thread-local
``CommitMetadata`` via a py4j callback that runs the statement on the JVM thread that
set them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from icetide.schema.contract.names import TableName
from icetide.spark.jvm import jvm_class


class _Callable:
    """A Python object the JVM sees as ``java.util.concurrent.Callable``."""

    def __init__(self, body: Callable[[], Any]) -> None:
        self._body = body
        self.error: BaseException | None = None

    def call(self) -> int:
        try:
            self._body()
        except BaseException as exc:  # re-raised in Python, not lost inside py4j
            self.error = exc
            raise
        return 0

    class Java:
        implements = ["java.util.concurrent.Callable"]


def with_commit_properties(
    spark: SparkSession, properties: dict[str, str], body: Callable[[], Any]
) -> None:
    """Run ``body`` (which issues Spark SQL writes) with ``properties`` on its commits."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    assert gateway is not None
    ensure_callback_server_started(gateway)
    props = jvm_class("java.util.HashMap")()
    for key, value in properties.items():
        props.put(key, value)
    callable_ = _Callable(body)
    try:
        jvm_class("org.apache.iceberg.spark.CommitMetadata").withCommitProperties(
            props, callable_, jvm_class("java.lang.RuntimeException")().getClass()
        )
    except Exception:
        if callable_.error is not None:
            raise callable_.error from None
        raise


def append_with_properties(
    frame: DataFrame, table: TableName, properties: dict[str, str], branch: str | None = None
) -> None:
    """Append ``frame`` to ``table`` (to its ``branch``, main when None) in one snapshot
    carrying ``properties`` in its summary.

    An empty ``frame`` (``spark.table(t).limit(0)``) records progress alone: a stage's
    marker commit.
    """
    writer = frame.writeTo(table.sql if branch is None else table.branch(branch))
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()
