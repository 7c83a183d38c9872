"""Table properties, and a table's schema version applied once and whole.

:func:`apply_version` applies one table's schema version as one Iceberg commit, with the
properties that record it (:mod:`icetide.lake.schema_update`): "property says N" holds
exactly when "shape is N", and a crash leaves the table at the old version, to be taken
to the new one again from the start.

Releases before it ran a version as several ``ALTER TABLE`` statements, each its own
commit, and recorded how far a swap got (:data:`ALTER_PROGRESS`). A table an older
release left part-way through a version is finished the old way, by
:func:`apply_alters`: it runs the statements again one by one (going on from the
recorded progress) and checks the table has the shape the new version asks for; the
caller's properties follow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaError
from icetide.lake.schema_update import UpdateRefused, commit_version
from icetide.lake.tables import iceberg_table, string_map
from icetide.schema.contract.alter import KEPT_AS, RENAMING
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import TableUpdate
from icetide.schema.quoting import literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType


def table_properties(spark: SparkSession, table: TableName, loaded: Any = None) -> dict[str, str]:
    """Every table property of ``table`` (of ``loaded``, its Iceberg table, when the
    caller has it), from its metadata through Iceberg's API.

    Not ``SHOW TBLPROPERTIES``: that is a parsed and planned statement and a collect
    each time, and the merge asks three times per batch (docs/merge-performance.md).
    """
    return string_map((loaded or iceberg_table(spark, table)).properties())


def int_property(properties: Mapping[str, str], key: str) -> int | None:
    """An integer property, None when absent or not a number."""
    value = properties.get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def set_properties(spark: SparkSession, table: TableName, properties: Mapping[str, str]) -> None:
    """Set table properties in one metadata commit."""
    if properties:
        pairs = ", ".join(f"{literal(k)}={literal(v)}" for k, v in properties.items())
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")


def _covers(actual: DataType, expected: DataType) -> bool:
    """Whether ``actual`` has every field of ``expected`` with the same type (extra fields,
    such as soft-dropped columns, and nullability do not matter)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(expected, StructType):
        if not isinstance(actual, StructType):
            return False
        fields = {f.name: f.dataType for f in actual.fields}
        return all(f.name in fields and _covers(fields[f.name], f.dataType) for f in expected)
    if isinstance(expected, ArrayType):
        return isinstance(actual, ArrayType) and _covers(actual.elementType, expected.elementType)
    if isinstance(expected, MapType):
        return (
            isinstance(actual, MapType)
            and _covers(actual.keyType, expected.keyType)
            and _covers(actual.valueType, expected.valueType)
        )
    return actual.simpleString() == expected.simpleString()


def has_shape(spark: SparkSession, table: TableName, columns: Sequence[str]) -> bool:
    """Whether ``table`` has every column of the SQL definitions ``columns``."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    expected = _parse_datatype_string(", ".join(c.replace(" NOT NULL", "") for c in columns))
    assert isinstance(expected, StructType)
    return _covers(spark.table(table.sql).schema, expected)


def kept_columns(
    spark: SparkSession, table: TableName, schema: Collection[str], image: str | None = None
) -> set[str]:
    """The top-level columns (of the struct column ``image``, when given) ``table`` holds
    beyond ``schema``'s: the ones soft drops left in it."""
    fields = spark.table(table.sql).schema
    if image is not None:
        inner = fields[image].dataType
        names = set(getattr(inner, "fieldNames", list)())
    else:
        names = set(fields.fieldNames())
    return {n for n in names if n.casefold() not in {s.casefold() for s in schema}}


_COMMENT = re.compile(r"^ALTER TABLE .* ALTER COLUMN .* COMMENT '")
RENAMING_MARK = RENAMING.split("{", 1)[0]
"""What the temporary names of columns trading names start with."""
_MOVED = re.compile(
    r" RENAME COLUMN .* TO `(?:[^`]|``)*"
    + re.escape(KEPT_AS.format(name="", version=""))
    + r"\d+`$"
)
"""A kept (soft-dropped) column moved out of the way of a new column of its name."""
ALTER_PROGRESS = "icetide.alter.progress"
"""``<version>:<statements done>`` of a schema change whose columns trade names."""


