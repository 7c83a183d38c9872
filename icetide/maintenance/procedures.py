"""The ``CALL <catalog>.system.…`` statements of Iceberg's maintenance procedures.

Built here, once, with every identifier quoted and every value a literal: the table
argument is a string that Iceberg parses as a (quoted) multi-part name.

>>> from icetide.schema.contract.names import TableName
>>> t = TableName("lake", "shop", "orders")
>>> rewrite_data_files(t, target_file_size=1024)
"CALL `lake`.system.rewrite_data_files(table => '`shop`.`orders`', strategy => 'binpack', \
options => map('target-file-size-bytes', '1024', 'min-input-files', '2', \
'delete-file-threshold', '1', 'remove-dangling-deletes', 'true', \
'use-starting-sequence-number', 'false'))"
"""

from __future__ import annotations

from datetime import datetime

from icetide.lake.calls import options_map as _map
from icetide.lake.calls import procedure_call as _call
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal


def _timestamp(moment: datetime) -> str:
    return f"TIMESTAMP {literal(moment.strftime('%Y-%m-%d %H:%M:%S.%f'))}"


def rewrite_data_files(table: TableName, *, target_file_size: int) -> str:
    """Bin-pack each partition (bucket) towards ``target_file_size``.

    Two small files in a bucket are enough to rewrite it, and any file with a delete
    against it is rewritten with the deletes applied. The new files take a new sequence
    number (not the starting one), so the position deletes that pointed at the old files
    no longer apply to anything and are removed as dangling in the same commit. That is
    safe here: icetide writes no equality deletes (which a rewrite racing them would have
    to keep applying), and a position delete committed meanwhile against a replaced file
    fails the rewrite's validation, which is then retried. One commit for the table (no
    partial progress): a partial commit can leave buckets half done.
    """
    options = {
        "target-file-size-bytes": str(target_file_size),
        "min-input-files": "2",
        "delete-file-threshold": "1",
        "remove-dangling-deletes": "true",
        "use-starting-sequence-number": "false",
    }
    return _call(table, "rewrite_data_files", strategy=literal("binpack"), options=_map(options))


def rewrite_position_delete_files(table: TableName) -> str:
    """Compact the position-delete files that remain and drop the dangling ones."""
    return _call(table, "rewrite_position_delete_files", options=_map({"rewrite-all": "true"}))


def expire_snapshots(table: TableName, *, older_than: datetime, retain_last: int) -> str:
    """Expire snapshots committed before ``older_than`` beyond the newest ``retain_last``
    (``older_than`` in UTC; the session's time zone is UTC)."""
    return _call(
        table,
        "expire_snapshots",
        older_than=_timestamp(older_than),
        retain_last=str(int(retain_last)),
    )


def rewrite_manifests(table: TableName) -> str:
    """Regroup the manifests (one per few commits, otherwise) by partition."""
    return _call(table, "rewrite_manifests")
