"""The config's sections: one frozen model per top-level key, and a source database.

Each checks its own fields (with the types of :mod:`icetide.config.types`); a rule that
spans sections lives in :meth:`icetide.config.model.Config._check`. A table's settings
are :mod:`icetide.config.tables`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from icetide.config.types import (
    Count,
    Duration,
    Identifier,
    JarSource,
    LocalPath,
    Location,
    Namespace,
    SecretMap,
    Size,
    Suffix,
    Text,
    plain_map,
)
from icetide.schema.compatibility import DEFAULT_MODE, CompatibilityMode
from icetide.schema.connector import ConnectorSettings, DecimalHandlingMode, TimePrecisionMode


class Section(BaseModel):
    """Base of every config model: unknown keys are errors, a loaded config is immutable.

    A key written without a value (``catalog:`` with every line below commented out) is
    ``null`` in YAML; for a field that has a default it means that default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        optional = {(f.alias or n) for n, f in cls.model_fields.items() if not f.is_required()}
        return {k: v for k, v in data.items() if v is not None or k not in optional}


class CatalogConfig(Section):
    """The Iceberg catalog Spark writes to."""

    name: Identifier = "lake"
    type: Literal["hadoop", "rest", "hive", "glue", "jdbc", "custom"] = "hadoop"
    warehouse: Location | None = None
    uri: Text | None = None
    namespace: Namespace = "cdc"
    properties: SecretMap = {}

    @model_validator(mode="before")
    @classmethod
    def _default_warehouse(cls, data: Any) -> Any:
        """A hadoop catalog without ``warehouse`` keeps its tables in ``./warehouse`` next
        to the config file, so the smallest config is a working local pipeline."""
        if (
            isinstance(data, dict)
            and data.get("type", "hadoop") == "hadoop"
            and data.get("warehouse") is None
        ):
            data = {**data, "warehouse": "warehouse"}
        return data

    def properties_plain(self) -> dict[str, str]:
        """``properties`` with secrets revealed, for ``spark.sql.catalog.<name>.<key>``."""
        return plain_map(self.properties)


class SparkConfig(Section):
    """How the Spark session is built."""

    master: Text = "local[*]"
    app_name: Text | None = None
    iceberg_jar: JarSource = "auto"
    extra_jars: tuple[Location, ...] = ()
    # None: the defaults in icetide.spark.jars (Iceberg, Kafka source, Avro, JDBC drivers).
    packages: tuple[Text, ...] | None = None
    jars_dir: Location | None = None
    shuffle_partitions: Count = Field(8, ge=1)
    compiler_nice: int = Field(19, ge=0, le=19)
    """The ``nice`` value of the JVM's JIT compiler threads on a local master (Linux), so
    they take the cores the query leaves idle; 0 leaves them as the JVM starts them
    (icetide/spark/jit_priority.py)."""
    class_archive: bool = True
    """On a local master, a new JVM maps the classes a former ``icetide run`` saved
    instead of loading them (seconds off every start; icetide/spark/class_archive.py)."""
    conf: SecretMap = {}

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, conf: dict[str, str]) -> dict[str, str]:
        wrong = [k for k in conf if not k.startswith("spark.")]
        if wrong:
            raise ValueError(f"keys must start with 'spark.', got {', '.join(map(repr, wrong))}")
        return conf

    @field_validator("packages")
    @classmethod
    def _coordinates(cls, packages: tuple[str, ...] | None) -> tuple[str, ...] | None:
        wrong = [p for p in packages or () if len(p.split(":")) != 3 or "" in p.split(":")]
        if wrong:
            raise ValueError(
                f"{', '.join(map(repr, wrong))} is not a Maven coordinate: write "
                "group:artifact:version, e.g. org.apache.spark:spark-avro_2.12:3.5.7"
            )
        return packages

    def conf_plain(self) -> dict[str, str]:
        """``conf`` with secrets revealed, for the session builder."""
        return plain_map(self.conf)


class RegistryConfig(Section):
    """A Confluent-compatible schema registry whose ids tag the messages (docs/registry.md).

    With it, a message starting with the magic byte 0 is read as the Confluent wire
    format (Avro, JSON Schema or Protobuf, as the registry says); other messages stay
    JSON. In landing files each registry-tagged message is one base64 line.
    """

    url: Text
    """Base URL (Apicurio: ``http://host:8080/apis/ccompat/v7``); ``mock://name`` is
    confluent-kafka's in-process registry (tests)."""
    compatibility: CompatibilityMode = DEFAULT_MODE


MAX_MESSAGES_PER_TRIGGER = 100_000
"""The default Kafka micro-batch bound. At 2.4 kB a message (a JSON event with its inline
schema) 100,000 are ~240 MB held while a batch is stored: within a 1-GB driver heap, and
a pipeline taking 10,000 events a second at a 2-s trigger never reaches it."""


