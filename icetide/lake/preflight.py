"""Before Spark starts: can the catalog and the object store of the config be reached?

A REST or JDBC catalog that is down, an S3 endpoint that is wrong, a key the store
refuses or a bucket that does not exist all surface inside Spark as a JVM exception
several causes deep, often after a minute of retries by the AWS SDK. Checked here first,
from Python with short timeouts and no retries, each is one error naming the setting to
fix (its YAML path) and what to do, before any JVM exists.

What is checked, and only when the config says enough to check it:

- ``catalog.type: rest``: ``GET <uri>/v1/config`` (with ``catalog.properties.token`` as
  a bearer token when given) answers, and does not refuse the token. The answer's
  ``defaults`` and ``overrides`` are merged around the config's properties the way
  Iceberg's clients merge them, so a warehouse or S3 endpoint the server hands out is
  checked too.
- ``catalog.type: jdbc``: the database host of a ``jdbc:<driver>://host:port/…`` URI
  accepts a TCP connection.
- An ``s3://`` (``s3a://``) warehouse whose properties name ``s3.endpoint`` or
  ``s3.access-key-id``: the store answers, accepts the key, and has the bucket. A
  warehouse whose keys the catalog vends (neither property set) is left to the catalog.
- An ``s3://`` state location (``state:``): the store answers with the catalog's
  ``s3.*`` properties (or the environment's AWS credentials), accepts the key, and has
  the bucket; every such error names ``state``, since capture and the ledger resume
  from there.

Messages may quote a configured value; the CLI's scrubber masks every secret of the
config in whatever is printed (:mod:`icetide.config.secrets`).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.errors import CatalogError
from icetide.state.s3 import s3_filesystem, split_s3_uri

if TYPE_CHECKING:
    from icetide.config import Config

TIMEOUT = 5.0
"""Seconds each check waits for an answer."""


class PreflightError(CatalogError):
    """The catalog or the object store of the config cannot be used; ``setting`` is the
    YAML path of the value to fix."""

    def __init__(self, setting: str, message: str, *, hint: str) -> None:
        super().__init__(f"{setting}: {message}", hint=hint)
        self.setting = setting


@dataclass(frozen=True)
class Lake:
    """What the checks found: the warehouse and the catalog properties in effect (the
    server's defaults, the config's properties, the server's overrides)."""

    warehouse: str | None
    warehouse_setting: str
    properties: Mapping[str, str]


def check_lake(config: Config, *, log: Callable[[str], None] | None = None) -> Lake:
    """Check the catalog and its object store (see module doc); raise a
    :class:`PreflightError` on the first problem. ``log`` hears one line per check
    passed."""
    catalog = config.catalog
    properties = dict(catalog.properties_plain())
    warehouse = str(catalog.warehouse) if catalog.warehouse else None
    warehouse_setting = "catalog.warehouse"
    say = log or (lambda _line: None)
    if catalog.type == "rest" and catalog.uri:
        answer = check_rest_catalog(str(catalog.uri), properties, warehouse)
        defaults = {str(k): str(v) for k, v in (answer.get("defaults") or {}).items()}
        overrides = {str(k): str(v) for k, v in (answer.get("overrides") or {}).items()}
        properties = defaults | properties | overrides
        if "warehouse" in overrides or (warehouse is None and "warehouse" in defaults):
            warehouse = properties["warehouse"]
            warehouse_setting = "catalog.uri (the warehouse its server configures)"
        say(f"check: the REST catalog at {catalog.uri} answers")
    elif catalog.type == "jdbc" and catalog.uri:
        where = check_jdbc_catalog(str(catalog.uri))
        if where:
            say(f"check: the catalog database at {where} accepts connections")
    lake = Lake(warehouse, warehouse_setting, properties)
    bucket = s3_bucket(warehouse)
    if bucket is not None and _names_a_store(properties):
        check_object_store(lake, bucket)
        say(f"check: bucket {bucket!r} on the object store at {_endpoint(properties)} is readable")
    if config.state is not None and split_s3_uri(config.state) is not None:
        check_state_location(config.state, catalog.properties_plain())
        say(f"check: the state location {config.state} is readable")
    return lake


def literal_credentials(config: Config) -> list[str]:
    """The YAML paths of catalog credentials (the store's keys, the catalog's token)
    written in the file rather than taken from the environment with ``${VAR}``: they work,
    but the key then lives in the file and wherever it is copied."""
    from icetide.config.secrets import Secret

    return [
        f"catalog.properties.{key}"
        for key, value in config.catalog.properties.items()
        if isinstance(value, Secret) and value and not value.parts
    ]


# -- the catalog ---------------------------------------------------------------------------


def check_rest_catalog(
    uri: str, properties: Mapping[str, str], warehouse: str | None, *, timeout: float = TIMEOUT
) -> dict[str, Any]:
    """``GET <uri>/v1/config``: the server's answer, or a :class:`PreflightError`."""
    query = f"?{urllib.parse.urlencode({'warehouse': warehouse})}" if warehouse else ""
    request = urllib.request.Request(f"{uri.rstrip('/')}/v1/config{query}")
    token = properties.get("token")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise PreflightError(
                "catalog.properties.token" if token else "catalog.properties",
                f"the REST catalog at {uri} refused the request (HTTP {exc.code}: {_reason(exc)})",
                hint="give the catalog's token (catalog.properties.token: ${TOKEN}) or "
                "OAuth2 credential (catalog.properties.credential), from the environment",
            ) from None
        raise PreflightError(
            "catalog.uri",
            f"{uri} does not answer as an Iceberg REST catalog (GET /v1/config: HTTP "
            f"{exc.code} {_reason(exc)})",
            hint="set catalog.uri to the catalog's base URL, the one before /v1/config",
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PreflightError(
            "catalog.uri",
            f"the catalog at {uri} is not reachable: {reason}",
            hint="start the catalog server, or correct catalog.uri (host and port)",
        ) from None
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise PreflightError(
            "catalog.uri",
            f"{uri} does not answer as an Iceberg REST catalog (GET /v1/config is not a "
            "JSON object)",
            hint="set catalog.uri to the catalog's base URL, the one before /v1/config",
        )
    return answer


def check_jdbc_catalog(uri: str, *, timeout: float = TIMEOUT) -> str | None:
    """Connect to the host and port of a ``jdbc:<driver>://host[:port]/…`` URI; return
    ``host:port``, or None for a URI without a network address (SQLite)."""
    address = jdbc_address(uri)
    if address is None:
        return None
    host, port = address
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise PreflightError(
            "catalog.uri",
            f"the catalog database at {host}:{port} is not reachable: {exc.strerror or exc}",
            hint="start the catalog's database, or correct the host and port in catalog.uri",
        ) from None
    return f"{host}:{port}"


_JDBC_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "sqlserver": 1433}


def jdbc_address(uri: str) -> tuple[str, int] | None:
    """The host and port a JDBC URI connects to, when it names one.

    >>> jdbc_address("jdbc:postgresql://db.internal/iceberg")
    ('db.internal', 5432)
    >>> jdbc_address("jdbc:mysql://127.0.0.1:3307/cat?ssl=true"), jdbc_address("jdbc:sqlite:c.db")
    (('127.0.0.1', 3307), None)
    """
    if not uri.startswith("jdbc:"):
        return None
    parsed = urllib.parse.urlsplit(uri[len("jdbc:") :])
    if not parsed.hostname:
        return None
    try:
        port = parsed.port
    except ValueError:
        return None
    port = port or _JDBC_PORTS.get(parsed.scheme)
    return None if port is None else (parsed.hostname, port)


# -- the object store ----------------------------------------------------------------------


def s3_bucket(warehouse: str | None) -> str | None:
    """The bucket of an ``s3://bucket/prefix`` warehouse, else None.

    >>> s3_bucket("s3://warehouse/rest"), s3_bucket("s3a://lake"), s3_bucket("/data/wh")
    ('warehouse', 'lake', None)
    """
    if not warehouse:
        return None
    split = split_s3_uri(warehouse)
    return None if split is None else split[0]


def _names_a_store(properties: Mapping[str, str]) -> bool:
    return bool(properties.get("s3.endpoint") or properties.get("s3.access-key-id"))


def _endpoint(properties: Mapping[str, str]) -> str:
    return properties.get("s3.endpoint") or "AWS S3"


_NETWORK = ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Could not resolve")
_DENIED = (
    "ACCESS_DENIED",
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "INVALID_ACCESS_KEY_ID",
    "SIGNATURE_DOES_NOT_MATCH",
    "HTTP status 403",
)


def check_object_store(lake: Lake, bucket: str, *, timeout: float = TIMEOUT) -> None:
    """The store at ``s3.endpoint`` answers, accepts the key and holds ``bucket``."""
    from pyarrow import fs

    properties = lake.properties
    endpoint = _endpoint(properties)
    s3 = s3_filesystem(properties, timeout=timeout)
    try:
        info = s3.get_file_info(bucket)
        if info.type == fs.FileType.NotFound:
            # HEAD says 404 with no body: a missing bucket, or an endpoint that is not S3.
            s3.get_file_info(fs.FileSelector(bucket, recursive=False))
    except OSError as exc:
        raise _store_error(exc, lake, bucket, endpoint) from None
    if info.type == fs.FileType.NotFound:
        raise _missing_bucket(lake, bucket, endpoint)


def _store_error(exc: OSError, lake: Lake, bucket: str, endpoint: str) -> PreflightError:
    text = str(exc)
    detail = _aws_detail(text)
    if any(sign in text for sign in _NETWORK):
        return PreflightError(
            "catalog.properties.s3.endpoint",
            f"the object store at {endpoint} is not reachable: {detail}",
            hint="start the object store, or correct s3.endpoint (scheme, host and port)",
        )
    if any(sign in text for sign in _DENIED):
        who = lake.properties.get("s3.access-key-id")
        key = f"the key {who}" if who else "the environment's AWS credentials"
        return PreflightError(
            "catalog.properties.s3.secret-access-key",
            f"the object store at {endpoint} refused {key} for bucket {bucket!r} (access denied)",
            hint="set s3.access-key-id and s3.secret-access-key to a key the store accepts, "
            "from the environment (${S3_ACCESS_KEY}, ${S3_SECRET_KEY}), never literally",
        )
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        return _missing_bucket(lake, bucket, endpoint)
    return PreflightError(
        "catalog.properties.s3.endpoint",
        f"{endpoint} does not answer as an S3 object store: {detail}",
        hint="set s3.endpoint to the store's S3 API (its S3 gateway's port), with "
        "s3.path-style-access: true for a store without virtual-host buckets",
    )


def check_state_location(
    location: str, properties: Mapping[str, str], *, timeout: float = TIMEOUT
) -> None:
    """The object store of an ``s3://bucket/prefix`` state location answers with
    ``properties`` (the catalog's), accepts the key, and holds the bucket."""
    from pyarrow import fs

    split = split_s3_uri(location)
    if split is None:
        return
    bucket = split[0]
    endpoint = _endpoint(properties)
    keys = "catalog.properties s3.access-key-id and s3.secret-access-key"
    try:
        s3 = s3_filesystem(properties, timeout=timeout)
        info = s3.get_file_info(bucket)
        if info.type == fs.FileType.NotFound:
            s3.get_file_info(fs.FileSelector(bucket, recursive=False))
    except OSError as exc:
        text = str(exc)
        detail = _aws_detail(text)
        if any(sign in text for sign in _NETWORK):
            why = f"its object store at {endpoint} is not reachable: {detail}"
            hint = "start the object store, or correct catalog.properties.s3.endpoint"
        elif any(sign in text for sign in _DENIED):
            why = f"the object store at {endpoint} refused the key for bucket {bucket!r}"
            hint = f"set {keys} from the environment (${{S3_ACCESS_KEY}}, ${{S3_SECRET_KEY}})"
        elif "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
            why = f"bucket {bucket!r} does not exist on the object store at {endpoint}"
            hint = f"create the bucket {bucket!r}, or point state: at one that exists"
        else:
            why = f"{endpoint} does not answer as an S3 object store: {detail}"
            hint = "set catalog.properties.s3.endpoint to the store's S3 API"
        raise PreflightError(
            "state", f"cannot use the state location {location}: {why}", hint=hint
        ) from None
    if info.type == fs.FileType.NotFound:
        raise PreflightError(
            "state",
            f"cannot use the state location {location}: bucket {bucket!r} does not exist on "
            f"the object store at {endpoint}",
            hint=f"create the bucket {bucket!r}, or point state: at one that exists",
        )


def _missing_bucket(lake: Lake, bucket: str, endpoint: str) -> PreflightError:
    return PreflightError(
        lake.warehouse_setting,
        f"bucket {bucket!r} of the warehouse {lake.warehouse} does not exist on the object "
        f"store at {endpoint}",
        hint=f"create the bucket {bucket!r}, or point the warehouse at one that exists",
    )


def _aws_detail(text: str) -> str:
    """The AWS SDK's words after ``operation:``, without PyArrow's preamble.

    >>> _aws_detail("When getting information for bucket 'w': AWS Error NETWORK_CONNECTION "
    ...     "during HeadBucket operation: curlCode: 7, Could not connect to server")
    'curlCode: 7, Could not connect to server'
    """
    _, found, rest = text.partition(" operation: ")
    return (rest if found else text).strip()


def _reason(exc: urllib.error.HTTPError) -> str:
    return str(exc.reason or "").strip() or "no reason given"
