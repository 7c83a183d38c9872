"""``icetide verify``: prove each base table holds exactly its source table's rows.

Per table, both sides compute the row count and the checksum of :mod:`checksum` (the sum
of a 60-bit hash of every row's canonical text) — the source in its own SQL, the base
with Spark — over the schema's columns only (the base's ``_icetide_*`` columns are not
compared). Equal counts and sums are a match. Otherwise both sides stream
``(key, row hash)`` to the driver, the keys are diffed, and the first 10 differing keys
(by key) are reported with both sides' values: missing in base, extra in base, or
different values. Streaming is fine up to a few million rows per table.

A common position. ``verify`` compares the source's *current* state with the base's
*current* snapshot; it does not stop anything. The caller (CLI, demo) first stops writes
to the source and lets capture and merge catch up, then verifies. Within one table the
source is read in one consistent snapshot (MySQL ``WITH CONSISTENT SNAPSHOT``,
PostgreSQL ``REPEATABLE READ``) and the base at one pinned Iceberg snapshot, so the
checksum and the diff see the same rows even if something still writes.

The source side is compared in the form capture writes, not always the column's plain
value. For PostgreSQL the table is read through a view (:class:`SourceView`) that
converts columns whose captured value is not their plain value (``timetz`` to UTC, an
``interval`` to microseconds, a ``real`` declared ``double`` through its text; see
:data:`~icetide.sources.postgres_catalog.SOURCE_VALUES`), and arrays capture sends as
JSON are read as their literal and turned into the stored value in Python, by capture's
own conversion and the ledger's projection (the list, or the JSON text of a column
declared ``json``): their rows are then hashed here, streamed, instead of summed in SQL.
An array that does not fit its list column (other dimensions than it declares, so the
base dead-lettered its row) gets a piece no stored value has: the row differs.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from icetide.config import SourceConfig, TableConfig
from icetide.errors import ConfigError, DecodeError, IcetideError, Terminal
from icetide.lake.tables import TableRefs, current_snapshot_id, table_exists
from icetide.observe import checksum as ck
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.model import TableSchema
from icetide.schema.types import Column
from icetide.sources.connect import connect_mysql, connect_postgres
from icetide.sources.errors import SourceUnavailableError
from icetide.sources.postgres_catalog import SOURCE_VALUES, source_columns
from icetide.sources.postgres_types import array_json_text, list_value
from icetide.sources.quoting import postgres_quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icetide.pipeline import Pipeline

MAX_SHOWN = 10
"""Differing keys reported per table."""
UNFIT_PIECE = "X"
"""The piece of a source value that does not fit its column (no stored value's piece
starts with it: those are ``N`` or digits)."""
_CHUNK = 10_000
"""Rows fetched per round trip while streaming the source's row hashes."""

Kind = Literal["missing", "extra", "different"]
Key = tuple[str, ...]


class VerifyError(IcetideError, Terminal):
    """A table cannot be verified: the source is unreachable, a table is missing …"""


# -- results -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnValues:
    """One column of a differing row: its canonical text on each side (None = NULL or
    no such row). Long values are cut to a readable size."""

    column: str
    source: str | None
    base: str | None


@dataclass(frozen=True)
class KeyDifference:
    """One differing key. ``columns`` holds the differing columns for ``different``, and
    the whole row of the side that has it for ``missing`` / ``extra``."""

    kind: Kind
    key: dict[str, str]
    columns: tuple[ColumnValues, ...] = ()


@dataclass
class TableVerdict:
    """The outcome of verifying one table. Checksums are the sums of row hashes."""

    table: str
    source: str
    """``<source name>:<source table>``."""
    source_rows: int
    base_rows: int
    source_checksum: int
    base_checksum: int
    base_snapshot: int | None
    matches: bool
    missing: int = 0
    extra: int = 0
    different: int = 0
    differences: list[KeyDifference] = field(default_factory=list)
    """The first :data:`MAX_SHOWN` differing keys, in key order."""


def exit_code(verdicts: Sequence[TableVerdict]) -> int:
    """0 when every table matches, else 1."""
    return 0 if all(v.matches for v in verdicts) else 1


# -- the source connection ---------------------------------------------------------------


