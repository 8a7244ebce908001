"""`pulsar-dissect`: the command line. Parses options, runs the pipeline, picks a renderer; nothing more."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from dissector import codecs
from dissector.capture import CaptureError
from dissector.framing import DEFAULT_MAX_FRAME_SIZE
from dissector.pipeline import DEFAULT_PORTS, FrameEvent, Options
from dissector.run import analysed_events
from dissector.records import record
from dissector.expert import EVENT_SEVERITY, NOTE, is_note
from dissector.filters import FrameFilter
from dissector.render_stats import render_stats
from dissector.render_timeline import TimelineRenderer
from dissector.stats import StatsCollector

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                  help="Apache Pulsar wire-protocol analyzer: decode captures into an annotated timeline.")

EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE = 0, 1, 2


@app.callback()
def _root() -> None:
    """Apache Pulsar wire-protocol analyzer. `pulsar-dissect CAPTURE` decodes a capture."""


def _split_csv(values: Optional[List[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out


def _options(port, detect, max_frame_size, max_decompressed) -> Options:
    return Options(ports=frozenset(DEFAULT_PORTS | set(port or [])), detect=detect,
                   max_frame_size=max_frame_size, max_decompressed=max_decompressed)


class TimelineOutput:
    """Writes accepted events as timeline lines or JSON Lines and counts problems (for --strict)."""

    def __init__(self, *, json_out: bool, plain: bool, no_color: bool, absolute_time: bool = False,
                 details: bool = False, payload: bool = False, max_frames: int | None = None) -> None:
        self.out = sys.stdout
        self.payload = payload
        self.max_frames = max_frames
        self.renderer = None
        self.console = Console(file=self.out, no_color=no_color or plain, highlight=False,
                               force_terminal=False if (no_color or plain) else None)
        if not json_out:
            self.renderer = TimelineRenderer(self.console, plain=plain or no_color, absolute_time=absolute_time,
                                             details=details, show_payload=payload)
        self.write_json = json_writer(self.out)
        # The timeline shows per-message data only with --payload or --details.
        self.summary = not json_out and not (payload or details)
        if self.renderer is not None and not self.console.is_terminal:
            self.renderer.plain = True  # piped or redirected: plain lines, no wrapping
        self.shown = 0
        self.problems = 0

    def count(self, ev) -> None:
        if type(ev) is FrameEvent:
            self.problems += sum(1 for p in ev.frame.problems if not is_note(p))
        elif EVENT_SEVERITY.get(ev.kind, NOTE) != NOTE:
            self.problems += 1

    def emit(self, ev) -> bool:
        """Write one event; False once --max-frames is reached."""
        if type(ev) is FrameEvent:
            if self.max_frames is not None and self.shown >= self.max_frames:
                return False
            self.shown += 1
        rec = record(ev, payload_bytes=self.payload, summary=self.summary)
        if self.renderer is None:
            self.write_json(rec)
        else:
            self.renderer.render(rec)
        return True


def _run(capture: Path, options: Options, flt: FrameFilter, output: TimelineOutput, sink=None) -> None:
    """Decode, filter and output; ``sink`` also sees every accepted event. Exits 2 on unreadable input."""
    try:
        for ev in analysed_events(capture, options):
            output.count(ev)
            if not flt.accepts(ev):
                continue
            if not output.emit(ev):
                break
            if sink is not None:
                sink(ev)
        output.out.flush()
    except CaptureError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(EXIT_OK)


def _strict_exit(strict: bool, output: TimelineOutput) -> None:
    if strict and output.problems:
        typer.echo(f"pulsar-dissect: {output.problems} problem(s) found", err=True)
        raise typer.Exit(EXIT_PROBLEMS)


CAPTURE_ARG = typer.Argument(..., help="pcap or pcapng file (gzip-compressed is fine)")
PORT_OPT = typer.Option(None, "--port", help="extra broker port (6650 and 6651 always count)")
DETECT_OPT = typer.Option(False, "--detect", help="also find Pulsar on connections off the broker ports")
MAX_FRAME_OPT = typer.Option(DEFAULT_MAX_FRAME_SIZE, "--max-frame-size", help="largest TOTAL_SIZE accepted")
MAX_DECOMPRESSED_OPT = typer.Option(codecs.DEFAULT_MAX_DECOMPRESSED, "--max-decompressed",
                                    help="largest payload to decompress, in bytes")


@app.command("dissect")
def dissect_cmd(
    capture: Path = CAPTURE_ARG,
    json_out: bool = typer.Option(False, "--json", help="JSON Lines: one object per frame or event"),
    port: Optional[List[int]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    conn: Optional[List[str]] = typer.Option(None, "--conn", help="only these connection numbers"),
    type_: Optional[List[str]] = typer.Option(None, "--type", "-t", help="only these command types (SEND,MESSAGE)"),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="only frames about this topic"),
    producer: Optional[List[str]] = typer.Option(None, "--producer", help="only this producer (name or id)"),
    consumer: Optional[List[str]] = typer.Option(None, "--consumer", help="only this consumer (name or id)"),
    max_frames: Optional[int] = typer.Option(None, "--max-frames", help="stop after this many frames shown"),
    strict: bool = typer.Option(False, "--strict", help="exit 1 when any frame or stream has problems"),
    no_color: bool = typer.Option(False, "--no-color", help="no colours"),
    plain: bool = typer.Option(False, "--plain", help="plain text, no colours, no wrapping (for pagers)"),
    absolute_time: bool = typer.Option(False, "--absolute-time", help="UTC wall-clock times, not relative"),
    details: bool = typer.Option(False, "--details", "-V", help="every decoded field under each frame"),
    payload: bool = typer.Option(False, "--payload", help="show payloads (JSON: payload_text / payload_b64)"),
    max_frame_size: int = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
) -> None:
    """Decode a capture into a request/response timeline (or JSON Lines with --json)."""
    options = _options(port, detect, max_frame_size, max_decompressed)
    flt = FrameFilter(_split_csv(conn), _split_csv(type_), topic or [], producer or [], consumer or [])
    output = TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, absolute_time=absolute_time,
                            details=details, payload=payload, max_frames=max_frames)
    _run(capture, options, flt, output)
    _strict_exit(strict, output)


@app.command("follow")
def follow_cmd(
    capture: Path = CAPTURE_ARG,
    producer: Optional[List[str]] = typer.Option(None, "--producer", help="the producer to follow (name or id)"),
    consumer: Optional[List[str]] = typer.Option(None, "--consumer", help="the consumer to follow (name or id)"),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="the topic to follow"),
    json_out: bool = typer.Option(False, "--json", help="JSON Lines instead of the timeline"),
    port: Optional[List[int]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    plain: bool = typer.Option(False, "--plain", help="plain text, no colours"),
    no_color: bool = typer.Option(False, "--no-color", help="no colours"),
    payload: bool = typer.Option(False, "--payload", help="show payloads"),
    strict: bool = typer.Option(False, "--strict", help="exit 1 when the actor's frames have problems"),
    max_frame_size: int = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
) -> None:
    """One actor's story: every frame of a producer, a consumer or a topic, then its summary."""
    if not (producer or consumer or topic):
        typer.echo("pulsar-dissect follow: name a --producer, --consumer or --topic", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    options = _options(port, detect, max_frame_size, max_decompressed)
    flt = FrameFilter([], [], topic or [], producer or [], consumer or [])
    output = TimelineOutput(json_out=json_out, plain=plain, no_color=no_color, payload=payload)
    stats = StatsCollector()
    actor_problems = 0

    def sink(ev) -> None:
        nonlocal actor_problems
        stats.add(ev)
        if type(ev) is FrameEvent:
            actor_problems += sum(1 for p in ev.frame.problems if not is_note(p))

    _run(capture, options, flt, output, sink)
    if output.renderer is not None:
        if output.shown == 0:
            output.console.print("nothing in this capture matches", markup=False)
        else:
            render_stats(stats.result(), output.console)
    output.problems = actor_problems
    _strict_exit(strict, output)


@app.command("stats")
def stats_cmd(
    capture: Path = CAPTURE_ARG,
    json_out: bool = typer.Option(False, "--json", help="the statistics as one JSON object"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="also draw latency plots to FILE.png or FILE.svg"),
    port: Optional[List[int]] = PORT_OPT,
    detect: bool = DETECT_OPT,
    plain: bool = typer.Option(False, "--plain", help="plain text, no colours"),
    no_color: bool = typer.Option(False, "--no-color", help="no colours"),
    max_frame_size: int = MAX_FRAME_OPT,
    max_decompressed: int = MAX_DECOMPRESSED_OPT,
) -> None:
    """Per connection, topic, producer and consumer: counts, bytes, batches, compression, latency, errors."""
    if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
        typer.echo("pulsar-dissect stats: --plot takes a .png or .svg file name", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    options = _options(port, detect, max_frame_size, max_decompressed)
    stats = StatsCollector()
    try:
        for ev in analysed_events(capture, options):
            stats.add(ev)
    except CaptureError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    data = stats.result()
    if json_out:
        json_writer(sys.stdout)(data)
    else:
        render_stats(data, Console(no_color=no_color or plain, highlight=False,
                                   force_terminal=False if (no_color or plain) else None))
    if plot is not None:
        try:
            from dissector.plot import plot_latency
            import matplotlib  # noqa: F401
        except ImportError:
            typer.echo("pulsar-dissect stats: --plot needs matplotlib (pip install 'pulsar-dissect[plot]')",
                       err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        plot_latency(stats.latency_samples, plot, title=f"{capture.name}: request latency over time")
        typer.echo(f"latency plot written to {plot}", err=True)


_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


def _json_default(value):
    """Last line of defence for values JSON cannot hold: wire bytes become escaped text, never a crash."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_writer(out):
    """A function writing one JSON Lines record; orjson when installed (several times faster)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency; stay usable without it
        return lambda rec: out.write(json.dumps(rec, separators=(",", ":"), default=_json_default) + "\n")
    buffer = out.buffer if hasattr(out, "buffer") else None
    if buffer is None:
        return lambda rec: out.write(json.dumps(rec, separators=(",", ":"), default=_json_default) + "\n")
    option = orjson.OPT_APPEND_NEWLINE
    dumps = orjson.dumps

    def write(rec: dict) -> None:
        data = dumps(rec, option=option, default=_json_default)
        if b"\xc2" in data:  # JSON allows raw C1 controls (U+0080..U+009F); a terminal would obey them
            data = _C1_UTF8.sub(lambda m: b"\\u%04x" % m.group()[1], data)
        buffer.write(data)

    return write


SUBCOMMANDS = {"dissect", "follow", "stats"}


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    # `pulsar-dissect FILE` is the main job: route it to the dissect command.
    if args and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h"):
        args.insert(0, "dissect")
    app(args=args, prog_name="pulsar-dissect")


if __name__ == "__main__":
    main()
