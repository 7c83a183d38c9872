"""load_config and load_table_schemas on small YAML files: defaults, paths, ${VAR},
secrets, and errors that name the YAML path and say what to do."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from icetide.config import Config, load_config, load_table_schemas
from icetide.errors import ConfigError

MINIMAL = """\
pipeline: shop
tables:
  - name: customers
"""

SCHEMA = """\
table: customers
primary_key: [id]
columns:
  - {id: 1, name: id, type: long, nullable: false}
  - {id: 2, name: email, type: string}
"""


Load = Callable[[str], Config]
Fail = Callable[[str], ConfigError]
Write = Callable[[str], Path]


# -- defaults and paths ------------------------------------------------------------------


def test_minimal_config_gets_the_defaults(load: Load, folder: Path) -> None:
    config = load(MINIMAL)

    (table,) = config.tables
    assert table.source == "customers"
    assert table.schema_file == folder / "schemas" / "customers.yaml"
    assert (table.primary_key, table.buckets, table.mode) == (None, 16, "merge-on-read")
    assert config.state_dir == folder / ".icetide"
    assert config.transport.path == folder / "landing"
    assert config.catalog.type == "hadoop"
    assert config.schedule.stream_interval == timedelta(seconds=10)
    assert config.dead_letter.unrouted == "icetide_unrouted_dlt"


def test_hadoop_catalog_without_warehouse_uses_one_next_to_the_config(
    load: Load, folder: Path
) -> None:
    assert load(MINIMAL).catalog.warehouse == str(folder / "warehouse")
    explicit_null = load(MINIMAL + "catalog:\n  warehouse:\n")
    assert explicit_null.catalog.warehouse == str(folder / "warehouse")


def test_other_catalogs_get_no_default_warehouse(load: Load) -> None:
    config = load(MINIMAL + "catalog: {type: rest, uri: 'http://rest:8181'}\n")
    assert config.catalog.warehouse is None
    assert config.catalog.uri == "http://rest:8181"


def test_a_key_without_value_means_the_default(load: Load) -> None:
    config = load(
        """\
        pipeline: shop
        catalog:
        spark:
          shuffle_partitions:
        tables:
          - name: customers
            source:
            buckets:
        """
    )
    assert config.catalog.name == "lake"
    assert config.spark.shuffle_partitions == 8
    assert config.tables[0].source == "customers"
    assert config.tables[0].buckets == 16


def test_relative_paths_resolve_against_the_config_folder(
    load: Load, folder: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(folder.parent / "home"))
    config = load(
        """\
        pipeline: shop
        state_dir: state
        catalog: {warehouse: ../lake}
        spark:
          iceberg_jar: jars/iceberg.jar
          extra_jars: [/usr/share/java/mysql.jar, drivers/pg.jar, ~/x.jar]
        transport: {path: ./in/../landing}
        tables:
          - {name: customers, schema: defs/customers.yaml}
        """
    )
    assert config.config_dir == folder
    assert config.state_dir == folder / "state"
    assert config.catalog.warehouse == str(folder.parent / "lake")
    assert config.spark.iceberg_jar == str(folder / "jars" / "iceberg.jar")
    assert config.spark.extra_jars == (
        "/usr/share/java/mysql.jar",
        str(folder / "drivers" / "pg.jar"),
        str(folder.parent / "home" / "x.jar"),
    )
    assert config.transport.path == folder / "landing"
    assert config.tables[0].schema_file == folder / "defs" / "customers.yaml"
    assert config.resolved_path("checkpoints") == folder / "checkpoints"
    assert config.resolved_path("/abs") == Path("/abs")
    assert not str(config.state_dir).startswith(str(elsewhere))


def test_uri_locations_are_kept_as_written(load: Load) -> None:
    config = load(MINIMAL + "catalog: {warehouse: 's3a://bucket/wh'}\n")
    assert config.catalog.warehouse == "s3a://bucket/wh"


def test_a_folder_means_its_icetide_yaml(write: Write, folder: Path) -> None:
    write(MINIMAL)
    assert load_config(folder).pipeline == "shop"


def test_missing_file_says_how_to_create_one(folder: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(folder / "nope.yaml")
    assert "nope.yaml" in info.value.message
    assert info.value.hint is not None and "icetide init" in info.value.hint


# -- ${VAR} interpolation ----------------------------------------------------------------


def test_variables_are_replaced(load: Load, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REST_HOST", "rest")
    monkeypatch.setenv("PARTITIONS", "4")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.delenv("UNSET_PORT", raising=False)
    config = load(
        """\
        pipeline: shop
        catalog:
          type: rest
          uri: "http://${REST_HOST}:${UNSET_PORT:-8181}/v1"
          warehouse: "${EMPTY:-s3a://default/wh}"
          properties:
            literal: "$${NOT_A_VAR}"
        spark:
          shuffle_partitions: ${PARTITIONS}
        tables:
          - name: customers
        """
    )
    assert config.catalog.uri == "http://rest:8181/v1"
    # ${VAR:-d} replaces a variable that is set but empty, as the shell does.
    assert config.catalog.warehouse == "s3a://default/wh"
    assert config.catalog.properties_plain() == {"literal": "${NOT_A_VAR}"}
    assert config.spark.shuffle_partitions == 4


def test_missing_variable_names_the_path_and_the_variable(
    fail: Fail, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ICETIDE_TEST_UNSET", raising=False)
    monkeypatch.delenv("ICETIDE_TEST_UNSET2", raising=False)
    error = fail(
        """\
        pipeline: shop
        catalog:
          type: rest
          uri: "${ICETIDE_TEST_UNSET}"
        transport:
          options: {kafka.x: "${ICETIDE_TEST_UNSET2}"}
        tables:
          - name: customers
        """
    )
    assert error.path == "catalog.uri"
    assert "catalog.uri: environment variable ICETIDE_TEST_UNSET is not set (line 4)" in (
        error.message
    )
    assert 'transport.options["kafka.x"]' in error.message
    assert "ICETIDE_TEST_UNSET2" in error.message
    assert error.hint is not None and "ICETIDE_TEST_UNSET" in error.hint


def test_malformed_reference_is_an_error(fail: Fail) -> None:
    error = fail(MINIMAL + "catalog: {properties: {x: '${1BAD}'}}\n")
    assert error.path == "catalog.properties.x"
    assert "${1BAD}" in error.message
    assert error.hint is not None and "${VAR:-default}" in error.hint


# -- secrets -----------------------------------------------------------------------------


def test_interpolated_and_credential_values_are_hidden_but_usable(
    load: Load, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CATALOG_URI", "http://user:hunter2@rest:8181")
    monkeypatch.setenv("JAAS", "jaas-hunter2")
    config = load(
        """\
        pipeline: shop
        catalog:
          type: rest
          uri: "${CATALOG_URI}"
          properties: {token: literal-hunter2, io-impl: org.example.IO}
        spark:
          conf: {spark.hadoop.fs.s3a.secret.key: s3-hunter2, spark.sql.ansi.enabled: true}
        transport:
          type: kafka
          bootstrap_servers: broker:9092
          topics: [shop.inventory.customers]
          options: {kafka.sasl.jaas.config: "${JAAS}"}
        tables:
          - name: customers
        """
    )
    redacted = config.redacted()
    assert redacted["catalog"]["uri"] == "***"
    assert redacted["catalog"]["properties"] == {"token": "***", "io-impl": "org.example.IO"}
    assert redacted["spark"]["conf"] == {
        "spark.hadoop.fs.s3a.secret.key": "***",
        "spark.sql.ansi.enabled": "true",
    }
    assert redacted["transport"]["options"] == {"kafka.sasl.jaas.config": "***"}
    for shown in (repr(config), str(config), repr(config.catalog), str(redacted)):
        assert "hunter2" not in shown

    # Spark gets the real values.
    assert config.catalog.uri == "http://user:hunter2@rest:8181"
    assert config.catalog.properties_plain()["token"] == "literal-hunter2"
    assert config.spark.conf_plain()["spark.hadoop.fs.s3a.secret.key"] == "s3-hunter2"
    assert config.transport.options_plain() == {"kafka.sasl.jaas.config": "jaas-hunter2"}
    assert type(config.catalog.properties_plain()["token"]) is str


def test_error_messages_do_not_show_interpolated_values(
    fail: Fail, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODE", "hunter2-mode")
    monkeypatch.setenv("CATALOG_NAME", "hunter2 name")
    monkeypatch.setenv("SUFFIX", "_hunter2")
    error = fail(
        """\
        pipeline: shop
        catalog: {name: "${CATALOG_NAME}"}
        tables:
          - {name: customers, mode: "${MODE}"}
        """
    )
    assert "catalog.name" in error.message and "tables[0].mode" in error.message
    assert "hunter2" not in error.render()

    error = fail(
        """\
        pipeline: shop
        dead_letter: {suffix: "${SUFFIX}"}
        tables:
          - {name: customers_hunter2}
        """
    )
    assert error.path == "tables[0].name"
    assert "hunter2" not in error.render()


def test_error_messages_show_literal_values(fail: Fail) -> None:
    error = fail(MINIMAL.replace("customers", "customers\n    mode: mor"))
    assert "(got 'mor')" in error.message


# -- unknown keys ------------------------------------------------------------------------


def test_unknown_top_level_key_suggests_the_close_one(fail: Fail) -> None:
    error = fail(MINIMAL + "catalgo: {}\n")
    assert error.path == "catalgo"
    assert "did you mean 'catalog'?" in error.message
    assert "(line 4)" in error.message


def test_unknown_nested_key_names_its_path_and_the_close_one(fail: Fail) -> None:
    error = fail(
        """\
        pipeline: shop
        tables:
          - name: customers
          - name: orders
            bukets: 8
        """
    )
    assert error.path == "tables[1].bukets"
    assert "tables[1].bukets: unknown key; did you mean 'buckets'? (line 5)" in error.message


def test_unknown_key_without_a_close_one_lists_the_allowed(fail: Fail) -> None:
    error = fail(MINIMAL + "transport: {zzzzzz: 1}\n")
    assert error.path == "transport.zzzzzz"
    assert "bootstrap_servers" in error.message and "max_files_per_trigger" in error.message


def test_the_kafka_micro_batch_is_bounded_and_set_in_one_place(load: Load, fail: Fail) -> None:
    """Unbounded, a micro-batch after a pause takes the whole backlog into the driver's
    heap; the bound has its own field, and the Spark option it becomes is refused in
    ``options`` (Spark reads option names in any case) so it is set in one place."""
    assert load(MINIMAL).transport.max_messages_per_trigger == 100_000
    config = load(MINIMAL + "transport: {max_messages_per_trigger: 5000}\n")
    assert config.transport.max_messages_per_trigger == 5000
    error = fail(MINIMAL + "transport: {options: {MAXOFFSETSPERTRIGGER: 10}}\n")
    assert error.path == "transport.options", error.message
    assert "transport.max_messages_per_trigger" in error.message
    assert fail(MINIMAL + "transport: {max_messages_per_trigger: 0}\n").path == (
        "transport.max_messages_per_trigger"
    )


def test_passthrough_maps_accept_any_key(load: Load) -> None:
    config = load(MINIMAL + "catalog: {properties: {anything-goes: 1, 2: on}}\n")
    assert config.catalog.properties_plain() == {"anything-goes": "1", "2": "true"}


# -- types and ranges --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "path", "words"),
    [
        ("buckets: 0", "tables[0].buckets", "at least 1"),
        ("buckets: 4097", "tables[0].buckets", "at most 4096"),
        ("buckets: 2.5", "tables[0].buckets", "whole number"),
        ("buckets: true", "tables[0].buckets", "whole number"),
        ("mode: mor", "tables[0].mode", "'merge-on-read' or 'copy-on-write'"),
        ("merge: {strategy: fast}", "tables[0].merge.strategy", "'bucket_join'"),
        ("merge: {stratgy: auto}", "tables[0].merge.stratgy", "strategy"),
        ("history: scd3", "tables[0].history", "'off' or 'scd2'"),
        ("name: 9lives", "tables[0].name", "identifier"),
        ("source: has space", "tables[0].source", "without spaces"),
        ("primary_key: id", "tables[0].primary_key", "must be a list"),
        ("primary_key: []", "tables[0].primary_key", "at least one"),
    ],
)
def test_bad_table_values_name_their_path(fail: Fail, line: str, path: str, words: str) -> None:
    item = line if line.startswith("name:") else f"name: customers\n    {line}"
    error = fail(f"pipeline: shop\ntables:\n  - {item}\n")
    assert error.path == path
    assert f"{path}: " in error.message and words in error.message
    assert f"(line {3 if item == line else 4})" in error.message


def test_every_problem_is_reported_and_nothing_else(fail: Fail) -> None:
    error = fail(
        """\
        pipeline: Shop
        spark: {shuffle_partitions: 0, conf: {sql.ansi: true}}
        schedule: {stream_interval: 10 minutes, merge_interval: 0}
        tables:
          - {name: customers, buckets: 0, mode: mor}
        """
    )
    rows = error.message.splitlines()[1:]
    assert [row.split(":")[0].strip() for row in rows] == [
        "pipeline",
        "spark.shuffle_partitions",
        "spark.conf",
        "schedule.stream_interval",
        "schedule.merge_interval",
        "tables[0].buckets",
        "tables[0].mode",
    ]
    # An invalid item does not also make the list look empty (a pydantic quirk).
    assert "needs at least one" not in error.message


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        ("pipeline: shop\n", "tables", "required"),
        ("pipeline: shop\ntables: []\n", "tables", "at least one"),
        ("pipeline: shop\ntables: {name: a}\n", "tables", "must be a list"),
        ("pipeline: shop\ntables: [a]\n", "tables[0]", "mapping"),
        ("tables: [{name: a}]\n", "pipeline", "required"),
        (MINIMAL + "catalog: {namespace: 'a..b'}\n", "catalog.namespace", "dotted"),
        (MINIMAL + "catalog: {type: iceberg}\n", "catalog.type", "'hadoop'"),
        (MINIMAL + "spark: {iceberg_jar: latest}\n", "spark.iceberg_jar", ".jar"),
        (MINIMAL + "spark: {conf: {sql.ansi: 1}}\n", "spark.conf", "spark."),
        (MINIMAL + "spark: {packages: [org.x:y]}\n", "spark.packages", "group:artifact:version"),
        (MINIMAL + "transport: {type: s3}\n", "transport.type", "'files' or 'kafka'"),
        (MINIMAL + "state_dir: ''\n", "state_dir", "must not be empty"),
        (MINIMAL + "merge: {tombstone_retention: 0}\n", "merge.tombstone_retention", "positive"),
    ],
)
def test_bad_values_name_their_path(fail: Fail, text: str, path: str, words: str) -> None:
    error = fail(text)
    assert error.path == path
    assert words in error.message
    assert error.hint  # every error says what to do next


def test_durations(load: Load) -> None:
    config = load(
        MINIMAL
        + "schedule: {stream_interval: 500ms, merge_interval: 90}\n"
        + "merge: {tombstone_retention: 36h}\n"
    )
    assert config.schedule.stream_interval == timedelta(milliseconds=500)
    assert config.schedule.merge_interval == timedelta(seconds=90)
    assert config.merge.tombstone_retention == timedelta(hours=36)


# -- rules across fields -----------------------------------------------------------------


def test_duplicate_table_names_are_rejected_ignoring_case(fail: Fail) -> None:
    error = fail(
        """\
        pipeline: shop
        tables:
          - {name: customers, source: a.customers}
          - {name: Customers, source: b.customers}
        """
    )
    assert error.path == "tables[1].name"
    assert "duplicate table name (as tables[0])" in error.message


def test_duplicate_sources_are_rejected(fail: Fail) -> None:
    error = fail(
        """\
        pipeline: shop
        tables:
          - {name: customers, source: inventory.customers}
          - {name: clients, source: Inventory.Customers}
        """
    )
    assert error.path == "tables[1].source"
    assert "already used by tables[0]" in error.message


def test_a_defaulted_source_collides_with_an_explicit_one(fail: Fail) -> None:
    error = fail("pipeline: shop\ntables: [{name: a}, {name: b, source: a}]\n")
    assert error.path == "tables[1].source"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("orders_dlt", "dead-letter suffix"),
        ("orders_cdc", "_cdc"),
        ("icetide_unrouted", "unrouted_table"),
    ],
)
def test_table_names_cannot_collide_with_generated_tables(
    fail: Fail, name: str, words: str
) -> None:
    error = fail(f"pipeline: shop\ntables: [{{name: {name}}}]\n")
    assert error.path == "tables[0].name"
    assert words in error.message


def test_kafka_needs_bootstrap_servers(fail: Fail) -> None:
    error = fail(MINIMAL + "transport: {type: kafka, topics: [t]}\n")
    assert error.path == "transport.bootstrap_servers"
    assert "required for the kafka transport" in error.message


@pytest.mark.parametrize(
    ("transport", "path"),
    [
        ("{type: kafka, bootstrap_servers: 'b:9092'}", "transport.topics"),
        (
            "{type: kafka, bootstrap_servers: 'b:9092', topics: [t], topic_pattern: 't.*'}",
            "transport.topic_pattern",
        ),
    ],
)
def test_kafka_needs_topics_or_a_pattern(fail: Fail, transport: str, path: str) -> None:
    assert fail(MINIMAL + f"transport: {transport}\n").path == path


def test_kafka_transport_loads(load: Load) -> None:
    config = load(
        MINIMAL + "transport: {type: kafka, bootstrap_servers: 'b:9092', topic_pattern: 's.*'}\n"
    )
    assert (config.transport.type, config.transport.topic_pattern) == ("kafka", "s.*")


@pytest.mark.parametrize(
    ("catalog", "path", "words"),
    [
        ("{type: rest}", "catalog.uri", "required for a rest catalog"),
        ("{type: hive}", "catalog.uri", "required for a hive catalog"),
        ("{type: custom}", "catalog.properties", "catalog-impl"),
    ],
)
def test_catalog_needs(fail: Fail, catalog: str, path: str, words: str) -> None:
    error = fail(MINIMAL + f"catalog: {catalog}\n")
    assert error.path == path
    assert words in error.message


# -- YAML problems -----------------------------------------------------------------------


def test_invalid_yaml_names_file_and_line(fail: Fail, folder: Path) -> None:
    error = fail("pipeline: shop\ntables:\n  - name: a\n   buckets: [\n")
    assert error.message.startswith(f"{folder / 'icetide.yaml'}:4:")
    assert "invalid YAML" in error.message
    assert error.hint


def test_duplicate_key_names_both_lines(fail: Fail) -> None:
    error = fail("pipeline: shop\ntables: [{name: a}]\npipeline: other\n")
    assert error.path == "pipeline"
    assert "pipeline: duplicate key (first at line 1) (line 3)" in error.message
    assert error.hint


@pytest.mark.parametrize(("text", "words"), [("", "empty"), ("- a\n", "mapping")])
def test_not_a_config(fail: Fail, text: str, words: str) -> None:
    error = fail(text)
    assert words in error.message
    assert error.hint is not None and "icetide init" in error.hint


# -- schema files ------------------------------------------------------------------------


def _schema(folder: Path, text: str = SCHEMA) -> None:
    file = folder / "schemas" / "customers.yaml"
    file.parent.mkdir(exist_ok=True)
    file.write_text(text)


def test_schemas_load_and_primary_key_defaults_to_the_schemas(load: Load, folder: Path) -> None:
    _schema(folder, SCHEMA.replace("table: customers\n", ""))
    schemas = load_table_schemas(load(MINIMAL))
    # A schema file without table: takes the config's name.
    assert schemas["customers"].table == "customers"
    assert schemas["customers"].primary_key == ("id",)


def test_equal_primary_key_is_accepted(load: Load, folder: Path) -> None:
    _schema(folder)
    config = load(MINIMAL + "    primary_key: [id]\n")
    assert load_table_schemas(config)["customers"].primary_key == ("id",)


def test_primary_key_must_equal_the_schema_files(load: Load, folder: Path) -> None:
    _schema(folder)
    config = load(MINIMAL + "    primary_key: [email]\n")
    with pytest.raises(ConfigError) as info:
        load_table_schemas(config)
    error = info.value
    assert error.path == "tables[0].primary_key"
    assert "['email'] differs from the primary key ['id']" in error.message
    assert str(folder / "schemas" / "customers.yaml") in error.message
    assert error.hint is not None and "primary_key" in error.hint


def test_schema_of_another_table_is_rejected(load: Load, folder: Path) -> None:
    _schema(folder, SCHEMA.replace("table: customers", "table: orders"))
    with pytest.raises(ConfigError) as info:
        load_table_schemas(load(MINIMAL))
    assert info.value.path == "tables[0].schema"
    assert "'orders'" in info.value.message


def test_missing_schema_file_names_the_table(load: Load) -> None:
    with pytest.raises(ConfigError) as info:
        load_table_schemas(load(MINIMAL))
    assert info.value.path == "tables[0].schema"
    assert "customers.yaml not found" in info.value.message


def test_evolution_switches_are_validated_and_soft_delete_is_drop(load: Load, fail: Fail) -> None:
    table = "pipeline: shop\ntables:\n  - name: customers\n    evolution: {%s}\n"
    config = load(table % "enabled: false, soft_delete: false")
    evolution = config.tables[0].evolution
    assert (evolution.enabled, evolution.drop) == (False, "hard")
    assert load(table % "soft_delete: true").tables[0].evolution.drop == "soft"
    assert load(table % "").tables[0].evolution.enabled
    error = fail(table % "soft_delete: true, drop: hard")
    assert error.path is not None and error.path.startswith("tables[0].evolution")
    assert "soft_delete: true contradicts drop: hard" in error.message
    error = fail(table % "enabled: maybe")
    assert error.path == "tables[0].evolution.enabled"


def test_transport_registry_formats_need_a_registry(load: Load, fail: Fail) -> None:
    base = "pipeline: shop\ntables:\n  - name: customers\ntransport:\n  format: %s\n"
    for form in ("avro", "json_schema", "protobuf"):
        error = fail(base % form)
        assert error.path is not None and error.path.startswith("transport")
        assert f"format: {form} registers its schemas: set registry" in error.message
        config = load(base % form + "  registry: {url: 'mock://x'}\n")
        assert config.transport.format == form
    assert "json_schema" in fail(base % "thrift").message  # the formats capture writes
