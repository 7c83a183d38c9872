"""The ledger's registry path: the writer schemas a micro-batch needs, fetched once on the
driver, and the decode step the workers run with them.

Workers never call the registry: :func:`wire_for` reads the schema ids of the batch's
registry-tagged messages (one small Spark job over the first five bytes), fetches those
schemas on the driver, and hands them to the ``mapInArrow`` steps as a
:class:`~icetide.events.raw.Wire`.
A schema id the registry does not have makes its messages dead letters
(``unknown_schema_id``); a registry that does not answer fails the batch, which retries.

Landing files carry registry-tagged messages as one base64 line each; a line that
decodes from base64 to a frame is read like a Kafka message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from icetide.events.raw import Wire

if TYPE_CHECKING:
    from icetide.config import Config


def wire_for(config: Config, batch: DataFrame) -> Wire | None:
    """The :class:`Wire` of one micro-batch, or None when no registry is configured."""
    registry = config.transport.registry
    if registry is None:
        return None
    base64_lines = config.transport.type == "files"
    raw = F.col("raw")
    if base64_lines:
        raw = F.unbase64(F.expr("CAST(raw AS STRING)"))
    ids_frame = (
        batch.where(F.col("raw").isNotNull())
        .select(raw.alias("frame"))
        .where(F.substring("frame", 1, 1) == F.unhex(F.lit("00")))
        .select(F.conv(F.hex(F.substring("frame", 2, 4)), 16, 10).cast("long").alias("id"))
        .distinct()
    )
    ids = {int(row.id) for row in ids_frame.collect() if row.id is not None}
    if not ids:
        return Wire({}, base64_lines)
    from icetide.events.registry import registry_for

    return Wire(registry_for(registry.url).writer_schemas(ids), base64_lines)
