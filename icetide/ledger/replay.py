"""Dead letters you can replay: reason codes, a summary, and replay after a fix.

Every dead letter keeps its exact reason (``malformed_json``, ``unknown_schema_id``…);
:func:`reason_code` groups them into the codes StreamNative routes by:

=============================  ===========================================================
code                           reasons
=============================  ===========================================================
``parse``                      the bytes are not a readable message (malformed JSON,
                               invalid UTF-8, a broken envelope, no op/position/key)
``deserialization``            a registry frame cannot be read with its writer schema, or
                               names a schema id/subject the registry lacks (or an id that
                               is no version of its subject)
``type_conversion``            a value does not fit its column (type mismatch, a bad
                               logical value, a failed sink conversion, NULL in a
                               required column)
``null_payload``               a message without a value where a row change was expected
``schema_incompatible``        its schema version fails the subject's compatibility mode
``unsupported_schema_change``  its schema change is held (category change, optional →
                               required), or evolution is off for the table
                               (``schema_evolution_disabled``)
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.errors import ConfigError
from icetide.events.raw import Wire
from icetide.faults import crash_point
from icetide.lake.align import align_to
from icetide.lake.tables import TableRefs
from icetide.ledger.decode import (
    DEAD,
    ROW,
    Classified,
    Projection,
    Refused,
    classify_keyed,
    classify_one,
    project_batches,
    projected_spark_schema,
)
from icetide.ledger.registry_decode import wire_for
from icetide.ledger.signals import CarriedSchema, OnVersions
from icetide.ledger.stage import carried_schema, routes_of
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.schema.quoting import quote

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
    "unknown_schema_version": "deserialization",
    "unreadable_schema": "deserialization",
    "unknown_magic_byte": "deserialization",
    "schema_change_failed": "unsupported_schema_change",
    "schema_incompatible": "schema_incompatible",
    "unsupported_schema_change": "unsupported_schema_change",
    "schema_evolution_disabled": "unsupported_schema_change",
}
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


REPLAY_STEPS = 4
"""A replay's steps, for its progress bar: read, decode, append, record what still fails."""


def replay(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    *,
    reason: str | None = None,
    ids: Sequence[str] = (),
    on_versions: OnVersions | None = None,
) -> ReplayResult:
    """Re-run the dead letters of ``table`` (filtered by ``reason`` / ``ids``) through the
    current decode and schema; see the module doc for the order that makes it safe.

    ``on_versions`` (the stage's version walk) first takes the schema versions the
    letters carry, so a version refused before (incompatible, held) is walked now and
    its records apply only if it is taken."""
    refuse_unrouted(pipeline.config, table)
    dead_letters = TableRefs.of(pipeline.config, table).dead_letters.sql

    def route(found: Classified) -> str | None:
        return table if found[1] == ROW and found[0] == table else None

    return _replay(spark, pipeline, dead_letters, table, route, reason, ids, on_versions)


def refuse_unrouted(config: Any, table: str) -> None:
    """A clear refusal when ``table`` names the unrouted dead-letter table."""
    if table.casefold() == config.dead_letter.unrouted_table.casefold():
        raise ConfigError(
            f"{table!r} is the unrouted dead-letter table: its records name no configured "
            "table, so they cannot be replayed into one by name",
            hint="run `icetide dlt replay --unrouted` after fixing the config's tables "
            "(records that now route apply), adding `--to TABLE` to send the ones whose "
            "source names no configured table to TABLE",
        )


FORCED_REASONS = ("unknown_table", "missing_source")
"""Unrouted reasons of well-formed row events: ``--to TABLE`` may route them."""


def replay_unrouted(
    spark: SparkSession,
    pipeline: Pipeline,
    *,
    to: str | None = None,
    reason: str | None = None,
    ids: Sequence[str] = (),
    on_versions: OnVersions | None = None,
) -> ReplayResult:
    """Re-run the unrouted dead letters: each that routes now (after a fix of the config's
    tables or servers) goes to its table's ledger; with ``to``, a well-formed row event
    whose source names no configured table (``unknown_table``, ``missing_source``) goes
    to ``to``. The rest stay, with their new reason. Same safe order as :func:`replay`."""
    config = pipeline.config
    label = config.dead_letter.unrouted_table
    forced = None if to is None else str(config.table(to).name)  # unknown: a ConfigError

    def route(found: Classified) -> str | None:
        routed, status, why, _error = found
        if status == ROW and routed is not None:
            return routed
        return forced if status == DEAD and why in FORCED_REASONS else None

    dead_letters = TableRefs.of(config, label).dead_letters.sql
    return _replay(spark, pipeline, dead_letters, label, route, reason, ids, on_versions)


