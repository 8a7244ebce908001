"""Templates in pieces (``problems.Pieces``) and format strings are rendered by Python and by the compiled core, which makes a
finding's text without asking Python: the two must agree on every registered one, whatever the parameters
(present, None, zero, missing, text with braces and non-ASCII, values the core leaves to Python)."""
from __future__ import annotations

import random

import pytest

import dissector.protocols  # noqa: F401  (registers every protocol's ids)
from dissector.problems import REGISTRY, Pieces, message, severity, severity_and_message

pulsar_dissect_core = pytest.importorskip("dissector._core")

VALUES = [None, 0, 1, 7, -3, 2**63 + 5, "", "t{o}p", "naïve ☃", True, False, 1.5, [1, 2]]


def _registered_pieces():
    """The ids whose template the core renders: in pieces, or a format string (one piece)."""
    return sorted(pid for pid, spec in REGISTRY.items() if isinstance(spec.template, (str, Pieces)))


def _pieces(pid):
    template = REGISTRY[pid].template
    return template.pieces if isinstance(template, Pieces) else (("always", "", template),)


def test_message_redelivered_is_in_pieces():
    # the finding made per message delivered again: the one this exists for
    assert isinstance(REGISTRY["message.redelivered"].template, Pieces)
    assert "message.redelivered" in _registered_pieces()


@pytest.mark.parametrize("pid", _registered_pieces())
def test_the_core_renders_as_python(pid):
    keys = sorted({key for _, key, _ in _pieces(pid) if key}
                  | {name for _, _, text in _pieces(pid) for name in _placeholders(text)})
    checked = 0
    pick = random.Random(7)
    for values in [[pick.choice(VALUES) for _ in keys] for _ in range(3000)]:
        for leave_out in (None, *keys):
            params = {k: v for k, v in zip(keys, values) if k != leave_out}
            core = pulsar_dissect_core.finding_text(severity_and_message, pid, params)
            assert core == (severity(pid), message(pid, params)), params
            checked += 1
    assert checked >= 3000


def _placeholders(text):
    import string
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def test_a_plain_function_still_gives_every_text():
    # a caller that passes a function (no .pieces): Python makes the text, as before
    params = {"ledger": 1, "entry": 2, "first_frame": 3, "delivery": 2}
    core = pulsar_dissect_core.finding_text(lambda pid, p: (severity(pid), message(pid, p)), "message.redelivered", params)
    assert core == ("note", message("message.redelivered", params))


def test_pieces_are_checked_when_declared():
    with pytest.raises(ValueError):
        Pieces(("sometimes", "key", "text"))
    assert Pieces("a {x}", ("present", "y", " b {y}"), ("truthy", "z", " c"))({"x": 1, "y": 0, "z": 0}) == "a 1 b 0"
