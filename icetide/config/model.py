"""The typed pipeline config: one YAML file per pipeline, validated into frozen models.

Field checks live on the fields; every rule that needs two fields lives in
:meth:`Config._check`, so there is one place to read them all. Paths are resolved against
the config file's folder (passed by the loader as validation context ``config_dir``).

Secrets: a string value written with ``${VAR}`` and every value in ``catalog.properties``,
``transport.options`` or ``spark.conf`` whose key names a credential become a
:class:`Secret` — a ``str`` that Spark takes as is, but that ``repr()`` shows as ``'***'``,
so printing a config, a sub-model or a dict of it never shows one, and
:meth:`Config.redacted` masks it. Numbers, durations, choices and local paths are typed
values, not secrets, even when they come from the environment.
"""

from __future__ import annotations

import difflib
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from icetide.errors import ConfigError
from icetide.schema.change_kinds import CHANGE_KINDS
from icetide.schema.connector import (
    CAPTURE,
    DEBEZIUM_DEFAULTS,
    ConnectorSettings,
    DecimalHandlingMode,
    TimePrecisionMode,
)

Loc = tuple[str | int, ...]

SECRET_KEY = re.compile(r"password|secret|token|credential|jaas|key", re.IGNORECASE)
"""A passthrough key matching this names a credential; its value is a :class:`Secret`."""


class Secret(str):
    """A string that must not be shown: ``repr()`` gives ``'***'``, the value is the str.

    It stays a ``str`` so the Spark session builder and py4j use it unchanged; call
    ``str(value)`` for a plain copy. Never format one into a log line yourself.

    >>> token = Secret("s3cr3t")
    >>> repr(token), token == "s3cr3t", repr({"token": token})
    ("'***'", True, "{'token': '***'}")
    """

    parts: tuple[str, ...] = ()
    """The environment values substituted into this string (``${HOST}`` in
    ``http://${HOST}:8181``): a message may quote one alone, so they are secrets too."""

    def __repr__(self) -> str:
        return "'***'"


class ConfigProblems(ValueError):
    """Cross-field problems found by :meth:`Config._check`, each with its YAML location.

    A ``ValueError`` so pydantic reports it as a validation error; the loader unpacks
    ``problems`` into one line per problem.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(f"{format_loc(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


def format_loc(loc: Loc) -> str:
    """Render a location as a YAML path.

    >>> format_loc(("tables", 0, "buckets"))
    'tables[0].buckets'
    >>> format_loc(("spark", "conf", "spark.sql.ansi.enabled"))
    'spark.conf["spark.sql.ansi.enabled"]'
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


# -- durations ---------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> timedelta:
    """Parse ``"500ms"``, ``"10s"``, ``"5m"``, ``"1h"``, ``"7d"`` or a number of seconds.

    >>> parse_duration("5m"), parse_duration(30)
    (datetime.timedelta(seconds=300), datetime.timedelta(seconds=30))
    """
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        result = timedelta(seconds=value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        result = timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2) or "s"])
    else:
        raise ValueError("not a duration; use e.g. 500ms, 10s, 5m, 1h, 7d or a number of seconds")
    if result <= timedelta(0):
        raise ValueError("must be a positive duration")
    return result


def format_duration(value: timedelta) -> str:
    """The shortest exact form of ``value`` in the units :func:`parse_duration` reads.

    >>> format_duration(timedelta(days=7)), format_duration(timedelta(milliseconds=1500))
    ('7d', '1500ms')
    """
    millis = round(value.total_seconds() * 1000)
    for unit in ("d", "h", "m", "s"):
        size = int(_UNITS[unit] * 1000)
        if millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


_SIZE = re.compile(r"(\d+)\s*(b|kb|kib|mb|mib|gb|gib)?", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3}
_SIZE_UNITS["gib"] = 1024**3


