"""The commented example config and schema file that ``icetide init`` writes.

Both load as they are (the tests check it), so a new user starts from a working pipeline
and every option is documented where it is set.
"""

from __future__ import annotations

from pathlib import Path

from icetide.errors import ConfigError

EXAMPLE_CONFIG = """\
# icetide pipeline config. Relative paths resolve against this file's folder.
# An option left empty (or null) takes its default.
# Any value may use ${VAR} or ${VAR:-default} to read the environment (write $${ for a
# literal ${). Text read that way is a secret: `icetide config show` prints it as ***;
# numbers, durations, choices and local paths are checked and shown as usual.

# Pipeline name (required; lowercase letters, digits, _ and -). Names the checkpoints
# and the Spark application.
pipeline: shop

# Checkpoints and local state. Default: ./.icetide
state_dir: ./.icetide

# Where what a new machine needs to resume is kept (capture offsets, a bootstrap under
# way, the ledger's Kafka position): s3://bucket/prefix on the catalog's object store
# (needs transport type kafka), or a folder. Default: none (in state_dir)
state: null

catalog:
  # Spark catalog name the tables are written through. Default: lake
  name: lake
  # hadoop | rest | hive | glue | jdbc | custom. Default: hadoop
  type: hadoop
  # Warehouse folder or URI (s3a://..., hdfs://...). Local paths are made absolute.
  # Default: ./warehouse for a hadoop catalog, else none
  warehouse: ./warehouse
  # Catalog service URI; required for rest, hive and jdbc. Default: none
  uri: null
  # Iceberg namespace of every table of this pipeline (a or a.b). Default: cdc
  namespace: cdc
  # Passed through as spark.sql.catalog.<name>.<key>=<value>. Values of keys naming a
  # password, secret, token, credential or key are hidden. A custom catalog needs
  # catalog-impl here. Example: {token: "${CATALOG_TOKEN}"}. Default: {}
  properties: {}

spark:
  # Spark master URL: local[*], local[4], spark://host:7077, yarn ... Default: local[*]
  master: local[*]
  # Spark application name. Default: icetide-<pipeline>
  app_name: null
  # Iceberg runtime jar: auto (from the snowpark-connect-deps-iceberg wheel),
  # provided (the cluster has it) or a path to a .jar. Default: auto
  iceberg_jar: auto
  # More jars for spark.jars, e.g. JDBC drivers from /usr/share/java. Default: []
  extra_jars: []
  # spark.sql.shuffle.partitions. Default: 8
  shuffle_partitions: 8
  # On a local master (Linux), the nice value (0-19) of the JVM's JIT compiler threads:
  # they then compile while the query's tasks leave a core idle. 0: as the JVM starts
  # them. Default: 19
  compiler_nice: 19
  # On a local master, new JVMs map the classes the first long `icetide run` saved
  # (in $ICETIDE_CLASS_ARCHIVE_DIR or ~/.cache/icetide/class-archive) instead of
  # loading them again: seconds off each start. Default: true
  class_archive: true
  # Any other spark.* setting, passed through. Default: {}
  conf: {}

transport:
  # How change events arrive: files (a landing folder) or kafka. Default: files
  type: files
  # files: the landing folder of Debezium JSON files. Default: ./landing
  path: ./landing
  # kafka: broker list host:port,...; required for kafka. Default: none
  bootstrap_servers: null
  # kafka: topics to read; give these or topic_pattern. Default: []
  topics: []
  # kafka: a regex of topics to subscribe to. Default: none
  topic_pattern: null
  # kafka: where a new pipeline starts: earliest, latest or Spark's JSON form.
  # Default: earliest
  starting_offsets: earliest
  # kafka: passed to Spark's Kafka source (kafka.* keys), e.g.
  # {kafka.sasl.jaas.config: "${KAFKA_JAAS}"}; credential values are hidden. Default: {}
  options: {}
  # files: at most this many files per stream trigger. Default: 100
  max_files_per_trigger: 100
  # kafka: at most this many messages per stream trigger (a backlog is taken in
  # several batches, each held in the driver's memory while stored). Default: 100000
  max_messages_per_trigger: 100000
  # capture: make records durable (close a landing file, flush the Kafka producer) once
  # this many bytes are buffered. Default: 16777216 (16 MiB)
  roll_bytes: 16777216
  # capture: ... or once the first buffered record is this old. Default: 5s
  roll_interval: 5s
  # capture, kafka: librdkafka producer properties, e.g. {compression.type: zstd};
  # enable.idempotence and acks are fixed; credential values are hidden. Default: {}
  producer: {}

schedule:
  # Durations: 500ms, 10s, 5m, 1h, 7d or a number of seconds.
  # How often the stream stage appends new events to the CDC tables. Default: 10s
  stream_interval: 10s
  # How often a merge round starts (a round that merged something and took longer
  # is followed at once; after an idle round, the whole interval, unless the ledger
  # stores rows first: then at once). Default: 60s
  merge_interval: 60s

merge:
  # How long deletes are remembered, so a late, older insert cannot resurrect a deleted
  # row. Default: 7d
  tombstone_retention: 7d
  # How many tables a merge round merges at once (threads of one Spark session); 1
  # merges them one after the other, in config order. Default: 2
  parallel_tables: 2
  # In `icetide run`, the most tables a merge round takes of those with new events: a
  # quarter the busiest, the rest those waiting longest; the others go to the next
  # round, which starts at once. Default: 32
  round_tables: 32

maintenance:
  # How often `icetide run` maintains every table (compaction, delete-file rewrite,
  # snapshot expiry, orphan removal, manifest rewrite). Default: 1h
  interval: 1h
  # Data files are bin-packed per bucket towards this size. Default: 128MiB
  target_file_size: 128MiB
  snapshots:
    # Expiry removes snapshots older than this ... Default: 5d
    max_age: 5d
    # ... beyond the newest keep_last; never one a stage still needs. Default: 10
    keep_last: 10
  # Unreferenced files are removed once older than this (at least 24h). Default: 3d
  orphan_age: 3d

dead_letter:
  # Suffix of each table's dead-letter table (customers -> customers_dlt). Default: _dlt
  suffix: _dlt
  # Table for events whose table cannot be determined; gets the suffix too.
  # Default: icetide_unrouted
  unrouted_table: icetide_unrouted

artifacts:
  # Typed schema packages of the tables and views (docs/artifacts.md). auto: `icetide
  # schema apply` publishes a table's new schema version and the views above it, and
  # `icetide run` does once the mirror holds the new version's data; off: only
  # `icetide artifacts publish` does. Default: auto
  refresh: auto

# The tables to replicate (at least one).
tables:
    # Iceberg table name in the namespace (letters, digits, _). Required.
  - name: customers
    # Debezium source: db.table (MySQL) or schema.table (PostgreSQL). Default: the name
    source: inventory.customers
    # Schema file with the columns and their stable ids. Default: schemas/<name>.yaml
    schema: schemas/customers.yaml
    # Primary key; when given it must equal the schema file's. Default: the schema's
    primary_key: [id]
    # The base table is partitioned by bucket(buckets, pk); 1..4096. Default: 16
    buckets: 16
    # merge-on-read (cheap writes) or copy-on-write (cheap reads). Default: merge-on-read
    mode: merge-on-read
    # scd2: also keep <name>_history, every version of every row with its validity
    # interval (docs/history.md); off: none. Default: off
    history: off
    # How recent the base table must be (now minus the source commit time of the newest
    # applied change); a breach fails `icetide status --check`. Default: none
    freshness_sla: null
    # What a source schema change does (docs/schema-evolution.md). Defaults shown.
    evolution:
      # evolve | freeze | discard_row | discard_value, for every kind of change
      mode: evolve
      # per kind, e.g. {type_change: freeze, add_column: discard_value}
      modes: {}
      # a dropped source column: soft (kept, commented) or hard (dropped)
      drop: soft
      # name patterns of new columns held as sensitive until approved, e.g. ["*ssn*"]
      sensitive: []
      # apply allowed changes with no human (false: wait for `icetide schema apply`)
      auto_apply: true
"""

