"""The schema-change state machine: where a table is in its change, read from the two
tables' properties (:class:`icetide.schema.contract.phases.ChangeState`), as both stages,
``icetide status`` and the status page read it."""

from __future__ import annotations

import pytest

from icetide.schema.contract.ledger import SCHEMA_VERSION_PROPERTY as LAYOUT
from icetide.schema.contract.phases import (
    DATA_VERSION,
    MERGE_VERSION,
    PHASES,
    PROJECTION_VERSION,
    ChangeState,
)


def state(
    ledger: int | None, projected: int | None, base: int | None, acked: int | None, data: int | None
) -> ChangeState:
    """The state read from the properties as the stages write them (absent when None)."""

    def props(*pairs: tuple[str, int | None]) -> dict[str, str]:
        return {key: str(value) for key, value in pairs if value is not None}

    return ChangeState.read(
        props((LAYOUT, ledger), (PROJECTION_VERSION, projected)),
        props((LAYOUT, base), (MERGE_VERSION, acked), (DATA_VERSION, data)),
    )


# (ledger layout, projected, base layout, merge acked, data done) → phase of version 3
CASES = [
    ((2, 2, 2, 2, 2), False, "schema"),  # nothing altered yet
    ((3, 2, 2, 2, 2), False, "schema"),  # the ledger altered, the base not yet
    ((3, 2, 3, 2, 2), False, "code"),  # both altered, the merge not switched
    ((3, 2, 3, 3, 2), False, "code"),  # the merge acknowledged, the ledger not switched
    ((3, 3, 3, 3, 2), False, "data"),  # both switched, phase 3 not done
    ((3, 3, 3, 3, 3), False, "converged"),
    ((3, 3, 3, 3, 3), True, "schema"),  # a re-snapshot under way holds phase 1
    ((4, 4, 4, 4, 4), False, "converged"),  # a later version passed this one
    ((3, 3, None, None, None), False, "schema"),  # no base table yet
]


@pytest.mark.parametrize(("steps", "copying", "phase"), CASES)
def test_the_phase_of_a_change_follows_the_properties(
    steps: tuple[int | None, ...], copying: bool, phase: str
) -> None:
    assert state(*steps).phase(3, copying) == phase
    assert phase in PHASES


@pytest.mark.parametrize(
    ("steps", "current", "projects"),
    [
        ((2, 2, 2, 2, 2), 3, 2),  # the merge has not acknowledged 3: keep projecting 2
        ((3, 2, 3, 3, 2), 3, 3),  # acknowledged: switch
        ((3, 2, 3, 4, 2), 3, 3),  # never past the schema file's version
        ((3, None, 3, None, None), 3, 3),  # a ledger from before the handshake: its layout
        ((None, None, None, None, None), 3, 3),
        ((3, 3, 3, 2, 2), 3, 3),  # never back
    ],
)
def test_the_ledger_switches_only_to_what_the_merge_acknowledged(
    steps: tuple[int | None, ...], current: int, projects: int
) -> None:
    assert state(*steps).ledger_projects(current) == projects


def test_the_merge_runs_the_ledgers_layout_within_the_schema_file() -> None:
    assert state(2, 2, 2, 2, 2).merge_runs(3) == 2
    assert state(4, 4, 3, 3, 3).merge_runs(3) == 3
    assert state(None, None, None, None, None).merge_runs(3) == 3


@pytest.mark.parametrize(
    ("steps", "due"),
    [
        ((3, 3, 3, 3, 2), True),
        ((3, 2, 3, 3, 2), False),  # the ledger still projects 2: rows may still arrive rescued
        ((3, 3, 3, 3, 3), False),  # done
        ((3, 3, 3, 3, None), False),  # a base that never recorded one: nothing to fill
    ],
)
def test_phase_three_is_due_once_the_ledger_projects_the_version(
    steps: tuple[int | None, ...], due: bool
) -> None:
    assert state(*steps).fill_due(3) is due
