"""The dead-letter payload column: the exact bytes, as unbroken RFC 4648 base64.

Spark's ``base64`` breaks its output into MIME lines (CRLF every 76 characters; Spark
3.5's ``spark.sql.chunkBase64String.enabled`` default), which lenient decoders such as
Python's default ``b64decode`` skip but strict ones (``java.util.Base64.getDecoder()``,
``b64decode(validate=True)``) reject. The dead-letter table promises the exact payload in
base64, so every stage that writes one goes through :func:`payload_b64`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def payload_b64(column: Column) -> Column:
    """``column`` (binary) as base64 with no line breaks."""
    return F.regexp_replace(F.base64(column), "[\\r\\n]", "")
