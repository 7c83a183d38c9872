"""The one table-contract builder: a table's schema and settings in, its tables' SQL and
Arrow shape out.

Everything that turns a schema into a table definition or a statement over it lives
here, generated from the table's Iceberg-side schema (the schema file after its sink
config: mapped names, overridden or converted types, :mod:`icetide.schema.sink`), so
the ledger's columns as SQL and as Arrow, the base DDL, the merge's value slots, its
MERGE and the ledger projection plan cannot drift apart. Identifiers are quoted by the
one quoting helper; table names arrive as :class:`~icetide.schema.contract.names.TableName`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import arrow_struct, arrow_type, sql_type, struct_sql
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote
from icetide.schema.sink import target_schema


@dataclass(frozen=True)
class TableSettings:
    """How a table's base is laid out: ``bucket(buckets, first key column)``, the
    Iceberg write mode for deletes, updates and merges, and the base's format version
    (3 lets an added column carry its default as ``initial-default``)."""

    buckets: int = 16
    mode: b.WriteMode = "merge-on-read"
    format_version: int = 2


def value_slot(column_id: int) -> str:
    """Name of the deduplicated value of a column: a struct ``{v}``, null = keep stored.

    Named by id, so a rename between batches cannot mix two columns' values.

    >>> value_slot(7)
    '_v7'
    """
    return f"_v{column_id}"


@dataclass(frozen=True)
class ProjectionStep:
    """How the ledger projection fills one column (see :meth:`TableContract.projection`)."""

    id: int
    source_name: str
    source_type: str
    how: str
    """``as is``, ``cast`` (a type override) or the conversion call."""
    name: str
    type: str

    def __str__(self) -> str:
        return (
            f"{self.id}: {self.source_name} {self.source_type} -> {self.how} -> "
            f"{self.name} {self.type}"
        )


@dataclass(frozen=True)
class TableContract:
    """Everything built from one version of a table's schema."""

    schema: TableSchema
    """The source-side schema (the schema file, with its sink config)."""
    settings: TableSettings = TableSettings()

    @cached_property
    def target(self) -> TableSchema:
        """The Iceberg-side schema every table and statement is generated from: the
        sink config's names and types, the same ids (:func:`~icetide.schema.sink.
        target_schema`)."""
        return target_schema(self.schema)

    def projection(self) -> list[ProjectionStep]:
        """The ledger projection plan: per column, from its source name and type to its
        Iceberg name and type, and the conversion or cast between them."""
        sink = self.schema.sink
        steps = []
        for source, stored in zip(self.schema.columns, self.target.columns, strict=True):
            conversion = sink.conversions.get(source.id)
            if conversion is not None:
                how = conversion.describe()
            elif source.id in sink.types:
                how = "cast"
            else:
                how = "as is"
            steps.append(
                ProjectionStep(
                    source.id, source.name, str(source.type), how, stored.name, str(stored.type)
                )
            )
        return steps

    def projection_text(self) -> str:
        """:meth:`projection` as lines, for ``schema show --sql`` and the golden files."""
        return "\n".join(str(step) for step in self.projection())

    # -- the ledger -------------------------------------------------------------------
    def ledger_columns(self) -> list[str]:
        """Column definitions of ``<table>_cdc``, in table order."""
        keys = [f"{quote(k.name)} {sql_type(k.type)}" for k in self.target.key_columns]
        row = struct_sql(self.target.columns)
        return keys + [
            f"{c.OP} STRING",
            f"{c.AFTER} {row}",
            f"{c.BEFORE} {row}",
            f"{c.UNAVAILABLE} ARRAY<STRING>",
            f"{c.POSITION} {c.POSITION_SQL}",
            f"{c.POSITION_TEXT} STRING",
            f"{c.SOURCE_TS} TIMESTAMP",
            f"{c.TX_ID} STRING",
            f"{c.MESSAGE_ID} STRING",
            f"{c.INGESTED_AT} TIMESTAMP",
            f"{c.SCHEMA_VERSION} INT",
            f"{c.RESCUED} STRING",
        ]

    def ledger_projected_columns(self) -> list[str]:
        """The ledger columns a projected batch carries (``project_batches``), quoted for a
        select: the key columns, then every meta column but the schema version, which the
        append stamps."""
        keys = [quote(col.name) for col in self.target.key_columns]
        return keys + [m for m in c.META_COLUMNS if m != c.SCHEMA_VERSION]

    def ledger_written_columns(self) -> list[str]:
        """The ledger columns the decoder fills from each message (all but the two
        stamped per append, :data:`~icetide.schema.contract.ledger.STAMPED`), as SQL
        definitions."""
        return [d for d in self.ledger_columns() if d.split(" ", 1)[0] not in c.STAMPED]

    def ledger_arrow(self) -> list[pa.Field]:
        """The Arrow fields of :meth:`ledger_written_columns`, for ``mapInArrow`` output."""
        row = arrow_struct(self.target.columns)
        keys = [pa.field(k.name, arrow_type(k.type)) for k in self.target.key_columns]
        return keys + [
            pa.field(c.OP, pa.string()),
            pa.field(c.AFTER, row),
            pa.field(c.BEFORE, row),
            pa.field(c.UNAVAILABLE, pa.list_(pa.string())),
            pa.field(c.POSITION, pa.decimal128(38, 0)),
            pa.field(c.POSITION_TEXT, pa.string()),
            pa.field(c.SOURCE_TS, pa.timestamp("us", tz="UTC")),
            pa.field(c.TX_ID, pa.string()),
            pa.field(c.MESSAGE_ID, pa.string()),
            pa.field(c.RESCUED, pa.string()),
        ]

    def ledger_ddl(self, table: TableName) -> str:
        """``CREATE TABLE`` for the ledger: append-only, partitioned by ingestion day."""
        columns = ",\n  ".join(self.ledger_columns())
        return (
            f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}\n) USING iceberg "
            f"PARTITIONED BY (days({c.INGESTED_AT})) "
            "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', "
            f"'{c.KIND_PROPERTY}'='ledger', "
            f"'{c.SCHEMA_VERSION_PROPERTY}'='{self.target.version}')"
        )

    def ledger_upgrades(self, table: TableName, present: set[str]) -> list[str]:
        """ALTERs adding the metadata columns an older ledger table lacks (the columns
        ``present`` in it now); the version-to-version changes are in
        :mod:`~icetide.schema.contract.alter`."""
        return [
            f"ALTER TABLE {table} ADD COLUMN {name} {kind}"
            for name, kind in c.ADDED_LATER.items()
            if name not in present
        ]

    # -- the base ---------------------------------------------------------------------
    def base_columns(self) -> list[str]:
        """Column definitions of the mirror: the schema's, then the pipeline's own.

        Non-key columns are nullable whatever the source says: a mirror must accept every
        row the source had, and required→optional is a safe evolution anyway.
        """
        keys = set(self.target.key_ids)
        columns = [
            f"{quote(col.name)} {sql_type(col.type)}" + (" NOT NULL" if col.id in keys else "")
            for col in self.target.columns
        ]
        return columns + [f"{b.POSITION} DECIMAL(38,0)", f"{b.SOURCE_TS} TIMESTAMP"]

    def base_ddl(self, table: TableName) -> str:
        """``CREATE TABLE`` for the mirror: ``bucket(N, pk)``, format v2 (or the
        settings' version), hash distribution, and bounds kept for the position column
        however wide the table (Iceberg keeps column metrics for the first 100 columns
        only by default; the merge's in-order check reads these bounds).

        Position-delete files are written with Snappy, data files with Iceberg's default
        (zstd): a merge writes a delete file per touched bucket, and zstd's set-up per
        file cost 0.12 s of a 1.9 s merge at 5M rows (measured:
        docs/merge-performance.md). A delete file holds file paths and row positions,
        lives until the next compaction, and is small either way.

        DELETEs check only what they read (``snapshot`` isolation): the merge's
        ``delete_insert`` appends the batch's rows to its branch while its DELETE runs,
        and that DELETE must not fail for rows it was never meant to see
        (:func:`icetide.merge.strategy.delete_insert`). Their two commits race, and
        the one that loses retries after 5 ms, not Iceberg's 100
        (:data:`~icetide.schema.contract.base.COMMIT_RETRY`)."""
        mode = self.settings.mode
        retry = "".join(f"'{key}'='{value}', " for key, value in b.COMMIT_RETRY.items())
        bucket_column = quote(self.target.primary_key[0])
        body = ",\n  ".join(self.base_columns())
        return (
            f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n) USING iceberg "
            f"PARTITIONED BY (bucket({self.settings.buckets}, {bucket_column})) TBLPROPERTIES ("
            f"'format-version'='{self.settings.format_version}', "
            f"'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', "
            f"'write.merge.mode'='{mode}', "
            f"'write.distribution-mode'='hash', '{c.KIND_PROPERTY}'='base', "
            f"'write.metadata.metrics.column.{b.POSITION}'='truncate(16)', "
            "'write.delete.parquet.compression-codec'='snappy', "
            f"'{b.DELETE_ISOLATION}'='snapshot', {retry}"
            f"'{c.SCHEMA_VERSION_PROPERTY}'='{self.target.version}')"
        )

    def identifier_fields_sql(self, table: TableName) -> str:
        """Mark the primary key as Iceberg identifier fields (readers and Flink use them)."""
        keys = ", ".join(quote(k) for k in self.target.primary_key)
        return f"ALTER TABLE {table} SET IDENTIFIER FIELDS {keys}"

    # -- the dead letters -------------------------------------------------------------
    @staticmethod
    def dead_letter_ddl(table: TableName) -> str:
        """``CREATE TABLE`` for a dead-letter table (the same for every table)."""
        columns = ",\n  ".join(c.DLT_COLUMNS_SQL)
        return (
            f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}\n) USING iceberg "
            f"PARTITIONED BY (days({c.DLT_INGESTED_AT})) "
            f"TBLPROPERTIES ('format-version'='2', '{c.KIND_PROPERTY}'='dead-letter')"
        )

    # -- the merge --------------------------------------------------------------------
    def value_slots(self) -> dict[int, str]:
        """Column id → the batch column holding its deduplicated value (non-key columns)."""
        return {col.id: value_slot(col.id) for col in self.target.value_columns}

    def merge_sql(
        self,
        base: TableName,
        source: str,
        keep: Collection[str] | None = None,
        guarded: bool = True,
    ) -> str:
        """MERGE the deduplicated batch view ``source`` into ``base``.

        An event applies only when its position is newer than the row's, so redelivered
        or replayed events are no-ops; a value slot that is null keeps the stored value.
        ``keep`` names the columns whose slot can be null for a living row (the batch had
        unchanged-TOAST placeholders for them); None means every column. The others are
        set from the slot alone, so a merge-on-read MERGE does not read them from the
        base at all.

        ``guarded=False`` leaves the position comparison out, so the base's positions are
        not read either: only for a batch whose every event is known to be newer than
        every base row (the merge's in-order path, :mod:`icetide.merge.stage`).
        """
        return self._merge(base, quote(source), keep=keep, guarded=guarded)

    def delete_keys_sql(
        self, base: TableName, keys: str, branch: str, buckets: Sequence[int] | None = None
    ) -> str:
        """DELETE the rows of ``base``'s ``branch`` whose key is in the view ``keys``: the
        first half of the merge's in-order replace (:mod:`icetide.merge.strategy`,
        ``delete_insert``).

        The keys are broadcast to the base's scan tasks (a batch's keys are few against
        the base), so the base is read in place, never shuffled, and without a staging
        table; only its key columns and row positions are read. ``buckets`` (the buckets
        the batch touches, from the ledger's figures) restricts the scan to their files;
        None reads every bucket.

        >>> from icetide.schema.model import Column
        >>> from icetide.schema.types import LongType
        >>> schema = TableSchema("t", (Column(1, "id", LongType(), False),), ("id",))
        >>> print(TableContract(schema).delete_keys_sql(
        ...     TableName("lake", "s", "t"), "keys", "b", [3, 1]))
        DELETE FROM `lake`.`s`.`t`.`branch_b` WHERE `id` IN (SELECT /*+ BROADCAST */ `id` \
FROM `keys`) AND `lake`.system.bucket(16, `id`) IN (1, 3)
        """
        pk = [quote(k) for k in self.target.primary_key]
        columns = pk[0] if len(pk) == 1 else f"({', '.join(pk)})"
        where = f"{columns} IN (SELECT /*+ BROADCAST */ {', '.join(pk)} FROM {quote(keys)})"
        if buckets is not None:
            where += f" AND {self._in_buckets(base, pk[0], buckets)}"
        return f"DELETE FROM {base.branch(branch)} WHERE {where}"

    def _in_buckets(self, base: TableName, column: str, buckets: Sequence[int]) -> str:
        """``column`` (a base row's first key, quoted) falls in one of ``buckets``: a
        predicate Iceberg prunes the base's files by (its ``bucket`` function is the
        partition transform)."""
        ids = ", ".join(str(int(i)) for i in sorted(buckets)) or "NULL"
        function = f"{quote(base.catalog)}.system.bucket"
        return f"{function}({self.settings.buckets}, {column}) IN ({ids})"

    def row_select(self) -> list[str]:
        """The deduplicated batch's living rows as base rows: the SELECT list (over the
        batch's columns) of the in-order replace's append, the same values the MERGE
        inserts."""
        names = [quote(col.name) for col in self.target.columns] + [b.POSITION, b.SOURCE_TS]
        return [f"{value} AS {name}" for value, name in zip(self._row_values(), names, strict=True)]

    def _row_values(self) -> list[str]:
        """A base row's values from the batch's columns, in the base's column order."""
        keys = set(self.target.key_ids)
        return [
            quote(col.name) if col.id in keys else f"{value_slot(col.id)}.v"
            for col in self.target.columns
        ] + [c.POSITION, c.SOURCE_TS]

    def bucket_merge_sql(
        self,
        base: TableName,
        staging: TableName,
        buckets: Sequence[int] | None = None,
        keep: Collection[str] | None = None,
        guarded: bool = True,
    ) -> str:
        """:meth:`merge_sql` from a staging *table* partitioned like ``base``
        (``bucket(N, first key)``), so Spark can join bucket to bucket without shuffling
        the base (storage-partitioned join).

        ``buckets`` restricts the base side to the buckets the batch touches (a
        target-only condition of the ON clause, which Iceberg prunes files by); None
        reads every bucket.
        """
        touched = None
        if buckets is not None:
            touched = self._in_buckets(base, f"t.{quote(self.target.primary_key[0])}", buckets)
        return self._merge(base, staging.sql, touched, keep, guarded)

    def _merge(
        self,
        base: TableName,
        source_sql: str,
        extra_on: str | None = None,
        keep: Collection[str] | None = None,
        guarded: bool = True,
    ) -> str:
        schema = self.target
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
        if extra_on:
            on = f"{on} AND {extra_on}"
        newer = f" AND s.{c.POSITION} > t.{b.POSITION}" if guarded else ""
        slot = value_slot
        updates = [
            f"{quote(col.name)} = CASE WHEN s.{slot(col.id)} IS NULL "
            f"THEN t.{quote(col.name)} ELSE s.{slot(col.id)}.v END"
            if keep is None or col.name in keep
            else f"{quote(col.name)} = s.{slot(col.id)}.v"
            for col in schema.value_columns
        ] + [f"{b.POSITION} = s.{c.POSITION}", f"{b.SOURCE_TS} = s.{c.SOURCE_TS}"]
        names = [quote(col.name) for col in schema.columns] + [b.POSITION, b.SOURCE_TS]
        values = [f"s.{value}" for value in self._row_values()]
        return (
            f"MERGE INTO {base} t USING {source_sql} s ON {on}\n"
            f"WHEN MATCHED AND s.{c.OP} = 'd'{newer} THEN DELETE\n"
            f"WHEN MATCHED{newer} THEN UPDATE SET {', '.join(updates)}\n"
            f"WHEN NOT MATCHED AND s.{c.OP} <> 'd' THEN INSERT ({', '.join(names)}) "
            f"VALUES ({', '.join(values)})"
        )

    def naive_merge_sql(self, base: TableName, ledger: TableName) -> str:
        """The baseline from the design: window dedupe + MERGE over the raw ledger rows.

        Not used by icetide; benchmarks run it to measure what the real merge gains.
        """
        schema, keys_ids = self.target, set(self.target.key_ids)
        keys = ", ".join(quote(k) for k in schema.primary_key)
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
        cols = [quote(col.name) for col in schema.columns]
        picked = ", ".join(
            quote(col.name)
            if col.id in keys_ids
            else f"{c.AFTER}.{quote(col.name)} AS {quote(col.name)}"
            for col in schema.columns
        )
        dedup = (
            f"SELECT {picked}, {c.OP}, {c.POSITION}, {c.SOURCE_TS} FROM ("
            f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {c.POSITION} DESC) rn "
            f"FROM {ledger}) WHERE rn = 1"
        )
        sets = ", ".join(f"{n} = s.{n}" for n in cols)
        return (
            f"MERGE INTO {base} t USING ({dedup}) s ON {on}\n"
            f"WHEN MATCHED AND s.{c.OP} = 'd' THEN DELETE\n"
            f"WHEN MATCHED THEN UPDATE SET {sets}, {b.POSITION} = s.{c.POSITION}, "
            f"{b.SOURCE_TS} = s.{c.SOURCE_TS}\n"
            f"WHEN NOT MATCHED AND s.{c.OP} <> 'd' THEN INSERT ({', '.join(cols)}, {b.POSITION}, "
            f"{b.SOURCE_TS}) VALUES ({', '.join('s.' + n for n in cols)}, s.{c.POSITION}, "
            f"s.{c.SOURCE_TS})"
        )


def column_path(*parts: str) -> str:
    """A (nested) column reference, each part quoted: ``_after`.`a b```.

    >>> column_path("_after", "a b")
    '`_after`.`a b`'
    """
    return ".".join(quote(p) for p in parts)
