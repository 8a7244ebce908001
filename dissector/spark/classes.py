"""The driver JVM's class archive (AppCDS: the JDK's dynamic archive). Spark loads and verifies thousands of
classes as it starts and plans its first queries; a JVM that maps them from an archive an earlier run made
starts Spark and runs its first queries seconds sooner (docs/SPARK.md has the figures).

The first run's JVM writes the archive as it exits, which ``pipeline`` waits for (``ClassArchive.finish``). A
half-written archive crashes the next JVM that maps it (a SIGBUS, even with ``-XX:+VerifySharedSpaces``:
tried), so a JVM writes a file of its own and only one that exited cleanly has its file put in place; a lock
keeps two first runs from both writing; an archive whose size is not the one it was put in place with is
removed; and a JVM that cannot start with the archive anyway is started again without it, the archive
removed (``job.start``)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

#: A lock older than this is a run that ended without cleaning up (killed): taken over.
STALE_LOCK_S = 900

#: Seconds ``finish`` waits for the JVM to write the archive and exit.
WRITE_TIMEOUT_S = 180

#: The JVM's notes about its archive would be printed on our standard output.
QUIET = "-Xlog:cds*=off"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pulsar-dissect"


def _java() -> str | None:
    """The java that Spark will start (as spark-class finds it)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


class ClassArchive:
    """The JVM options that use the archive, or make it (``options``: empty when neither can be done), and
    ``finish`` once the session stopped."""

    def __init__(self, java_options: str):
        self.options = ""
        self.path: Path | None = None
        self._writing: Path | None = None
        self._lock: Path | None = None
        java = _java()
        if java is None:
            return
        import pyspark

        # an archive holds one JVM build's view of one classpath: a new Spark, java or set of options is a new
        # one, and so is the same Spark installed elsewhere (another virtual environment): the JVM checks the
        # classpath's jars against the archive's and, when they differ, starts without it, silently
        spark_home = os.path.dirname(os.path.realpath(pyspark.__file__))
        key = f"{pyspark.__version__}\0{spark_home}\0{java}\0{os.stat(java).st_mtime_ns}\0{java_options}"
        self.path = cache_dir() / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"
        if self._whole():
            self.options = f"-XX:SharedArchiveFile={self.path} {QUIET}"
            return
        lock = self.path.with_suffix(".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
                lock.unlink(missing_ok=True)
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:
            return  # another run is writing it, or the cache cannot be written: this run goes without
        self._lock = lock
        self._writing = self.path.with_name(f"{self.path.stem}.{os.getpid()}.writing")
        self.options = f"-XX:ArchiveClassesAtExit={self._writing} {QUIET}"

    def _whole(self) -> bool:
        """Whether the archive is there, as large as when it was put in place (a file cut short would crash the
        JVM that maps it; one that is not is removed)."""
        size = self.path.with_suffix(".size")
        try:
            if self.path.stat().st_size == int(size.read_text()):
                return True
        except (OSError, ValueError):
            pass
        self.path.unlink(missing_ok=True)
        size.unlink(missing_ok=True)
        return False

    @property
    def used(self) -> bool:
        """Whether the JVM maps an existing archive (rather than writing one)."""
        return self.options.startswith("-XX:SharedArchiveFile=")

    def discard(self) -> None:
        """The archive could not be used (the JVM did not start with it): removed, and not used again."""
        if self.path is not None and self.used:
            self.path.unlink(missing_ok=True)
            self.path.with_suffix(".size").unlink(missing_ok=True)
        self.options = ""

    def finish(self) -> None:
        """After the session stopped. When this run's JVM writes the archive: told to exit (its standard input
        closed, as pyspark ends it) and waited for; its file put in place only when it exited cleanly."""
        if self._writing is None:
            return
        writing, lock, self._writing = self._writing, self._lock, None
        try:
            from pyspark import SparkContext

            jvm = getattr(SparkContext._gateway, "proc", None)
            if jvm is not None and jvm.stdin is not None:
                jvm.stdin.close()
                if jvm.wait(WRITE_TIMEOUT_S) == 0 and writing.exists() and writing.stat().st_size > 0:
                    self.path.with_suffix(".size").write_text(str(writing.stat().st_size))
                    os.replace(writing, self.path)
        except (OSError, subprocess.TimeoutExpired):
            pass  # no archive this time; the next run tries again
        finally:
            writing.unlink(missing_ok=True)
            if lock is not None:
                lock.unlink(missing_ok=True)
