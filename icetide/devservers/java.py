"""How a private server on the JVM is started: the ``java`` found on ``PATH``, and the
flags every such server runs with.

A development server (the Iceberg REST catalog, Kafka, Kafka Connect) answers a few
requests at a time for minutes, on a machine whose cores the pipeline under test needs:
the serial collector (no collector threads of its own) and the quick JIT compiler only
(the optimizing compiler's threads would spend most of their time on code the server
runs a few times) cost it less CPU than the JVM's defaults.
"""

from __future__ import annotations

import shutil

from icetide.devservers.errors import LocalServerError

QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
"""The JVM's quick (C1) JIT compiler only, without the optimizing one (C2)."""

SERVER_FLAGS = ("-XX:+UseSerialGC", QUICK_COMPILER, "-Djava.awt.headless=true")
"""The flags of every development server's JVM (the module's docstring says why)."""


def java() -> str:
    """The ``java`` launcher on ``PATH``, or a :class:`LocalServerError` saying how to get one."""
    found = shutil.which("java")
    if found is None:
        raise LocalServerError("cannot find java", hint="apt-get install openjdk-17-jre")
    return found


def server_command(
    heap: str, classpath: str, main: str, *args: str, flags: tuple[str, ...] = ()
) -> list[str]:
    """The command that runs ``main`` with ``args`` in a server JVM of ``heap``
    (``-Xmx…``): :data:`SERVER_FLAGS`, then the server's own ``flags``.

    >>> command = server_command("-Xmx64m", "a.jar", "Main", "x", flags=("-Dk=v",))
    >>> command[1:2] + command[-6:]
    ['-Xmx64m', '-Djava.awt.headless=true', '-Dk=v', '-cp', 'a.jar', 'Main', 'x']
    >>> all(flag in command for flag in SERVER_FLAGS)
    True
    """
    return [java(), heap, *SERVER_FLAGS, *flags, "-cp", classpath, main, *args]
