"""The README is a front door, and the documentation says only what is there.

- Every repository path the README, ``docs/**/*.md`` and every other markdown file of the tree name exists:
  a path in backquotes (``tests/test_colour.py``, ``captures/...``) counts from the repository's root, a markdown
  link to a local file (``[check](docs/commands/check.md#rules)``) from the document's folder, and its anchor
  must be a heading of the target.
- Every option a command's ``--help`` prints is in the OPTIONS table of its page ``docs/commands/<command>.md``,
  and that table names no option the command lacks; every command has its page and a row in the README.
- The README has at most 300 lines.
- Every example of the README and the command pages (``$ pulsar-dissect ...`` in a fenced block) still prints
  the lines shown under it.

The help is read from the command line run in this tree (``python -m dissector.cli.main``), so it needs the
compiled extension only for what the CLI imports at start-up.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from test_architecture_doc import named_paths

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COMMANDS_DIR = ROOT / "docs" / "commands"
README_MAX_LINES = 300
# what the benchmarks make and .gitignore keeps out of the tree: named as where the scripts write them
GENERATED = ("benchmarks/out/",)


def documents() -> list[Path]:
    """Every markdown file of the repository: the README, docs/, and the notes beside the code and captures.

    Build products, virtualenvs and hidden folders are not walked (``target*``, ``.venv``, ``benchmarks/out``)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        here = Path(folder)
        skipped = (".", "target", "node_modules", "__pycache__")
        subfolders[:] = sorted(
            d for d in subfolders if not d.startswith(skipped) and here / d != ROOT / "benchmarks" / "out"
        )
        found += [here / f for f in sorted(files) if f.endswith(".md")]
    first = [README, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "RESULTS.md"]
    return first + sorted(p for p in found if p not in first)


# ---- paths ----------------------------------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
# [text](target): not an image's, not inside a code span; target without spaces
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def backquoted_paths(text: str) -> list[str]:
    """The repository paths named in backquotes (code spans; fenced blocks are commands and output, not names)."""
    prose = _FENCE.sub("", text)
    found: dict[str, None] = {}
    for span in _CODE_SPAN.findall(prose):
        for path in named_paths(span):
            found[path] = None
    return list(found)


def local_links(text: str) -> list[str]:
    """The targets of markdown links that point into the repository (not a URL, not an anchor of this page)."""
    prose = _FENCE.sub("", _CODE_SPAN.sub("", text))
    return [t for t in _LINK.findall(prose) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a markdown file's headings: lower case, punctuation dropped, spaces as -."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", _FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def missing_paths(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    missing = [
        p for p in backquoted_paths(text) if not p.startswith(GENERATED) and not (ROOT / p).exists()
    ]
    for target in local_links(text):
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve()
        if not file.exists():
            missing.append(target)
        elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file.read_text(encoding="utf-8")):
            missing.append(target)
    # anchors within the page itself
    for anchor in re.findall(r"\]\(#([^)\s]+)\)", _CODE_SPAN.sub("", _FENCE.sub("", text))):
        if anchor not in heading_anchors(text):
            missing.append("#" + anchor)
    return missing


def test_the_parsers_find_paths_links_and_anchors():
    text = (
        "see `tests/test_colour.py` and `captures/x.pcap --port 1`, [a](docs/a.md#b), [u](https://x.org/a.md), "
        "![img](pic.png), [self](#here), and not captures/bare.pcap outside quotes\n"
        "```\n$ pulsar-dissect `captures/in_a_fence.pcap` [f](fence.md)\n```\n## Here (`it`)\n"
    )
    assert backquoted_paths(text) == ["tests/test_colour.py", "captures/x.pcap"]
    assert local_links(text) == ["docs/a.md#b"]
    assert heading_anchors(text) == {"here-it"}
    assert heading_anchors("## Memory (`bench_memory.py`)\n# Set-up and CI\n") == {
        "memory-bench_memorypy",
        "set-up-and-ci",
    }


