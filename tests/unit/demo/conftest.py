"""Shared workloads for the demo generator tests: generated and decoded once per session."""

from __future__ import annotations

import pytest
from demo_support import EVENTS, SEED, Decoded, decode_all

from icetide.demo.workload import Workload, generate


@pytest.fixture(scope="session")
def workload() -> Workload:
    """The default workload: all three tables, both envelope forms, TOAST, key changes."""
    return generate(SEED, EVENTS)


@pytest.fixture(scope="session")
def decoded(workload: Workload) -> list[Decoded]:
    """Every message of the default workload, decoded and projected."""
    return decode_all(workload)
