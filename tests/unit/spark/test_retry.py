"""Which failures a step is redone after, how long it waits, and when it gives up."""

from __future__ import annotations

import pytest

from icetide.errors import CatalogUnavailableError, CommitConflictError, IcetideError, StageError
from icetide.spark.retry import DEFAULT_POLICY, RetryPolicy, classify, next_pause, retry_step


def test_a_30_second_outage_is_waited_out_by_the_default_policy() -> None:
    policy = RetryPolicy()
    pauses, waited = [], 0.0
    while waited < 30:  # the catalog is back 30 s after the first failure
        pause = next_pause(policy, "outage", len(pauses) + 1, waited)
        assert pause is not None, pauses
        pauses.append(pause)
        waited += pause
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_a_long_outage_pauses_at_the_ceiling_and_gives_up_at_the_budget() -> None:
    policy = RetryPolicy(outage_first=1, outage_ceiling=30, outage_budget=300)
    pauses, waited = [], 0.0
    while (pause := next_pause(policy, "outage", len(pauses) + 1, waited)) is not None:
        pauses.append(pause)
        waited += pause
    assert pauses[:6] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert set(pauses[5:]) == {30.0}
    assert sum(pauses) <= 300 < sum(pauses) + 30


def test_conflicts_are_retried_soon_and_a_bounded_number_of_times() -> None:
    policy = RetryPolicy(conflict_attempts=3, conflict_pause=0.5)
    assert [next_pause(policy, "conflict", n, 0) for n in (1, 2, 3)] == [0.5, 1.0, None]


def test_permanent_failures_are_never_retried() -> None:
    assert next_pause(RetryPolicy(), "permanent", 1, 0) is None
    assert classify(StageError("disk full")) == "permanent"


class Flaky:
    """A step failing with ``errors`` in turn, then returning ``done``."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def run(step: Flaky, policy: RetryPolicy = DEFAULT_POLICY) -> tuple[str, list[float], list[str]]:
    pauses: list[float] = []
    told: list[str] = []

    def on_retry(failures: int, exc: IcetideError, seconds: float) -> None:
        told.append(f"{failures} {classify(exc)} {seconds}")

    return (
        retry_step("merge of t", step, policy=policy, on_retry=on_retry, pause=pauses.append),
        pauses,
        told,
    )


def test_an_outage_then_a_conflict_are_each_retried_and_reported_once_per_attempt() -> None:
    down = CatalogUnavailableError("catalog not reachable")
    step = Flaky(down, down, down, CommitConflictError("lost"), down)
    result, pauses, told = run(step)
    assert result == "done" and step.calls == 6
    # The conflict starts its own count, and the outage after it starts over.
    assert pauses == [1.0, 2.0, 4.0, 0.2, 1.0]
    assert told == [
        "1 outage 1.0",
        "2 outage 2.0",
        "3 outage 4.0",
        "1 conflict 0.2",
        "1 outage 1.0",
    ]


def test_an_outage_past_the_budget_is_raised_as_it_is() -> None:
    down = CatalogUnavailableError("catalog not reachable")
    step = Flaky(*[down] * 10)
    with pytest.raises(CatalogUnavailableError):
        run(step, RetryPolicy(outage_first=1, outage_ceiling=4, outage_budget=10))
    assert step.calls == 4  # pauses 1, 2, 4; a fourth of 4 would pass the budget


def test_a_permanent_failure_is_raised_at_once() -> None:
    step = Flaky(StageError("bad"))
    with pytest.raises(StageError):
        run(step)
    assert step.calls == 1


def test_jvm_failures_are_classified_after_translation() -> None:
    from py4j.protocol import Py4JError

    refused = Py4JError(
        "An error occurred while calling o7.sql.\n"
        ": org.apache.iceberg.exceptions.RESTException: Error occurred while processing POST\n"
        "Caused by: org.apache.hc.client5.http.HttpHostConnectException: Connect to "
        "http://127.0.0.1:8181 failed: Connection refused"
    )
    result, pauses, _ = run(Flaky(refused))
    assert result == "done" and pauses == [1.0]


def test_a_stop_during_the_pause_ends_the_retries() -> None:
    from icetide.stopping import Stop, Stopped

    stop = Stop()
    step = Flaky(*[CatalogUnavailableError("down")] * 3)

    def pause(seconds: float) -> None:
        stop.request("SIGTERM")  # arrives during the first pause
        stop.wait(seconds)

    with pytest.raises(Stopped):
        retry_step("merge of t", step, pause=pause)
    assert step.calls == 1
