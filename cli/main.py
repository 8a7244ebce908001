"""`pulsar-dissect`: the command line. Parses options, runs the pipeline, picks a renderer; nothing more."""

from __future__ import annotations

import dataclasses
import enum
import functools
import gc
import json
import os
import sys
from pathlib import Path
from typing import Callable, List, NoReturn, Optional

import typer
from rich.console import Console

from dissector.capture.files import CaptureError
from dissector.options import MAX_SETTING, OptionError, Options
from dissector.output.expr import ExprError, needs_full_records
from dissector.output.fields import FieldsError, FieldsFormat, fields_format
from dissector.output.filters import FrameFilter
from dissector.output.hints import nothing_decoded, size_text
from dissector.output.jsonl import json_writer
from dissector.output.records import problem_count
from dissector.output.render_stats import render_stats
from dissector.output.stats import StatsCollector
from dissector.output.timeline import TimelineRenderer
from dissector.run import analysed_json_lines, analysed_records, analysed_timeline_lines

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Apache Pulsar wire-protocol analyzer: decode captures into an annotated timeline.")

EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE = 0, 1, 2


def _silence_stdout() -> None:
    """Standard output's reader is gone: what is still buffered, and anything written later, goes to /dev/null,
    so that no later write or the flush at exit fails again (Python would say so on stderr and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a file descriptor (a test's captured output): nothing to redirect
        pass


def _closed_pipe() -> NoReturn:
    """The reader of standard output went away (``| head -1``): that is not a failure. Exit 0, silently."""
    _silence_stdout()
    raise typer.Exit(EXIT_OK)


class _Console(Console):
    """rich's Console, whose closed pipe is the tool's: rich's own exits 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _pipe_safe(command: Callable) -> Callable:
    """A command whose output may go to a reader that stops early: a closed pipe ends it with exit 0, never a
    traceback or Click's exit 1, whichever renderer was writing (tables, JSON, evidence, the timeline)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            _closed_pipe()
    return run


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = f"pulsar-dissect {version('pulsar-dissect')}"
        except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
            text = "pulsar-dissect (not installed)"
        try:
            typer.echo(text)
        except BrokenPipeError:
            _closed_pipe()
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-v", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Apache Pulsar wire-protocol analyzer. `pulsar-dissect CAPTURE` decodes a capture."""


