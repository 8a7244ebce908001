"""Tell the user what happened: packet numbers on every timeline line, -x (the frame's bytes), -V (the tree of
decoded fields, bytes read as on the line), fixed-precision latency columns, tables that never split a value,
and `follow` saying how the followed actor's connections and requests ended.

Expectations come from the JSON records (the contract), the manifests and the capture itself (scapy reads the
packets, not our reader); the text is parsed by its structure, not by its wording.
"""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

import framebuild as fb
from corpus import capture_path, decoded, manifest
from dissector.cli.main import app
from dissector.output.render_stats import render_stats
from dissector.output.text import hex_dump

runner = CliRunner()
COLUMNS_80 = {"COLUMNS": "80", "NO_COLOR": None, "FORCE_COLOR": None}

# a timeline line: frame number (or - for an event), time, packet(s)
LINE = re.compile(r"^\s*(\d+|-)\s+(\+\d+\.\d{6})\s+p(\d+)(?:-(\d+))?\s")
# a hex dump line: offset, 16 bytes (padded to 47 columns), their ASCII
DUMP = re.compile(r"^ +([0-9a-f]{4,8})  ([0-9a-f ]{47})  (.{1,16})$")


def cli(*args, env=COLUMNS_80):
    res = runner.invoke(app, [str(a) for a in args], env=env)
    return res


def json_records(*args) -> list[dict]:
    res = cli(*args, "--json")
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(the timeline line, the lines under it) for each record of a plain timeline."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if LINE.match(line):
            out.append((line, []))
        else:
            assert out, line
            out[-1][1].append(line)
    return out


def dumped(lines: list[str]) -> bytes:
    """The bytes of the hex dump lines among ``lines``, checked against their offsets and ASCII column."""
    chunks: list[bytes] = []
    size = 0
    for line in lines:
        m = DUMP.match(line)
        if not m:
            continue
        assert int(m[1], 16) == size
        chunk = bytes.fromhex(m[2])
        assert m[3] == chunk.translate(_ASCII).decode("ascii")
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


_ASCII = bytes(b if 0x20 <= b < 0x7F else ord(".") for b in range(256))


def tcp_payloads(name: str) -> dict[int, tuple[str, str, bytes]]:
    """packet number (1-based) -> (src, dst, TCP payload), read by scapy."""
    pytest.importorskip("scapy")
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap

    out = {}
    for number, pkt in enumerate(rdpcap(str(capture_path(name))), 1):
        if TCP in pkt and IP in pkt:
            out[number] = (f"{pkt[IP].src}:{pkt[TCP].sport}", f"{pkt[IP].dst}:{pkt[TCP].dport}",
                           bytes(pkt[TCP].payload))
    return out


# ------------------------------------------------------------------------------------- packet numbers
@pytest.mark.parametrize("name", ["01_basic_nonbatched.pcap", "04_chunking.pcap", "11_errors.pcap"])
def test_every_timeline_line_names_the_packet_of_its_record(name):
    records = list(decoded(name))
    res = cli("dissect", capture_path(name), "--plain")
    assert res.exit_code == 0, res.stderr
    lines = [line for line, _ in blocks(res.stdout)]
    assert len(lines) == len(records)  # --plain: one line per record (problems under it, indented)
    spanning = 0
    for line, rec in zip(lines, records):
        m = LINE.match(line)
        assert m, line
        assert m[1] == (str(rec["index"]) if "index" in rec else "-")
        if m[4] is None:
            assert int(m[3]) == rec["packet"] and "first_packet" not in rec, line
        else:
            assert (int(m[3]), int(m[4])) == (rec["first_packet"], rec["packet"]), line
            spanning += 1
    if name.startswith("04"):
        assert spanning  # the chunks of 04_chunking span many packets


