"""`pipeline`'s wait for a cluster's executors (`dissector/spark/executors.py`): a job that waits too long with
none registered is cancelled, with a word on the way; a job that has one, or no job, is left alone. Readings
and time are given, so no Spark is needed here (tests/test_spark_pipeline.py runs it against a master with no
worker)."""
from __future__ import annotations

import pytest

from dissector.spark.executors import WARN_S, ExecutorWatch


class FakeContext:
    def __init__(self):
        self.cancelled = 0

    def cancelAllJobs(self):  # noqa: N802 (Spark's name)
        self.cancelled += 1


class Readings:
    """The executors registered and whether a job runs, as a test sets them, and the clock."""

    def __init__(self):
        self.executors, self.running, self.now = 0, True, 0.0

    def watch(self, timeout: float, warnings: list) -> tuple[ExecutorWatch, FakeContext]:
        context = FakeContext()
        return ExecutorWatch(context, timeout, warnings.append, executors=lambda: self.executors,
                             running=lambda: self.running, clock=lambda: self.now), context

    def advance(self, watch: ExecutorWatch, seconds: float, step: float = 1.0) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now = min(end, self.now + step)
            watch.poll()


@pytest.mark.parametrize("timeout, warned_at", [(100, WARN_S), (10, 5)])  # a short timeout: warned halfway
def test_a_job_with_no_executor_is_warned_of_then_cancelled(timeout, warned_at):
    readings, warnings = Readings(), []
    watch, context = readings.watch(timeout, warnings)
    watch.poll()  # the wait begins
    readings.advance(watch, warned_at - 1)
    assert warnings == [] and watch.waited() == warned_at - 1
    readings.advance(watch, 1)
    assert warnings == [warned_at]  # once
    readings.advance(watch, timeout - warned_at - 1)
    assert (context.cancelled, watch.timed_out, len(warnings)) == (0, False, 1)
    readings.advance(watch, 1)
    assert context.cancelled == 1 and watch.timed_out


def test_an_executor_ends_the_wait_and_no_job_is_no_wait():
    readings, warnings = Readings(), []
    watch, context = readings.watch(60, warnings)
    watch.poll()
    readings.advance(watch, 40)
    assert len(warnings) == 1
    readings.executors = 2  # they came: the wait is over
    readings.advance(watch, 100)
    assert watch.waited() is None and context.cancelled == 0
    readings.executors = 0  # all lost mid-job: a new wait, said again
    readings.advance(watch, 59)
    assert len(warnings) == 2 and context.cancelled == 0
    readings.running = False  # the driver's own work between jobs: nothing waits for an executor
    readings.advance(watch, 1000)
    assert watch.waited() is None and context.cancelled == 0 and not watch.timed_out


def test_no_timeout_waits_as_spark_does_and_says_so():
    readings, warnings = Readings(), []
    watch, context = readings.watch(0, warnings)
    watch.poll()
    readings.advance(watch, 10_000, step=10)
    assert warnings == [WARN_S] and context.cancelled == 0 and not watch.timed_out


@pytest.mark.parametrize("broken", ["executors", "running"])
def test_a_failed_reading_is_no_reading(broken):
    readings, warnings = Readings(), []
    watch, context = readings.watch(5, warnings)

    def fails():
        raise RuntimeError("py4j: the gateway closed")

    setattr(watch, f"_{broken}", fails)
    readings.advance(watch, 50)
    assert warnings == [] and context.cancelled == 0 and watch.waited() is None