def _progress(spark: SparkSession, table: TableName, version: int) -> int:
    return _recorded_progress(table_properties(spark, table), version)


def _recorded_progress(properties: Mapping[str, str], version: int) -> int:
    wanted, _, count = properties.get(ALTER_PROGRESS, "").partition(":")
    return int(count) if wanted == str(version) and count.isdigit() else 0


def apply_version(
    spark: SparkSession,
    table: TableName,
    update: TableUpdate,
    version: int,
    properties: Mapping[str, str],
    *,
    statements: Callable[[], Sequence[str]] | None = None,
    columns: Sequence[str] = (),
) -> Applied:
    """Take ``table`` to schema ``version`` by ``update`` and set ``properties``, all in
    one Iceberg commit.

    ``statements`` (called only then) and ``columns`` are the same version as ALTER
    statements and the column definitions it ends with: they finish a table an older
    release left part-way through the version (:data:`ALTER_PROGRESS` recorded, or a
    table Iceberg will not take the update on because some of its ALTERs ran), then
    ``properties`` are set in a commit of their own, as that release did."""
    recorded = _recorded_progress(table_properties(spark, table), version)
    if not recorded:
        try:
            schema_id = commit_version(spark, table, update, version, properties)
            return Applied(len(update.ops), schema_id)
        except UpdateRefused:
            if statements is None:
                raise
            # Part-way through by ALTERs of an older release (a column added, another
            # not yet): only ALTERs, which pass over what is done, can finish it.
    assert statements is not None, "a change begun by ALTERs needs its statements"
    ran = apply_alters(spark, table, statements(), columns, version)
    set_properties(spark, table, properties)
    return Applied(ran, None)


@dataclass(frozen=True)
class Applied:
    """What :func:`apply_version` did."""

    operations: int
    """Schema operations in the one commit; ALTER statements run when finishing."""
    schema_id: int | None
    """The Iceberg schema id of the version; None when ALTERs finished an older
    release's change."""

    def describe(self) -> str:
        """For the stage's report line."""
        if self.schema_id is None:
            return (
                f"{self.operations} ALTER statements, finishing a change an earlier release began"
            )
        return f"{self.operations} schema changes in one commit, Iceberg schema {self.schema_id}"


def apply_alters(
    spark: SparkSession,
    table: TableName,
    statements: Sequence[str],
    columns: Sequence[str],
    version: int = 0,
) -> int:
    """Run ``statements`` unless ``table`` has the shape ``columns`` already; return how
    many ran. A statement that fails because an earlier run applied it is passed over;
    the shape check at the end decides.

    Columns trading names (a swap, a rename cycle: the statements go through temporary
    names) leave the shape as it was, so the shape cannot say whether they ran, and
    running a finished swap again would swap back. So does a column added under the
    name of a kept (soft-dropped) one of the same type: the kept one already has the
    new one's name and type, but must move out of its way first. Those statements record
    how far they got (:data:`ALTER_PROGRESS`, per ``version``) and a rerun goes on from
    there."""
    tracked = any(RENAMING_MARK in s or _MOVED.search(s) for s in statements)
    done = _progress(spark, table, version) if tracked else 0
    if not tracked and has_shape(spark, table, columns):
        # A soft drop changes no shape, only a comment: it still has to be said.
        statements = [s for s in statements if _COMMENT.search(s)]
        if not statements:
            return 0
    failures: list[str] = []
    ran = 0
    for index, statement in enumerate(statements):
        if index < done:
            continue
        try:
            spark.sql(statement)
            ran += 1
        except Exception as exc:  # applied by a run that crashed, or a real refusal
            failures.append(f"{statement}: {str(exc).splitlines()[0]}")
        if tracked:
            set_properties(spark, table, {ALTER_PROGRESS: f"{version}:{index + 1}"})
    if not has_shape(spark, table, columns):
        raise SchemaError(
            f"table {table}: the schema change did not reach the expected shape"
            + (f"; first failure: {failures[0]}" if failures else ""),
            hint="look at the table with DESCRIBE and at `icetide status`; the change is "
            "retried at the next batch",
        )
    return ran