def test_follow_lines_name_their_packets_too():
    name = manifest("01_basic_nonbatched")["producer"]["producer_name"]
    by_index = {r["index"]: r for r in decoded("01_basic_nonbatched.pcap") if "index" in r}
    res = cli("follow", capture_path("01_basic_nonbatched.pcap"), "--producer", name, "--plain")
    assert res.exit_code == 0, res.stderr
    frames = [LINE.match(line) for line in res.stdout.splitlines() if LINE.match(line)]
    frames = [m for m in frames if m[1] != "-"]
    assert len(frames) > 10
    assert all(int(m[3]) == by_index[int(m[1])]["packet"] for m in frames)


def test_the_packet_named_carries_the_frame():
    """The error the timeline shows is in the packet it names (scapy reads the pcap, not our reader)."""
    wire = tcp_payloads("11_errors.pcap")
    error = next(r for r in decoded("11_errors.pcap") if r.get("type") == "ERROR")
    text = cli("dissect", capture_path("11_errors.pcap"), "--plain", "--type", "ERROR").stdout
    (line,) = [ln for ln in text.splitlines() if LINE.match(ln)]
    packet = int(LINE.match(line)[3])
    assert packet == error["packet"]
    assert error["command"]["message"].encode() in wire[packet][2]


# ------------------------------------------------------------------------------------------------ -x
@pytest.mark.parametrize("name, args", [
    ("01_basic_nonbatched.pcap", []),
    ("02_batching_props_keys.pcap", ["-Y", 'type == "SEND" or type == "ACK"', "-c", "7"]),
])
def test_hex_dump_is_each_frames_bytes_on_the_wire(name, args):
    wire = tcp_payloads(name)
    by_index = {r["index"]: r for r in decoded(name) if "index" in r}
    res = cli("dissect", capture_path(name), "-x", "--plain", *args)
    assert res.exit_code == 0, res.stderr
    frames = [(int(LINE.match(line)[1]), under) for line, under in blocks(res.stdout) if LINE.match(line)[1] != "-"]
    assert frames
    for index, under in frames:
        rec = by_index[index]
        data = dumped(under)
        assert len(data) == rec["size"]
        assert int.from_bytes(data[:4], "big") == rec["size"] - 4  # TOTAL_SIZE
        first = rec.get("first_packet", rec["packet"])
        carried = b"".join(p for n in range(first, rec["packet"] + 1)
                           for src, dst, p in [wire[n]] if (src, dst) == (rec["src"], rec["dst"]))
        assert data in carried, index
        assert all(len(line) <= 80 for line in under)


def test_hex_dump_follows_the_filter_and_the_chunks(tmp_path):
    """Each frame's own bytes, with a filter that skips frames and with frames that span packets."""
    m = manifest("04_chunking")
    res = cli("dissect", capture_path("04_chunking.pcap"), "-x", "--plain", "-Y", 'type == "SEND"')
    assert res.exit_code == 0, res.stderr
    sends = [r for r in decoded("04_chunking.pcap") if r.get("type") == "SEND"]
    got = [(LINE.match(line), dumped(under)) for line, under in blocks(res.stdout) if LINE.match(line)[1] != "-"]
    assert [int(m_[1]) for m_, _ in got] == [r["index"] for r in sends]
    assert len(sends) == sum(s.get("expected_chunks", 1) for s in m["sent"])
    for (_, data), rec in zip(got, sends):
        assert len(data) == rec["size"] and int.from_bytes(data[:4], "big") == rec["size"] - 4


def test_hex_dump_shows_no_escape_sequences():
    dump = "\n".join(hex_dump(bytes(range(256)) + b"\x1b[31mRED\x9b"))
    assert "\x1b" not in dump and "\x9b" not in dump and "\x07" not in dump
    assert all(32 <= ord(ch) < 127 for ch in dump.replace("\n", ""))
    assert dumped(dump.splitlines()) == bytes(range(256)) + b"\x1b[31mRED\x9b"


def test_hex_dump_needs_the_timeline():
    cap = capture_path("01_basic_nonbatched.pcap")
    for args in (["dissect", cap, "-x", "--json"], ["follow", cap, "--topic", "t", "-x", "--json"],
                 ["live", "-x", "--json"]):
        res = cli(*args)
        assert res.exit_code == 2 and "-x" in res.stderr and "Traceback" not in res.output, args