EXAMPLE_SCHEMA = """\
# Schema of table customers: the source of truth for its columns.
# Column ids are stable: never change or reuse one; a rename keeps its id.
# Types: boolean, int, long, float, double, string, binary, date, time, timestamp
# (no zone), timestamptz (an instant), uuid, json, decimal(p,s), and the nested
# {enum: [a, b]}, {struct: [fields]}, {list: {element_id, element}},
# {map: {key_id, key, value_id, value}} (every nested field has its own id too).
# `sink.logical` names the Debezium logical type of a column, needed only for events
# without a schema.
table: customers
version: 1
primary_key: [id]
columns:
  - {id: 1, name: id, type: long, nullable: false}
  - {id: 2, name: email, type: string}
  - {id: 3, name: first_name, type: string}
  - {id: 4, name: last_name, type: string}
  - {id: 5, name: balance, type: "decimal(12,2)"}
  - {id: 6, name: updated_at, type: timestamp}
sink:
  logical: {updated_at: io.debezium.time.MicroTimestamp}
  # How columns are stored in Iceberg, by source column name (docs/sink-config.md):
  # another name, a wider type, or a conversion (sha256, mask, lower, upper, trim,
  # epoch_millis_to_timestamp, epoch_seconds_to_timestamp, json_text_to_struct).
  # columns:
  #   email: {name: email_sha256, convert: sha256}
  #   balance: {type: "decimal(18,2)"}
"""


def write_example(directory: Path, force: bool = False) -> list[Path]:
    """Write ``icetide.yaml`` and ``schemas/customers.yaml`` into ``directory``.

    Nothing is written when either file exists, unless ``force``: a half-overwritten
    pipeline would be worse than none.
    """
    files = {
        directory / "icetide.yaml": EXAMPLE_CONFIG,
        directory / "schemas" / "customers.yaml": EXAMPLE_SCHEMA,
    }
    if directory.exists() and not directory.is_dir():
        raise ConfigError(
            f"{directory} is a file, not a folder",
            hint="name a folder to write icetide.yaml into (default: the current one)",
        )
    existing = [path for path in files if path.exists()]
    if existing and not force:
        raise ConfigError(
            f"{', '.join(map(str, existing))} already exist{'s' if len(existing) == 1 else ''}",
            hint="pass --force to overwrite",
        )
    for path, text in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as exc:
            raise ConfigError(
                f"cannot write {path}: {exc.strerror or exc}",
                hint="choose a folder you can write to, or fix its permissions",
            ) from None
    return list(files)
