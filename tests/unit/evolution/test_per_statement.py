"""The shapes a batch's DDL statements leave, one per statement (evolution/per_statement.py):
what a version per statement is built from, and when the catalog's reading is used."""

from __future__ import annotations

from icetide.evolution.evidence import collect
from icetide.evolution.per_statement import after_statement, statement_steps
from icetide.ledger.signals import ChangeSignal
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import BooleanType, Column, IntType, LongType, StringType

T = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "a", "type": "int"},
            {"id": 3, "name": "vip", "type": "boolean"},
        ],
    }
)


def _after(*ddl: str) -> TableSchema | None:
    shape: TableSchema | None = T
    for statement in ddl:
        assert shape is not None
        shape = after_statement(shape, collect([statement], "mysql"))
    return shape


def _shape(schema: TableSchema | None) -> list[tuple[int, str, object, bool]]:
    assert schema is not None
    return [(c.id, c.name, c.type, c.nullable) for c in schema.columns]


def _signals(*ddl: str, table: str = "t") -> list[ChangeSignal]:
    return [
        ChangeSignal(table, "ddl", ddl=f"ALTER TABLE t {d}", position=100 + i)
        for i, d in enumerate(ddl)
    ]


def test_a_statement_adds_drops_renames_and_redefines_by_identity() -> None:
    assert _shape(_after("ALTER TABLE t ADD COLUMN n VARCHAR(5) NOT NULL FIRST")) == [
        (4, "n", StringType(), False),
        (1, "id", IntType(), False),
        (2, "a", IntType(), True),
        (3, "vip", BooleanType(), True),
    ]
    # CHANGE renames and retypes at once: the id stays, the type is the new one.
    assert _shape(_after("ALTER TABLE t CHANGE a b BIGINT NOT NULL")) == [
        (1, "id", IntType(), False),
        (2, "b", LongType(), False),
        (3, "vip", BooleanType(), True),
    ]
    # A drop and an add under the name: a new column, placed after the one named.
    assert _shape(
        _after("ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN a INT AFTER id")
    ) == [
        (1, "id", IntType(), False),
        (4, "a", IntType(), True),
        (3, "vip", BooleanType(), True),
    ]


def test_a_redefined_column_keeps_a_declared_type_its_source_type_still_fits() -> None:
    # TINYINT(1) is what a declared boolean reads from; INT is not.
    assert _shape(_after("ALTER TABLE t MODIFY vip TINYINT(1)"))[2][2] == BooleanType()
    assert _shape(_after("ALTER TABLE t MODIFY vip INT"))[2][2] == IntType()


def test_what_a_statement_does_not_say_makes_no_shape() -> None:
    assert _after("ALTER TABLE t DROP PRIMARY KEY") is None  # keyed by what, next?
    rekeyed = collect(["ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)"], "mysql")
    assert after_statement(T, rekeyed).primary_key == ("id", "a")  # type: ignore[union-attr]
    # A key the config names stays the key, whatever the source's says.
    assert after_statement(T, rekeyed, key_pinned=True).primary_key == ("id",)  # type: ignore[union-attr]
    assert _after("ALTER TABLE t ADD COLUMN g GEOMETRYCOLLECTIONZ") is None


def test_the_catalog_gives_the_last_shape_only_when_its_names_agree() -> None:
    ddl = ("ADD COLUMN c INT", "RENAME COLUMN c TO d")
    now = T.with_columns([*T.columns, Column(4, "D", LongType())])  # the catalog's d
    steps = statement_steps(T, _signals(*ddl), now, "mysql")
    assert steps is not None
    assert [(s.position, s.from_catalog) for s in steps] == [(100, False), (101, True)]
    assert [c.name for c in steps[0].source.columns] == ["id", "a", "vip", "c"]
    assert steps[1].source is now
    # The catalog has moved on (a column the statements read so far do not add): the
    # last shape is the statements', and the later statement comes with its own batch.
    ahead = now.with_columns([*now.columns, Column(5, "e", IntType())])
    steps = statement_steps(T, _signals(*ddl), ahead, "mysql")
    assert steps is not None and not steps[-1].from_catalog
    assert [c.name for c in steps[-1].source.columns] == ["id", "a", "vip", "d"]
    # Or a column no statement named has another type there (a MODIFY still to come).
    modified = now.with_columns([now.columns[0], Column(2, "a", LongType()), *now.columns[2:]])
    steps = statement_steps(T, _signals(*ddl), modified, "mysql")
    assert steps is not None and not steps[-1].from_catalog
    assert steps[-1].source.by_name["a"].type == IntType()
    # Or two columns of one type have traded names since (the same names, in another
    # order): the shape keeps each column where the statements left it.
    traded = now.with_columns([now.columns[0], now.columns[3], now.columns[2], now.columns[1]])
    steps = statement_steps(T, _signals(*ddl), traded, "mysql")
    assert steps is not None and not steps[-1].from_catalog
    assert [c.name for c in steps[-1].source.columns] == ["id", "a", "vip", "d"]


def test_changes_the_statements_cannot_replay_are_planned_at_once() -> None:
    signals = _signals("RENAME COLUMN a TO b")
    assert statement_steps(T, signals, T, "postgres") is None  # no DDL in its log
    unplaced = [ChangeSignal("t", "ddl", ddl="ALTER TABLE t RENAME COLUMN a TO b")]
    assert statement_steps(T, unplaced, T, "mysql") is None
    unparsed = _signals("RENAME COLUMN a TO b", "ADD COLUMN (((")
    assert statement_steps(T, unparsed, T, "mysql") is None
    # Signals without DDL (a row's unknown fields) ride with the last statement.
    unknown = ChangeSignal("t", "unknown_fields", columns=("b",), position=200)
    steps = statement_steps(T, [*signals, unknown], T, "mysql")
    assert steps is not None and steps[-1].signals == (signals[0], unknown)


def test_a_redefined_column_carries_how_its_values_arrive_now() -> None:
    dated = schema_from_dict(
        {
            "table": "t",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int", "nullable": False},
                {"id": 2, "name": "dt", "type": "timestamp"},
            ],
            "sink": {"logical": {"dt": "io.debezium.time.Timestamp"}},
        }
    )
    # Rows written after DATETIME(6) carry microseconds: the version says so.
    after = after_statement(dated, collect(["ALTER TABLE t MODIFY dt DATETIME(6)"], "mysql"))
    assert after is not None and after.sink.logical == {2: "io.debezium.time.MicroTimestamp"}
    added = after_statement(dated, collect(["ALTER TABLE t ADD COLUMN at DATETIME(3)"], "mysql"))
    assert added is not None
    assert added.sink.logical == {2: "io.debezium.time.Timestamp", 3: "io.debezium.time.Timestamp"}
