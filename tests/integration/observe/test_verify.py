"""``icetide verify`` against a real MariaDB and a real PostgreSQL, with real Spark/Iceberg.

Each source holds a table with every icetide type and tricky values; the base table is
loaded through Spark with exactly the values a SELECT returns, converted to the schema's
types. Verify must call that a match — also with a non-UTC Spark session zone — and,
after single-value changes in the base, report exactly the changed keys with both sides'
values.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.config import Config, load_config
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.ports import free_port
from icetide.errors import ConfigError
from icetide.lake.tables import TableRefs, ensure_namespace
from icetide.observe import checksum as ck
from icetide.observe.verify import (
    VerifyError,
    exit_code,
    render_verdicts,
    run_verify,
    verdict_dicts,
)
from icetide.pipeline import Pipeline
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import sql_type
from icetide.schema.file import dump_schema_file, schema_from_dict
from icetide.schema.model import TableSchema
from tests.devservers.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)

COLUMNS = [
    ("id", "int"),
    ("c_bool", "boolean"),
    ("c_int", "int"),
    ("order", "long"),  # a reserved word: every engine must quote it
    ("c_dec", "decimal(38,10)"),
    ("c_money", "decimal(12,2)"),
    ("c_big_u", "decimal(20,0)"),
    ("c_float", "float"),
    ("c_double", "double"),
    ("c_str", "string"),
    ("c_bin", "binary"),
    ("c_date", "date"),
    ("c_time", "time"),
    ("c_ts", "timestamp"),
    ("c_tstz", "timestamptz"),
    ("c_uuid", "uuid"),
    ("c_json", "json"),
]
SCHEMA = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": i + 1, "name": n, "type": t, **({"nullable": False} if n == "id" else {})}
            for i, (n, t) in enumerate(COLUMNS)
        ],
    }
)
NAMES = [n for n, _ in COLUMNS]

MYSQL_DDL = """CREATE TABLE shop.all_types (
  id INT PRIMARY KEY, c_bool BOOL, c_int INT, `order` BIGINT, c_dec DECIMAL(38,10),
  c_money DECIMAL(12,2), c_big_u BIGINT UNSIGNED, c_float FLOAT, c_double DOUBLE,
  c_str VARCHAR(200), c_bin VARBINARY(64), c_date DATE, c_time TIME(6), c_ts DATETIME(6),
  c_tstz TIMESTAMP(6) NULL DEFAULT NULL, c_uuid CHAR(36), c_json JSON
) DEFAULT CHARSET=utf8mb4"""
POSTGRES_DDL = """CREATE TABLE sales.all_types (
  id int PRIMARY KEY, c_bool boolean, c_int int, "order" bigint, c_dec numeric(38,10),
  c_money numeric(12,2), c_big_u numeric(20,0), c_float real, c_double double precision,
  c_str text, c_bin bytea, c_date date, c_time time(6), c_ts timestamp(6),
  c_tstz timestamptz, c_uuid uuid, c_json jsonb
)"""

U = "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"


def _row(i: int, **values: Any) -> dict[str, Any]:
    """A row with ordinary values, overridden by ``values``."""
    row: dict[str, Any] = {
        "id": i,
        "c_bool": i % 2 == 0,
        "c_int": i * 7,
        "order": -(10**12) - i,
        "c_dec": Decimal(f"{i}.0000000001"),
        "c_money": Decimal(f"{i}.25"),
        "c_big_u": Decimal(10**18 + i),
        "c_float": 1.5,
        "c_double": 0.1 * i,
        "c_str": f"row {i}",
        "c_bin": bytes([i, 0, 255]),
        "c_date": date(2024, 1, 1) + timedelta(days=i),
        "c_time": time(12, 0, i % 60, 500_000),
        "c_ts": datetime(2024, 2, 29, 10, 11, 12, 345_000) + timedelta(minutes=i),
        "c_tstz": datetime(2024, 3, 1, 0, 0, i % 60, 250, tzinfo=UTC),
        "c_uuid": str(uuid.UUID(int=i)),
        "c_json": json.dumps({"i": i, "tags": ["a", "b"]}),
    }
    row.update(values)
    return row


ROWS = [
    _row(
        1,
        c_int=-(2**31),
        order=-(2**63),
        c_dec=Decimal("-1234567890123456789012345678.0123456789"),
        c_money=Decimal("-0.05"),
        c_big_u=Decimal(2**64 - 1),
        c_float=0.1,
        c_double=0.1,
        c_str="héllo wörld ✓ 🎉 'quote' \"dq\" \\ back\ttab\nline",
        c_bin=bytes(range(64)),
        c_uuid=U,
        c_json='{"a": [1, 2.5, "x"], "b": null, "ü": "✓"}',
    ),
    _row(
        2,
        c_int=2**31 - 1,
        order=2**63 - 1,
        c_dec=Decimal("0"),
        c_money=Decimal("-12.34"),
        c_float=1e-7,
        c_double=1e-7,
        c_bin=b"",
        c_date=date(1000, 1, 1),
    ),
    _row(
        3,
        c_dec=Decimal("-0.0000000001"),
        c_float=3.4e38,
        c_double=1.7976931348623157e308,
        c_date=date(9999, 12, 31),
        c_ts=datetime(2024, 2, 29, 10, 11, 12, 345_000),
    ),
    _row(4, c_str="Hello World", c_double=-2.5, c_float=-0.0),
    _row(5, c_str="", c_double=5e-324, c_json="{}"),
    _row(6, c_double=2.2250738585072014e-308),
    _row(7, c_double=0.30000000000000004),
    {"id": 8, **dict.fromkeys(NAMES[1:])},
    # 00:30 on 2018-11-04 does not exist in São Paulo (DST gap): a zone-sensitive
    # timestamp formatter would shift it. TIME 00:00:00 reaches the base as "00:00:00".
    _row(
        9,
        c_ts=datetime(2018, 11, 4, 0, 30),
        c_time=time(0, 0),
        c_tstz=datetime(2038, 1, 19, 3, 14, 7, 999_999, tzinfo=UTC),
    ),
    *[_row(i) for i in range(10, 40)],
]
POSTGRES_ONLY = [_row(40, c_double=math.nan, c_float=-math.inf), _row(41, c_double=math.inf)]


# -- sources -----------------------------------------------------------------------------


@dataclass
class Sources:
    maria: MariaDBServer
    postgres: PostgresServer


@pytest.fixture(scope="module")
def sources() -> Iterator[Sources]:
    """One MariaDB and one PostgreSQL, each with the all-types table filled."""
    with MariaDBServer() as maria, PostgresServer() as postgres:
        with maria.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute(MYSQL_DDL)
            cur.execute("SET time_zone = '+00:00'")
            for row in ROWS:
                values = {**row, "c_tstz": _naive_utc(row["c_tstz"])}
                cur.execute(_insert("`shop`.`all_types`", "`order`"), [values[n] for n in NAMES])
        postgres.create_database("shop")
        postgres.execute("CREATE SCHEMA sales", "shop")
        postgres.execute(POSTGRES_DDL, "shop")
        insert = _insert("sales.all_types", '"order"')
        for row in ROWS + POSTGRES_ONLY:
            postgres.execute(insert, "shop", [row[n] for n in NAMES])
        yield Sources(maria, postgres)


def _naive_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None)


def _insert(table: str, order: str) -> str:
    names = ", ".join(order if n == "order" else n for n in NAMES)
    return f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(NAMES))})"


def _select(sources: Sources, dialect: str) -> list[dict[str, Any]]:
    """The source table as the database returns it, floats and JSON read exactly."""
    if dialect == "mysql":
        # MariaDB prints FLOAT with 6 digits; FLOAT + 0e0 is the exact value as a DOUBLE.
        exprs = ["c_float + 0e0" if n == "c_float" else f"`{n}`" for n in NAMES]
        with sources.maria.connect(init_command="SET time_zone = '+00:00'") as conn:
            with conn.cursor() as cur:
                cur.execute(f"SELECT {', '.join(exprs)} FROM shop.all_types ORDER BY id")
                rows = cur.fetchall()
    else:
        exprs = [f"{n}::text" if n in ("c_json", "c_uuid") else f'"{n}"' for n in NAMES]
        rows = sources.postgres.execute(
            f"SELECT {', '.join(exprs)} FROM sales.all_types ORDER BY id", "shop"
        )
    return [dict(zip(NAMES, row, strict=True)) for row in rows]


def _to_schema_types(row: dict[str, Any]) -> dict[str, Any]:
    """A SELECTed row in the Python types Spark takes for the schema's Spark types,
    shaped as the pipeline writes them (time as ISO text, instants as aware UTC)."""
    out = dict(row)
    if out["c_big_u"] is not None:
        out["c_big_u"] = Decimal(out["c_big_u"])  # pymysql: BIGINT UNSIGNED is an int
    if isinstance(out["c_bool"], int):
        out["c_bool"] = bool(out["c_bool"])
    if isinstance(out["c_time"], timedelta):
        out["c_time"] = (datetime.min + out["c_time"]).time()
    if out["c_time"] is not None:
        out["c_time"] = out["c_time"].isoformat()  # "00:00:00" when there are no micros
    if out["c_tstz"] is not None and out["c_tstz"].tzinfo is None:
        out["c_tstz"] = out["c_tstz"].replace(tzinfo=UTC)  # MySQL session zone is UTC
    if out["c_bin"] is not None:
        out["c_bin"] = bytes(out["c_bin"])
    return out


# -- pipeline ----------------------------------------------------------------------------

_namespaces = iter(range(1, 1000))


def _config(
    root: Path,
    warehouse: Path,
    sources: Sources,
    pg_table: str = "sales.all_types",
    namespace: str | None = None,
) -> Config:
    """A pipeline with a MariaDB table ``my_types`` and a PostgreSQL table ``pg_types``
    (read from ``pg_table``), in a new namespace unless ``namespace`` is given."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("my_types", "pg_types"):
        dump_schema_file(
            TableSchema(name, SCHEMA.columns, SCHEMA.primary_key), root / "schemas" / f"{name}.yaml"
        )
    doc: dict[str, Any] = {
        "pipeline": "verify",
        "state_dir": "./state",
        "catalog": {
            "name": "lake",
            "warehouse": str(warehouse),
            "namespace": namespace or f"verify_{next(_namespaces)}",
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [
            {
                "name": "maria",
                "type": "mysql",
                "port": sources.maria.port,
                "user": "root",
                "tables": ["my_types"],
            },
            {
                "name": "pg",
                "type": "postgres",
                "port": sources.postgres.port,
                "user": "postgres",
                "database": "shop",
                "tables": ["pg_types"],
            },
        ],
        "tables": [
            {"name": "my_types", "source": "shop.all_types", "buckets": 2},
            {"name": "pg_types", "source": pg_table, "buckets": 2},
        ],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    return load_config(path)


def _load_base(
    spark: SparkSession, config: Config, table: str, rows: list[dict[str, Any]]
) -> TableName:
    """Create ``table``'s base (with the _icetide_* columns) and append ``rows``."""
    refs = TableRefs.of(config, table)
    ensure_namespace(spark, config.catalog.name, config.catalog.namespace)
    spark.sql(TableContract(SCHEMA, TableSettings(2, "merge-on-read")).base_ddl(refs.base))
    ddl = ", ".join(
        f"`{c.name}` {sql_type(c.type)}" + (" NOT NULL" if c.name == "id" else "")
        for c in SCHEMA.columns
    )
    data = [tuple(_to_schema_types(r)[n] for n in NAMES) for r in rows]
    (
        spark.createDataFrame(data, ddl)
        .withColumn("_icetide_position", F.lit(7).cast("decimal(38,0)"))
        .withColumn("_icetide_source_ts", F.current_timestamp())
        .writeTo(refs.base.sql)
        .append()
    )
    return refs.base


def _reference_checksum(rows: list[dict[str, Any]]) -> int:
    """The checksum by the plain-Python specification."""
    return sum(ck.python_row_value(ck.python_row_hash(r, SCHEMA.columns)) for r in rows)


Selected = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def loaded(
    tmp_path_factory: pytest.TempPathFactory,
    warehouse: Path,
    spark: SparkSession,
    sources: Sources,
) -> tuple[Config, Selected]:
    """A config whose two base tables hold exactly their sources' rows (read-only)."""
    config = _config(tmp_path_factory.mktemp("verify"), warehouse, sources)
    selected = {"my_types": _select(sources, "mysql"), "pg_types": _select(sources, "postgres")}
    for table, rows in selected.items():
        _load_base(spark, config, table, rows)
    return config, selected


# -- tests -------------------------------------------------------------------------------


def test_identical_tables_match_on_both_sources_whatever_the_session_zone(
    spark: SparkSession, loaded: tuple[Config, dict[str, list[dict[str, Any]]]]
) -> None:
    config, selected = loaded
    zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    spark.conf.set("spark.sql.session.timeZone", "America/Sao_Paulo")
    try:
        verdicts = run_verify(Pipeline(config), spark, None)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)

    by_table = {v.table: v for v in verdicts}
    assert set(by_table) == {"my_types", "pg_types"}
    for table, verdict in by_table.items():
        rows = selected[table]
        assert verdict.matches, render_verdicts([verdict])
        assert (verdict.source_rows, verdict.base_rows) == (len(rows), len(rows))
        # Both engines agree with the plain-Python specification, not just with each other.
        assert verdict.source_checksum == verdict.base_checksum == _reference_checksum(rows)
        assert verdict.differences == [] and verdict.base_snapshot is not None
    assert by_table["pg_types"].source_rows == len(ROWS) + len(POSTGRES_ONLY)
    assert exit_code(verdicts) == 0
    assert "MATCH" in render_verdicts(verdicts) and "DIFFERENT" not in render_verdicts(verdicts)
    data = json.loads(json.dumps(verdict_dicts(verdicts)))
    assert [d["matches"] for d in data] == [True, True]
    # Sums of 60-bit values pass 2**53: JSON carries them as exact text.
    assert [int(d["source_checksum"]) for d in data] == [v.source_checksum for v in verdicts]


def _shown(row: dict[str, Any]) -> list[str | None]:
    """A row's values as a difference report shows them, by the specification."""
    out = []
    for column in SCHEMA.columns:
        value = row[column.name]
        if column.type.name == "binary" and value is not None:
            value = bytes(value)[: ck.DISPLAY_BYTES]
        out.append(ck.python_text(value, column.type))
    return out


NEAR = math.nextafter(0.30000000000000004, 1.0)
"""Key 7's double with its last bit changed."""


def _drifted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The source rows with one change per kind of value, key 6 kept (deleted later in
    Iceberg) and a copy of key 1 added as key 100."""
    by_id = {row["id"]: row for row in rows}
    changes: dict[int, dict[str, Any]] = {
        2: {"c_money": by_id[2]["c_money"] + Decimal("0.01")},  # a decimal's last digit
        3: {"c_ts": by_id[3]["c_ts"] + timedelta(microseconds=1)},
        4: {"c_str": by_id[4]["c_str"].lower()},  # case only
        5: {"c_str": None},  # the source has ''
        7: {"c_double": NEAR},
    }
    drifted = [{**row, **changes.get(row["id"], {})} for row in rows]
    return [*drifted, {**by_id[1], "id": 100}]


@pytest.mark.parametrize("table", ["my_types", "pg_types"])
def test_reports_exactly_the_changed_keys_with_both_values(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    sources: Sources,
    loaded: tuple[Config, Selected],
    table: str,
) -> None:
    config = _config(tmp_path, warehouse, sources)
    rows = loaded[1][table]
    base = _load_base(spark, config, table, _drifted(rows))
    spark.sql(f"DELETE FROM {base} WHERE id = 6")  # a merge-on-read delete file

    (verdict,) = run_verify(Pipeline(config), spark, [table])

    assert not verdict.matches and exit_code([verdict]) == 1
    assert verdict.source_rows == verdict.base_rows == len(rows)  # one out, one in
    assert verdict.source_checksum != verdict.base_checksum
    assert (verdict.missing, verdict.extra, verdict.different) == (1, 1, 5)
    found = {
        int(d.key["id"]): (d.kind, [(c.column, c.source, c.base) for c in d.columns])
        for d in verdict.differences
    }
    assert list(found) == [2, 3, 4, 5, 6, 7, 100]  # in key order
    before = ck.python_text(0.30000000000000004, SCHEMA.by_name["c_double"].type)
    assert found[2] == ("different", [("c_money", "-12.34", "-12.33")])
    assert found[3] == (
        "different",
        [("c_ts", "2024-02-29 10:11:12.345000", "2024-02-29 10:11:12.345001")],
    )
    assert found[4] == ("different", [("c_str", "Hello World", "hello world")])
    assert found[5] == ("different", [("c_str", "", None)])
    assert found[7] == ("different", [("c_double", before, NEAR.hex())])
    # A missing or extra row shows every column of the side that has it, as the
    # specification writes it (binary cut to its first bytes): every type's display
    # expression is checked on the source engine (key 6) and on Spark (key 100).
    by_id = {row["id"]: row for row in rows}
    kind, columns = found[6]
    assert kind == "missing" and [c for c, _, _ in columns] == NAMES
    assert [src for _, src, _ in columns] == _shown(by_id[6])
    assert all(b is None for _, _, b in columns)
    kind, columns = found[100]
    assert kind == "extra" and [b for _, _, b in columns] == _shown({**by_id[1], "id": 100})
    assert all(src is None for _, src, _ in columns)

    text = render_verdicts([verdict])
    assert "DIFFERENT (1 missing, 1 extra, 5 different)" in text
    assert "key id=6: missing in base" in text and "key id=100: extra in base" in text
    assert "c_money: source '-12.34', base '-12.33'" in text


def test_more_than_ten_differences_show_the_first_ten_by_key_value(
    tmp_path: Path, warehouse: Path, spark: SparkSession, sources: Sources
) -> None:
    config = _config(tmp_path, warehouse, sources)
    rows = _select(sources, "mysql")
    # The base lacks ids 1..9 and 10..39 are all different: 39 differing keys.
    changed = [{**r, "c_int": -1} for r in rows if r["id"] >= 10]
    _load_base(spark, config, "my_types", changed)

    (verdict,) = run_verify(Pipeline(config), spark, ["my_types"])

    assert (verdict.missing, verdict.extra, verdict.different) == (9, 0, 30)
    assert [d.key["id"] for d in verdict.differences] == [str(i) for i in range(1, 11)]
    assert "… and 29 more differing key(s)" in render_verdicts([verdict])


def test_a_missing_base_table_or_source_table_is_a_clear_error(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    sources: Sources,
    loaded: tuple[Config, Selected],
) -> None:
    config = _config(tmp_path / "fresh", warehouse, sources)
    with pytest.raises(VerifyError, match="base table .*my_types.* does not exist") as err:
        run_verify(Pipeline(config), spark, ["my_types"])
    assert err.value.hint and "merge" in err.value.hint

    namespace = loaded[0].catalog.namespace  # its bases exist
    wrong = _config(
        tmp_path / "wrong", warehouse, sources, "sales.no_such_table", namespace=namespace
    )
    with pytest.raises(VerifyError, match='pg_types.*"sales"."no_such_table".*pg') as err:
        run_verify(Pipeline(wrong), spark, ["pg_types"])
    assert err.value.hint and "exists" in err.value.hint


def test_an_unreachable_source_or_unknown_table_is_a_clear_error(
    tmp_path: Path, warehouse: Path, spark: SparkSession, sources: Sources
) -> None:
    config = _config(tmp_path, warehouse, sources)
    down = config.model_copy(
        update={"sources": (config.sources[0].model_copy(update={"port": free_port()}),)}
    )
    with pytest.raises(VerifyError, match="cannot connect to source 'maria'") as err:
        run_verify(Pipeline(down), spark, ["my_types"])
    assert err.value.hint and "sources:" in err.value.hint
    with pytest.raises(ConfigError, match="no table 'my_typo'"):
        run_verify(Pipeline(config), spark, ["my_typo"])
