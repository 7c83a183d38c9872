"""The one pass's class counts (icetide/ledger/one_pass.py): what each task counts of its
Arrow batches and what the driver adds up must be what the two passes' Spark aggregate
counts, dead-letter samples included."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from icetide.ledger.one_pass import SAMPLES, ClassCount, classes_of, combined, task_answer


def classified(
    rows: Sequence[tuple[str | None, str, str | None, str | None]], first: int
) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "message_id": [f"m{first + i}" for i in range(len(rows))],
            "table": [r[0] for r in rows],
            "status": [r[1] for r in rows],
            "reason": [r[2] for r in rows],
            "schema_key": [r[3] for r in rows],
        }
    )


def test_tasks_counts_add_up_and_keep_the_first_dead_letters_in_order() -> None:
    dead = ("t", "dead", "type_mismatch", None)
    rows = [("t", "row", "", "k1"), dead, ("t", "row", "", "k2"), (None, "dead", "x", None)]
    tasks = [classes_of(classified(rows * 7, 100 * n)) for n in range(3)]
    whole = combined(tasks)
    assert whole[("t", "row", "", "k1")].n == whole[("t", "row", "", "k2")].n == 21
    assert whole[dead].n == 21 and whole[(None, "dead", "x", None)].n == 21
    # The first task's seven, then the second's first three: ten, in arrival order.
    assert whole[dead].samples == [f"m{i}" for i in range(1, 28, 4)] + ["m101", "m105", "m109"]
    assert len(whole[dead].samples) == SAMPLES
    assert whole[("t", "row", "", "k1")].samples == []  # a row's id is never a sample
    # The same through the tasks' answers, as the driver reads them.
    answers = []
    for task in tasks:
        answers += [{"table": "t", "classes": None}]
        answers += [{"table": None, "classes": _row(task)}]
    files, counts, why = task_answer(answers)
    assert why is None and len(files) == 3
    assert {c[:4]: c for c in counts} == whole


def test_one_abandoned_task_abandons_the_batch() -> None:
    done = {"table": None, "classes": _row(classes_of(classified([("t", "row", "", None)], 0)))}
    abandoned = {"table": None, "classes": '{"classes": [], "why": "a schema change of t"}'}
    assert task_answer([done, abandoned, done])[2] == "a schema change of t"


def _row(classes: dict[tuple[object, ...], ClassCount]) -> str:
    import json

    return json.dumps({"classes": [list(c) for c in classes.values()], "why": None})