class TransportConfig(Section):
    """Where change events arrive: a landing folder of files, or Kafka topics."""

    type: Literal["files", "kafka"] = "files"
    path: LocalPath = Field(Path("landing"), validate_default=True)
    bootstrap_servers: Text | None = None
    topics: tuple[Text, ...] = ()
    topic_pattern: Text | None = None
    starting_offsets: Text = "earliest"
    registry: RegistryConfig | None = None
    """Registry-tagged messages (Confluent wire format) and where their schemas live."""
    format: Literal["json", "avro", "json_schema", "protobuf"] = "json"
    """What capture writes: ``json`` (JsonConverter), or ``avro`` / ``json_schema`` /
    ``protobuf`` registered with ``registry`` (Debezium's AvroConverter,
    JsonSchemaConverter, ProtobufConverter; Confluent wire format, base64 lines in
    landing files). The ledger reads every form whatever this says."""
    options: SecretMap = {}
    max_files_per_trigger: Count = Field(100, ge=1)
    max_messages_per_trigger: Count = Field(MAX_MESSAGES_PER_TRIGGER, ge=1)
    """Kafka: at most this many messages per micro-batch (Spark's
    ``maxOffsetsPerTrigger``). Unbounded, the first batch after a pause takes the whole
    backlog, and the ledger holds a batch in the driver's heap while it stores it."""
    roll_bytes: Count = Field(16 * 2**20, ge=1)
    """Capture: make records durable (close a landing file, flush the Kafka producer) once
    this many bytes are buffered."""
    roll_interval: Duration = timedelta(seconds=5)
    """Capture: make records durable at most this long after the first one was buffered."""
    producer: SecretMap = {}
    """Capture, kafka: librdkafka producer properties (``compression.type``, ``sasl.*`` …);
    ``enable.idempotence`` and ``acks`` are fixed."""

    @field_validator("options")
    @classmethod
    def _batch_size_has_its_field(cls, options: dict[str, str]) -> dict[str, str]:
        # Spark reads its source options case-insensitively.
        if any(key.lower() == "maxoffsetspertrigger" for key in options):
            raise ValueError(
                "set the micro-batch size with transport.max_messages_per_trigger, not "
                "options.maxOffsetsPerTrigger"
            )
        return options

    @model_validator(mode="after")
    def _format_needs_registry(self) -> Self:
        if self.format != "json" and self.registry is None:
            raise ValueError(
                f"format: {self.format} registers its schemas: set registry: {{url: ...}} "
                "(or format: json)"
            )
        return self

    def options_plain(self) -> dict[str, str]:
        """``options`` with secrets revealed, for Spark's Kafka source."""
        return plain_map(self.options)

    def producer_plain(self) -> dict[str, str]:
        """``producer`` with secrets revealed, for the capture's Kafka producer."""
        return plain_map(self.producer)


class ScheduleConfig(Section):
    """How often the stream stage triggers and the merge stage runs."""

    stream_interval: Duration = timedelta(seconds=10)
    merge_interval: Duration = timedelta(seconds=60)
    convergence_sla: Duration = timedelta(minutes=15)
    """How long a schema change may take from the source to full convergence (all three
    phases) before ``icetide status`` reports a breach."""


class MergeConfig(Section):
    """Merge-stage settings."""

    tombstone_retention: Duration = timedelta(days=7)
    """How long a delete is remembered, so a late, older insert cannot resurrect the row."""
    parallel_tables: int = Field(2, ge=1)
    """How many tables a merge round merges at once, in threads of one SparkSession: one
    merge's driver work (planning, commits) overlaps another's tasks. 1: one after the
    other, in config order."""
    round_tables: int = Field(32, ge=1)
    """In ``icetide run``, the most tables a merge round takes of those the ledger stored
    events for: a quarter the busiest, the rest those waiting longest; the others wait
    for the next round, which starts at once. Each table costs a round about the same
    (planning its MERGE, a commit), so with many tables a capped round keeps the busy
    ones merged every few seconds instead of once per round of every table."""


class SnapshotRetention(Section):
    """Which snapshots expiry may remove: older than ``max_age`` and beyond the newest
    ``keep_last``. Snapshots a stage still needs are kept whatever these say."""

    max_age: Duration = timedelta(days=5)
    keep_last: Count = Field(10, ge=1)


_MIN_ORPHAN_AGE = timedelta(hours=24)


def _safe_orphan_age(value: timedelta) -> timedelta:
    # A younger file may belong to a commit still being written (a merge in flight):
    # removing it would corrupt that commit. Iceberg's procedure refuses less than 24h.
    if value < _MIN_ORPHAN_AGE:
        raise ValueError(
            "must be at least 24h: a younger unreferenced file may belong to a commit in "
            "flight (Iceberg's remove_orphan_files refuses less)"
        )
    return value


class MaintenanceConfig(Section):
    """Table maintenance: compaction, delete-file rewrite, snapshot expiry, orphans."""

    interval: Duration = timedelta(hours=1)
    """How often ``icetide run`` maintains every table."""
    target_file_size: Size = Field(128 * 2**20, ge=1)
    """Data files are bin-packed per bucket towards this size."""
    snapshots: SnapshotRetention = Field({}, validate_default=True)
    orphan_age: Annotated[Duration, AfterValidator(_safe_orphan_age)] = timedelta(days=3)
    """Files no snapshot references are removed once older than this."""


