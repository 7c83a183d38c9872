"""Dead letters you can replay: reason codes, a summary, and replay after a fix.

Every dead letter keeps its exact reason (``malformed_json``, ``unknown_schema_id``…);
:func:`reason_code` groups them into the codes StreamNative routes by:

=============================  ===========================================================
code                           reasons
=============================  ===========================================================
``parse``                      the bytes are not a readable message (malformed JSON,
                               invalid UTF-8, a broken envelope, no op/position/key)
``deserialization``            a registry frame cannot be read with its writer schema, or
                               names a schema id/subject the registry lacks
``type_conversion``            a value does not fit its column (type mismatch, a bad
                               logical value, a failed sink conversion, NULL in a
                               required column)
``null_payload``               a message without a value where a row change was expected
``schema_incompatible``        its schema version fails the subject's compatibility mode
``unsupported_schema_change``  its schema change is held (category change, optional →
                               required)
``routing``                    no table takes it (unknown table or source)
=============================  ===========================================================

:func:`replay` re-runs dead letters of one table through the current decode and schema.
Iceberg has no multi-table transaction, so the order makes it safe to kill at any point:

1. the ones that now apply are appended to the ledger, **skipping message ids the ledger
   already holds** (idempotent by message id);
2. every replayed id the ledger now holds is deleted from the dead-letter table;
3. the ones that still fail get their new reason.

A replay killed after 1 leaves rows in both tables; the rerun appends nothing (2's ids are
in the ledger already) and removes them from the dead-letter table. Killed after 2, the
rerun only updates reasons. Nothing is lost or applied twice.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.faults import crash_point
from icetide.ledger.align import align_to
from icetide.ledger.decode import DEAD, ROW, classify_one, project_batches, projected_spark_schema
from icetide.ledger.registry_decode import Wire, wire_for
from icetide.ledger.stage import routes_of
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.spark.sql import quote
from icetide.spark.tables import TableRefs

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline

REASON_CODES: dict[str, str] = {
    "malformed_json": "parse",
    "invalid_utf8": "parse",
    "bad_envelope": "parse",
    "missing_op": "parse",
    "unknown_op": "parse",
    "missing_position": "parse",
    "missing_key": "parse",
    "missing_source": "routing",
    "unknown_table": "routing",
    "not_a_row": "null_payload",
    "tombstone": "null_payload",
    "deserialization": "deserialization",
    "unknown_schema_id": "deserialization",
    "unknown_subject": "deserialization",
    "decode_failed": "deserialization",
    "type_mismatch": "type_conversion",
    "bad_logical_value": "type_conversion",
    "conversion_failed": "type_conversion",
    "null_in_required": "type_conversion",
    "schema_incompatible": "schema_incompatible",
    "unsupported_schema_change": "unsupported_schema_change",
}
CODES = (
    "parse",
    "deserialization",
    "type_conversion",
    "null_payload",
    "schema_incompatible",
    "unsupported_schema_change",
    "routing",
)
REPLAY_PROPERTY = "icetide.dlt.replay"
"""Snapshot property of a ledger append made by a replay (the replay's time)."""


def reason_code(reason: str) -> str:
    """The code a reason belongs to (an unknown reason is its own code).

    >>> reason_code("malformed_json"), reason_code("unknown_schema_id")
    ('parse', 'deserialization')
    """
    return REASON_CODES.get(reason, reason)


def _matches(wanted: str | None) -> Any:
    """A filter on reason: ``wanted`` is a reason or a code."""
    if wanted is None:
        return F.lit(True)
    reasons = [r for r, code in REASON_CODES.items() if code == wanted] or [wanted]
    return F.col("reason").isin(*{*reasons, wanted})


def preview(payload: bytes, limit: int = 160) -> str:
    """A readable start of a payload: text as is, binary (registry frames) as hex.

    >>> preview(b'{"op": "c"}'), preview(b"\\x00\\x00\\x00\\x00\\x07\\xff")
    ('{"op": "c"}', 'hex 0000000007ff')
    """
    try:
        text = payload.decode("utf-8")
        if text.isprintable() or all(ch.isprintable() or ch in "\r\n\t" for ch in text):
            return text if len(text) <= limit else text[: limit - 1] + "…"
    except UnicodeDecodeError:
        pass
    shown = payload[: limit // 2].hex()
    return f"hex {shown}" + ("…" if len(payload) > limit // 2 else "")


@dataclass
class DltSummary:
    """Dead letters of one table: counts by reason, sample ids and payload previews."""

    table: str
    counts: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON form of ``icetide dlt show --output json``."""
        return {
            "table": self.table,
            "total": sum(self.counts.values()),
            "by_reason": self.counts,
            "by_code": self.codes,
            "samples": self.samples,
        }


def show(
    spark: SparkSession, dlt_table: str, label: str, reason: str | None = None, samples: int = 3
) -> DltSummary:
    """Counts by reason (and code) and a few decoded samples of one dead-letter table."""
    frame = spark.table(dlt_table).where(_matches(reason))
    summary = DltSummary(label)
    counts = frame.groupBy("reason").count().orderBy("reason").collect()
    for row in counts:
        summary.counts[str(row.reason)] = int(row["count"])
        code = reason_code(str(row.reason))
        summary.codes[code] = summary.codes.get(code, 0) + int(row["count"])
    for row in counts:
        picked = (
            frame.where(F.col("reason") == row.reason)
            .orderBy("message_id")
            .select("message_id", "error", "payload_b64")
            .limit(samples)
            .collect()
        )
        summary.samples[str(row.reason)] = [
            {
                "message_id": str(p.message_id),
                "error": str(p.error or ""),
                "payload": preview(base64.b64decode(p.payload_b64 or "")),
            }
            for p in picked
        ]
    return summary


@dataclass
class ReplayResult:
    """What one replay did."""

    table: str
    replayed: int = 0
    applied: list[str] = field(default_factory=list)
    """Message ids now in the ledger and removed from the dead-letter table."""
    already: list[str] = field(default_factory=list)
    """Of those, ids the ledger already held (an earlier, interrupted replay)."""
    still_failing: dict[str, str] = field(default_factory=dict)
    """Message id → its new reason."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form of ``icetide dlt replay --output json``."""
        return {
            "table": self.table,
            "replayed": self.replayed,
            "applied": len(self.applied),
            "already_in_ledger": len(self.already),
            "still_failing": len(self.still_failing),
            "still_failing_by_reason": _count(self.still_failing.values()),
        }


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


def _in(column: str, ids: Sequence[str]) -> str:
    literals = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    return f"{quote(column)} IN ({literals})"


def replay(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    *,
    reason: str | None = None,
    ids: Sequence[str] = (),
) -> ReplayResult:
    """Re-run the dead letters of ``table`` (filtered by ``reason`` / ``ids``) through the
    current decode and schema; see the module doc for the order that makes it safe."""
    config = pipeline.config
    refs = TableRefs.of(config, table)
    schema = pipeline.schema(table)
    result = ReplayResult(table)
    letters = spark.table(refs.dlt.sql).where(_matches(reason))
    if ids:
        letters = letters.where(F.col("message_id").isin(*ids))
    rows = letters.select("message_id", "payload_b64").collect()
    result.replayed = len(rows)
    if not rows:
        return result
    raws = {str(r.message_id): base64.b64decode(r.payload_b64 or "") for r in rows}
    messages = spark.createDataFrame(list(raws.items()), "message_id STRING, raw BINARY")
    wire = wire_for(config, messages)
    routes = routes_of(config)
    routable: list[str] = []
    for message_id, raw in raws.items():
        routed, status, why, _error = classify_one(raw, routes, wire)
        if status == ROW and routed == table:
            routable.append(message_id)
        else:
            result.still_failing[message_id] = why if status == DEAD else "routing"
    projected = _project(spark, messages.where(F.col("message_id").isin(*routable)), schema, wire)
    good = projected.where(F.col("_status") == ROW) if routable else None
    for r in projected.where(F.col("_status") == DEAD).select(c.MESSAGE_ID, "_reason").collect():
        result.still_failing[str(r[c.MESSAGE_ID])] = str(r["_reason"])
    ok_ids = [i for i in routable if i not in result.still_failing]
    if ok_ids and good is not None:
        held = spark.table(refs.cdc.sql).where(F.col(c.MESSAGE_ID).isin(*ok_ids))
        result.already = sorted(str(r[0]) for r in held.select(c.MESSAGE_ID).collect())
        fresh = good.where(~F.col(c.MESSAGE_ID).isin(*result.already)) if result.already else good
        if result.already != sorted(ok_ids):
            _append_ledger(fresh, refs.cdc.sql, schema)
        crash_point("dlt.replay.after_ledger_append")
        spark.sql(f"DELETE FROM {refs.dlt.sql} WHERE {_in('message_id', ok_ids)}")
        result.applied = sorted(ok_ids)
    crash_point("dlt.replay.after_dlt_delete")
    _update_reasons(spark, refs.dlt.sql, result.still_failing)
    projected.unpersist()
    return result


def _project(spark: SparkSession, messages: DataFrame, schema: Any, wire: Wire | None) -> DataFrame:
    return messages.mapInArrow(
        project_batches(schema, wire), projected_spark_schema(schema)
    ).persist()


def _append_ledger(rows: DataFrame, ledger: str, schema: Any) -> None:
    stamped = (c.INGESTED_AT, c.SCHEMA_VERSION)
    stored = TableContract(schema).target
    columns = [quote(col.name) for col in stored.key_columns] + [
        m for m in c.META_COLUMNS if m not in stamped
    ]
    now = datetime.now(UTC)
    stamped_rows = rows.select(
        *columns,
        F.lit(now).alias(c.INGESTED_AT),
        F.lit(schema.version).cast("int").alias(c.SCHEMA_VERSION),
    )
    (
        align_to(stamped_rows, rows.sparkSession.table(ledger).schema)
        .writeTo(ledger)
        .option(f"snapshot-property.{REPLAY_PROPERTY}", now.isoformat())
        .append()
    )


def _update_reasons(spark: SparkSession, dlt: str, failing: dict[str, str]) -> None:
    if not failing:
        return
    values = ", ".join(
        "('" + i.replace("'", "''") + "', '" + r.replace("'", "''") + "')"
        for i, r in sorted(failing.items())
    )
    spark.sql(
        f"MERGE INTO {dlt} t USING (SELECT * FROM VALUES {values} AS v(message_id, reason)) s "
        "ON t.message_id = s.message_id "
        "WHEN MATCHED AND t.reason <> s.reason THEN UPDATE SET t.reason = s.reason"
    )


def render(summary: DltSummary) -> str:
    """The text form of ``icetide dlt show``."""
    total = sum(summary.counts.values())
    lines = [f"{summary.table}: {total} dead letter(s)"]
    for reason, n in summary.counts.items():
        lines.append(f"  {reason} ({reason_code(reason)}): {n}")
        for sample in summary.samples.get(reason, []):
            lines.append(f"    {sample['message_id']}: {sample['error'][:100]}")
            lines.append(f"      {sample['payload'][:100]}")
    return "\n".join(lines)


def render_replay(result: ReplayResult) -> str:
    """The text form of ``icetide dlt replay``."""
    data = result.to_json()
    failing = ", ".join(f"{k} {v}" for k, v in data["still_failing_by_reason"].items())
    return (
        f"{result.table}: replayed {result.replayed}; {data['applied']} now in the ledger and "
        f"removed from the dead-letter table; {data['still_failing']} still failing"
        + (f" ({failing})" if failing else "")
    )
