"""A counting HTTP relay: how many requests a client sends a server, of which kind, and
how long the client waited for them.

The storage benchmark (bench/storage_bench.py) and the lakehouse tests put it between
Spark and the Iceberg REST catalog: the catalog's round trips are not visible in
Spark's metrics, and the server keeps no count. Each
request is forwarded as it came (method, path, headers, body) over a kept-alive
connection, and its answer returned as it came; what the client waited, server and
relay together, is added to the request's kind (``GET /v1/namespaces/{}/tables/{}``:
the path with its names replaced, so that a table load counts once per kind however
many tables there are). The relay adds well under a millisecond per request on
loopback, which the figures include.

    with CountingRelay("http://127.0.0.1:8181") as relay:
        ...  # a client pointed at relay.url
        counts = relay.snapshot()  # {"GET /v1/config": (1, 0.004), ...}
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "trailer"}
_NAMES = re.compile(r"/(namespaces|tables|views)/[^/?]+")


def request_kind(method: str, path: str) -> str:
    """The method and the path with namespace, table and view names left out.

    >>> request_kind("POST", "/v1/namespaces/b/tables/accounts?x=1")
    'POST /v1/namespaces/{}/tables/{}'
    >>> request_kind("GET", "/v1/config?warehouse=s3://w")
    'GET /v1/config'
    """
    return f"{method} {_NAMES.sub(lambda m: f'/{m.group(1)}/{{}}', path.split('?', 1)[0])}"


class CountingRelay:
    """Relays HTTP on a free loopback port to ``target``, counting requests by kind."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, float]] = {}
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep the client's connections alive

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                begin = time.perf_counter()
                answer, payload = relay._forward(self.command, self.path, body, headers)
                relay._add(request_kind(self.command, self.path), time.perf_counter() - begin)
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_BY_HOP | {"content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._local = threading.local()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _connection(self) -> http.client.HTTPConnection:
        """One kept-alive connection to the server per relay thread."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=60)
        return conn

    def _forward(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """Send one request on this thread's kept-alive connection; the server may have
        closed it while idle (before reading anything), so a closed connection is opened
        again and the request sent once more, as HTTP clients do."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                answer = conn.getresponse()
                return answer, answer.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _add(self, kind: str, seconds: float) -> None:
        with self._lock:
            n, total = self._counts.get(kind, (0, 0.0))
            self._counts[kind] = (n + 1, total + seconds)

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """Requests so far by kind: (count, seconds the client waited in all)."""
        with self._lock:
            return dict(self._counts)

    def __enter__(self) -> CountingRelay:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


def difference(
    after: dict[str, tuple[int, float]], before: dict[str, tuple[int, float]]
) -> dict[str, tuple[int, float]]:
    """What happened between two snapshots (kinds with no new request left out).

    >>> difference({"a": (3, 1.5), "b": (1, 0.1)}, {"a": (1, 0.5), "b": (1, 0.1)})
    {'a': (2, 1.0)}
    """
    out = {}
    for kind, (n, seconds) in after.items():
        n0, s0 = before.get(kind, (0, 0.0))
        if n > n0:
            out[kind] = (n - n0, seconds - s0)
    return out