def _dumps(text: str) -> list[tuple[int, bytes, list[str]]]:
    """(frame number, its dumped bytes, the lines under it) of each frame of a plain timeline."""
    return [(int(LINE.match(line)[1]), dumped(under), under) for line, under in blocks(text)
            if LINE.match(line)[1] != "-"]


def test_hex_dump_from_standard_input_is_the_same_as_from_the_file():
    """One reading: the records carry the bytes, so standard input works as a file does."""
    cap = capture_path("02_batching_props_keys.pcap")
    from_file = cli("dissect", cap, "-x", "--plain", "-Y", 'type == "SEND" or type == "ACK"')
    with open(cap, "rb") as fh:
        from_stdin = runner.invoke(app, ["dissect", "-", "-x", "--plain", "-Y", 'type == "SEND" or type == "ACK"'],
                                   input=fh.read(), env=COLUMNS_80)
    assert from_file.exit_code == from_stdin.exit_code == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout
    dumps = _dumps(from_stdin.stdout)
    by_index = {r["index"]: r for r in decoded("02_batching_props_keys.pcap") if "index" in r}
    assert dumps and all(len(data) == by_index[i]["size"] for i, data, _ in dumps)


def test_hex_dump_of_a_frame_with_missing_bytes_says_how_many(tmp_path):
    """A frame damaged by a capture gap: the bytes before the gap, then how many are not in the capture."""
    frames = [fb.simple_frame("CONNECT", client_version="t"), fb.send_frame(b"q" * 3000, sequence_id=1),
              fb.simple_frame("PING")]
    path = tmp_path / "gap.pcap"
    fb.tcp_pcap(path, [("c", f) for f in frames], segment_size=[len(frames[0]), 1000, 1000, 2000], drop=[2])
    res = cli("dissect", path, "-x", "--plain")
    assert res.exit_code == 0, res.stderr
    dumps = {i: (data, under) for i, data, under in _dumps(res.stdout)}
    data, under = dumps[2]
    assert data == frames[1][:1000]
    assert any(f"{len(frames[1]) - 1000} bytes not shown" in line for line in under)
    assert dumps[1][0] == frames[0]


def test_hex_dump_in_live(monkeypatch):
    """live -x: the same dump under each line as from the file the packets came from."""
    import signal

    import dissector.capture.live as live
    from dissector.capture.files import open_capture

    cap = capture_path("01_basic_nonbatched.pcap")

    class Source:
        def packets(self, stop):
            with open_capture(cap) as reader:
                for packet in reader:
                    yield packet
                    yield None  # an idle moment between packets

        def poll_stats(self):
            return type("Stats", (), {"received": 0, "kernel_dropped": 0, "duplicates": 0})()

        def close(self):
            pass

    monkeypatch.setattr(live, "open_live", lambda engine, interface, capture: Source())
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = cli("live", "-x", "--plain")
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert res.exit_code == 0, res.stderr
    got = _dumps(res.stdout)
    offline = _dumps(cli("dissect", cap, "-x", "--plain").stdout)
    assert got and [(i, d) for i, d, _ in got] == [(i, d) for i, d, _ in offline]


def test_json_records_never_carry_the_frame_bytes():
    from dissector.options import Options
    from dissector.run import analysed_records

    cap = capture_path("01_basic_nonbatched.pcap")
    assert not any("frame_bytes" in r for r in decoded("01_basic_nonbatched.pcap"))
    kept = [r for r in analysed_records(cap, Options(keep_frame_bytes=True)) if "index" in r]
    assert kept and all(isinstance(r["frame_bytes"], bytes) and len(r["frame_bytes"]) == r["size"] for r in kept)
    assert not any("frame_bytes" in r for r in map(json.loads, cli("dissect", cap, "--json").stdout.splitlines()))


