"""The Python workers' daemon (``spark.python.daemon.module``, set by ``job.start``): pyspark's own, started
after one change to where pyspark is imported from.

Spark puts its ``pyspark.zip`` first on the workers' ``PYTHONPATH`` and sets ``PYTHONDONTWRITEBYTECODE``: every
Python worker daemon compiles pyspark from the zip's sources (0.73-0.77 s to import ``pyspark.daemon`` and
``pyspark.worker`` so, 0.15-0.17 s from the installed package, measured on the benchmark machine), and that
start is part of the first job of every run. When the zip is the installed pyspark's own copy (pip's pyspark:
``SPARK_HOME`` is the package, the zip under its ``python/lib``), the two are one release: the zip goes to the
end of the path and pyspark is imported from the package. Any other Spark (a cluster's own install) keeps its
path as it is."""
from __future__ import annotations

import os
import sys


def _installed_copy(entry: str, path: list[str]) -> bool:
    """Whether ``entry`` (a ``sys.path`` entry) is the ``pyspark.zip`` of a pyspark package found on ``path``."""
    if os.path.basename(entry) != "pyspark.zip":
        return False
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))  # …/pyspark/python/lib
    if os.path.basename(package) != "pyspark" or not os.path.isfile(os.path.join(package, "__init__.py")):
        return False
    where = os.path.dirname(package)
    return any(os.path.abspath(other) == where for other in path if other and other != entry)


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` with the installed pyspark's own zip moved last (``_installed_copy``); else as it is."""
    copies = [entry for entry in path if _installed_copy(entry, path)]
    return [entry for entry in path if entry not in copies] + copies


if __name__ == "__main__":
    sys.path[:] = prefer_installed_pyspark(sys.path)
    from pyspark.daemon import manager

    manager()
