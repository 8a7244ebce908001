"""docs/ARCHITECTURE.md names only paths that exist.

A repository path is a token that starts with one of the tree's top folders and ends in a file extension or a
slash (``crates/engine/src/engine.rs``, ``dissector/output/``): the form the document uses. Needs no compiled
extension: it reads files only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"

TOP = ("crates", "dissector", "cli", "tests", "docs", "tools", "fuzz", "proto", "benchmarks", "captures")
# a run of path characters starting with a top folder, not inside a longer token (``../proto``, ``a/tests/``)
_TOKEN = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*)" % "|".join(TOP))
# what counts as a path: ends in ``/`` or in ``.ext``
_PATH = re.compile(r".*(?:/|\.[A-Za-z0-9]+)$")


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names, in order, each once."""
    found: dict[str, None] = {}
    for match in _TOKEN.finditer(text):
        token = match.group(1).rstrip(".,:;")  # sentence punctuation is not part of the path
        if _PATH.fullmatch(token):
            found[token] = None
    return list(found)


def test_the_parser_finds_paths_and_only_paths():
    text = (
        "see `crates/engine/src/engine.rs`, crates/python/src/ and docs/chunks.md. "
        "not ../proto/pulsar/ nor x/tests/a.py nor dissector._core nor cli/main"
    )
    assert named_paths(text) == ["crates/engine/src/engine.rs", "crates/python/src/", "docs/chunks.md"]


def test_every_path_the_document_names_exists():
    paths = named_paths(DOC.read_text(encoding="utf-8"))
    # a regex gone wrong must not pass on nothing
    assert len(paths) >= 30, f"only {len(paths)} paths found in {DOC.name}: {paths}"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"{DOC.name} names paths that do not exist: {missing}"
