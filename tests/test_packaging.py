"""The built wheel holds every package of the source tree, and installs no top-level module but dissector."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_every_package_and_only_dissector_at_the_top(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"dissector"}
    packaged = {str(Path(n).parent) for n in names if n.endswith("__init__.py")}
    in_tree = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "dissector").rglob("__init__.py")}
    in_tree.add("dissector/cli")  # cli/ is installed as dissector.cli
    assert in_tree <= packaged
    entry_points = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "pulsar-dissect = dissector.cli.main:main" in entry_points
    assert "dissector.pytest_plugin" in entry_points
