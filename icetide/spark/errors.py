"""The one boundary where JVM errors from py4j become icetide errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from icetide.errors import CatalogError, IcetideError, StageError

_CATALOG_SIGNS = (
    "ConnectException",
    "UnknownHostException",
    "AccessDeniedException",
    "Permission denied",
    "NoSuchNamespaceException",
    "RESTException",
    "Connection refused",
    "Read-only file system",
)


def translate(exc: BaseException, action: str) -> IcetideError:
    """Map a Spark/py4j exception raised while doing ``action`` to an icetide error."""
    if isinstance(exc, IcetideError):
        return exc
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if any(sign in text for sign in _CATALOG_SIGNS):
        return CatalogError(
            f"{action}: the Iceberg catalog or its storage is not reachable or refuses "
            f"access: {first}",
            hint="check catalog.uri / catalog.warehouse and the credentials in the config; "
            "nothing was lost, rerun the command once the catalog is back",
        )
    return StageError(f"{action} failed: {first}", hint="rerun resumes where it stopped")


@contextmanager
def jvm_boundary(action: str) -> Iterator[None]:
    """Run a block of Spark work; re-raise JVM failures as icetide errors."""
    try:
        yield
    except IcetideError:
        raise
    except Exception as exc:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if isinstance(exc, Py4JError | PySparkException):
            raise translate(exc, action) from exc
        raise
