"""`pulsar-dissect`: the command line. Parses options, runs the pipeline, picks a renderer; nothing more."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from dissector import codecs
from dissector.analysis import topic_of
from dissector.capture import CaptureError
from dissector.framing import DEFAULT_MAX_FRAME_SIZE
from dissector.pipeline import DEFAULT_PORTS, FrameEvent, Options
from dissector.run import analysed_events
from dissector.records import record
from dissector.render_timeline import TimelineRenderer

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


class FrameFilter:
    """Which records to show: by connection, type, topic, producer, consumer."""

    def __init__(self, conns, types, topics, producers, consumers) -> None:
        self.conns = {int(c) for c in conns}
        self.types = {t.upper() for t in types}
        self.topics = set(topics)
        self.producers = set(producers)
        self.consumers = set(consumers)
        self.actor_filter = bool(self.topics or self.producers or self.consumers)

    def accepts(self, ev) -> bool:
        if self.conns and (ev.conn is None or ev.conn.id not in self.conns):
            return ev.conn is None and not self.actor_filter
        if type(ev) is not FrameEvent:
            if self.types and ev.kind not in self.types:
                return False
            return not self.actor_filter or ev.conn is None
        if self.types and ev.frame.type not in self.types:
            return False
        if self.topics and topic_of(ev) not in self.topics:
            return False
        if self.producers and not _actor_matches(ev, "producer", "producer_id", self.producers):
            return False
        if self.consumers and not _actor_matches(ev, "consumer", "consumer_id", self.consumers):
            return False
        return True


def _actor_matches(ev: FrameEvent, key: str, id_field: str, wanted: set[str]) -> bool:
    cmd = ev.frame.command
    info = ev.notes.get(key) or {}
    name = info.get("name")
    if cmd is not None and ev.frame.type in ("PRODUCER", "SUBSCRIBE"):
        name = getattr(cmd, "producer_name" if key == "producer" else "consumer_name", None) or name
        if (key == "producer") != (ev.frame.type == "PRODUCER"):
            return False
    if name is not None and name in wanted:
        return True
    if cmd is not None and hasattr(cmd, id_field) and (key in ev.notes or ev.frame.type in ("PRODUCER", "SUBSCRIBE")):
        return str(getattr(cmd, id_field)) in wanted
    return False


@app.command("dissect")
def dissect_cmd(
    capture: Path = typer.Argument(..., help="pcap or pcapng file (gzip-compressed is fine)"),
    json_out: bool = typer.Option(False, "--json", help="JSON Lines: one object per frame or event"),
    port: Optional[List[int]] = typer.Option(None, "--port", help="extra broker port (default 6650, 6651)"),
    detect: bool = typer.Option(False, "--detect", help="also find Pulsar on connections off the Pulsar ports"),
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
    max_frame_size: int = typer.Option(DEFAULT_MAX_FRAME_SIZE, "--max-frame-size", help="largest TOTAL_SIZE"),
    max_decompressed: int = typer.Option(codecs.DEFAULT_MAX_DECOMPRESSED, "--max-decompressed",
                                         help="largest payload to decompress, bytes"),
) -> None:
    """Decode a capture into a request/response timeline (or JSON Lines with --json)."""
    options = Options(ports=frozenset(DEFAULT_PORTS | set(port or [])), detect=detect,
                      max_frame_size=max_frame_size, max_decompressed=max_decompressed)
    flt = FrameFilter(_split_csv(conn), _split_csv(type_), topic or [], producer or [], consumer or [])
    out = sys.stdout
    renderer = None
    if not json_out:
        console = Console(file=out, no_color=no_color or plain, highlight=False,
                          force_terminal=None if not (no_color or plain) else False)
        renderer = TimelineRenderer(console, plain=plain or no_color, absolute_time=absolute_time,
                                    details=details, show_payload=payload)
    write_json = json_writer(out)
    shown = 0
    problems = 0
    try:
        for ev in analysed_events(capture, options):
            is_frame = type(ev) is FrameEvent
            if is_frame and ev.frame.problems or not is_frame and ev.kind not in ("CONNECTION_OPENED",
                                                                                   "CONNECTION_CLOSED"):
                problems += 1
            if not flt.accepts(ev):
                continue
            if is_frame:
                if max_frames is not None and shown >= max_frames:
                    break
                shown += 1
            rec = record(ev, payload_bytes=payload)
            if renderer is None:
                write_json(rec)
            else:
                renderer.render(rec)
    except CaptureError as exc:
        typer.echo(f"pulsar-dissect: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(EXIT_OK)
    if strict and problems:
        typer.echo(f"pulsar-dissect: {problems} problem(s) found", err=True)
        raise typer.Exit(EXIT_PROBLEMS)


def json_writer(out):
    """A function writing one JSON Lines record; orjson when installed (several times faster)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency; stay usable without it
        return lambda rec: out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    buffer = out.buffer if hasattr(out, "buffer") else None
    if buffer is None:
        return lambda rec: out.write(orjson.dumps(rec).decode() + "\n")
    option = orjson.OPT_APPEND_NEWLINE
    return lambda rec: buffer.write(orjson.dumps(rec, option=option))


SUBCOMMANDS = {"dissect"}


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    # `pulsar-dissect FILE` is the main job: route it to the dissect command.
    if args and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h"):
        args.insert(0, "dissect")
    app(args=args, prog_name="pulsar-dissect")


if __name__ == "__main__":
    main()
