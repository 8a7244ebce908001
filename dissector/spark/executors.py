"""How long a job on a cluster waits for an executor. Spark waits for one without end: a standalone master with
no worker, or none with the cores and memory asked (``spark.executor.cores``, ``spark.executor.memory``);
executors that exit as they start (a JVM option the workers' Java refuses: a standalone master starts them again
and again, each leaving its directory on the worker); a queue that grants nothing. Spark's one warning about it
is below the level ``pipeline`` shows without ``-v``, so the command waited in silence, in a CI job until its
own time limit.

``ExecutorWatch`` (a thread; local mode has none: its executor is the driver) reads how many executors are
registered while a Spark job runs. A job that has waited ``timeout`` seconds with none has its jobs cancelled
(``timed_out`` says so, for the command to say why it failed); ``warn`` is called once, halfway there or after
``WARN_S``, whichever is sooner, so that a log says what the run is waiting for before it ends."""
from __future__ import annotations

import threading
import time
from typing import Callable

#: Seconds of waiting with no executor before the first word about it (sooner when the timeout is shorter).
WARN_S = 30.0

#: Seconds between two readings of the executors registered.
POLL_S = 1.0


def executors_registered(context) -> int:
    """The executors registered with ``context``'s driver now (Spark lists the driver among them)."""
    return max(0, len(context._jsc.sc().statusTracker().getExecutorInfos()) - 1)


def jobs_running(context) -> bool:
    return len(context.statusTracker().getActiveJobsIds()) > 0


class ExecutorWatch(threading.Thread):
    """Cancels ``context``'s jobs once one has waited ``timeout`` seconds (0: never) with no executor
    registered; calls ``warn(seconds waited)`` once per such wait, before that (``WARN_S``)."""

    def __init__(self, context, timeout: float, warn: Callable[[float], None], *,
                 executors: Callable[[], int] | None = None, running: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(name="executor-watch", daemon=True)
        self.context, self.timeout, self.warn, self.clock = context, timeout, warn, clock
        self._executors = executors or (lambda: executors_registered(context))
        self._running = running or (lambda: jobs_running(context))
        self.waiting_since: float | None = None  # a job has waited with no executor since then
        self.warned = False
        self.timed_out = False
        self._done = threading.Event()

    @property
    def warn_after(self) -> float:
        return min(WARN_S, self.timeout / 2) if self.timeout > 0 else WARN_S

    def waited(self) -> float | None:
        """Seconds the running job has waited with no executor (None: it has one, or none runs)."""
        since = self.waiting_since
        return None if since is None else self.clock() - since

    def poll(self) -> None:
        try:
            waiting = self._running() and self._executors() == 0
        except Exception:  # Spark stopping, a py4j call cut short: no reading this time
            return
        now = self.clock()
        if not waiting:
            self.waiting_since, self.warned = None, False
            return
        if self.waiting_since is None:
            self.waiting_since = now
        waited = now - self.waiting_since
        if not self.warned and waited >= self.warn_after:
            self.warned = True
            self.warn(waited)
        if self.timeout > 0 and waited >= self.timeout:
            self.timed_out = True
            self._done.set()
            try:
                self.context.cancelAllJobs()
            except Exception:
                pass  # the context stopped meanwhile: the job ends anyway

    def run(self) -> None:
        while not self._done.wait(POLL_S):
            self.poll()

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(5)