# ------------------------------------------------------------------------------------------------ -V
def _tree(under: list[str]) -> list[tuple[int, str]]:
    """(depth, text) of the tree lines under a frame (depth 0 at 8 columns, 4 columns a level)."""
    out = []
    for line in under:
        if DUMP.match(line) or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert indent >= 8 and (indent - 8) % 4 == 0, line
        out.append(((indent - 8) // 4, line.strip()))
    return out


def _children(tree: list[tuple[int, str]], head: str, depth: int = 0) -> list[tuple[int, str]]:
    """The nodes under the first node ``head`` at ``depth``."""
    start = tree.index((depth, head)) + 1
    end = next((i for i in range(start, len(tree)) if tree[i][0] <= depth), len(tree))
    return tree[start:end]


def test_details_tree_nests_every_field_and_reads_bytes_as_text_as_the_line_does():
    name = "02_batching_props_keys.pcap"
    m = manifest("02_batching_props_keys")
    sent = {s["i"]: s for s in m["sent"]}
    res = cli("dissect", capture_path(name), "-V", "--payload", "--plain", "-Y", 'type == "SEND"')
    assert res.exit_code == 0, res.stderr
    sends = [r for r in json_records("dissect", capture_path(name), "--payload", "-Y", 'type == "SEND"')
             if "index" in r]
    shown = [(line, under) for line, under in blocks(res.stdout) if LINE.match(line)[1] != "-"]
    assert len(shown) == len(sends) == m["summary"]["batches_entries"]
    for (line, under), rec in zip(shown, sends):
        tree = _tree(under)
        assert tree[0][0] == 0 and tree[0][1].startswith(f"frame {rec['index']}: {rec['size']} bytes")
        command = _children(tree, "command SEND")
        assert command == [(1, f"{k}: {v}") for k, v in rec["command"].items()]
        metadata = _children(tree, "metadata")
        wire_key = rec["metadata"].get("ordering_key")
        if wire_key is not None:  # base64 in the record, text in the tree, as for each message
            assert (1, f"ordering_key: {base64.b64decode(wire_key).decode()}") in metadata
            assert wire_key not in res.stdout
        messages = _children(tree, f"messages ({len(rec['messages'])})")
        for i, msg in enumerate(rec["messages"]):
            node = _children(messages, f"[{i}]", 1)
            truth = sent[msg["sequence_id"]]
            assert (2, f"payload: {truth['payload_utf8']}") in node
            assert (2, f"partition_key: {truth['partition_key']}") in node
            if truth.get("ordering_key"):
                assert (2, f"ordering_key: {truth['ordering_key']}") in node
            assert _children(node, "properties", 2) == [(3, f"{k}: {v}") for k, v in truth["properties"].items()]


@pytest.fixture(scope="module")
def binary_keys(tmp_path_factory):
    """A SEND whose schema version and ordering key are not text, and a GET_SCHEMA asking for that version."""
    path = tmp_path_factory.mktemp("bytes") / "bytes.pcap"
    version = bytes([0, 0, 0, 0, 0, 0, 1, 7])
    md = fb.metadata(producer_name="p", schema_version=version, ordering_key=b"\xff\xfe\x00k")
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="persistent://a/b/t", producer_id=1, request_id=1,
                                             producer_name="p")),
                       ("c", fb.send_frame(b"\xff\x01binary", producer_id=1, sequence_id=0, md=md)),
                       ("c", fb.simple_frame("GET_SCHEMA", topic="persistent://a/b/t", request_id=2,
                                             schema_version=version))])
    return path, version