def test_a_missing_path_or_anchor_is_reported(tmp_path, monkeypatch):
    """The check can fail: a document naming a file that is not there, a link to nowhere, a dead anchor."""
    doc = ROOT / "docs" / "commands" / "dissect.md"
    text = doc.read_text(encoding="utf-8")
    fake = tmp_path / "docs" / "commands" / "dissect.md"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        text + "\n`tests/test_hostile_nowhere.py` [gone](gone.md) [bad](problems.md#no-such-heading) [me](#nope)\n"
    )
    # relative links resolve from the fake's folder: give it the real pages beside it
    (fake.parent / "problems.md").write_text((COMMANDS_DIR / "problems.md").read_text(encoding="utf-8"))
    found = missing_paths(fake)
    assert "tests/test_hostile_nowhere.py" in found
    assert "gone.md" in found
    assert "problems.md#no-such-heading" in found
    assert "#nope" in found


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(doc):
    assert doc.exists(), f"{doc.relative_to(ROOT)} is missing"
    missing = missing_paths(doc)
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_documents_name_paths_at_all():
    """A regex gone wrong, or a walk that finds nothing, must not pass on nothing."""
    names = {str(p.relative_to(ROOT)) for p in documents()}
    assert {"README.md", "docs/ARCHITECTURE.md", "docs/commands/dissect.md", "captures/CORPUS.md"} <= names, names
    paths = [p for doc in documents() for p in backquoted_paths(doc.read_text(encoding="utf-8"))]
    links = [t for doc in documents() for t in local_links(doc.read_text(encoding="utf-8"))]
    assert len(paths) >= 40 and len(links) >= 40, (len(paths), len(links))


# ---- the README ---------------------------------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, at most {README_MAX_LINES}"


# ---- options --------------------------------------------------------------------------------------------------


