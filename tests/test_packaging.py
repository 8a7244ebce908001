"""The built wheel (one package: Python and the compiled engine together) holds every package of the source tree,
the extension module beside its type stub, and installs no top-level module but dissector."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_every_package_and_only_dissector_at_the_top(tmp_path):
    # built as a release is (maturin build: the manylinux check, abi3), in the dev profile here (what is in the
    # wheel does not depend on it), minutes faster than the release build with its link-time optimisation
    subprocess.run([sys.executable, "-m", "maturin", "build", "--profile", "dev", "--quiet", "-o", str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)
    (wheel,) = tmp_path.glob("*.whl")
    assert "-abi3-" in wheel.name and "manylinux" in wheel.name  # one wheel for every CPython from 3.11
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"dissector"}
    packaged = {str(Path(n).parent) for n in names if n.endswith("__init__.py")}
    in_tree = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "dissector").rglob("__init__.py")}
    in_tree.add("dissector/cli")  # cli/ is installed as dissector.cli
    assert in_tree <= packaged
    entry_points = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("entry_points.txt"))
    declared = {line.replace(" ", "") for line in entry_points.splitlines()}
    assert "pulsar-dissect=dissector.cli.main:main" in declared
    assert "pulsar_dissect=dissector.pytest_plugin" in declared
    assert "dissector/_core.pyi" in names
    assert [n for n in names if n.startswith("dissector/_core.") and n.endswith(".so")]


def test_the_dissector_runs_without_the_protobuf_runtime():
    """One decoder: the compiled core decodes; the protobuf package is the tests' oracle only."""
    code = ("import sys\n"
            "sys.modules['google'] = None\n"  # any import of google.protobuf fails
            "from dissector.cli.main import main\n"
            "sys.argv = ['pulsar-dissect', sys.argv[1], '--json']\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "captures" / "03_compression_zlib.pcap")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    census = json.loads((ROOT / "captures" / "03_compression_zlib.json").read_text())["derived_frame_census"]
    frames = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"index"')]
    assert len(frames) == sum(census["totals_by_direction_and_type"].values())
    assert all(not f["problems"] for f in frames)
    runtime = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[0]
    assert "protobuf" not in runtime