def test_bytes_read_the_same_on_the_line_and_in_the_tree(binary_keys):
    path, version = binary_keys
    records = [r for r in json_records("dissect", path, "--payload") if "index" in r]
    b64 = {base64.b64encode(version).decode(), base64.b64encode(b"\xff\xfe\x00k").decode()}
    assert {r["metadata"]["schema_version"] for r in records if r["type"] == "SEND"} <= b64  # the record: base64
    res = cli("dissect", path, "-V", "--payload", "--plain")
    assert res.exit_code == 0, res.stderr
    assert not any(value in res.stdout for value in b64)  # never base64 on the screen
    shown = [(line.split()[6], line, _tree(under)) for line, under in blocks(res.stdout) if LINE.match(line)[1] != "-"]
    (send_line, send_tree), = [(line, tree) for kind, line, tree in shown if kind == "SEND"]
    (schema_line, schema_tree), = [(line, tree) for kind, line, tree in shown if kind == "GET_SCHEMA"]
    assert f" schema={version.hex()}" in send_line
    assert (1, f"schema_version (hex): {version.hex()}") in _children(send_tree, "metadata")
    assert f" version={version.hex()}" in schema_line
    assert (1, f"schema_version (hex): {version.hex()}") in _children(schema_tree, "command GET_SCHEMA")
    # a key that is not UTF-8: the same hex in the metadata and in the message
    assert (1, "ordering_key (hex): ff fe 00 6b") in _children(send_tree, "metadata")
    assert (2, "ordering_key (hex): ff fe 00 6b") in _children(_children(send_tree, "messages (1)"), "[0]", 1)
    assert (2, "payload (8 bytes, hex): ff 01 62 69 6e 61 72 79") in \
        _children(_children(send_tree, "messages (1)"), "[0]", 1)


def test_details_and_hex_dump_in_follow():
    name = manifest("01_basic_nonbatched")["producer"]["producer_name"]
    res = cli("follow", capture_path("01_basic_nonbatched.pcap"), "--producer", name, "-V", "-x", "--plain")
    assert res.exit_code == 0, res.stderr
    timeline = res.stdout.split("\n\n", 1)[0].split(" frames on ")[0]
    frames = [(line, under) for line, under in blocks(timeline.rsplit("\n", 1)[0]) if LINE.match(line)[1] != "-"]
    by_index = {r["index"]: r for r in decoded("01_basic_nonbatched.pcap") if "index" in r}
    assert frames
    for line, under in frames:
        rec = by_index[int(LINE.match(line)[1])]
        assert _tree(under)[1] == (0, f"command {rec['type']}")
        assert len(dumped(under)) == rec["size"]


# --------------------------------------------------------------------------------------------- tables
def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_latency_columns_have_three_decimals_and_line_up():
    cap = capture_path("11_errors.pcap")
    data = json.loads(cli("stats", cap, "--json").stdout)
    res = cli("stats", cap, "--plain")
    assert res.exit_code == 0, res.stderr
    header, rule, *rows = _section(res.stdout, "Latency by request type (ms)")
    assert set(rule) == {"─"}
    assert len(rows) == len(data["latency_ms"])
    ends = [m.end() for m in re.finditer(r"\S+", header)][-6:]  # count, p50, p90, p99, max, mean: right-aligned
    for row in rows:
        cells = row.split()
        kind, numbers = cells[0], cells[-5:]
        assert all(re.fullmatch(r"\d+\.\d{3}", n) for n in numbers), row
        want = data["latency_ms"][kind]
        assert numbers == [f"{want[k]:.3f}" for k in ("p50", "p90", "p99", "max", "mean")]
        assert [m.end() for m in re.finditer(r"\S+", row)][-6:] == ends, row


@pytest.mark.parametrize("name", ["11_errors.pcap", "11b_send_error_too_big.pcap"])
def test_plain_tables_never_split_a_value_at_80_columns(name):
    cap = capture_path(name)
    data = json.loads(cli("stats", cap, "--json").stdout)
    res = cli("stats", cap, "--plain")
    assert res.exit_code == 0, res.stderr
    _header, _rule, *rows = _section(res.stdout, "Connections")
    assert len(rows) == len(data["connections"])  # one line per connection, nothing folded
    for row, c in zip(rows, data["connections"]):
        closed = c["closed"] + (f"/{c['closed_by']}" if c.get("closed_by") else "")
        assert row.split()[:3] == [str(c["conn"]), c["client"], c["broker"]]
        assert row.split()[-2:] == [closed, str(c["problems"])]
    for error in data["server_errors"]:
        assert any(line.split()[:3] == ["server", "error", error] for line in res.stdout.splitlines())
    for p in data["producers"]:
        for error, count in (p["errors"] or {}).items():
            (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith(f"{p['name']} ({p['id']}@c{p['conn']}) ")]
            assert line.split()[-1] == f"{error}={count}"


