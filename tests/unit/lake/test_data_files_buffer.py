"""A task's file streams buffer :data:`~icetide.lake.data_files.WRITE_BUFFER` bytes, not
PyIceberg's mebibyte: what a row group writes reaches the file before it is closed."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, NestedField

from icetide.lake.data_files import WRITE_BUFFER, FileTarget


def test_a_row_group_reaches_the_file_past_the_buffer(tmp_path: Path) -> None:
    schema = Schema(NestedField(1, "payload", BinaryType(), required=False))
    target = FileTarget(schema.model_dump_json(), str(tmp_path), None, {}, codec="uncompressed")
    writer = target.open()
    written = 6 * WRITE_BUFFER  # random bytes: the row group is about this size
    rows = pa.table({"payload": [os.urandom(1024) for _ in range(written // 1024)]})
    writer.write(rows.cast(target.arrow_schema()))
    on_disk = os.path.getsize(writer.path)
    # PyIceberg's default (a mebibyte) would hold all of it until the footer.
    assert written - WRITE_BUFFER <= on_disk <= written + WRITE_BUFFER
    done = writer.close()
    assert done.rows == written // 1024 and done.size == os.path.getsize(writer.path) > written