class SourceConnection:
    """One open connection to a source database, in the session checksums need.

    Use :func:`open_source`; :meth:`snapshot` gives the consistent read of one table.
    """

    def __init__(self, source: SourceConfig, conn: Any) -> None:
        self.source = source
        self.dialect: ck.Dialect = "mysql" if source.type == "mysql" else "postgres"
        self.conn = conn

    def _names(self, table: TableConfig) -> list[str]:
        parts = str(table.source).split(".")
        name, container = parts[-1], parts[-2] if len(parts) > 1 else None
        if container is None and self.dialect == "mysql":
            container = str(self.source.database) if self.source.database else None
            if container is None:
                raise VerifyError(
                    f"table {table.name!r}: source {table.source!r} names no database",
                    hint="write the source as db.table, or set database: on the source",
                )
        return [container, name] if container else [name]

    def table_sql(self, table: TableConfig) -> str:
        """The quoted source table of ``table``: ``db.table`` (MySQL), ``schema.table``."""
        return ck.qualified_ident(self.dialect, *self._names(table))

    def view(self, table: TableConfig, schema: TableSchema) -> SourceView:
        """How the checksum queries read ``table``'s source: see :class:`SourceView`."""
        quoted = self.table_sql(table)
        if self.dialect == "mysql":
            return SourceView(quoted, quoted)
        names = self._names(table)
        found = source_columns(self.conn, names[0] if len(names) > 1 else "public", names[-1])
        self.conn.rollback()  # the catalog read opened a transaction; the snapshot comes later
        if not found:
            return SourceView(quoted, quoted)  # the queries report the missing table
        python: dict[str, Callable[[str], Any]] = {}
        selected, converted = [], False
        hints = read_hints(schema, CAPTURE)  # capture's conversion makes the values
        for column in schema.columns:
            source = found.get(column.name)
            name = postgres_quote(column.name)
            value = SOURCE_VALUES.get((column.type.name, source.type_name)) if source else None
            if source is not None and source.pg_type is not None and source.json_array:
                literal = "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END"
                if column.type.name == "json":
                    python[column.name] = partial(array_json_text, kind=source.pg_type)
                    value = literal
                elif column.type.name == "list":
                    python[column.name] = partial(
                        list_value, kind=source.pg_type, column=column, hint=hints.get(column.id)
                    )
                    value = literal
            converted = converted or value is not None
            selected.append(f"{value.format(c=name) if value else name} AS {name}")
        if not converted:
            return SourceView(quoted, quoted)
        sql = f"(SELECT {', '.join(selected)} FROM {quoted}) AS icetide_source"
        return SourceView(sql, quoted, python)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One consistent read: every query inside sees the same committed state."""
        if self.dialect == "mysql":
            with self.conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        else:
            # The session is REPEATABLE READ: the next statement opens a fresh snapshot.
            self.conn.rollback()
        try:
            yield
        finally:
            self.conn.rollback()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """All rows of one query."""
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def stream(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """The rows of one query, fetched in chunks (server-side cursor) to bound memory."""
        if self.dialect == "mysql":
            import pymysql.cursors

            cur = self.conn.cursor(pymysql.cursors.SSCursor)
        else:
            cur = self.conn.cursor(name="icetide_verify")
            cur.itersize = _CHUNK
        try:
            cur.execute(sql)
            while rows := cur.fetchmany(_CHUNK):
                yield from rows
        finally:
            cur.close()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


@dataclass(frozen=True)
class SourceView:
    """A source table as the checksum queries read it.

    ``sql`` is what they select from: the table itself, or a sub-select that converts
    columns to the value capture sends. ``table`` is the table's quoted name, for
    messages. ``python`` maps the columns whose stored value is computed in Python to
    that computation (their value arrives as text; it raises
    :class:`~icetide.errors.DecodeError` for a value the column cannot hold).
    """

    sql: str
    table: str
    python: dict[str, Callable[[str], Any]] = field(default_factory=dict)


def open_source(source: SourceConfig) -> SourceConnection:
    """Connect to ``source`` and set the session up for checksums (UTC, utf8mb4)."""
    conn: Any
    try:
        if source.type == "mysql":
            conn = connect_mysql(source, charset="utf8mb4", autocommit=True)
        else:
            conn = connect_postgres(source)
            # Server-side cursors need a transaction; each table gets its own snapshot.
            conn.set_session(isolation_level="REPEATABLE READ", readonly=True, autocommit=False)
    except SourceUnavailableError as exc:
        raise VerifyError(exc.message, hint=exc.hint) from exc
    statements = ck.MYSQL_SESSION if source.type == "mysql" else ck.POSTGRES_SESSION
    opened = SourceConnection(source, conn)
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    if source.type == "postgres":
        conn.commit()
    return opened


# -- one table ---------------------------------------------------------------------------


def _base_frame(
    spark: SparkSession, refs: TableRefs, schema: TableSchema
) -> tuple[DataFrame, int | None]:
    """The base table pinned at its current snapshot, and that snapshot's id."""
    if not table_exists(spark, refs.base):
        raise VerifyError(
            f"table {refs.name!r}: base table {refs.base} does not exist",
            hint="run the merge (or a bootstrap) first",
        )
    snapshot = current_snapshot_id(spark, refs.base)
    pinned = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
    frame = spark.sql(f"SELECT * FROM {refs.base}{pinned}")
    present = {name.casefold() for name in frame.columns}
    absent = [c.name for c in schema.columns if c.name.casefold() not in present]
    if absent:
        raise VerifyError(
            f"table {refs.name!r}: base table {refs.base} has no column(s) {', '.join(absent)}",
            hint="the schema file is newer than the base table; run the merge first",
        )
    return frame, snapshot


