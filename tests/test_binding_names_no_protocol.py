"""The PyO3 binding (``crates/python/src/``) names no protocol (issue 30): it reaches each through the engine's
registry by name and the ``Protocol`` and ``DecodedBody`` traits, so that a protocol compiled into the engine
needs no change to the binding.

Read in the binding's code (comments and string literals left out): no protocol's folder name
(``crates/engine/src/protocols/<name>/``, as in ``engine::protocols::pulsar``) and no type, constant or static
such a folder defines (``PayloadSection``, ``TubeBody``, ``METHODS``) unless the engine outside the folder, or
the binding itself, defines one of that name too (the statistics' own ``COMMAND_KEYS``, a variant ``Core``).
Needs no compiled extension: it reads files only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINDING = ROOT / "crates" / "python" / "src"
PROTOCOLS = ROOT / "crates" / "engine" / "src" / "protocols"

# Files of the binding that still name a protocol, and why (each must still do so: a stale entry fails). None
# now: the message journeys are reached through the registry (`Protocol::journeys`, `engine::journeys`).
NOT_YET: dict[str, str] = {}

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'b?r(#*)".*?"\1|b?"(?:[^"\\]|\\.)*"|b?\'(?:[^\'\\]|\\.)\'', re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ITEM = re.compile(r"\bpub(?:\([a-z]+\))?\s+(?:struct|enum|trait|type|const|static)\s+([A-Za-z_][A-Za-z0-9_]*)")
# what a file defines itself: an item of any visibility, or an enum variant (a capitalised name opening a line)
_OWN = re.compile(r"\b(?:struct|enum|trait|type|const|static|fn)\s+([A-Za-z_][A-Za-z0-9_]*)|^\s*([A-Z]\w*)\s*[({,=]", re.M)


def code_identifiers(source: str) -> set[str]:
    """The identifiers of Rust code, its comments and string and char literals left out."""
    return set(_IDENT.findall(_STRING.sub(" ", _COMMENT.sub(" ", source))))


def public_items(files) -> set[str]:
    return {name for f in files for name in _ITEM.findall(_COMMENT.sub(" ", f.read_text(encoding="utf-8")))}


def own_names(source: str) -> set[str]:
    """The names a Rust file defines itself (items and enum variants)."""
    return {a or b for a, b in _OWN.findall(_STRING.sub(" ", _COMMENT.sub(" ", source)))}


def protocol_names() -> dict[str, set[str]]:
    """Each protocol's folder name and what it must not be named by: the folder's name and its public types,
    constants and statics that no engine file outside the folder defines too."""
    engine = sorted(PROTOCOLS.parent.rglob("*.rs"))
    out = {}
    for folder in sorted(p for p in PROTOCOLS.iterdir() if p.is_dir()):
        inside = [f for f in engine if folder in f.parents]
        outside = [f for f in engine if folder not in f.parents]
        out[folder.name] = {folder.name} | (public_items(inside) - public_items(outside))
    return out


def named_protocols(source: str, names: dict[str, set[str]], own: set[str] = frozenset()) -> dict[str, set[str]]:
    """The protocols ``source`` names, with the names it uses of each (those it, or ``own``, defines left out)."""
    idents = code_identifiers(source) - own_names(source) - own
    return {protocol: idents & items for protocol, items in names.items() if idents & items}


def test_the_check_finds_a_protocol_named_in_code_only():
    names = {"pulsar": {"pulsar", "PayloadSection"}, "tubemq": {"tubemq", "TubeBody"}}
    code = 'use engine::protocols::pulsar::payload::PayloadSection;\nlet body: TubeBody = x; // pulsar\n'
    assert named_protocols(code, names) == {"pulsar": {"pulsar", "PayloadSection"}, "tubemq": {"TubeBody"}}
    quiet = '// PayloadSection, TubeBody\nlet s = "pulsar"; /* tubemq */ let c = b\'x\';\n'
    assert named_protocols(quiet, names) == {}
    own = "enum Decoded {\n    PayloadSection(Box<Body>),\n}\nstruct TubeBody;\n"
    assert named_protocols(own, names) == {}


def test_the_protocols_folders_are_read():
    names = protocol_names()
    # a glob gone wrong must not pass on nothing
    assert {"pulsar", "tubemq"} <= set(names)
    assert {"PayloadSection", "Checksum"} <= names["pulsar"] and {"TubeBody", "METHODS"} <= names["tubemq"]


def test_the_binding_names_no_protocol():
    names = protocol_names()
    files = sorted(BINDING.glob("*.rs"))
    assert len(files) >= 10, files
    sources = {f.name: f.read_text(encoding="utf-8") for f in files}
    own = set().union(*(own_names(source) for source in sources.values()))
    found = {name: named_protocols(source, names, own) for name, source in sources.items()}
    naming = {name: used for name, used in found.items() if used and name not in NOT_YET}
    assert not naming, f"the binding names protocols: {naming}"
    stale = [name for name in NOT_YET if not found.get(name)]
    assert not stale, f"these files name no protocol any more: drop them from NOT_YET: {stale}"
