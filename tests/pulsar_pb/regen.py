"""Regenerate (or check) the committed protobuf modules in ``tests/pulsar_pb`` (the tests' oracle).

    python tests/pulsar_pb/regen.py           # rewrite PulsarApi_pb2.py, PulsarMarkers_pb2.py
    python tests/pulsar_pb/regen.py --check   # exit 1, naming the stale files, if they differ

The modules are produced by ``grpc_tools.protoc`` from ``proto/pulsar/*.proto`` and
committed, so the tests need only ``protobuf``: the dissector itself decodes with its compiled core and
does not import them.  protoc emits
cross-file imports as top-level modules (``import PulsarApi_pb2``); they are
rewritten to package-relative imports so ``from pulsar_pb import ...`` works (tests/ is on the path).
The check regenerates into a temporary directory and compares bytes; the output
embeds the protoc version, so it is exact only for the same grpcio-tools.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PB_DIR = Path(__file__).resolve().parent
REPO_ROOT = PB_DIR.parents[1]
PROTO_DIR = REPO_ROOT / "proto" / "pulsar"
PROTO_FILES = ("PulsarApi.proto", "PulsarMarkers.proto")
GENERATED = tuple(name.replace(".proto", "_pb2.py") for name in PROTO_FILES)

_MODULES = "|".join(re.escape(Path(name).stem) for name in PROTO_FILES)
# protoc writes e.g. "import PulsarApi_pb2 as PulsarApi__pb2" for a cross-file import.
_TOP_LEVEL_IMPORT = re.compile(rf"^import ((?:{_MODULES})_pb2) as (\w+)$", re.MULTILINE)
_VERSION_LINE = re.compile(rb"^# Protobuf Python Version: (\S+)$", re.MULTILINE)


class RegenError(RuntimeError):
    """protoc is unavailable or failed."""


def _fix_imports(source: str) -> str:
    return _TOP_LEVEL_IMPORT.sub(r"from . import \1 as \2", source)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on the .proto files into ``out_dir``; return the written modules."""
    try:
        import grpc_tools  # noqa: F401  (only to give a clear error)
    except ImportError as exc:
        raise RegenError(
            "grpc_tools is not installed; install grpcio-tools to regenerate"
        ) from exc
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        *(str(PROTO_DIR / name) for name in PROTO_FILES),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RegenError(f"protoc failed ({proc.returncode}):\n{proc.stderr.strip()}")
    written = []
    for name in GENERATED:
        path = out_dir / name
        if not path.is_file():
            raise RegenError(f"protoc did not produce {name}")
        text = path.read_text(encoding="utf-8")
        fixed = _fix_imports(text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")
        written.append(path)
    return written


def _version(data: bytes) -> str | None:
    match = _VERSION_LINE.search(data)
    return match.group(1).decode() if match else None


def stale_modules(target_dir: Path = PB_DIR) -> list[str]:
    """Names of committed modules that differ from a fresh generation (or are missing)."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="pulsar-pb-") as tmp:
        for fresh in generate(Path(tmp)):
            committed = target_dir / fresh.name
            if not committed.is_file() or committed.read_bytes() != fresh.read_bytes():
                stale.append(fresh.name)
    return stale


def describe_stale(stale: list[str], target_dir: Path = PB_DIR) -> str:
    lines = [f"stale generated modules in {target_dir}: {', '.join(stale)}"]
    with tempfile.TemporaryDirectory(prefix="pulsar-pb-") as tmp:
        fresh_dir = Path(tmp)
        generate(fresh_dir)
        for name in stale:
            committed = target_dir / name
            if not committed.is_file():
                lines.append(f"  {name}: missing")
                continue
            old, new = _version(committed.read_bytes()), _version((fresh_dir / name).read_bytes())
            if old != new:
                lines.append(f"  {name}: committed by protoc for protobuf {old}, this protoc is {new}")
    lines.append("run: python tests/pulsar_pb/regen.py")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/pulsar_pb/regen.py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the committed modules are stale")
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_modules()
            if stale:
                print(describe_stale(stale), file=sys.stderr)
                return 1
            print(f"up to date: {', '.join(GENERATED)}")
            return 0
        for path in generate(PB_DIR):
            print(f"wrote {path.relative_to(REPO_ROOT)}")
        return 0
    except RegenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