def _sort_key(key: Key, columns: Sequence[Column]) -> tuple[Any, ...]:
    """Order keys by value (10 after 9), not by their text."""
    out: list[Any] = []
    for text, column in zip(key, columns, strict=True):
        if column.type.name in ("int", "long"):
            out.append(int(text))
        elif column.type.name == "decimal":
            out.append(Decimal(text))
        else:
            out.append(text)
    return tuple(out)


@dataclass
class HashDiff:
    """The differing keys of two ``(key, row hash)`` streams."""

    missing: list[Key] = field(default_factory=list)
    extra: list[Key] = field(default_factory=list)
    different: list[Key] = field(default_factory=list)

    def first(self, columns: Sequence[Column]) -> list[tuple[Kind, Key]]:
        """The first :data:`MAX_SHOWN` differing keys by key value, each with its kind."""
        labelled: Iterable[tuple[Kind, Key]] = [
            *(("missing", k) for k in self.missing),
            *(("extra", k) for k in self.extra),
            *(("different", k) for k in self.different),
        ]
        return heapq.nsmallest(MAX_SHOWN, labelled, key=lambda item: _sort_key(item[1], columns))


def diff_hashes(
    source: Iterable[Sequence[Any]], base: Iterable[Sequence[Any]], key_count: int
) -> HashDiff:
    """Compare ``(key texts…, row hash)`` rows of both sides by key.

    A key the base holds twice counts as extra, one the source holds twice as missing.
    """
    by_key: dict[Key, str] = {}
    diff = HashDiff()
    for row in source:
        key = tuple(row[:key_count])
        if key in by_key:
            diff.missing.append(key)
        by_key[key] = row[key_count]
    for row in base:
        key = tuple(row[:key_count])
        expected = by_key.pop(key, None)
        if expected is None:
            diff.extra.append(key)
        elif expected != row[key_count]:
            diff.different.append(key)
    diff.missing.extend(by_key)
    return diff


Side = dict[Key, tuple[Sequence[Any], Sequence[Any]]]
"""One side's looked-up rows: key texts → (each column's piece, each column's display)."""


def _by_key(rows: Iterable[Sequence[Any]], key_count: int, width: int) -> Side:
    """Rows of ``(key texts…, pieces…, displays…)`` keyed by their key texts."""
    n, w = key_count, width
    return {tuple(r[:n]): (r[n : n + w], r[n + w : n + 2 * w]) for r in rows}


def _finish_piece(value: Any, column: Column, convert: Callable[[str], Any]) -> str:
    """The piece of a column whose stored value is computed in Python."""
    if value is None:
        return ck.NULL_PIECE
    try:
        return ck.python_piece(convert(str(value)), column.type)
    except DecodeError:
        return UNFIT_PIECE


