"""Which micro-batch a ledger table already holds: the test that keeps appends exactly once.

Every append to a ledger or dead-letter table carries the streaming query's id and the
micro-batch id in its snapshot summary (:data:`~icetide.schema.contract.ledger.QUERY_PROPERTY`,
:data:`~icetide.schema.contract.ledger.BATCH_PROPERTY`). A batch reaches an append a
second time in two ways, and both must find it there rather than write it twice:

- Spark replays a micro-batch that did not finish (a crash, a restart): same query id
  (from the checkpoint), same batch id, same input;
- the stage redoes an append after a catalog outage
  (:func:`~icetide.spark.retry.retry_step`): the commit may have landed before the
  connection failed (the server applied it and its answer was lost, which Iceberg reports
  as a failure like any other), so after a failure the table's summary is read again
  (:func:`after_failure`), never taken from what the stage remembered before the attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from icetide.schema.contract import ledger as c

T = TypeVar("T")

NONE = -1
"""The stored batch of a table holding no batch of the query."""


def stored_batch(summary: Mapping[str, str] | None, query: str) -> int:
    """The last micro-batch of streaming query ``query`` a table holds, from the summary
    of its newest snapshot carrying a batch id (None: no such snapshot); :data:`NONE`
    when that snapshot is another query's (a new checkpoint numbers its batches from 0
    again, so another query's number says nothing about this one's).

    >>> landed = {c.BATCH_PROPERTY: "7", c.QUERY_PROPERTY: "q1"}
    >>> stored_batch(landed, "q1"), stored_batch(landed, "q2"), stored_batch(None, "q1")
    (7, -1, -1)
    """
    if summary is None or summary.get(c.QUERY_PROPERTY) != query:
        return NONE
    return int(summary[c.BATCH_PROPERTY])


def after_failure(remembered: Mapping[T, int], table: T) -> dict[T, int]:
    """What the stage may still trust of ``remembered`` (table → last batch it appended
    there) after an attempt to append to ``table`` failed: not ``table``'s entry. Whether
    the failed commit landed is known only to the catalog, so the next attempt reads the
    table's summary again (:func:`stored_batch`) and appends only when the batch is not
    there.

    >>> after_failure({"t_cdc": 3, "u_cdc": 5}, "t_cdc")
    {'u_cdc': 5}
    """
    return {name: batch for name, batch in remembered.items() if name != table}