class ArtifactsConfig(Section):
    """Typed schema packages (docs/artifacts.md)."""

    refresh: Literal["auto", "off"] = "auto"
    """``auto``: ``icetide schema apply`` publishes a table's new schema version (and the
    views above it) right after applying it, and ``icetide run`` does once the mirror holds
    a new version's data; ``off``: only ``icetide artifacts publish`` publishes."""


class DeadLetterConfig(Section):
    """Names of the dead-letter tables."""

    suffix: Suffix = "_dlt"
    unrouted_table: Identifier = "icetide_unrouted"

    def table_for(self, table: str) -> str:
        """The dead-letter table of ``table``: ``customers`` → ``customers_dlt``."""
        return f"{table}{self.suffix}"

    @property
    def unrouted(self) -> str:
        """The dead-letter table for events whose table cannot be determined."""
        return self.table_for(self.unrouted_table)


class DebeziumConfig(Section):
    """``debezium:``: how the Debezium connectors feeding the pipeline are configured, in
    their own property names (dots as underscores). It decides how values of messages
    *without* a schema (JsonConverter with ``schemas.enable=false``) are read; messages
    with an inline or registry schema say it themselves (docs/debezium.md).

    At the top level it is every external feed's; under a table it overrides that for
    the table (a key left out there inherits). Tables that icetide's own capture reads
    (``sources:``) are read the way capture writes them, so a table-level ``debezium:``
    on one is an error.
    """

    decimal_handling_mode: DecimalHandlingMode | None = None
    """``precise`` (Debezium's default: base64 bytes), ``string`` or ``double``."""
    time_precision_mode: TimePrecisionMode | None = None
    """Unset: the connector's default (``adaptive_time_microseconds`` for MySQL and
    MariaDB, ``adaptive`` for PostgreSQL), each temporal column by its schema-file hint;
    ``adaptive_time_microseconds`` on PostgreSQL: every ``time`` in microseconds;
    ``connect``: every date/time/timestamp in Kafka Connect's units; ``isostring``:
    ISO-8601 text. ``adaptive`` on a MySQL/MariaDB source is refused (its ``TIME(0-3)``
    milliseconds cannot be told apart)."""

    def over(self, base: ConnectorSettings) -> ConnectorSettings:
        """``base`` with the keys given here."""
        return ConnectorSettings(
            self.decimal_handling_mode or base.decimal_handling_mode,
            self.time_precision_mode or base.time_precision_mode,
        )


class SourceConfig(Section):
    """A source database that ``icetide capture`` reads and ``icetide bootstrap`` /
    ``icetide verify`` query.

    ``name`` is the Debezium server name (``source.name`` in events); the ledger gives the
    tables this source captures only the events carrying that name. ``tables`` lists the
    pipeline tables (by ``name``) captured from here; it may be left out when there is only
    one source, which then captures every table. ``database`` is the database to connect
    to (required for PostgreSQL; for MySQL the tables' ``db.table`` sources name theirs).
    """

    name: Identifier
    type: Literal["mysql", "postgres"]
    host: Text = "127.0.0.1"
    port: Count | None = Field(None, ge=1, le=65535)
    user: Text = "root"
    password: Text | None = None
    database: Text | None = None
    tables: tuple[Identifier, ...] = ()
    server_id: Count | None = Field(None, ge=1, le=2**32 - 1)
    """MySQL: the replica id capture uses; unique among the server's replicas."""
    slot: Identifier = "icetide"
    """PostgreSQL: the logical replication slot."""
    publication: Identifier = "icetide"
    """PostgreSQL: the publication listing the captured tables."""
    heartbeat: Duration = timedelta(seconds=1)
    """How long capture waits on a quiet log before rolling files and saving offsets."""
    debezium: DebeziumConfig | None = None
    """Set when an external Debezium connector captures this database instead of icetide
    (its ``topic.prefix`` is this source's ``name``): the connector's settings, over the
    pipeline's ``debezium:``. icetide then only reads the database (onboard, bootstrap,
    verify, schema changes) and never captures it."""

    @model_validator(mode="after")
    def _time_mode_fits(self) -> Self:
        if (
            self.type == "mysql"
            and self.debezium is not None
            and self.debezium.time_precision_mode == "adaptive"
        ):
            raise ValueError(
                "debezium.time_precision_mode: adaptive sends a MySQL TIME(0-3) in "
                "milliseconds, which icetide cannot tell from microseconds without a "
                "schema: use the connector's default adaptive_time_microseconds (or "
                "connect), or turn the converter's schemas on"
            )
        return self

    @property
    def captured_by_icetide(self) -> bool:
        """Whether icetide's capture reads this source (no external Debezium does)."""
        return self.debezium is None

    @property
    def resolved_port(self) -> int:
        """``port``, or the database's default (3306, 5432)."""
        return self.port or (3306 if self.type == "mysql" else 5432)

    @property
    def offsets_file(self) -> str:
        """The name of this source's durable offset in the pipeline's state location."""
        return f"capture/{self.name}.offset.json"