def _finish_display(value: Any, column: Column, convert: Callable[[str], Any]) -> str | None:
    """The display text of a column whose stored value is computed in Python."""
    if value is None:
        return None
    try:
        text = ck.python_text(convert(str(value)), column.type)
    except DecodeError as exc:
        text = f"{value} (does not fit: {exc.message})"
    return None if text is None else text[: ck.DISPLAY_CHARS]


def python_hashes(
    conn: SourceConnection, view: SourceView, keys: Sequence[Column], columns: Sequence[Column]
) -> Iterator[tuple[Any, ...]]:
    """``(key texts…, row hash)`` of every source row, the hashes finished in Python for
    the columns of ``view.python`` (the same hash :func:`ck.row_hash_sql` computes)."""
    query = ck.pieces_sql(conn.dialect, view.sql, keys, columns, view.python)
    n = len(keys)
    converts = [(i, c, view.python[c.name]) for i, c in enumerate(columns) if c.name in view.python]
    for row in conn.stream(query):
        pieces = list(row[n:])
        for i, column, convert in converts:
            pieces[i] = _finish_piece(pieces[i], column, convert)
        yield (*row[:n], hashlib.md5("".join(pieces).encode()).hexdigest())


def _details(
    conn: SourceConnection,
    view: SourceView,
    frame: DataFrame,
    schema: TableSchema,
    first: list[tuple[Kind, Key]],
) -> list[KeyDifference]:
    """Both sides' values for the reported keys, looked up by their canonical key text."""
    from pyspark.sql import functions as F

    if not first:
        return []
    keys, columns = schema.key_columns, schema.columns
    wanted = [key for _, key in first]
    query = ck.rows_sql(conn.dialect, view.sql, keys, columns, len(wanted), view.python)
    params = [text for key in wanted for text in key]
    rows = [list(r) for r in conn.query(ck.bind_placeholders(query), params)]
    n, w = len(keys), len(columns)
    for row in rows:
        for i, column in enumerate(columns):
            convert = view.python.get(column.name)
            if convert is not None:
                text = row[n + i]
                row[n + i] = _finish_piece(text, column, convert)
                row[n + w + i] = _finish_display(text, column, convert)
    source = _by_key(rows, n, w)
    match = F.lit(False)
    for key in wanted:
        one = F.lit(True)
        for column, text in zip(keys, key, strict=True):
            one = one & (ck.text_column(column) == F.lit(text))
        match = match | one
    found = ck.hash_frame(frame.where(match), keys, columns, pieces=True, display=True)
    base = _by_key(found.drop("_hash").collect(), len(keys), len(columns))
    nothing = ([None] * len(columns), [None] * len(columns))
    result = []
    for kind, key in first:
        (src_pieces, src_shown), (base_pieces, base_shown) = (
            source.get(key, nothing),
            base.get(key, nothing),
        )
        shown = tuple(
            ColumnValues(column.name, src_shown[i], base_shown[i])
            for i, column in enumerate(columns)
            if kind != "different" or src_pieces[i] != base_pieces[i]
        )
        names = [k.name for k in keys]
        result.append(KeyDifference(kind, dict(zip(names, key, strict=True)), shown))
    return result