def test_terminal_tables_fit_80_columns_and_wrap_only_between_words():
    data = json.loads(cli("stats", capture_path("09_shared.pcap"), "--json").stdout)
    long_name = "consumer-with-a-long-nm"  # the tables show 24 characters of a name at most
    data["consumers"][0]["name"] = long_name
    for width in (80, 60):
        out = io.StringIO()
        render_stats(data, Console(file=out, width=width, force_terminal=True, color_system=None), plain=False)
        text = out.getvalue()
        for c in data["connections"]:
            assert c["client"] in text and c["broker"] in text
        assert long_name in text  # a name wraps between words, never inside one
        if width == 80:
            assert max(len(line) for line in text.splitlines()) <= 80


# -------------------------------------------------------------------------------------------- follow
@pytest.mark.parametrize("name, actor", [
    ("01_basic_nonbatched.pcap", ("--producer", manifest("01_basic_nonbatched")["producer"]["producer_name"])),
    ("11_errors.pcap", None),  # the consumer whose SUBSCRIBE got no answer
])
def test_follow_tells_how_the_actors_connections_and_requests_ended(name, actor):
    records = list(decoded(name))
    if actor is None:
        unanswered = next(r for r in records if r["type"] == "UNANSWERED"
                          and r["details"]["request_type"] == "SUBSCRIBE")
        request = next(r for r in records if r.get("index") == unanswered["details"]["request"])
        actor = ("--consumer", request["command"]["consumer_name"])
    shown = json_records("follow", capture_path(name), *actor)
    frames = {r["index"] for r in shown if "index" in r}
    conns = {r["conn"] for r in shown if "index" in r}
    expected = [r for r in records if "index" not in r and r.get("conn") in conns and (
        r["type"] == "CONNECTION_CLOSED"
        or r["type"] in ("UNANSWERED", "OVERDUE") and r["details"]["request"] in frames)]
    assert any(r["type"] == "CONNECTION_CLOSED" for r in expected)
    assert [r for r in shown if "index" not in r] == expected
    if name.startswith("11"):
        assert any(r["type"] == "UNANSWERED" for r in expected)
    # the timeline says it too, and the statistics say how each connection was closed
    res = cli("follow", capture_path(name), *actor, "--plain")
    assert res.exit_code == 0, res.stderr
    events = [line.split() for line in res.stdout.splitlines() if LINE.match(line) and LINE.match(line)[1] == "-"]
    assert [(e[3], e[4]) for e in events if e[4] == "CONNECTION_CLOSED"] == \
        [(f"c{r['conn']}", "CONNECTION_CLOSED") for r in expected if r["type"] == "CONNECTION_CLOSED"]
    _header, _rule, *rows = _section(res.stdout, "Connections")
    closed = {r["conn"]: r["details"]["how"] + (f"/{r['details']['closed_by']}" if "closed_by" in r["details"] else "")
              for r in expected if r["type"] == "CONNECTION_CLOSED"}
    assert {int(row.split()[0]): row.split()[-2] for row in rows} == closed


def test_follow_with_an_expression_shows_only_what_matches():
    name = manifest("01_basic_nonbatched")["producer"]["producer_name"]
    shown = json_records("follow", capture_path("01_basic_nonbatched.pcap"), "--producer", name,
                         "-Y", 'type == "SEND"')
    assert shown and {r["type"] for r in shown} == {"SEND"}


def test_dissect_filtered_to_an_actor_ends_its_story_as_follow_does():
    """--consumer X shows, beside X's frames, how X's connection ended (as follow does), and nothing of the
    other connections' ends."""
    capture = str(capture_path("09_shared.pcap"))
    everything = json_records("dissect", capture)
    mine = json_records("dissect", capture, "--consumer", "consumer-A")
    conns = {r["conn"] for r in mine if "index" in r}
    closed = [r for r in mine if r["type"] == "CONNECTION_CLOSED"]
    expected = [r for r in everything if r["type"] == "CONNECTION_CLOSED" and r["conn"] in conns]
    assert closed == expected and closed