def _split_csv(values: Optional[List[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out


_DEFAULTS = Options()
_TUNABLE = {f.name: f.type for f in dataclasses.fields(Options) if f.type in ("int", "float")}


def _options(port, detect, max_frame_size, max_decompressed, settings=()) -> Options:
    """Options from the command line; ``-o NAME=VALUE`` sets any numeric cap or limit of ``Options``."""
    values: dict = {}
    for setting in settings or ():
        name, sep, value = setting.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in _TUNABLE:
            typer.echo(f"pulsar-dissect: -o takes NAME=VALUE with NAME one of: {', '.join(sorted(_TUNABLE))}",
                       err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        try:
            values[name] = int(value) if _TUNABLE[name] == "int" else float(value)
        except ValueError:
            typer.echo(f"pulsar-dissect: -o {name}: {value!r} is not a number", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
    try:
        return Options(ports=frozenset(_ports(port)), detect=detect, max_frame_size=max_frame_size,
                       max_decompressed=max_decompressed, **values)
    except OptionError as exc:  # negative, NaN, infinite or beyond 64 bits: no bound at all
        flag = _FLAGS.get(exc.name, f"-o {exc.name}")
        typer.echo(f"pulsar-dissect: {flag} takes a number from 0 to {MAX_SETTING}, not {exc.value!r}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


_FLAGS = {"max_frame_size": "--max-frame-size", "max_decompressed": "--max-decompressed"}


class TimelineOutput:
    """Writes accepted records as timeline lines or JSON Lines and counts their problems (for --strict)."""

    def __init__(self, *, json_out: bool, plain: bool, no_color: bool, color: str = "auto",
                 absolute_time: bool = False, details: bool = False, payload: bool = False,
                 max_frames: int | None = None, hex_dump: bool = False, fields: FieldsFormat | None = None) -> None:
        self.out = sys.stdout
        self.fields = fields  # -T fields: the chosen fields of each record, one line each
        json_out = json_out or fields is not None  # the same records as --json's, written otherwise
        self.max_frames = max_frames
        self.hex_dump = hex_dump and not json_out  # -x: the bytes of each frame shown, under its line
        self.renderer = None
        self.console = _terminal_console(self.out, no_color, color, plain)
        if not json_out:
            self.renderer = TimelineRenderer(self.console, plain=plain, absolute_time=absolute_time,
                                             details=details, show_payload=payload)
        self.write_json = json_writer(self.out)
        # The timeline shows per-message data only with --payload or --details.
        self.summary = not json_out and not (payload or details)
        self.payload_bytes = payload or (fields is not None and fields.reads_payload)
        if self.renderer is not None and not self.console.is_terminal:
            self.renderer.plain = True  # piped or redirected: plain lines, no wrapping
        self.shown = 0
        self.problems = 0
        self._held: list[str] = []  # -T fields: lines written to the stream in batches (see ``hold``)
        self._held_size = 0

    def hex_options(self, options: Options) -> Options:
        """-x: the pipeline keeps each frame's bytes in its record (``frame_bytes``), and the timeline dumps them
        under each frame's line. One reading, so a file, standard input and a live capture alike."""
        if not self.hex_dump or self.renderer is None:
            return options
        self.renderer.frame_bytes = _record_bytes
        return options if options.keep_frame_bytes else dataclasses.replace(options, keep_frame_bytes=True)

    def emit(self, rec: dict) -> bool:
        """Write one record and count its problems; False once --max-frames is reached."""
        if not self.count(rec):
            return False
        if self.fields is not None:
            self.hold(self.fields.line(rec))
        elif self.renderer is None:
            self.write_json(rec)
        else:
            self.renderer.render(rec)
        return True

    HELD_SIZE = 1 << 16

    def hold(self, line: str) -> None:
        """A line for the stream, written with the lines after it once they are ``HELD_SIZE`` characters: fewer,
        larger writes than one per record (the lines are short)."""
        self._held.append(line)
        self._held_size += len(line)
        if self._held_size >= self.HELD_SIZE:
            self.flush(stream=False)

    def flush(self, stream: bool = True) -> None:
        """The lines held, written; then the stream flushed (unless not ``stream``)."""
        if self._held:
            held, self._held, self._held_size = self._held, [], 0
            self.out.write("".join(held))
        if stream:
            self.out.flush()

    def count(self, rec: dict) -> bool:
        """Count a record about to be written, and its problems; False once --max-frames is reached."""
        if "index" in rec:
            if self.max_frames is not None and self.shown >= self.max_frames:
                return False
            self.shown += 1
        self.problems += problem_count(rec)
        return True

    @property
    def plain_lines(self) -> bool:
        """Whether the core can write the lines: a plain timeline without -V or -x under them."""
        return self.renderer is not None and self.renderer.plain and not self.renderer.details and \
            self.renderer.frame_bytes is None


def _record_bytes(rec: dict) -> tuple[bytes, int] | None:
    """(bytes, bytes not in the capture) of a frame record kept with -x, or None."""
    data = rec.get("frame_bytes")
    return None if data is None else (data, max(0, rec["size"] - len(data)))


def _records(capture: Path, options: Options, *, payload_bytes: bool = False, summary: bool = False,
             seen: "Seen | None" = None, stats=None):
    """The capture's records (``-`` reads standard input); exits 2 with a message when it cannot be read.
    ``stats`` (a StatsCollector): every record goes into it in the core (events still come here too)."""
    source = sys.stdin.buffer if str(capture) == "-" else capture
    try:
        for rec in analysed_records(source, options, payload_bytes=payload_bytes, summary=summary,
                                    report=seen.report if seen is not None else None,
                                    stats=stats.core if stats is not None else None):
            if seen is not None:
                seen.add(rec)
            yield rec
        if seen is not None and stats is not None:
            seen.frames += seen.report["core_records"][0]
    except CaptureError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


def _run(capture: Path, options: Options, flt: FrameFilter, output: TimelineOutput, sink=None,
         context: "ActorContext | None" = None) -> "Seen":
    """Decode, filter and output; ``sink`` also sees every record shown; ``context`` (follow) adds the events
    that tell how the followed actor's connections and requests ended. Returns what the capture held."""
    if flt.predicate is not None and needs_full_records(flt.predicate):
        output.summary = False  # the expression reads each message or the whole metadata
    seen = Seen(flt)
    options = output.hex_options(options)
    if output.fields is not None and output.fields.header:
        output.out.write(output.fields.header_line())
    if (output.renderer is None and output.fields is None and sink is None and context is None and flt.accepts_all
            and output.max_frames is None and not options.keep_frame_bytes):
        return _run_json_lines(capture, options, output, seen)
    if (output.plain_lines and sink is None and context is None and flt.accepts_all and output.max_frames is None
            and not options.keep_frame_bytes):
        return _run_timeline_lines(capture, options, output, seen)
    try:
        try:
            for rec in _records(capture, options, payload_bytes=output.payload_bytes, summary=output.summary,
                                seen=seen):
                if output.renderer is not None and output.renderer.origin is None:
                    output.renderer.origin = rec["time"]  # times from the capture's start, whatever the filter
                if not flt.accepts(rec):
                    if context is None or not context.wants(rec, flt):
                        continue
                elif context is not None:
                    context.saw(rec)
                if not output.emit(rec):
                    break
                if sink is not None:
                    sink(rec)
        finally:  # what was shown before a capture's damage too
            output.flush()
    except BrokenPipeError:
        _closed_pipe()
    return seen


def _run_json_lines(capture: Path, options: Options, output: TimelineOutput, seen: "Seen") -> "Seen":
    """``_run`` for --json with nothing to filter or stop at: the core writes the frames' JSON lines, which go
    to standard output as they come; the other records (events) are dicts, written as ``_run`` writes them
    (the same bytes)."""
    source = sys.stdin.buffer if str(capture) == "-" else capture
    items = analysed_json_lines(source, options, summary=output.summary, payload_bytes=output.payload_bytes,
                                report=seen.report, buffers=True)
    return _write_core_lines(items, output, seen, "json_lines", lambda rec, write: output.emit(rec))


def _run_timeline_lines(capture: Path, options: Options, output: TimelineOutput, seen: "Seen") -> "Seen":
    """``_run`` for a plain timeline with nothing to filter or stop at: the core writes the lines of its frames
    and events, which go to standard output as they come; the other records (the capture file's notes) are made
    into lines by the renderer, with the same core's line maker (``TimelineFormat``: the same plans, the same
    time origin)."""
    source = sys.stdin.buffer if str(capture) == "-" else capture
    renderer = output.renderer
    output.out.flush()  # what went through the text layer before, ahead of the bytes written under it
    items = analysed_timeline_lines(source, renderer.format, options, payload_bytes=output.payload_bytes,
                                    summary=output.summary, report=seen.report)

    def event_line(rec: dict, write) -> None:
        output.count(rec)
        write((renderer.line(rec) + "\n").encode())

    return _write_core_lines(items, output, seen, "timeline_lines", event_line)


def _write_core_lines(items, output: TimelineOutput, seen: "Seen", counted_by: str, other) -> "Seen":
    """Write a view whose frames' lines the core wrote: their bytes as they come (a batch of packets' lines
    each), the other records (events) through ``other(rec, write)``; the frames and problems of the lines are
    counted by the core (``seen.report[counted_by]``), for the summary and --strict."""
    buffer = getattr(output.out, "buffer", None)
    write_lines = buffer.write if buffer is not None else (lambda data: output.out.write(bytes(data).decode()))
    try:
        for item in items:
            if type(item) is not dict:  # bytes, or the core's JsonLines buffer
                write_lines(item)
            else:
                seen.add(item)
                other(item, write_lines)
        output.out.flush()
        frames, problems = seen.report.get(counted_by, (0, 0))
        output.shown += frames
        seen.frames += frames
        output.problems += problems
    except CaptureError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    except BrokenPipeError:
        _closed_pipe()
    return seen


class ActorContext:
    """follow: besides the followed actor's frames, the events that finish its story: how its connections
    ended (CONNECTION_CLOSED: FIN or RST and by whom, or the end of the capture), its requests that got no
    answer (UNANSWERED, OVERDUE), its consumer's messages never acknowledged (UNACKED_AT_END) or delivered more
    than once (REDELIVERED), and its chunked messages never finished (UNFINISHED_CHUNKS). Bounded: the most recent frames shown are remembered."""

    MEMORY = 100_000

    def __init__(self) -> None:
        from collections import OrderedDict

        self.conns: set[int] = set()
        self.frames: "OrderedDict[int, None]" = OrderedDict()
        self.consumers: set[tuple[int, object]] = set()  # (conn, consumer id)

    def saw(self, rec: dict) -> None:
        """A record shown for the actor."""
        if "index" not in rec:
            return
        if len(self.conns) < self.MEMORY:
            self.conns.add(rec["conn"])
        self.frames[rec["index"]] = None
        if len(self.frames) > self.MEMORY:
            self.frames.popitem(last=False)
        consumer = rec.get("consumer")
        if consumer and len(self.consumers) < self.MEMORY:
            self.consumers.add((rec["conn"], consumer.get("id")))

    def wants(self, rec: dict, flt: FrameFilter) -> bool:
        """An event (not a frame) the filter left out that belongs to the actor's story; -Y still applies."""
        if "index" in rec or rec.get("conn") not in self.conns:
            return False
        if flt.predicate is not None and not flt.predicate(rec):
            return False
        kind, details = rec["type"], rec.get("details") or {}
        if kind == "CONNECTION_CLOSED":
            return True
        if kind in ("UNANSWERED", "OVERDUE"):
            return details.get("request") in self.frames
        if kind in ("UNACKED_AT_END", "REDELIVERED"):
            return (rec["conn"], details.get("consumer_id")) in self.consumers
        if kind == "UNFINISHED_CHUNKS":
            return any(i in self.frames for i in details.get("chunks") or ())
        return False


class Seen:
    """What a capture held (bounded), to tell the user why nothing was shown."""

    CAP = 1000

    def __init__(self, flt: FrameFilter | None = None) -> None:
        self.report: dict = {}
        self.frames = 0
        # the actors and topics are listed only to explain a filter on them that matched nothing
        self.listing = flt is not None and bool(flt.conns or flt.producers or flt.consumers or flt.topics)
        self.conns: set[int] = set()
        self.producers: dict[str, str] = {}  # "0@c1" -> name
        self.consumers: dict[str, str] = {}
        self.topics: set[str] = set()

    def add(self, rec: dict) -> None:
        if "index" not in rec:
            return
        self.frames += 1
        if not self.listing:
            return
        if len(self.conns) < self.CAP:
            self.conns.add(rec["conn"])
        for key, table in (("producer", self.producers), ("consumer", self.consumers)):
            info = rec.get(key)
            if info and len(table) < self.CAP:
                table[f"{info.get('id')}@c{rec['conn']}"] = info.get("name") or "?"
                if info.get("topic") and len(self.topics) < self.CAP:
                    self.topics.add(info["topic"])
        topic = rec["command"].get("topic")
        if isinstance(topic, str) and len(self.topics) < self.CAP:
            self.topics.add(topic)

    def explain(self, options: Options, flt: FrameFilter, shown: int) -> str | None:
        """Why nothing (or no frame) was shown, or None when there is nothing to say."""
        if self.frames == 0:
            return nothing_decoded(options, self.report)
        if shown:
            return None
        lines = []
        if flt.conns and not flt.conns & self.conns:
            lines.append("connections in this capture: " + _listing(f"c{c}" for c in sorted(self.conns)))
        if flt.producers:
            lines.append("producers in this capture: " + _listing(f"{n} ({k})" for k, n in self.producers.items()))
        if flt.consumers:
            lines.append("consumers in this capture: " + _listing(f"{n} ({k})" for k, n in self.consumers.items()))
        if flt.topics:
            lines.append("topics in this capture: " + _listing(sorted(self.topics)))
        return ("nothing in this capture matches the filter; " + "; ".join(lines)) if lines else None


def _listing(items) -> str:
    from dissector.output.text import safe

    items = [safe(i, 80) for i in items]
    return ", ".join(items[:20]) + (f", … ({len(items)})" if len(items) > 20 else "") if items else "none"


_size = size_text


def _tell(seen: Seen, options: Options, flt: FrameFilter, output: "TimelineOutput") -> None:
    """Never print nothing silently: say on stderr what the capture held (a problem for --strict)."""
    message = seen.explain(options, flt, output.shown)
    if message:
        typer.echo(f"pulsar-dissect: {message}", err=True)
        output.problems += 1
    _tell_times(output)


def _tell_times(output: "TimelineOutput") -> None:
    """--absolute-time: the times no UTC date holds were shown as numbers; say so once, with the id."""
    from dissector.problems import message

    renderer = output.renderer
    if renderer is None or not renderer.absolute_time:
        return
    count, first = renderer.format.not_dates
    if count:
        typer.echo(f"pulsar-dissect: time.not_a_date: {message('time.not_a_date', {'count': count, 'first': first})}",
                   err=True)


def _conn_ids(values: list[str]) -> list[int]:
    """Connections as the timeline prints them (c3) or as numbers (3)."""
    out = []
    for v in values:
        text = v[1:] if v[:1] in ("c", "C") else v
        if not text.isdigit():
            typer.echo(f"pulsar-dissect: --conn takes connection numbers as the timeline shows them (c3 or 3), "
                       f"not {v!r}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        out.append(int(text))
    return out


def _known_types(types: list[str]) -> list[str]:
    """Command types and event kinds as given; an unknown one is an error naming the closest."""
    import difflib

    from dissector import protocols
    from dissector.problems import REGISTRY

    known = {spec.name for proto in protocols.registered() for spec in proto.commands}
    known |= {pid for pid in REGISTRY if pid.isupper()} | {"MALFORMED"}
    for t in types:
        if t.upper() not in known and not t.upper().startswith("UNKNOWN("):
            close = difflib.get_close_matches(t.upper(), sorted(known), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            typer.echo(f"pulsar-dissect: unknown command type {t!r}{hint}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
    return types


def _ports(values: Optional[List[str]]) -> list:
    """Port numbers (Pulsar's), or PROTOCOL:[ROLE:]PORT for another protocol's (``tubemq:9000``,
    ``tubemq:broker:9123``)."""
    from dissector import protocols

    out: list = []
    for v in _split_csv(values):
        *named, number = v.split(":")
        bad = not number.isdigit() or not 0 < int(number) < 65536 or len(named) > 2
        if not bad and named:
            try:
                spec = protocols.get(named[0])
            except KeyError:
                bad = True
            else:
                bad = len(named) == 2 and named[1] not in spec.server_roles
        if bad:
            typer.echo(f"pulsar-dissect: --port takes TCP port numbers, or PROTOCOL:[ROLE:]PORT such as tubemq:9000 "
                       f"(comma lists are fine), not {v!r}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        out.append((named[0], named[1] if len(named) == 2 else None, int(number)) if named else int(number))
    return out


def _filter(*shorthands, expression: str | None = None) -> FrameFilter:
    """The record filter of the options; a bad expression is a message with its column and exit 2."""
    try:
        return FrameFilter(*shorthands, expression=expression)
    except ExprError as exc:
        typer.echo(f"pulsar-dissect: bad filter expression: {exc.describe()}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


def _require(what: str, extra: str, *modules: str) -> None:
    """Exit 2 with one line when a package of an optional extra is not installed."""
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in modules):
        typer.echo(f"pulsar-dissect {what} (pip install 'pulsar-dissect[{extra}]')", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


def _strict_exit(strict: bool, output: TimelineOutput) -> None:
    """--strict, in every command: exit 1 when a record shown has an error or a warning (notes do not count)."""
    if strict and output.problems:
        typer.echo(f"pulsar-dissect: {output.problems} problem(s) found", err=True)
        raise typer.Exit(EXIT_PROBLEMS)


CAPTURE_ARG = typer.Argument(None, help="pcap or pcapng file (gzip-compressed is fine; - reads standard input)",
                             show_default=False)
READ_OPT = typer.Option(None, "-r", "--read", help="the capture file (as tshark's -r)")


def _capture(capture: Optional[Path], read: Optional[Path]) -> Path:
    if capture is not None and read is not None:
        typer.echo("pulsar-dissect: give the capture once (as an argument or with -r)", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    if capture is None and read is None:
        typer.echo("pulsar-dissect: which capture? (pulsar-dissect CAPTURE, or -r CAPTURE; - for standard input)",
                   err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    return capture if capture is not None else read
PORT_OPT = typer.Option(None, "--port", help="extra server ports, repeatable or as a comma list: Pulsar's (6650 "
                        "and 6651 always count), or PROTOCOL:[ROLE:]PORT, e.g. tubemq:9000 (8715 and 8123 always "
                        "count)")
DETECT_OPT = typer.Option(False, "--detect", help="also find Pulsar on connections off the broker ports")
MAX_FRAME_OPT = typer.Option(None, "--max-frame-size", help="largest frame accepted, in bytes (default: each "
                             "protocol's own: Pulsar 5,253,120, TubeMQ 29,374,476)")
MAX_DECOMPRESSED_OPT = typer.Option(_DEFAULTS.max_decompressed, "--max-decompressed",
                                    help="largest payload to decompress, in bytes")
MAX_FRAMES_OPT = typer.Option(None, "--max-frames", "-c", min=1, help="stop after this many frames shown "
                              "(after -Y and the other filters; events are not counted)")
FILTER_OPT = typer.Option(None, "-Y", "--filter",
                          help='only records matching this expression, e.g. \'type == "SEND" and latency_ms > 20\'')
STRICT_OPT = typer.Option(False, "--strict", help="exit 1 when a record shown has an error or a warning")
NO_COLOR_OPT = typer.Option(False, "--no-color", help="no colours (as --color never)")


class ColorWhen(str, enum.Enum):
    auto = "auto"
    always = "always"
    never = "never"


COLOR_OPT = typer.Option(ColorWhen.auto, "--color", help="colours: auto (on a terminal, unless NO_COLOR is set), "
                         "always (into a pipe too), never")


def _colours(no_color: bool, color: str) -> tuple[bool, bool | None]:
    """(no colours, force a terminal's colours): --no-color or --color never: none; always: even into a pipe;
    auto: on a terminal, unless the environment sets NO_COLOR (no-color.org: any value but empty)."""
    color = getattr(color, "value", color)
    if no_color or color == "never" or (color == "auto" and os.environ.get("NO_COLOR")):
        return True, False
    return False, (True if color == "always" else None)


def _terminal_console(out, no_color: bool, color: str, plain: bool) -> Console:
    """The console of the timeline and the tables: colours as ``_colours`` decides, and no styles at all
    without them. No colour is not no terminal: NO_COLOR or --no-color still folds at the terminal's width;
    only --plain (or a pipe) writes one line per row."""
    no_color, force = _colours(no_color, color)
    no_color = no_color or plain
    return _Console(file=out, no_color=no_color, highlight=False, color_system=None if no_color else "auto",
                    force_terminal=False if plain else (None if no_color else force))


PLAIN_OPT = typer.Option(False, "--plain", help="plain text, no colours, no wrapping (for pagers)")
ABSOLUTE_TIME_OPT = typer.Option(False, "--absolute-time", help="UTC wall-clock times, not relative")
DETAILS_OPT = typer.Option(False, "--details", "-V", help="every decoded field under each frame, as a tree")
HEX_OPT = typer.Option(False, "-x", "--hex", help="a hex and ASCII dump of each frame's bytes under its line "
                                                  "(as tshark's -x)")
PAYLOAD_OPT = typer.Option(False, "--payload", help="show payloads (JSON: payload_text / payload_b64)")
JSON_OPT = typer.Option(False, "--json", help="JSON Lines: one object per frame or event")
SET_OPT = typer.Option(None, "-o", "--option", help="set a limit: NAME=VALUE (e.g. max_pending_requests=50000)")


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    fields = "fields"


FORMAT_OPT = typer.Option(None, "-T", help="text (the timeline), json (as --json) or fields (the -e fields of "
                          "each record, as tshark's -T fields)", show_default=False)
FIELD_OPT = typer.Option(None, "-e", help="with -T fields: a field to show, repeatable, named as -Y names it "
                         "(type, latency_ms, producer.name, command.topic, messages.sequence_id)")
FIELD_SETTING_OPT = typer.Option(None, "-E", help="with -T fields, as tshark's: header=y, separator=,|/t|/s, "
                                 "quote=d|s|n, occurrence=f|l|a, aggregator=,|/s")


def _fields_output(form, fields: Optional[List[str]], settings: Optional[List[str]], json_out: bool) -> \
        tuple[bool, FieldsFormat | None]:
    """(--json, the fields format) from -T, -e and -E: -e alone means -T fields; --json beside another -T, -e or
    -E beside another format, or -T fields without -e, is a one-line error and exit 2."""
    form = getattr(form, "value", form)
    if form is None:
        form = "fields" if fields and not json_out else "json" if json_out else "text"
    elif json_out and form != "json":
        typer.echo(f"pulsar-dissect: --json and -T {form} ask for two formats (give one)", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    if form != "fields":
        if fields or settings:
            typer.echo(f"pulsar-dissect: -e and -E choose the columns of -T fields, not of -T {form}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        return form == "json", None
    try:
        return False, fields_format(fields or [], settings or [])
    except FieldsError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


@app.command("dissect")
@_pipe_safe
def dissect_cmd(
    capture: Optional[Path] = CAPTURE_ARG,
    read: Optional[Path] = READ_OPT,
    json_out: bool = JSON_OPT,
    form: Optional[OutputFormat] = FORMAT_OPT,
    field_names: Optional[List[str]] = FIELD_OPT,
    field_settings: Optional[List[str]] = FIELD_SETTING_OPT,
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    conn: Optional[List[str]] = typer.Option(None, "--conn", help="only these connection numbers"),
    type_: Optional[List[str]] = typer.Option(None, "--type", "-t", help="only these command types (SEND,MESSAGE)"),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="only frames about this topic"),
    producer: Optional[List[str]] = typer.Option(None, "--producer", help="only this producer (name or id)"),
    consumer: Optional[List[str]] = typer.Option(None, "--consumer", help="only this consumer (name or id)"),
    expr: Optional[str] = FILTER_OPT,
    max_frames: Optional[int] = MAX_FRAMES_OPT,
    write: Optional[Path] = typer.Option(None, "-w", help="also write the packets of the frames shown to this "
                                                          "pcap file (read, filter, write)"),
    strict: bool = STRICT_OPT,
    no_color: bool = NO_COLOR_OPT,
    color: ColorWhen = COLOR_OPT,
    plain: bool = PLAIN_OPT,
    absolute_time: bool = ABSOLUTE_TIME_OPT,
    details: bool = DETAILS_OPT,
    hex_dump: bool = HEX_OPT,
    payload: bool = PAYLOAD_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """Decode a capture into a request/response timeline (or JSON Lines with --json)."""
    capture = _capture(capture, read)
    json_out, fields = _fields_output(form, field_names, field_settings, json_out)
    if write is not None and str(capture) == "-":
        typer.echo("pulsar-dissect: -w needs a capture file, not standard input (it reads the packets again)",
                   err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    _check_hex(hex_dump, json_out or fields is not None, "--json" if fields is None else "-T fields")
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    flt = _filter(_conn_ids(_split_csv(conn)), _known_types(_split_csv(type_)), topic or [], producer or [],
                  consumer or [], expression=expr)
    output = TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, color=color, absolute_time=absolute_time,
                            details=details, payload=payload, max_frames=max_frames, hex_dump=hex_dump, fields=fields)
    packets = _PacketSet() if write is not None else None
    # filtered to producers, consumers or topics: also the events that end their story, as follow shows them
    context = ActorContext() if flt.actor_filter else None
    seen = _run(capture, options, flt, output, packets.add if packets is not None else None, context)
    if packets is not None:
        written = packets.write(capture, write)
        typer.echo(f"pulsar-dissect: {written} packets of the frames shown written to {write}", err=True)
    _tell(seen, options, flt, output)
    _sum_up(output, capture)
    _strict_exit(strict, output)


def _sum_up(output: "TimelineOutput", capture) -> None:
    """On a terminal, the timeline ends with one line on stderr: how much was shown and how many problems,
    and where they are listed (a pipe or a file gets the timeline alone)."""
    if output.renderer is None or not output.shown or not (sys.stdout.isatty() and sys.stderr.isatty()):
        return
    where = f"; pulsar-dissect problems {capture} lists them" if output.problems and str(capture) != "-" else ""
    typer.echo(_folded(f"{output.shown:,} frames and events shown, {output.problems:,} errors and warnings{where}",
                       sys.stderr), err=True)


def _check_hex(hex_dump: bool, json_out: bool, flag: str = "--json") -> None:
    """-x shows the frames' bytes under timeline lines; JSON records (and their fields) never carry them."""
    if hex_dump and json_out:
        typer.echo("pulsar-dissect: -x shows the bytes under timeline lines; JSON records do not carry them "
                   f"(drop {flag}, or -x)", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


class _PacketSet:
    """The capture packets that carried the frames shown (ranges, merged as they come), for -w."""

    def __init__(self) -> None:
        self.ranges: list[list[int]] = []

    def add(self, rec: dict) -> None:
        if "index" not in rec:
            return
        first, last = rec.get("first_packet", rec["packet"]), rec["packet"]
        if self.ranges and first <= self.ranges[-1][1] + 1:
            self.ranges[-1][1] = max(self.ranges[-1][1], last)
        else:
            self.ranges.append([first, last])

    def write(self, capture: Path, path: Path) -> int:
        """Copy those packets from the capture (read again, streaming) to a pcap file."""
        from bisect import bisect_right

        from dissector.capture.files import open_capture
        from dissector.capture.writer import PcapWriter

        self.ranges.sort()
        starts = [r[0] for r in self.ranges]
        writer, count = None, 0
        try:
            with open_capture(capture) as reader:
                for packet in reader:
                    i = bisect_right(starts, packet.index) - 1
                    if i >= 0 and packet.index <= self.ranges[i][1]:
                        if writer is None:
                            writer = PcapWriter(path, packet.linktype)
                        writer.write(packet)
                        count += 1
        except OSError as exc:
            typer.echo(f"pulsar-dissect: cannot write {path}: {exc.strerror or exc}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:  # nothing shown: an empty but valid pcap
            PcapWriter(path, 1).close()
        return count


@app.command("follow")
@_pipe_safe
def follow_cmd(
    capture: Optional[Path] = CAPTURE_ARG,
    read: Optional[Path] = READ_OPT,
    producer: Optional[List[str]] = typer.Option(None, "--producer", help="the producer to follow (name or id)"),
    consumer: Optional[List[str]] = typer.Option(None, "--consumer", help="the consumer to follow (name or id)"),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="the topic to follow"),
    message: Optional[str] = typer.Option(None, "--message", help="a message id LEDGER:ENTRY[:BATCH]: its journey "
                                          "(SEND, receipt, every delivery, acks) across connections; --topic "
                                          "narrows it to one topic"),
    sequence: Optional[int] = typer.Option(None, "--sequence", min=0, help="with --producer: the journey of "
                                           "that producer's message with this sequence id, as --message shows it"),
    expr: Optional[str] = FILTER_OPT,
    json_out: bool = typer.Option(False, "--json", help="JSON Lines instead of the timeline"),
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    plain: bool = typer.Option(False, "--plain", help="plain text, no colours"),
    no_color: bool = NO_COLOR_OPT,
    color: ColorWhen = COLOR_OPT,
    payload: bool = typer.Option(False, "--payload", help="show payloads"),
    details: bool = DETAILS_OPT,
    hex_dump: bool = HEX_OPT,
    strict: bool = STRICT_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """One actor's story: every frame of a producer, a consumer or a topic, how its connections and requests
    ended, then its summary; or one message's journey (--message)."""
    if sequence is not None and (message is not None or not producer or consumer):
        typer.echo("pulsar-dissect follow: --sequence N follows a message of one --producer (not with --message "
                   "or --consumer)", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    if message is not None:
        ref = _message_ref(message)
        if producer or consumer:
            typer.echo("pulsar-dissect follow: --message follows one message; --producer and --consumer do not "
                       "apply (--topic narrows it)", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
    if not (producer or consumer or topic or message is not None):
        typer.echo("pulsar-dissect follow: name a --producer, --consumer, --topic or --message", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    capture = _capture(capture, read)
    _check_hex(hex_dump, json_out)
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    if message is not None or sequence is not None:
        from dissector.analysis.journeys import follow_message, follow_sequence

        if message is not None:
            def find(records):
                return [(journey, ref.batch) for journey in follow_message(records, ref, set(topic or ()))]
            what = f"message {ref}"
        else:
            def find(records):
                return follow_sequence(records, set(_split_csv(producer)), sequence, set(topic or ()))
            what = f"sequence id {sequence} of {_listing(_split_csv(producer))}"
        _follow_journeys(capture, options, find, what, _filter(expression=expr),
                         TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, color=color, payload=payload,
                                        details=details, hex_dump=hex_dump))
        return
    flt = _filter([], [], topic or [], producer or [], consumer or [], expression=expr)
    output = TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, color=color,
                            payload=payload, details=details,
                            hex_dump=hex_dump)
    stats = StatsCollector(options)
    seen = _run(capture, options, flt, output, stats.add, ActorContext())
    _tell(seen, options, flt, output)
    if output.renderer is not None and output.shown:
        render_stats(stats.result(), output.console, plain=output.renderer.plain)
    _strict_exit(strict, output)


def _message_ref(text: str):
    from dissector.analysis.journeys import MessageIdError, MessageRef

    try:
        return MessageRef.parse(text)
    except MessageIdError as exc:
        typer.echo(f"pulsar-dissect follow: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


def _follow_journeys(capture: Path, options: Options, find, what: str, flt: FrameFilter,
                     output: TimelineOutput) -> None:
    """follow --message / --sequence: each journey's frames through the timeline renderer (or JSON), then its
    summary line. ``find(records)``: the journeys, with the batch index of the message followed."""
    from dissector.output.text import safe

    options = output.hex_options(options)
    first: list[float] = []

    def records():
        for rec in _records(capture, options, payload_bytes=output.payload_bytes):
            if not first:
                first.append(rec["time"])
            yield rec

    journeys = find(records())
    if output.renderer is not None and first:
        output.renderer.origin = first[0]  # times from the capture's start, as every timeline
    if not journeys:
        typer.echo(f"pulsar-dissect follow: no frame carries {what} in this capture", err=True)
        return
    try:
        for journey, batch in journeys:
            summary = journey.summary(batch)
            frames = [rec for rec in journey.frames if flt.accepts(rec)]
            if output.renderer is None:
                json_writer(output.out)({"journey": summary, "frames": frames})
                continue
            output.console.file.write(f"journey of {summary['message_id']} on {safe(journey.topic or '?', 200)}\n")
            for rec in frames:
                output.emit(rec)
            output.console.file.write(_folded(_journey_line(summary, journey.frames_dropped), output.out) + "\n")
        output.out.flush()
    except BrokenPipeError:
        _closed_pipe()


def _folded(text: str, out, hang: str | None = None) -> str:
    """``text`` folded between words at the terminal's width when ``out`` is a terminal (each line continuing
    under its own indent, two further in, or at ``hang``), else as it is: a pipe gets one line per line."""
    if not out.isatty():
        return text
    import shutil
    import textwrap

    width = shutil.get_terminal_size().columns
    lines = []
    for line in text.split("\n"):
        indent = " " * (len(line) - len(line.lstrip(" ")))
        lines.append(textwrap.fill(line, width, subsequent_indent=indent + "  " if hang is None else hang,
                                   break_long_words=False,
                                   break_on_hyphens=False) if len(line) > width else line)
    return "\n".join(lines)


def _journey_line(summary: dict, dropped: int) -> str:
    """One line: publish latency, each delivery's delay and ack latency, redeliveries."""
    from dissector.output.text import safe

    def ms(value) -> str:
        return "?" if value is None else f"{value:.3f} ms"

    parts = [f"publish {ms(summary['publish_latency_ms'])}" if summary["send"] else "no SEND in the capture"]
    deliveries = summary["deliveries"]
    for d in deliveries:
        if d["discarded"] is not None:
            ack = f"dropped unread by the client ({safe(str(d['discarded']))}) at #{d['ack_index']}"
        elif d["ack_index"] is not None:
            ack = f"acked by #{d['ack_index']} after {ms(d['ack_latency_ms'])}"
        else:
            ack = "never acked"
        parts.append(f"#{d['index']} to {safe(d['consumer'] or '?')} ({safe(d['subscription'] or '?')}) "
                     f"{ms(d['delay_ms'])} after the SEND, {ack}")
    if not deliveries:
        parts.append("never delivered in the capture")
    parts.append(f"{summary['redeliveries']} redelivered")
    if dropped:
        parts.append(f"{dropped} more frames not shown")
    return "  journey: " + "; ".join(parts)


@app.command("report")
@_pipe_safe
def report_cmd(
    capture: Optional[Path] = CAPTURE_ARG,
    read: Optional[Path] = READ_OPT,
    output: Path = typer.Option(..., "-o", "--output", help="the HTML file to write (- for standard output)"),
    max_frames: int = typer.Option(100_000, "--max-frames", min=1,
                                   help="records kept in the table and the sequence diagram (the summary, charts "
                                        "and journeys cover the whole capture)"),
    max_journeys: int = typer.Option(20_000, "--max-journeys", min=0,
                                     help="message journeys listed (the distributions cover them all)"),
    expr: Optional[str] = FILTER_OPT,
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = typer.Option(None, "--option", help="set a limit: NAME=VALUE (e.g. "
                                                 "max_pending_requests=50000); -o is the output file here"),
) -> None:
    """One self-contained HTML file to share: summary, sequence diagrams, the timeline as a filterable table,
    latency and throughput charts, message journeys (opens offline in any browser)."""
    from dissector.output.report import ReportBuilder

    capture = _capture(capture, read)
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    flt = _filter(expression=expr)
    _writable(output, "report")
    builder = ReportBuilder(options, max_frames=max_frames, max_journeys=max_journeys)
    seen = Seen(flt)
    for rec in _records(capture, options, seen=seen):
        if flt.accepts(rec):
            builder.add(rec)
    message = seen.explain(options, flt, builder.frames)
    if message:
        typer.echo(f"pulsar-dissect: {message}", err=True)
    _write_report(builder, output, capture.name if str(capture) != "-" else "-", expr, "report", notice=message)


def _writable(output: Path, command: str) -> None:
    """Refuse an output file that cannot be written before any capture is read (``-``: standard output)."""
    if str(output) == "-":
        return
    parent = output.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        typer.echo(f"pulsar-dissect {command}: cannot write {output}: no writable directory {parent}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)


def _write_report(builder, output: Path, capture_name: str, expr: Optional[str], command: str,
                  notice: Optional[str] = None) -> None:
    """Write the page (atomically: a reader never sees half of it) and say what it holds on stderr; ``notice``
    (why nothing was decoded) is the page's first line too."""
    from dissector.output.report import page_chunks

    document = builder.document(capture=capture_name, expression=expr, notice=notice)
    chunks = page_chunks(document, builder.details, builder.rows, builder.journey_rows)
    if str(output) == "-":
        for chunk in chunks:
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    size = 0
    try:
        with open(temporary, "wb") as out:
            for chunk in chunks:
                size += out.write(chunk)
        os.replace(temporary, output)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        typer.echo(f"pulsar-dissect {command}: cannot write {output}: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    kept = builder.kept
    typer.echo(f"pulsar-dissect {command}: {output} written ({_size(size)}): {builder.frames} frames, {kept} "
               f"records in the table" + (f" ({builder.records - kept} left out: --max-frames)"
                                          if builder.records > kept else "")
               + f", {builder.journeys_total} message journeys", err=True)


@app.command("stats")
@_pipe_safe
def stats_cmd(
    capture: Optional[Path] = CAPTURE_ARG,
    read: Optional[Path] = READ_OPT,
    json_out: bool = typer.Option(False, "--json", help="the statistics as one JSON object"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="also draw latency plots to FILE.png or FILE.svg"),
    expr: Optional[str] = FILTER_OPT,
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    plain: bool = typer.Option(False, "--plain", help="plain text, no colours"),
    no_color: bool = NO_COLOR_OPT,
    color: ColorWhen = COLOR_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """Per connection, topic, producer and consumer: counts, bytes, batches, compression, latency, errors."""
    if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
        typer.echo("pulsar-dissect stats: --plot takes a .png or .svg file name", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    capture = _capture(capture, read)
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    flt = _filter(expression=expr)
    stats = StatsCollector(options)
    full = flt.predicate is not None and needs_full_records(flt.predicate)
    seen = Seen()
    if flt.accepts_all:  # every record goes into the statistics in the core, in capture order
        for _ in _records(capture, options, summary=True, seen=seen, stats=stats):
            pass
    else:
        for rec in _records(capture, options, summary=not full, seen=seen):
            if flt.accepts(rec):
                stats.add(rec)
    data = stats.result()
    message = seen.explain(options, flt, data["frames"])
    if message:
        typer.echo(f"pulsar-dissect: {message}", err=True)
    if json_out:
        json_writer(sys.stdout)(data)
    elif data["frames"] or not message:  # no empty tables under the message that says why
        # plain (--plain, or not a terminal): one line per row, never a value split, wider than the terminal
        # if it must be
        render_stats(data, _terminal_console(sys.stdout, no_color, color, plain), plain=plain or None)
    if plot is not None:
        _require("stats: --plot needs matplotlib", "plot", "matplotlib")
        from dissector.output.plot import plot_latency
        try:
            plot_latency(stats.latency_samples, plot, title=f"{capture.name}: request latency over time",
                         origin=stats.origin, throughput=stats.throughput, width=stats.throughput_width)
        except OSError as exc:
            typer.echo(f"pulsar-dissect stats: cannot write the plot {plot}: {exc.strerror or exc}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        typer.echo(f"latency plot written to {plot}", err=True)


@app.command("problems")
@_pipe_safe
def problems_cmd(
    capture: Optional[Path] = CAPTURE_ARG,
    read: Optional[Path] = READ_OPT,
    json_out: bool = typer.Option(False, "--json", help="one JSON object per group of findings"),
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """Every finding and problem event, grouped by severity and id, with its count and the frames and packets
    that carry it (as tshark's -z expert)."""
    from dissector.output.findings import Findings
    from dissector.output.text import safe

    capture = _capture(capture, read)
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    found = Findings()
    seen = Seen()
    for rec in _records(capture, options, summary=True, seen=seen):
        found.add(rec)
    message = seen.explain(options, _filter(), found.frames)
    if message:
        typer.echo(f"pulsar-dissect: {message}", err=True)
    groups = found.ordered()
    if json_out:
        write = json_writer(sys.stdout)
        for group in groups:
            write(group.as_json())
        return
    if not groups:
        if not message:
            typer.echo(f"no problems in {found.frames:,} frames")
        return
    # on a terminal every line folds at its width, continuing under the message; into a pipe a group is two lines
    def fold(text: str) -> str:
        return _folded(text, sys.stdout, hang=" " * 8)

    for group in groups:
        places = ", ".join(f"#{f}(p{p})" if f is not None else f"p{p}" for f, p in zip(group.frames, group.packets))
        more = group.count - len(group.packets)
        typer.echo(fold(f"{group.severity:<7} {safe(group.id, 60)} ×{group.count:,}: {places}"
                        + (f", … {more:,} more" if more else "")))
        typer.echo(fold(f"        {safe(group.message, 300)}"))


@app.command("live")
@_pipe_safe
def live_cmd(
    interface: Optional[str] = typer.Option(None, "-i", "--interface", help="interface to sniff (default: all)"),
    port: Optional[List[str]] = PORT_OPT,
    bpf: Optional[str] = typer.Option(None, "-f", help="capture filter (BPF); default: TCP on the broker ports"),
    write: Optional[Path] = typer.Option(None, "-w", help="also save the packets to this pcap file"),
    duration: Optional[float] = typer.Option(None, "--duration", min=0, help="stop after this many seconds"),
    max_frames: Optional[int] = MAX_FRAMES_OPT,
    count: Optional[int] = typer.Option(None, "--max-packets", min=1, help="stop after this many packets "
                                        "captured (as tshark's -c)"),
    expr: Optional[str] = FILTER_OPT,
    engine: str = typer.Option("socket", "--engine", help="socket (AF_PACKET, needs CAP_NET_RAW) or dumpcap"),
    json_out: bool = JSON_OPT,
    form: Optional[OutputFormat] = FORMAT_OPT,
    field_names: Optional[List[str]] = FIELD_OPT,
    field_settings: Optional[List[str]] = FIELD_SETTING_OPT,
    detect: bool = DETECT_OPT,
    strict: bool = STRICT_OPT,
    no_color: bool = NO_COLOR_OPT,
    color: ColorWhen = COLOR_OPT,
    plain: bool = PLAIN_OPT,
    absolute_time: bool = ABSOLUTE_TIME_OPT,
    details: bool = DETAILS_OPT,
    hex_dump: bool = HEX_OPT,
    payload: bool = PAYLOAD_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """Sniff an interface and stream the timeline (or JSON Lines) as traffic flows; Ctrl-C stops."""
    import signal
    import threading
    import time

    from dissector import protocols
    from dissector.capture.live import LiveError, PcapWriter, capture_filter, open_live
    from dissector.run import live_records

    json_out, fields = _fields_output(form, field_names, field_settings, json_out)
    _check_hex(hex_dump, json_out or fields is not None, "--json" if fields is None else "-T fields")
    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    flt = _filter(expression=expr)
    output = TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, color=color, absolute_time=absolute_time,
                            details=details, payload=payload, hex_dump=hex_dump, max_frames=max_frames, fields=fields)
    options = output.hex_options(options)
    if flt.predicate is not None and needs_full_records(flt.predicate):
        output.summary = False
    ports = {p for protocol in protocols.select(options.protocols) for p in protocol.ports} | options.port_numbers
    capture = capture_filter(ports, bpf)
    try:
        source = open_live(engine, interface, capture)
    except LiveError as exc:
        typer.echo(f"pulsar-dissect live: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    typer.echo(f"pulsar-dissect live: capturing on {interface or 'all interfaces'} ({capture}), engine {engine}",
               err=True)
    deadline = time.time() + duration if duration is not None else None
    writer: list = []  # the pcap writer, made with the first packet's link type
    received = 0

    def packets():
        nonlocal received
        for packet in source.packets(stop):
            if packet is not None:
                received += 1
                if write is not None:
                    try:
                        if not writer:
                            writer.append(PcapWriter(write, packet.linktype))
                        writer[0].write(packet)
                    except OSError as exc:
                        typer.echo(f"pulsar-dissect live: cannot write {write}: {exc.strerror or exc}", err=True)
                        raise typer.Exit(EXIT_UNREADABLE)
                if count is not None and received >= count:
                    stop.set()
            elif writer:
                writer[0].flush()
            if deadline is not None and time.time() >= deadline:
                stop.set()
            yield packet

    frames = 0
    last_flush = time.time()
    try:
        if fields is not None and fields.header:
            output.out.write(fields.header_line())
        for rec in live_records(packets(), options, payload_bytes=output.payload_bytes, summary=output.summary):
            if "index" in rec:
                frames += 1
            if flt.accepts(rec):
                output.emit(rec)
                if max_frames is not None and output.shown >= max_frames:
                    stop.set()  # -c: the frames shown, as offline; waiting for one more might never end
                    break
            if time.time() - last_flush > 0.1:
                _flush(output)
                last_flush = time.time()
    except BrokenPipeError:  # the reader went away (| head): stop capturing, say what was seen on stderr
        stop.set()
        _silence_stdout()
    finally:
        source.close()
        if writer:
            writer[0].close()
        _flush(output)
    _tell_times(output)
    stats = source.poll_stats()
    typer.echo(f"pulsar-dissect live: {stats.received} packets received, {stats.kernel_dropped} dropped by the "
               f"kernel" + (f", {stats.duplicates} loopback copies left out" if stats.duplicates else "")
               + f"; {frames} frames, {output.problems} problem(s) shown"
               + (f"; packets saved to {write}" if write is not None and writer else ""), err=True)
    _strict_exit(strict, output)


def _flush(output: "TimelineOutput") -> None:
    try:
        output.flush()
        buffer = getattr(output.out, "buffer", None)
        if buffer is not None:
            buffer.flush()
    except (BrokenPipeError, ValueError):
        pass


def _captures(paths: list[str]) -> list[Path]:
    """Capture files from files, directories (their pcap/pcapng files, gzipped or not) and glob patterns."""
    import glob

    out: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            out.extend(sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_CAPTURE_ENDINGS)))
        elif not path.exists() and any(c in text for c in "*?["):
            out.extend(Path(p) for p in sorted(glob.glob(text)))
        else:
            out.append(path)
    return out


_CAPTURE_ENDINGS = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz")


def _write_stages(out: Path, seconds: dict) -> None:
    """DIR/stages.json: the seconds of each stage of the run, for whoever asks where its time went."""
    try:
        (out / "stages.json").write_text(json.dumps(seconds, indent=1) + "\n")
    except OSError as exc:
        typer.echo(_folded(f"pulsar-dissect pipeline: cannot write {out / 'stages.json'}: {exc.strerror or exc}",
                           sys.stderr), err=True)


@app.command("pipeline")
@_pipe_safe
def pipeline_cmd(
    inputs: List[str] = typer.Argument(..., help="capture files, directories and globs: rotated sets, pcap or "
                                                 "pcapng, gzipped or not, read as one capture in time order"),
    out: Path = typer.Option(..., "--out", help="the directory for the Parquet tables and summary.json"),
    master: str = typer.Option("local[*]", "--master", help="the Spark master: local[*], local[N], "
                               "spark://HOST:PORT, yarn, k8s://..."),
    conf: Optional[List[str]] = typer.Option(None, "--conf", help="a Spark setting KEY=VALUE, repeatable"),
    partitions: Optional[int] = typer.Option(None, "--partitions", min=1,
                                             help="partitions the connections are spread over (default: one "
                                                  "per core Spark has)"),
    json_out: bool = typer.Option(False, "--json", help="print the summary as one JSON object"),
    report: Optional[Path] = typer.Option(None, "--report", help="also write the HTML report (as `report -o`) "
                                          "of the whole input, from the tables"),
    max_frames: int = typer.Option(100_000, "--max-frames", min=1, help="with --report: records kept in its "
                                   "table and sequence diagrams"),
    strict: bool = typer.Option(False, "--strict", help="exit 1 when a problem of severity error or warning "
                                                        "was found"),
    with_json: bool = typer.Option(False, "--with-json", help="also keep each frame's record as `--json` writes "
                                   "it, in the frames table's `json` column"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="let Spark's and the JVM's warnings through "
                                 "(Spark logs at WARN)"),
    # long enough for a busy queue to grant a container; short enough that a cluster that can never run the job
    # does not hold a CI run until the CI's own limit
    executor_wait: float = typer.Option(300.0, "--executor-wait", min=0, metavar="SECONDS",
                                        help="on a cluster, end the run (exit 2) when a Spark job has waited this "
                                             "long with no executor registered; 0 waits as long as Spark does"),
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
) -> None:
    """Dissect many or huge captures on Apache Spark into Parquet tables (frames, messages, exchanges,
    problems, files) and a summary; the same decoding as the other commands. On a terminal, its progress on
    standard error; at the end, the seconds of each stage."""
    from dissector.capture.inputs import expand

    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    spark_conf = {}
    for item in conf or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            typer.echo(_folded(f"pulsar-dissect pipeline: --conf takes KEY=VALUE, not {item!r}", sys.stderr), err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        spark_conf[key.strip()] = value.strip()
    files, missing = expand(inputs)
    if not files:
        typer.echo(_folded(f"pulsar-dissect pipeline: no capture file in {_listing(inputs)}", sys.stderr), err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    if report is not None:
        _writable(report, "pipeline")
    _require("pipeline: needs PySpark (and a Java runtime)", "spark", "pyspark", "pyarrow")
    from dissector.spark import job, prepass as first_reading, stages_lines, summary_lines
    from dissector.spark.console import Console, Progress, launch_jvm
    from dissector.spark.executors import ExecutorWatch

    console = Console()  # the progress line (on a terminal) and the JVM's output, on standard error
    stages = job.Stages()
    # the input's index (and count) read while Spark starts (local mode; a cluster's small input)
    prepass = first_reading.start(master, files, str(out), options, partitions)
    builder = None
    if report is not None:
        from dissector.output.report import ReportBuilder

        builder = ReportBuilder(options, max_frames=max_frames)

        def build(records) -> None:
            for rec in records:
                builder.add(rec)
    context = watch = failed = None
    progress = Progress(None, console, str(out), len(files), partitions or 0,
                        starting=f"starting Spark on {master}", indexing=prepass is not None)

    def waiting(seconds: float) -> None:  # said once, on a terminal or in a log, before the run ends for it
        limit = f"; the run ends after {executor_wait:g} s without one (--executor-wait)" if executor_wait else ""
        console.write(_folded(f"pulsar-dissect pipeline: waiting for an executor: none registered on {master} in "
                              f"{seconds:.0f} s{limit}", sys.stderr) + "\n")
    try:
        with progress:
            try:
                context = job.start(master, spark_conf, class_archive=True,
                                    log_level="warn" if verbose else "error",
                                    launch=functools.partial(launch_jvm, console=console, verbose=verbose))
                stages.done("spark_start")
            except Exception as exc:  # no Java, a master that cannot be reached: pyspark's own error types vary
                progress.__exit__(None, None, None)
                typer.echo(_folded(f"pulsar-dissect pipeline: cannot start Spark on {master}: "
                                   f"{str(exc).splitlines()[0]}", sys.stderr), err=True)
                raise typer.Exit(EXIT_UNREADABLE)
            if first_reading.local_cores(master) is None:  # a cluster's executors may never come (local: the driver)
                watch = ExecutorWatch(context, executor_wait, waiting)
                watch.start()
            progress.attach(context, partitions or job.default_partitions(context), watch)
            try:
                summary = job.run(context, inputs, str(out), options=options, partitions=partitions,
                                  records=build if builder is not None else None, stages=stages,
                                  with_json=with_json, prepass=prepass)
            except Exception as exc:
                failed = job.failure(exc)
                if (watch is None or not watch.timed_out) and failed is None:
                    raise
                summary = None  # cancelled by the watch, or a failed Spark job: said below, once Spark stopped
        console.status("stopping Spark")
    finally:
        if watch is not None:
            watch.stop()
        if prepass is not None:
            prepass.cancel()  # a run that failed (or Spark that did not start) before it waited for it
        if context is not None:
            job.stop(context)
        console.clear()
    if summary is None and (watch is None or not watch.timed_out):
        from dissector.output.text import safe

        typer.echo(_folded(f"pulsar-dissect pipeline: the Spark job failed: {safe(failed)} (with -v, Spark's log "
                           f"of it; on a cluster also the executor's stderr on its worker); {out} holds no "
                           f"summary.json", sys.stderr), err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    if summary is None:
        typer.echo(_folded(f"pulsar-dissect pipeline: no executor registered on {master} in {executor_wait:g} s "
                           f"(--executor-wait): the run was cancelled, {out} holds no summary.json. A worker needs "
                           f"the cores and memory the job asks (spark.executor.cores, spark.executor.memory); an "
                           f"executor that exits as it starts says why in its stderr on the worker",
                           sys.stderr), err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    stages.done("spark_stop")
    if prepass is not None and prepass.failed:  # the tables are whole; only the time it would have saved is lost
        typer.echo(_folded(f"pulsar-dissect pipeline: warning: the first reading of the input failed (its output: "
                           f"{Path(out) / first_reading.LOG}); Spark's tasks read it again, and the tables are whole",
                           sys.stderr), err=True)
    _write_stages(out, stages.seconds)
    if builder is not None:
        name = Path(files[0]).name if len(files) == 1 else f"{Path(files[0]).name} and {len(files) - 1} more"
        _write_report(builder, report, name, None, "pipeline")
    if json_out:
        json_writer(sys.stdout)({**summary, "stages": stages.seconds})
    else:
        for line in summary_lines(summary):
            typer.echo(line)
        typer.echo(_folded(f"tables written to {out}/ (frames, messages, exchanges, events, problems, files; "
                           f"summary.json)", sys.stdout))
        for line in stages_lines(stages.seconds):  # where the time went: information, on standard error
            typer.echo(line, err=True)
    if strict and any(row["severity"] in ("error", "warning") for row in summary["problems"]):
        raise typer.Exit(EXIT_PROBLEMS)


@app.command("check")
@_pipe_safe
def check_cmd(
    captures: List[str] = typer.Argument(..., help="capture files, directories or glob patterns"),
    rules_files: Optional[List[Path]] = typer.Option(None, "--rules", help="a YAML rule file (docs/commands/check.md)"),
    rule_texts: Optional[List[str]] = typer.Option(None, "--rule", help='a rule, e.g. no-errors, '
                                                   '"latency SEND p99 < 20ms", \'count(type == "SEND") == 10\''),
    junit: Optional[Path] = typer.Option(None, "--junit", help="also write JUnit XML to FILE"),
    json_out: bool = typer.Option(False, "--json", help="one JSON object per capture and rule"),
    port: Optional[List[str]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    max_frame_size: Optional[int] = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
    settings: Optional[List[str]] = SET_OPT,
    allow_empty: bool = typer.Option(False, "--allow-empty",
                                     help="pass a capture in which nothing was decoded (by default it fails, "
                                          "with the hint: which ports had TCP)"),
) -> None:
    """Assert rules on recorded captures: exit 0 when every rule holds, 1 when one fails, 2 when a capture or
    the rules cannot be read. A capture in which nothing was decoded fails (rule kind `decoded`) unless
    --allow-empty."""
    from dissector.check import run_check
    from dissector.check.parse import RuleError, rule_from_text, rules_from_yaml
    from dissector.check.report import as_json, as_junit, as_text

    options = _options(port, detect, max_frame_size, max_decompressed, settings)
    sources = [(path, path.read_text(encoding="utf-8")) for path in rules_files or () if _readable(path)]

    def fresh_rules():  # rules keep per-capture state: new ones for every capture
        try:
            rules = [rule for path, text in sources for rule in rules_from_yaml(text, str(path))]
            for text in rule_texts or ():
                try:
                    rules.append(rule_from_text(text))
                except ExprError as exc:
                    raise RuleError(f"--rule {text!r}: bad expression: {exc.describe()}") from None
        except RuleError as exc:
            typer.echo(f"pulsar-dissect check: {exc}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        if not rules:
            typer.echo("pulsar-dissect check: no rules: give --rules FILE or --rule TEXT", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        return rules

    fresh_rules()  # the rules are checked before any capture is read
    paths = _captures(captures)
    if not paths:
        typer.echo("pulsar-dissect check: no capture files found", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    results, unreadable = [], 0
    write = json_writer(sys.stdout)
    for path in paths:
        try:
            source = sys.stdin.buffer if str(path) == "-" else path  # - is standard input, as elsewhere
            result = run_check(source, fresh_rules(), options, name=str(path), allow_empty=allow_empty)
        except CaptureError as exc:
            typer.echo(f"pulsar-dissect check: {exc}", err=True)
            unreadable += 1
            continue
        results.append(result)
        if json_out:
            for obj in as_json(result):
                write(obj)
        else:
            typer.echo(_folded(as_text(result), sys.stdout))
    if junit is not None:
        try:
            junit.write_bytes(as_junit(results))
        except OSError as exc:
            typer.echo(f"pulsar-dissect check: cannot write {junit}: {exc.strerror or exc}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
    if unreadable:
        raise typer.Exit(EXIT_UNREADABLE)
    raise typer.Exit(EXIT_OK if all(r.passed for r in results) else EXIT_PROBLEMS)


def _readable(path: Path) -> bool:
    if not path.is_file():
        typer.echo(f"pulsar-dissect check: cannot read the rule file {path}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    return True


SUBCOMMANDS = {"dissect", "follow", "stats", "problems", "report", "check", "live", "pipeline"}


def _widen_stdout_pipe() -> None:
    """A pipe holds 64 KiB: the output (a batch of lines is some 200 KiB) then waits on the reader (jq, grep,
    a pager) every few lines. Ask for 1 MiB (the most an unprivileged process gets); nothing else changes."""
    try:
        import fcntl
        import os
        import stat

        if stat.S_ISFIFO(os.fstat(1).st_mode):
            fcntl.fcntl(1, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ValueError, ImportError):
        pass  # not a pipe we may widen: it works as it is


def main(argv: list[str] | None = None) -> None:
    # A command-line run allocates millions of short-lived objects that reference counting frees; the cyclic
    # collector scanning the long-lived ones again and again cost a third of the time on big captures. The
    # CLI (not the library) freezes what exists at start-up and collects less often.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    _widen_stdout_pipe()
    args = list(sys.argv[1:] if argv is None else argv)
    # `pulsar-dissect FILE` is the main job: route it to the dissect command.
    if args and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h", "--version", "-v"):
        _mistyped_command(args[0])
        args.insert(0, "dissect")
    sys.exit(_invoke(args))


def _mistyped_command(word: str) -> None:
    """A first word that is no file but close to a command (`stat x.pcap`): say which, exit 2, rather than
    read it as a capture that does not exist."""
    import difflib

    if word.startswith("-") or os.path.exists(word) or "/" in word or "." in word:
        return
    close = difflib.get_close_matches(word, sorted(SUBCOMMANDS), n=2, cutoff=0.6)
    if close:
        typer.echo(f"pulsar-dissect: no command {word!r} and no file of that name; did you mean "
                   f"{' or '.join(close)}?", err=True)
        sys.exit(EXIT_UNREADABLE)


def _invoke(args: list[str]) -> int:
    """Run the command line; the exit code. A usage error (an unknown option, a bad value, a value out of its
    range) is one line on stderr naming the command, and exit 2, as every other error of the tool."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    stdout = sys.stdout
    try:
        code = app(args=args, prog_name="pulsar-dissect", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `pulsar-dissect` alone: the help, as asked
        exc.show()
        return exc.exit_code
    except ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "pulsar-dissect"
        hint = f" (see {command} -h)" if ctx is not None else ""
        message = " ".join(exc.format_message().split())  # one line, whatever Click's text held
        typer.echo(f"{command}: {message}{hint}", err=True)
        return exc.exit_code
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        return EXIT_PROBLEMS
    except SystemExit as exc:
        # Click's own output (the help) to a reader that went away: Click swaps standard output for a wrapper
        # and exits 1. A closed pipe is not a failure.
        if exc.code == 1 and sys.stdout is not stdout:
            _silence_stdout()
            return EXIT_OK
        raise
    return code if isinstance(code, int) else EXIT_OK


if __name__ == "__main__":
    main()