def verify_table(
    spark: SparkSession,
    pipeline: Pipeline,
    table: TableConfig | str,
    source_conn: SourceConnection,
) -> TableVerdict:
    """Compare one base table with its source table; see the module docs."""
    table = pipeline.config.table(table) if isinstance(table, str) else table
    schema = pipeline.schema(table.name)
    if schema.sink.maps:
        return verify_converted(spark, pipeline, table, source_conn)
    refs = pipeline.refs(table.name)
    keys, columns = schema.key_columns, schema.columns
    frame, snapshot = _base_frame(spark, refs, schema)
    with _source_errors(table, source_conn, source_conn.table_sql(table)):
        view = source_conn.view(table, schema)
    base_rows, base_sum = ck.spark_checksum(frame, columns)
    with source_conn.snapshot(), _source_errors(table, source_conn, view.table):
        source_hashes: list[tuple[Any, ...]] | None = None
        if view.python:
            source_hashes = list(python_hashes(source_conn, view, keys, columns))
            count = len(source_hashes)
            total = sum(ck.python_row_value(str(h[-1])) for h in source_hashes)
        else:
            count, total = source_conn.query(
                ck.checksum_sql(source_conn.dialect, view.sql, columns)
            )[0]
        verdict = TableVerdict(
            table=table.name,
            source=f"{source_conn.source.name}:{table.source}",
            source_rows=int(count),
            base_rows=base_rows,
            source_checksum=int(total or 0),
            base_checksum=base_sum,
            base_snapshot=snapshot,
            matches=int(count) == base_rows and int(total or 0) == base_sum,
        )
        if verdict.matches:
            return verdict
        base_hashes = ck.hash_frame(frame, keys, columns).toLocalIterator(prefetchPartitions=True)
        source_rows = (
            source_hashes
            if source_hashes is not None
            else source_conn.stream(ck.hashes_sql(source_conn.dialect, view.sql, keys, columns))
        )
        diff = diff_hashes(source_rows, base_hashes, len(keys))
        verdict.missing, verdict.extra = len(diff.missing), len(diff.extra)
        verdict.different = len(diff.different)
        verdict.differences = _details(source_conn, view, frame, schema, diff.first(keys))
    return verdict


def verify_converted(
    spark: SparkSession,
    pipeline: Pipeline,
    table: TableConfig,
    source_conn: SourceConnection,
) -> TableVerdict:
    """Verify a table with a sink config (mapped names, type overrides, conversions).

    The source cannot compute a conversion in its own SQL, so its rows are read (in one
    consistent snapshot), put through the sink config by the code the ledger and the
    bootstrap use (:func:`icetide.bootstrap.sink.sink_frame`) in Spark, and both sides
    are hashed there over the Iceberg columns. A row whose value the sink cannot convert
    keeps that value null, so it differs from the base (which dead-lettered it). The
    differing keys are reported without their values (the source's are not the stored
    form, and a hashed column shows nothing useful)."""
    from icetide.bootstrap.sink import SOURCE_ROW, sink_frame
    from icetide.schema.convert.spark import sql_type
    from icetide.schema.quoting import quote

    contract = pipeline.contract(table.name)
    schema, target = contract.schema, contract.target
    refs = pipeline.refs(table.name)
    frame, snapshot = _base_frame(spark, refs, target)
    quoted = source_conn.table_sql(table)
    names = ", ".join(ck.quote_ident(source_conn.dialect, c.name) for c in schema.columns)
    with source_conn.snapshot(), _source_errors(table, source_conn, quoted):
        rows = list(source_conn.stream(f"SELECT {names} FROM {quoted}"))
    shape = ", ".join(f"{quote(c.name)} {sql_type(c.type)}" for c in schema.columns)
    source = sink_frame(spark.createDataFrame(rows, shape), contract).drop(SOURCE_ROW)
    keys, columns = target.key_columns, target.columns
    source_rows, source_sum = ck.spark_checksum(source, columns)
    base_rows, base_sum = ck.spark_checksum(frame, columns)
    verdict = TableVerdict(
        table=table.name,
        source=f"{source_conn.source.name}:{table.source}",
        source_rows=source_rows,
        base_rows=base_rows,
        source_checksum=source_sum,
        base_checksum=base_sum,
        base_snapshot=snapshot,
        matches=source_rows == base_rows and source_sum == base_sum,
    )
    if verdict.matches:
        return verdict
    diff = diff_hashes(
        ck.hash_frame(source, keys, columns).collect(),
        ck.hash_frame(frame, keys, columns).toLocalIterator(prefetchPartitions=True),
        len(keys),
    )
    verdict.missing, verdict.extra = len(diff.missing), len(diff.extra)
    verdict.different = len(diff.different)
    key_names = [k.name for k in keys]
    verdict.differences = [
        KeyDifference(kind, dict(zip(key_names, key, strict=True)))
        for kind, key in diff.first(keys)
    ]
    return verdict


