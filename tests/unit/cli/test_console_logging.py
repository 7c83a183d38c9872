"""What a command prints of what is logged: warnings as bare lines, none of py4j's."""

from __future__ import annotations

import logging
import socket
import threading

import pytest
from py4j.java_gateway import GatewayClient, GatewayParameters
from py4j.protocol import ERROR

from icetide.cli.main import console_logging


def test_a_failed_call_into_the_jvm_prints_nothing_and_sets_no_logging_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A peer that takes py4j's connection and hangs up, as a JVM being killed does:
    py4j logs the failure on the root logger with its traceback (and, with no handler
    there, sets logging up for the rest of the process); the call fails to its caller.
    A command prints none of it, and other warnings stay bare lines."""
    listener = socket.create_server(("127.0.0.1", 0))

    def hang_up() -> None:
        peer, _ = listener.accept()
        peer.close()

    root = logging.getLogger()
    before = list(root.handlers)
    threading.Thread(target=hang_up, daemon=True).start()
    client = GatewayClient(
        gateway_parameters=GatewayParameters(port=listener.getsockname()[1], auto_close=True)
    )
    with console_logging() as handler:
        answer = client.send_command("c\nt\nf\ne\n", retry=False)
        logging.getLogger("icetide.events.registry").warning("a registry warning")
        logging.getLogger("py4j.clientserver").error("py4j's own error")
        assert root.handlers == [*before, handler]  # no basicConfig handler was added
    listener.close()
    assert answer == ERROR  # py4j's error answer: the caller raises on it
    assert root.handlers == before
    err = capsys.readouterr().err
    assert err == "a registry warning\n", err