def parse_size(value: Any) -> int:
    """Parse ``"128MiB"``, ``"512MB"``, ``"1GiB"`` or a number of bytes.

    >>> parse_size("128MiB"), parse_size(1024)
    (134217728, 1024)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        result = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()]
    else:
        raise ValueError("not a size; use e.g. 128MiB, 512MB, 1GiB or a number of bytes")
    if result <= 0:
        raise ValueError("must be a positive size")
    return result


# -- field types -------------------------------------------------------------------------


def _keep_secret(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate ``value`` and keep it a :class:`Secret` if it was one (pydantic copies str
    subclasses into plain str)."""
    out = handler(value)
    if not (isinstance(value, Secret) and isinstance(out, str)):
        return out
    kept = Secret(out)
    kept.parts = value.parts
    return kept


def _matching(regex: str, rule: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(rule)
        return value

    return AfterValidator(check)


def _config_dir(info: ValidationInfo) -> Path:
    context = info.context if isinstance(info.context, dict) else {}
    return Path(context.get("config_dir") or Path.cwd())


def resolve_path(base: Path, path: str | Path) -> Path:
    """``path`` made absolute against ``base`` (``~`` expanded, ``..`` folded, links kept)."""
    return Path(os.path.normpath(base / Path(path).expanduser()))


def _local_path(value: Path, info: ValidationInfo) -> Path:
    return resolve_path(_config_dir(info), value)


def _non_empty_path(value: Any) -> Any:
    # Path("") is ".": an empty value is a mistake, not "the config folder".
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//|/)")


def _location(value: str, info: ValidationInfo) -> str:
    """A URI (``s3a://…``, ``hdfs://…``, ``file:/…``) as is, a local path made absolute."""
    if not value.strip():
        raise ValueError("must not be empty")
    if _URI.match(value):
        return value
    return str(resolve_path(_config_dir(info), value))


def _jar_source(value: str, info: ValidationInfo) -> str:
    if value in ("auto", "provided"):
        return value
    if not value.endswith(".jar"):
        raise ValueError("must be auto, provided or a path to a .jar file")
    return _location(value, info)


def _scalar_text(value: Any) -> Any:
    """Spark options are strings: write YAML booleans the way Spark spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None or isinstance(value, dict | list):
        raise ValueError("must be a string, number or boolean")
    return value


def _text_keys(value: Any) -> Any:
    """YAML reads ``1: x`` or ``true: x`` with a non-string key; option keys are strings."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _scalar_text(k): v for k, v in value.items()}
    return value


def _at_least_one(values: tuple[Any, ...]) -> tuple[Any, ...]:
    # Not Field(min_length=1): pydantic then also reports an empty list whenever one item
    # is invalid, which sends the user looking for a problem that is not there.
    if not values:
        raise ValueError("needs at least one entry")
    return values


def _mark_secret_keys(values: dict[str, str]) -> dict[str, str]:
    return {k: Secret(v) if SECRET_KEY.search(k) else v for k, v in values.items()}


Text = Annotated[str, Field(min_length=1), WrapValidator(_keep_secret)]
"""A non-empty string that stays a :class:`Secret` when it came from the environment."""

Identifier = Annotated[
    str,
    _matching(
        r"[A-Za-z_][A-Za-z0-9_]*",
        "must be an identifier: letters, digits and _, not starting with a digit",
    ),
    WrapValidator(_keep_secret),
]
Namespace = Annotated[
    str,
    _matching(
        r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*",
        "must be an identifier or dotted identifiers (a.b)",
    ),
    WrapValidator(_keep_secret),
]
PipelineName = Annotated[
    str,
    _matching(r"[a-z0-9_-]+", "must use only lowercase letters, digits, _ and -"),
    WrapValidator(_keep_secret),
]
SourceName = Annotated[
    str,
    _matching(
        r"[^\s.]+(\.[^\s.]+){0,2}",
        "must be table, db.table (MySQL) or schema.table (PostgreSQL), without spaces",
    ),
    WrapValidator(_keep_secret),
]
Suffix = Annotated[
    str,
    _matching(r"[A-Za-z0-9_]+", "must be letters, digits and _"),
    WrapValidator(_keep_secret),
]
LocalPath = Annotated[Path, BeforeValidator(_non_empty_path), AfterValidator(_local_path)]
"""A local path; relative paths resolve against the config file's folder."""
Location = Annotated[str, AfterValidator(_location), WrapValidator(_keep_secret)]
"""A URI kept as is, or a local path made absolute like :data:`LocalPath`."""
JarSource = Annotated[str, AfterValidator(_jar_source), WrapValidator(_keep_secret)]
OptionValue = Annotated[str, BeforeValidator(_scalar_text), WrapValidator(_keep_secret)]
SecretMap = Annotated[
    dict[str, OptionValue], BeforeValidator(_text_keys), AfterValidator(_mark_secret_keys)
]
"""Passthrough options; values under credential-like keys become :class:`Secret`."""
Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
Size = Annotated[int, BeforeValidator(parse_size)]


def _not_bool(value: Any) -> Any:
    # pydantic reads true as 1; `buckets: true` is a mistake, not one bucket.
    if isinstance(value, bool):
        raise ValueError("must be a whole number")
    return value


Count = Annotated[int, BeforeValidator(_not_bool)]
"""A whole number; a numeric string (from ``${VAR}``) is read as one, a boolean is not."""


def _plain_map(values: dict[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in values.items()}


# -- models ------------------------------------------------------------------------------


class _Model(BaseModel):
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


class CatalogConfig(_Model):
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
        return _plain_map(self.properties)


class SparkConfig(_Model):
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
        return _plain_map(self.conf)


class RegistryConfig(_Model):
    """A Confluent-compatible schema registry whose ids tag the messages (docs/registry.md).

    With it, a message starting with the magic byte 0 is read as the Confluent wire
    format (Avro, JSON Schema or Protobuf, as the registry says); other messages stay
    JSON. In landing files each registry-tagged message is one base64 line.
    """

    url: Text
    """Base URL (Apicurio: ``http://host:8080/apis/ccompat/v7``); ``mock://name`` is
    confluent-kafka's in-process registry (tests)."""
    compatibility: Literal[
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
        "NONE",
    ] = "BACKWARD_TRANSITIVE"


class TransportConfig(_Model):
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
    roll_bytes: Count = Field(16 * 2**20, ge=1)
    """Capture: make records durable (close a landing file, flush the Kafka producer) once
    this many bytes are buffered."""
    roll_interval: Duration = timedelta(seconds=5)
    """Capture: make records durable at most this long after the first one was buffered."""
    producer: SecretMap = {}
    """Capture, kafka: librdkafka producer properties (``compression.type``, ``sasl.*`` …);
    ``enable.idempotence`` and ``acks`` are fixed."""

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
        return _plain_map(self.options)

    def producer_plain(self) -> dict[str, str]:
        """``producer`` with secrets revealed, for the capture's Kafka producer."""
        return _plain_map(self.producer)


class ScheduleConfig(_Model):
    """How often the stream stage triggers and the merge stage runs."""

    stream_interval: Duration = timedelta(seconds=10)
    merge_interval: Duration = timedelta(seconds=60)
    convergence_sla: Duration = timedelta(minutes=15)
    """How long a schema change may take from the source to full convergence (all three
    phases) before ``icetide status`` reports a breach."""


class MergeConfig(_Model):
    """Merge-stage settings."""

    tombstone_retention: Duration = timedelta(days=7)
    """How long a delete is remembered, so a late, older insert cannot resurrect the row."""
    parallel_tables: int = Field(2, ge=1)
    """How many tables a merge round merges at once, in threads of one SparkSession: one
    merge's driver work (planning, commits) overlaps another's tasks. 1: one after the
    other, in config order."""


class TableMergeConfig(_Model):
    """Per-table merge settings (``tables[i].merge``)."""

    strategy: Literal["auto", "shuffle", "bucket_join", "bucket_join_pruned", "delete_insert"] = (
        "auto"
    )
    """How the batch meets the base (:mod:`icetide.merge.strategy`); ``auto`` chooses
    from the base's size and the batch's. ``delete_insert`` applies only to a batch in
    order with whole row images; any other batch gets ``auto``'s choice."""
    compact_every: int = Field(4, ge=0)
    """Once this many merges have added data files since the base's last rewrite, the
    merge bin-packs each bucket's small files (:mod:`icetide.merge.compact`); 0: never
    (leave it to ``icetide maintain``). Small bases too: a merge that shuffles a small
    base reads every file it has, so without the rewrite each merge is slower than the
    last (docs/merge-performance.md, "Small bases bin-packed too")."""
    resnapshot_chunk_rows: int = Field(200_000, ge=1)
    """Rows per chunk when the merge re-snapshots the table for a change no ALTER
    expresses (:mod:`icetide.bootstrap.resnapshot`): one chunk per merge round, each its
    own resumable commit."""


class SnapshotRetention(_Model):
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


class MaintenanceConfig(_Model):
    """Table maintenance: compaction, delete-file rewrite, snapshot expiry, orphans."""

    interval: Duration = timedelta(hours=1)
    """How often ``icetide run`` maintains every table."""
    target_file_size: Size = Field(128 * 2**20, ge=1)
    """Data files are bin-packed per bucket towards this size."""
    snapshots: SnapshotRetention = Field({}, validate_default=True)
    orphan_age: Annotated[Duration, AfterValidator(_safe_orphan_age)] = timedelta(days=3)
    """Files no snapshot references are removed once older than this."""


class ArtifactsConfig(_Model):
    """Typed schema packages (docs/artifacts.md)."""

    refresh: Literal["auto", "off"] = "auto"
    """``auto``: ``icetide schema apply`` publishes a table's new schema version (and the
    views above it) right after applying it, and ``icetide run`` does once the mirror holds
    a new version's data; ``off``: only ``icetide artifacts publish`` publishes."""


class DeadLetterConfig(_Model):
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


class DebeziumConfig(_Model):
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


class SourceConfig(_Model):
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

    def offsets_file(self, state_dir: Path) -> Path:
        """Where capture keeps this source's durable offset."""
        return state_dir / "capture" / f"{self.name}.offset.json"


def _split_server(data: dict[str, Any]) -> dict[str, Any]:
    """``source: server.db.table`` → ``server: server``, ``source: db.table``."""
    source = data.get("source")
    if not isinstance(source, str) or source.count(".") != 2 or any(c.isspace() for c in source):
        return data
    server, rest = source.split(".", 1)
    given = data.get("server")
    if given is not None and given != server:
        raise ValueError(
            f"source {source!r} names server {server!r} but server is {given!r}; "
            "give the server once"
        )
    return {**data, "server": server, "source": rest}


EvolutionMode = Literal["evolve", "freeze", "discard_row", "discard_value"]
"""dlt's schema-contract modes: ``evolve`` takes the change (held kinds wait for approval),
``freeze`` refuses it (events that need it go to the dead-letter table), ``discard_row``
drops the rows that carry it, ``discard_value`` drops just the values it brings."""


def _change_kinds(value: Any) -> Any:
    if isinstance(value, dict):
        for kind in value:
            if kind not in CHANGE_KINDS:
                close = difflib.get_close_matches(str(kind), CHANGE_KINDS, n=1)
                raise ValueError(
                    f"unknown change kind {kind!r}"
                    + (f"; did you mean {close[0]!r}?" if close else "")
                    + f" (kinds: {', '.join(CHANGE_KINDS)})"
                )
    return value


class EvolutionConfig(_Model):
    """``evolution:`` of a table: what happens when its source schema changes.

    ``mode`` is the contract mode for every kind of change, ``modes`` overrides it per
    kind (``{type_change: freeze, add_column: discard_value}``). ``drop`` says what a
    dropped source column does to the tables (``soft``: kept, commented, no longer
    written; ``hard``: dropped). ``sensitive`` lists name patterns (``fnmatch``, no case)
    whose new columns are tagged ``sensitive`` and held until approved. ``auto_apply``:
    changes that need no approval apply without a human (``false``: they wait for
    ``icetide schema apply``). ``enabled: false`` turns evolution off for the table: a
    message whose carried schema (registry version, inline Debezium schema) differs from
    the table's goes to the dead-letter table instead. ``soft_delete`` is the registry
    world's name for ``drop`` (``true`` = ``soft``, ``false`` = ``hard``); giving both with
    different answers is refused.
    """

    mode: EvolutionMode = "evolve"
    modes: Annotated[dict[str, EvolutionMode], BeforeValidator(_change_kinds)] = {}
    drop: Literal["soft", "hard"] = "soft"
    sensitive: tuple[Text, ...] = ()
    auto_apply: bool = True
    enabled: bool = True
    soft_delete: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _soft_delete_is_drop(cls, data: Any) -> Any:
        """``soft_delete`` sets ``drop``; a contradiction names both keys."""
        if not isinstance(data, dict) or not isinstance(data.get("soft_delete"), bool):
            return data
        wanted = "soft" if data["soft_delete"] else "hard"
        if data.get("drop") not in (None, wanted):
            raise ValueError(
                f"soft_delete: {str(data['soft_delete']).lower()} contradicts "
                f"drop: {data['drop']}; keep one of them (soft_delete: true is drop: soft)"
            )
        return {**data, "drop": wanted}


class TableConfig(_Model):
    """One replicated table: its Debezium source, schema file and layout.

    ``source`` is ``table``, ``db.table`` (MySQL) or ``schema.table`` (PostgreSQL); a
    3-part ``server.db.table`` is split into ``server`` and ``source`` when loaded, so
    every reader of ``source`` sees the table in its database. ``server`` is the Debezium
    server name (``source.name`` in events, the topic prefix): when it is known, only
    events of that server reach this table (see :meth:`Config.table_server`).
    """

    name: Identifier
    source: SourceName
    server: Identifier | None = None
    schema_file: LocalPath = Field(alias="schema")
    primary_key: Annotated[tuple[Text, ...], AfterValidator(_at_least_one)] | None = None
    buckets: Count = Field(16, ge=1, le=4096)
    mode: Literal["merge-on-read", "copy-on-write"] = "merge-on-read"
    format_version: Literal[2, 3] = 2
    """The base table's Iceberg format version. 3 lets a column added at the source with a
    constant ``DEFAULT`` carry it as ``initial-default`` (old rows read it, nothing is
    rewritten; :mod:`icetide.spark.defaults`); readers of the base must support v3."""
    merge: TableMergeConfig = Field({}, validate_default=True)
    freshness_sla: Duration | None = None
    """The base table must hold the source's changes this recent; a breach is logged,
    exported as a metric and fails ``icetide status --check``."""
    evolution: EvolutionConfig = Field({}, validate_default=True)
    debezium: DebeziumConfig | None = None
    """The connector settings of this table's feed, over the pipeline's ``debezium:``."""

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_name(cls, data: Any) -> Any:
        """``source`` defaults to the name, ``schema`` to ``schemas/<name>.yaml``; an
        explicit ``null`` means the default too."""
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            name = data["name"]
            data = dict(data)
            if data.get("source") is None:
                data["source"] = name
            data = _split_server(data)
            if data.get("schema") is None:
                data["schema"] = f"schemas/{name}.yaml"
        return data

    def qualified(self, namespace: str) -> str:
        """``namespace.name``, the table's Iceberg identifier without the catalog."""
        return f"{namespace}.{self.name}"


class Config(_Model):
    """One pipeline: catalog, Spark, transport, schedule and the tables it replicates."""

    pipeline: PipelineName
    state_dir: LocalPath = Field(Path(".icetide"), validate_default=True)
    # Sections default to {} and are validated, so their relative paths resolve too.
    catalog: CatalogConfig = Field({}, validate_default=True)
    spark: SparkConfig = Field({}, validate_default=True)
    transport: TransportConfig = Field({}, validate_default=True)
    schedule: ScheduleConfig = Field({}, validate_default=True)
    merge: MergeConfig = Field({}, validate_default=True)
    maintenance: MaintenanceConfig = Field({}, validate_default=True)
    dead_letter: DeadLetterConfig = Field({}, validate_default=True)
    artifacts: ArtifactsConfig = Field({}, validate_default=True)
    debezium: DebeziumConfig = Field({}, validate_default=True)
    sources: tuple[SourceConfig, ...] = ()
    tables: Annotated[tuple[TableConfig, ...], AfterValidator(_at_least_one)]

    _config_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Self:
        """Every rule that spans fields, reported together with each one's YAML path."""
        problems: list[tuple[Loc, str]] = []
        catalog, transport = self.catalog, self.transport
        if catalog.type in ("rest", "hive", "jdbc") and not catalog.uri:
            problems.append((("catalog", "uri"), f"required for a {catalog.type} catalog"))
        if catalog.type == "custom" and "catalog-impl" not in catalog.properties:
            problems.append(
                (("catalog", "properties"), "a custom catalog needs catalog-impl (its class)")
            )
        if transport.type == "kafka":
            if not transport.bootstrap_servers:
                problems.append(
                    (("transport", "bootstrap_servers"), "required for the kafka transport")
                )
            if not transport.topics and not transport.topic_pattern:
                problems.append(
                    (("transport", "topics"), "the kafka transport needs topics or topic_pattern")
                )
            if transport.topics and transport.topic_pattern:
                problems.append(
                    (("transport", "topic_pattern"), "give topics or topic_pattern, not both")
                )
        # casefold() of a Secret is a plain str: print the field itself, which hides it.
        suffix = self.dead_letter.suffix.casefold()
        unrouted = self.dead_letter.unrouted_table.casefold()
        names: dict[str, int] = {}
        # Spark identifiers are case-insensitive, so "Orders" and "orders" collide.
        for i, table in enumerate(self.tables):
            name = table.name.casefold()
            if name in names:
                problems.append(
                    (("tables", i, "name"), f"duplicate table name (as tables[{names[name]}])")
                )
            names.setdefault(name, i)
            if name.endswith(suffix):
                problems.append(
                    (
                        ("tables", i, "name"),
                        f"must not end with the dead-letter suffix {self.dead_letter.suffix!r}",
                    )
                )
            if name.endswith("_cdc"):
                problems.append(
                    (("tables", i, "name"), "must not end with '_cdc' (the CDC ledger tables)")
                )
            if name == unrouted:
                problems.append(
                    (("tables", i, "name"), "is the name of dead_letter.unrouted_table")
                )
            source = self._capturing_source(table)
            if table.debezium is not None and source is not None and source.captured_by_icetide:
                problems.append(
                    (
                        ("tables", i, "debezium"),
                        f"the table is captured by icetide (source {source.name!r}), which "
                        "writes decimals as text and times as the MySQL connector's "
                        "defaults; remove this key, or give the source debezium: if an "
                        "external Debezium connector captures it",
                    )
                )
        problems.extend(self._source_problems())
        problems.extend(self._route_problems())
        if problems:
            raise ConfigProblems(problems)
        self._config_dir = _config_dir(info)
        return self

    def _source_problems(self) -> list[tuple[Loc, str]]:
        problems: list[tuple[Loc, str]] = []
        known = {t.name.casefold() for t in self.tables}
        owner: dict[str, int] = {}
        seen: dict[str, int] = {}
        for i, source in enumerate(self.sources):
            if source.name.casefold() in seen:
                problems.append(
                    (
                        ("sources", i, "name"),
                        f"duplicate source name (as sources[{seen[source.name.casefold()]}])",
                    )
                )
            seen.setdefault(source.name.casefold(), i)
            if source.type == "postgres" and not source.database:
                problems.append((("sources", i, "database"), "required for a postgres source"))
            if len(self.sources) > 1 and not source.tables:
                problems.append(
                    (
                        ("sources", i, "tables"),
                        "list the tables of each source when there are several",
                    )
                )
            for j, table in enumerate(source.tables):
                name = table.casefold()
                if name not in known:
                    close = difflib.get_close_matches(table, [t.name for t in self.tables], n=1)
                    problems.append(
                        (
                            ("sources", i, "tables", j),
                            f"no table named {table!r} in tables"
                            + (f" (did you mean {close[0]!r}?)" if close else ""),
                        )
                    )
                elif name in owner:
                    problems.append(
                        (("sources", i, "tables", j), f"already captured by sources[{owner[name]}]")
                    )
                owner.setdefault(name, i)
        return problems

    def _capturing_source(self, table: TableConfig) -> SourceConfig | None:
        wanted = table.name.casefold()
        for source in self.sources:
            if any(t.casefold() == wanted for t in source.tables):
                return source
        if len(self.sources) == 1 and not self.sources[0].tables:
            return self.sources[0]
        return None

    def table_server(self, table: TableConfig) -> str | None:
        """The Debezium server name (``source.name``) whose events ``table`` takes.

        The table's own ``server`` (or the first part of a 3-part ``source``), else the
        name of the configured source that captures it (icetide's capture writes its
        source's name there), else ``None``: events of any server, as Debezium's
        ``db.table`` alone cannot tell servers apart.
        """
        if table.server is not None:
            return str(table.server)
        source = self._capturing_source(table)
        return str(source.name) if source is not None else None

    def _route_problems(self) -> list[tuple[Loc, str]]:
        """Two tables that could both take one event make routing a guess: refuse them."""
        problems: list[tuple[Loc, str]] = []
        claimed: list[tuple[str, str | None, int]] = []
        for i, table in enumerate(self.tables):
            server = self.table_server(table)
            source = self._capturing_source(table)
            if table.server is not None and source is not None:
                if str(table.server).casefold() != str(source.name).casefold():
                    problems.append(
                        (
                            ("tables", i, "source"),
                            f"names server {table.server!r} but the table is captured by "
                            f"source {source.name!r}, whose events carry {source.name!r}",
                        )
                    )
            qualified = table.source.casefold()
            for other_qualified, other_server, j in claimed:
                if other_qualified != qualified:
                    continue
                if (
                    server is None
                    or other_server is None
                    or (server.casefold() == other_server.casefold())
                ):
                    either = server or other_server
                    where = f"of server {either!r} " if either else ""
                    problems.append(
                        (
                            ("tables", i, "source"),
                            f"source already used by tables[{j}]: tables[{j}] "
                            f"({self.tables[j].name}) and tables[{i}] ({table.name}) would "
                            f"both take the events {where}for {table.source!r}; give each "
                            f"its server as a 3-part source (server.{table.source}) or "
                            "list them under different sources",
                        )
                    )
            claimed.append((qualified, server, i))
        return problems

    def connector(self, table: str) -> ConnectorSettings:
        """How the values of ``table``'s schemaless messages are encoded: icetide's
        capture's way for a table it captures, else the table's ``debezium:`` over its
        source's over the pipeline's over Debezium's defaults (icetide.schema.connector)."""
        settings = self.table(table)
        source = self._capturing_source(settings)
        if source is not None and source.debezium is None:
            return CAPTURE
        chosen = self.debezium.over(DEBEZIUM_DEFAULTS)
        if source is not None and source.debezium is not None:
            chosen = source.debezium.over(chosen)
        return settings.debezium.over(chosen) if settings.debezium is not None else chosen

    def source(self, name: str) -> SourceConfig:
        """The source called ``name``; ConfigError if there is none."""
        for source in self.sources:
            if source.name.casefold() == name.casefold():
                return source
        known = [s.name for s in self.sources]
        raise ConfigError(
            f"pipeline {self.pipeline!r} has no source {name!r}",
            hint=f"sources are {', '.join(known)}" if known else "add a sources: section",
        )

    def source_tables(self, source: SourceConfig) -> tuple[TableConfig, ...]:
        """The pipeline tables that ``source`` captures (all of them for a lone source)."""
        if not source.tables:
            return self.tables
        return tuple(self.table(name) for name in source.tables)

    def source_of(self, table: str) -> SourceConfig | None:
        """The configured source that captures ``table`` (None: no source does)."""
        wanted = self.table(table)
        return next((s for s in self.sources if wanted in self.source_tables(s)), None)

    @property
    def config_dir(self) -> Path:
        """The folder of the config file; relative paths in it resolve against it."""
        return self._config_dir

    @property
    def app_name(self) -> str:
        """The Spark application name: ``spark.app_name`` or ``icetide-<pipeline>``."""
        return self.spark.app_name or f"icetide-{self.pipeline}"

    def resolved_path(self, path: str | Path) -> Path:
        """``path`` made absolute against :attr:`config_dir`."""
        return resolve_path(self.config_dir, path)

    def table(self, name: str) -> TableConfig:
        """The table called ``name`` (case-insensitive); ConfigError if there is none."""
        for table in self.tables:
            if table.name.casefold() == name.casefold():
                return table
        known = [t.name for t in self.tables]
        close = difflib.get_close_matches(name, known, n=1)
        raise ConfigError(
            f"pipeline {self.pipeline!r} has no table {name!r}",
            hint=f"did you mean {close[0]!r}?" if close else f"tables are {', '.join(known)}",
        )

    def table_for_source(self, source: str, server: str | None = None) -> TableConfig | None:
        """The table replicating Debezium source ``source`` (``db.table``) of ``server``.

        A table bound to a server takes only that server's events; one that is not takes
        the events of any server (the config allows no overlap between the two).
        """
        wanted = source.casefold()
        for table in self.tables:
            if table.source.casefold() != wanted:
                continue
            own = self.table_server(table)
            if own is None or (server is not None and own.casefold() == server.casefold()):
                return table
        return None

    def redacted(self) -> dict[str, Any]:
        """The config as plain data with secrets as ``***``: what ``config show`` prints.

        Keys are the YAML keys, durations are written as ``10s``, paths as strings.
        """
        result = _redact(self)
        assert isinstance(result, dict)
        return result


def _redact(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {
            (field.alias or name): _redact(getattr(value, name))
            for name, field in type(value).model_fields.items()
        }
    if isinstance(value, Secret):
        return "***"
    if isinstance(value, str | Path):
        return str(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, dict):
        return {str(k): _redact(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_redact(v) for v in value]
    return value


def allowed_keys(loc: Loc, root: type[BaseModel] | None = None) -> list[str] | None:
    """The YAML keys allowed in the mapping at ``loc`` (``("tables", 0)`` → TableConfig's),
    or None when that mapping is free-form; feeds the did-you-mean of unknown keys.

    ``root`` is the model of the whole file: :class:`Config` unless told (a schema file's
    is :class:`~icetide.schema.model.SchemaFile`)."""
    model: type[BaseModel] | None = root or Config
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        model = _model_in(fields[part].annotation)
    return None if model is None else [(f.alias or n) for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class inside ``X``, ``X | None`` or ``tuple[X, ...]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