@contextmanager
def _source_errors(table: TableConfig, conn: SourceConnection, source_table: str) -> Iterator[None]:
    """Database errors of the source queries as a :class:`VerifyError` naming the table."""
    try:
        yield
    except IcetideError:
        raise
    except Exception as exc:
        driver_errors: tuple[type[BaseException], ...]
        if conn.dialect == "mysql":
            import pymysql

            driver_errors = (pymysql.err.Error,)
        else:
            import psycopg2

            driver_errors = (psycopg2.Error,)
        if not isinstance(exc, driver_errors):
            raise
        raise VerifyError(
            f"table {table.name!r}: cannot checksum source table {source_table} on source "
            f"{conn.source.name!r}: {str(exc).strip()}",
            hint="check that the table exists, the user may read it, and the schema file's "
            "columns exist in it",
        ) from exc


# -- every table -------------------------------------------------------------------------


def run_verify(
    pipeline: Pipeline, spark: SparkSession, tables: Sequence[str] | None = None
) -> list[TableVerdict]:
    """Verify ``tables`` (default: every table some source captures), one connection per
    source. Naming a table no source captures is a :class:`ConfigError`."""
    config = pipeline.config
    if not config.sources:
        raise ConfigError(
            f"pipeline {config.pipeline!r} has no sources to verify against",
            hint="add a sources: section with the source database's connection",
        )
    wanted = {config.table(name).name for name in tables} if tables is not None else None
    plan = [
        (source, [t for t in config.source_tables(source) if wanted is None or t.name in wanted])
        for source in config.sources
    ]
    covered = {t.name for _, chosen in plan for t in chosen}
    orphans = sorted((wanted or set()) - covered)
    if orphans:
        raise ConfigError(
            f"no source captures table(s) {', '.join(orphans)}, so they cannot be verified",
            hint="list them under tables: of their source in sources:",
        )
    verdicts: list[TableVerdict] = []
    for source, chosen in plan:
        if not chosen:
            continue
        conn = open_source(source)
        try:
            for table in chosen:
                pipeline.report(
                    "verify",
                    f"verify {table.name}: checksumming source {source.name} and base …",
                    table=table.name,
                    done=len(verdicts),
                    total=len(covered),
                )
                verdicts.append(verify_table(spark, pipeline, table, conn))
        finally:
            conn.close()
    return verdicts


# -- output ------------------------------------------------------------------------------


def _cut(text: str | None, width: int = 60) -> str:
    if text is None:
        return "NULL"
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _render_key(key: dict[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in key.items())


def render_verdicts(verdicts: Sequence[TableVerdict]) -> str:
    """A plain text report: one line per table, then its first differing keys."""
    lines = []
    for v in verdicts:
        state = "MATCH" if v.matches else "DIFFERENT"
        line = (
            f"{v.table:<20} source {v.source_rows:>10,} rows  base {v.base_rows:>10,} rows  {state}"
        )
        if not v.matches:
            line += f" ({v.missing:,} missing, {v.extra:,} extra, {v.different:,} different)"
        lines.append(line)
        for d in v.differences:
            if d.kind == "different":
                cols = "; ".join(
                    f"{c.column}: source {_cut(c.source)}, base {_cut(c.base)}" for c in d.columns
                )
                lines.append(f"  key {_render_key(d.key)}: different: {cols}")
            else:
                side = "missing in base" if d.kind == "missing" else "extra in base"
                values = ", ".join(
                    f"{c.column}={_cut(c.source if d.kind == 'missing' else c.base, 30)}"
                    for c in d.columns
                )
                lines.append(f"  key {_render_key(d.key)}: {side} ({values})")
        shown = len(v.differences)
        total = v.missing + v.extra + v.different
        if total > shown:
            lines.append(f"  … and {total - shown:,} more differing key(s)")
    return "\n".join(lines)


def verdict_dicts(verdicts: Sequence[TableVerdict]) -> list[dict[str, Any]]:
    """The verdicts as JSON-ready dicts (``--output json``); checksums as strings, since
    they exceed what JSON readers hold exactly in a number."""
    out = []
    for v in verdicts:
        data = asdict(v)
        data["source_checksum"] = str(v.source_checksum)
        data["base_checksum"] = str(v.base_checksum)
        out.append(data)
    return out
