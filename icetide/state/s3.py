"""The S3 client of the lake's object store, from the catalog's ``S3FileIO`` properties.

One builder for every Python-side use of the store (preflight's checks, the shared state
location), so the endpoint, the path-style flag and the keys the catalog is given mean the
same thing everywhere: ``s3.endpoint``, ``s3.path-style-access``, ``s3.access-key-id``,
``s3.secret-access-key``, ``s3.session-token``, ``client.region`` / ``s3.region``. Without
keys, PyArrow takes the environment's AWS credentials (``AWS_ACCESS_KEY_ID`` …, a
profile, an instance role).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

DEFAULT_REGION = "us-east-1"
S3_SCHEMES = ("s3", "s3a", "s3n")


def split_s3_uri(uri: str) -> tuple[str, str] | None:
    """``(bucket, key prefix)`` of an ``s3://bucket/prefix`` URI, else None.

    >>> split_s3_uri("s3://lake/state/shop/"), split_s3_uri("s3a://lake"), split_s3_uri("/x")
    (('lake', 'state/shop'), ('lake', ''), None)
    """
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme not in S3_SCHEMES or not parsed.netloc:
        return None
    return parsed.netloc, parsed.path.strip("/")


def s3_filesystem(
    properties: Mapping[str, str], *, timeout: float = 5.0, attempts: int = 1
) -> S3FileSystem:
    """A PyArrow S3 file system with the catalog's ``S3FileIO`` properties, ``timeout``
    seconds per connection and request, ``attempts`` tries per request (preflight's
    checks: one, so a wrong endpoint is said at once)."""
    from pyarrow import fs

    options: dict[str, object] = {
        "region": properties.get("client.region") or properties.get("s3.region") or DEFAULT_REGION,
        "force_virtual_addressing": properties.get("s3.path-style-access", "false") != "true"
        and "s3.endpoint" not in properties,
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=attempts),
        "connect_timeout": timeout,
        "request_timeout": timeout,
    }
    if properties.get("s3.access-key-id"):
        options["access_key"] = properties["s3.access-key-id"]
        options["secret_key"] = properties.get("s3.secret-access-key", "")
        if properties.get("s3.session-token"):
            options["session_token"] = properties["s3.session-token"]
    endpoint = properties.get("s3.endpoint")
    if endpoint:
        scheme, _, address = endpoint.partition("://")
        options["scheme"] = scheme if address else "https"
        options["endpoint_override"] = (address or scheme).rstrip("/")
    return fs.S3FileSystem(**options)