def _replay(
    spark: SparkSession,
    pipeline: Pipeline,
    dead_letters: str,
    label: str,
    route: Callable[[Classified], str | None],
    reason: str | None,
    ids: Sequence[str],
    on_versions: OnVersions | None,
) -> ReplayResult:
    """Replay the letters of ``dead_letters`` into the table ``route`` picks for each (None: it
    still fails), in the module doc's safe order."""
    config = pipeline.config
    result = ReplayResult(label)

    def step(done: int, what: str) -> None:
        pipeline.report(
            "dlt",
            f"dlt replay {label}: {what}",
            table=label,
            done=done,
            total=REPLAY_STEPS,
            bar=f"dlt replay {label}",
        )

    step(0, "reading the dead letters")
    raws = _letters(spark, dead_letters, reason, ids)
    result.replayed = len(raws)
    if not raws:
        return result
    step(1, f"decoding {len(raws):,} dead letters")
    messages = spark.createDataFrame(list(raws.items()), "message_id STRING, raw BINARY")
    wire = wire_for(config, messages)
    routes = routes_of(config)
    targets: dict[str, list[str]] = {}
    for message_id, raw in raws.items():
        found = classify_one(raw, routes, wire)
        target = route(found)
        if target is not None:
            targets.setdefault(target, []).append(message_id)
        else:
            result.still_failing[message_id] = found[2] if found[1] == DEAD else "routing"
    step(2, f"appending {sum(map(len, targets.values())):,} to the ledger")
    for table in sorted(targets):
        part = ReplayResult(table)
        _into_ledger(spark, pipeline, table, raws, targets[table], wire, on_versions, part)
        result.applied += part.applied
        result.already += part.already
        result.still_failing |= part.still_failing
    result.applied.sort()
    result.already.sort()
    _delete_letters(spark, dead_letters, result.applied)
    crash_point("dlt.replay.after_dlt_delete")
    step(3, f"recording the reasons of {len(result.still_failing):,} still failing")
    _update_reasons(spark, dead_letters, result.still_failing)
    step(REPLAY_STEPS, f"{len(result.applied):,} replayed")
    return result


def _letters(
    spark: SparkSession, dead_letters: str, reason: str | None, ids: Sequence[str]
) -> dict[str, bytes]:
    letters = spark.table(dead_letters).where(_matches(reason))
    if ids:
        letters = letters.where(F.col("message_id").isin(*ids))
    rows = letters.select("message_id", "payload_b64").collect()
    return {str(r.message_id): base64.b64decode(r.payload_b64 or "") for r in rows}


def _into_ledger(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    raws: dict[str, bytes],
    routable: list[str],
    wire: Wire | None,
    on_versions: OnVersions | None,
    result: ReplayResult,
) -> None:
    """Project ``routable`` letters onto ``table``'s current schema and append the ones
    that apply to its ledger, skipping ids it already holds (steps 1 of the module doc)."""
    if not routable:
        return
    config = pipeline.config
    refs = TableRefs.of(config, table)
    subset = {i: raws[i] for i in routable}
    refused = _walk(config, table, subset, wire, on_versions)
    schema = pipeline.schema(table)
    messages = spark.createDataFrame(list(subset.items()), "message_id STRING, raw BINARY")
    now = datetime.now(UTC)  # the rows' ingestion time and the append's replay property
    reading = Projection(schema, hints=pipeline.read_hints(table))
    projected = messages.mapInArrow(
        project_batches(reading, now, wire, refused), projected_spark_schema(schema)
    ).persist()
    try:
        for r in (
            projected.where(F.col("_status") == DEAD).select(c.MESSAGE_ID, "_reason").collect()
        ):
            result.still_failing[str(r[c.MESSAGE_ID])] = str(r["_reason"])
        ok_ids = [i for i in routable if i not in result.still_failing]
        if not ok_ids:
            return
        good = projected.where(F.col("_status") == ROW)
        held = spark.table(refs.cdc.sql).where(F.col(c.MESSAGE_ID).isin(*ok_ids))
        result.already = sorted(str(r[0]) for r in held.select(c.MESSAGE_ID).collect())
        fresh = good.where(~F.col(c.MESSAGE_ID).isin(*result.already)) if result.already else good
        if result.already != sorted(ok_ids):
            _append_ledger(fresh, refs.cdc.sql, schema, now)
        crash_point("dlt.replay.after_ledger_append")
        result.applied = sorted(ok_ids)
    finally:
        projected.unpersist()


def _walk(
    config: Any,
    table: str,
    raws: dict[str, bytes],
    wire: Wire | None,
    on_versions: OnVersions | None,
) -> Refused | None:
    """The version walk over the schemas the letters carry; the refused keys."""
    if on_versions is None:
        return None
    carried: dict[str, CarriedSchema] = {}
    for first, (message_id, raw) in enumerate(raws.items()):
        key = classify_keyed(raw, routes_of(config), wire)[1]
        if key is None or key in carried:
            continue
        carried[key] = carried_schema(config, table, key, message_id, raw, first)
    return on_versions(list(carried.values())).get(table)


def _delete_letters(spark: SparkSession, dead_letters: str, ids: Sequence[str]) -> None:
    if ids:
        spark.sql(f"DELETE FROM {dead_letters} WHERE {_in('message_id', ids)}")


def _append_ledger(rows: DataFrame, ledger: str, schema: Any, now: datetime) -> None:
    """Append projected ``rows`` (stamped ``now`` by the projection) to the ledger, the
    snapshot marked as a replay at ``now``."""
    columns = TableContract(schema).ledger_projected_columns()
    stamped_rows = rows.select(*columns, F.lit(schema.version).cast("int").alias(c.SCHEMA_VERSION))
    (
        align_to(stamped_rows, rows.sparkSession.table(ledger).schema)
        .writeTo(ledger)
        .option(f"snapshot-property.{REPLAY_PROPERTY}", now.isoformat())
        .append()
    )


def _update_reasons(spark: SparkSession, dead_letters: str, failing: dict[str, str]) -> None:
    if not failing:
        return
    values = ", ".join(
        "('" + i.replace("'", "''") + "', '" + r.replace("'", "''") + "')"
        for i, r in sorted(failing.items())
    )
    spark.sql(
        f"MERGE INTO {dead_letters} t "
        f"USING (SELECT * FROM VALUES {values} AS v(message_id, reason)) s "
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