@cache
def help_text(*args: str) -> str:
    env = dict(os.environ, COLUMNS="250", NO_COLOR="1", TERM="dumb")
    res = subprocess.run(
        [sys.executable, "-m", "dissector.cli.main", *args, "--help"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def _section(text: str, title: str) -> str:
    """The lines of a help section (``Options:``, ``Commands:``) up to the next blank line."""
    match = re.search(rf"^{title}:\n((?:[ \t].*\n?)+)", text, re.M)
    assert match, f"no {title}: section in\n{text}"
    return match.group(1)


def commands() -> list[str]:
    return re.findall(r"^\s{2}([a-z][\w-]*)\s", _section(help_text(), "Commands"), re.M)


_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_options(text: str) -> set[str]:
    """The options a ``--help`` prints: the names at the start of each entry of its Options section."""
    found = set()
    for line in _section(text, "Options").splitlines():
        head = re.match(r"\s{1,4}((?:--?[\w-]+)(?:,\s*--?[\w-]+)*)", line)
        if head:
            found.update(_OPTION.findall(head.group(1)))
    return found


def doc_options(text: str) -> set[str]:
    """The options a command's page documents: the first column of the table in its OPTIONS section."""
    match = re.search(r"^## OPTIONS\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "no ## OPTIONS section"
    found = set()
    for line in match.group(1).splitlines():
        if not line.startswith("|"):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]  # a pipe escaped as \| belongs to the cell
        for span in _CODE_SPAN.findall(first_cell):
            found.update(_OPTION.findall(span.split()[0]) if span.startswith("-") else ())
    return found


def test_the_option_parsers():
    help_ = "Usage: x\n\nOptions:\n  -r, --read <path>   the file\n  --json    JSON, not --fake\n\n"
    assert help_options(help_) == {"-r", "--read", "--json"}
    doc = "## OPTIONS\n\n| option | what |\n| --- | --- |\n| `-r FILE`, `--read FILE` | x `--not-this` |\n" \
          "| `--color auto\\|never` | y |\n\n## EXAMPLES\n| `--no` | z |\n"
    assert doc_options(doc) == {"-r", "--read", "--color"}


def test_the_cli_has_the_commands_the_docs_expect():
    found = commands()
    assert {"dissect", "stats", "follow", "problems", "check", "report", "live", "pipeline"} <= set(found), found


@pytest.mark.parametrize("command", ["dissect", "follow", "stats", "problems", "report", "check", "live", "pipeline"])
def test_every_option_of_a_command_is_in_its_page(command):
    assert command in commands()
    page = COMMANDS_DIR / f"{command}.md"
    assert page.exists(), f"{command} has no page {page.relative_to(ROOT)}"
    in_help = help_options(help_text(command))
    assert len(in_help) >= 5, in_help
    in_doc = doc_options(page.read_text(encoding="utf-8"))
    assert sorted(in_help - in_doc) == [], f"options of `{command} --help` missing from {page.name}"
    assert sorted(in_doc - in_help) == [], f"{page.name} documents options `{command}` does not have"


@pytest.mark.parametrize("command", ["dissect", "follow", "stats", "problems", "report", "check", "live", "pipeline"])
def test_a_page_is_in_man_page_order(command):
    """As tshark's manual: SYNOPSIS, DESCRIPTION, OPTIONS, then EXAMPLES (other sections may come between)."""
    headings = re.findall(r"^## (.+?)\s*$", (COMMANDS_DIR / f"{command}.md").read_text(encoding="utf-8"), re.M)
    wanted = ["SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES"]
    assert [h for h in headings if h in wanted] == wanted, headings
    assert headings[:3] == wanted[:3], headings


def test_every_command_has_a_page_and_a_row():
    readme = README.read_text(encoding="utf-8")
    index = (COMMANDS_DIR / "README.md").read_text(encoding="utf-8")
    for command in commands():
        assert (COMMANDS_DIR / f"{command}.md").exists(), command
        assert f"(docs/commands/{command}.md)" in readme, f"README's command table lacks {command}"
        assert f"({command}.md)" in index, f"docs/commands/README.md lacks {command}"


# ---- examples -------------------------------------------------------------------------------------------------
#
# A `$ pulsar-dissect ...` line in a fenced block of the README or a command's page is an example, and the lines
# under it are what it printed: run again on the shipped captures, it must print them (`...` stands for lines
# left out). `$ cat NAME` shows a file a later example reads. Examples that need root, Spark, or write files
# (live, pipeline, report, -w) are not run here; their commands have tests of their own.

_NOT_RUN = {"live", "pipeline", "report"}


def examples(doc: Path) -> list[tuple[int, str, list[str], dict[str, str]]]:
    """(line number, command, expected lines, files shown by `$ cat`) of each example in ``doc``."""
    found = []
    shown: dict[str, str] = {}
    lines = doc.read_text(encoding="utf-8").splitlines()
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_fence = not in_fence
            i += 1
            continue
        if in_fence and line.startswith("$ "):
            start = i
            command = line[2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            expected = []
            i += 1
            while i < len(lines) and not lines[i].startswith(("$ ", "```")):
                expected.append(lines[i])
                i += 1
            if command.startswith("cat "):
                shown[command[4:].strip()] = "\n".join(expected) + "\n"
            else:
                found.append((start + 1, command, expected, dict(shown)))
            continue
        i += 1
    return found


def runnable(command: str) -> bool:
    words = shlex.split(command.split("|")[0])
    return (
        words[0] == "pulsar-dissect"
        and (len(words) < 2 or words[1] not in _NOT_RUN)
        and "-w" not in words
    )


def run_example(command: str, shown: dict[str, str], tmp_path: Path) -> list[str]:
    command, _, pipe = command.partition("|")
    words = shlex.split(command)[1:]
    for name, content in shown.items():
        if name in words:
            (tmp_path / name).write_text(content)
            words[words.index(name)] = str(tmp_path / name)
    env = dict(os.environ, NO_COLOR="1")
    env.pop("COLUMNS", None)
    res = subprocess.run(
        [sys.executable, "-m", "dissector.cli.main", *words], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )
    out = res.stdout
    head = re.fullmatch(r"\s*head\s+(-c\s*(\d+)|-(\d+)|-n\s*(\d+))\s*", pipe) if pipe else None
    if pipe:
        assert head, f"an example's pipe this test cannot replay: |{pipe}"
        if head.group(2):
            out = out.encode()[: int(head.group(2))].decode(errors="ignore")
        else:
            out = "".join(out.splitlines(keepends=True)[: int(head.group(3) or head.group(4))])
    return [x.rstrip() for x in out.splitlines() + res.stderr.splitlines()]


def missing_from(expected: list[str], actual: list[str]) -> list[str]:
    """The runs of expected lines (between `...` lines) not found, each contiguous and in order, in actual."""
    runs: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            runs.append([])
        else:
            runs[-1].append(line.rstrip())
    missing, at = [], 0
    for run in filter(None, runs):
        for start in range(at, len(actual) - len(run) + 1):
            if actual[start : start + len(run)] == run:
                at = start + len(run)
                break
        else:
            missing.append("\n".join(run))
    return missing


def test_an_example_whose_output_changed_is_reported():
    actual = ["a", "b", "c", "d"]
    assert missing_from(["a", "b", "...", "d"], actual) == []
    assert missing_from(["a", "c"], actual) == ["a\nc"]  # not contiguous
    assert missing_from(["c", "...", "a"], actual) == ["a"]  # not in order
    assert missing_from(["a", "B"], actual) == ["a\nB"]


def _all_examples():
    pages = [README, *sorted(COMMANDS_DIR.glob("*.md"))]
    for doc in pages:
        for line, command, expected, shown in examples(doc):
            if runnable(command):
                yield pytest.param(command, expected, shown, id=f"{doc.relative_to(ROOT)}:{line}")


def test_the_pages_have_examples():
    assert len(list(_all_examples())) >= 25


@pytest.mark.parametrize("command, expected, shown", list(_all_examples()))
def test_every_example_prints_what_its_page_shows(command, expected, shown, tmp_path):
    assert expected, f"`{command}` shows no output"
    actual = run_example(command, shown, tmp_path)
    missing = missing_from(expected, actual)
    shown_now = "\n".join(actual)
    assert not missing, f"`{command}` no longer prints:\n" + "\n---\n".join(missing) + f"\n\nit prints:\n{shown_now}"
