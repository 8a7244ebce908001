"""benchmarks/gen/fleet.py: a fleet-like capture set made from one capture (K copies between their own
addresses, merged in time order, rotated as tcpdump -C rotates). The reference is the CLI's decoding of the
original capture (`dissector.run.analysed_json_lines`): each copy must decode to the same frames, apart from
what a copy changes (addresses, times, connection ids, frame and packet numbers)."""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

import pcapgen
from dissector.capture.files import CaptureError, open_capture
from dissector.run import analysed_json_lines

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.gen.fleet import main as fleet_main  # noqa: E402
from benchmarks.gen.fleet import write_fleet  # noqa: E402

SOURCE = ROOT / "captures" / "11_errors.pcap"  # 14 connections (loopback: 127.0.0.1 at both ends), 118 frames
COPIES = 3
PIECE_BYTES = 6000  # the 25 KB capture, 3 times: about a dozen pieces
SHIFT_S = 0.001
# what a copy changes in a frame's record: addresses, times (and the latencies computed from them), connection
# ids, frame numbers (also in `answers`, the request's number) and packet numbers
CHANGED = {"src", "dst", "time", "latency_ms", "conn", "index", "answers", "packet"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    where = tmp_path_factory.mktemp("fleet")
    return write_fleet(SOURCE, where / "set", COPIES, PIECE_BYTES, merged=where / "merged.pcap", shift_s=SHIFT_S)


def _records(path) -> tuple[list[dict], list[dict]]:
    """The CLI's frame records and event records of a capture."""
    frames, events = [], []
    for item in analysed_json_lines(str(path)):
        if type(item) is bytes:
            frames += [json.loads(line) for line in item.splitlines()]
        else:
            events.append(item)
    return frames, events


def _copy_of(endpoint: str) -> int:
    """The copy an address of the set belongs to: 10.X.Y.d is copy (X & 127) * 256 + Y."""
    octets = [int(o) for o in endpoint.rsplit(":", 1)[0].split(".")]
    assert octets[0] == 10, endpoint
    return (octets[1] & 0x7F) << 8 | octets[2]


def _decoded(frame: dict) -> str:
    kept = {k: v for k, v in frame.items() if k not in CHANGED}
    # the findings' texts name frames by number: their ids and severities are compared
    kept["expert"] = [(e["id"], e["severity"]) for e in frame.get("expert", [])]
    kept["problems"] = len(frame.get("problems", []))
    return json.dumps(kept, sort_keys=True)


def _packets(path) -> list[tuple[float, bytes, int]]:
    with open_capture(str(path)) as reader:
        return [(p.timestamp, p.data, p.orig_len) for p in reader]


def test_k_times_the_frames_and_connections(fleet):
    frames, events = _records(SOURCE)
    fleet_frames, fleet_events = _records(fleet.merged)
    assert len(fleet_frames) == COPIES * len(frames) > 0
    connections = {r["conn"] for r in frames + events if "conn" in r}
    fleet_connections = {r["conn"] for r in fleet_frames + fleet_events if "conn" in r}
    assert len(connections) == 14
    assert len(fleet_connections) == COPIES * len(connections)
    assert len(fleet_events) == COPIES * len(events)


def test_each_copy_decodes_as_the_original(fleet):
    frames, _ = _records(SOURCE)
    original = list(map(_decoded, frames))
    assert any("payload_sha256" in line for line in original)  # payloads are compared too
    assert any('"expert": [[' in line for line in original)
    position_of = {frame["index"]: n for n, frame in enumerate(frames)}
    by_copy: dict[int, list] = {}
    numbers: dict[int, dict] = {}  # per copy: frame number in the set -> position of its frame in the original
    clients, brokers = {}, {}
    for frame in _records(fleet.merged)[0]:
        copy = _copy_of(frame["src"])
        assert _copy_of(frame["dst"]) == copy
        # a copy keeps its packets' order, so its frames come in the original's order
        position = len(by_copy.setdefault(copy, []))
        numbers.setdefault(copy, {})[frame["index"]] = position
        original_frame = frames[position]
        assert ("answers" in frame) == ("answers" in original_frame)
        if "answers" in frame:  # a reply answers its own copy's request, the one the original's answers
            assert numbers[copy][frame["answers"]] == position_of[original_frame["answers"]]
        by_copy[copy].append(_decoded(frame))
        to_broker = frame["direction"] == "to_broker"
        client, broker = (frame["src"], frame["dst"]) if to_broker else (frame["dst"], frame["src"])
        clients.setdefault(copy, set()).add(client.rsplit(":", 1)[0])
        brokers.setdefault(copy, set()).add(broker.rsplit(":", 1)[0])
    assert sorted(by_copy) == list(range(COPIES))
    for copy in range(COPIES):
        assert by_copy[copy] == original, f"copy {copy}"
        # loopback's one address became two: the broker's end keeps 10.0.i.1, the client's is 10.128.i.1
        assert brokers[copy] == {f"10.0.{copy}.1"} and clients[copy] == {f"10.128.{copy}.1"}


def test_the_pieces_are_the_merged_file_rotated(fleet):
    assert [p.name for p in fleet.pieces] == ["fleet.pcap"] + [f"fleet.pcap{n}" for n in range(1, len(fleet.pieces))]
    assert len(fleet.pieces) > 3
    in_pieces = [packet for piece in fleet.pieces for packet in _packets(piece)]
    assert in_pieces == _packets(fleet.merged)
    assert len(in_pieces) == fleet.packets == COPIES * len(_packets(SOURCE))
    largest = max(16 + len(data) for _, data, _ in in_pieces)
    for piece in fleet.pieces[:-1]:  # a piece ends once it has passed the size, as with tcpdump -C
        assert PIECE_BYTES < piece.stat().st_size <= PIECE_BYTES + largest
    assert sum(p.stat().st_size for p in fleet.pieces) == fleet.bytes


def test_copies_are_shifted_and_interleaved(fleet):
    original = _packets(SOURCE)
    merged = _packets(fleet.merged)
    times = [t for t, _, _ in merged]
    assert times == sorted(times)
    # copy i (< 256) has 10.0.i.x / 10.128.i.x: its number is the source's 3rd octet (Ethernet, IHL 5)
    by_copy: dict[int, list] = {}
    for t, data, orig_len in merged:
        by_copy.setdefault(data[14 + 14], []).append((t, data, orig_len))
    assert sorted(by_copy) == list(range(COPIES))
    for copy, packets in by_copy.items():
        assert len(packets) == len(original)
        for (t, data, orig_len), (t0, data0, orig_len0) in zip(packets, original):
            assert t == pytest.approx(t0 + copy * SHIFT_S, abs=2e-6)
            assert orig_len == orig_len0 and len(data) == len(data0)
            # only the IPv4 checksum, the addresses and the TCP checksum differ
            assert data[:24] == data0[:24] and data[34:50] == data0[34:50] and data[52:] == data0[52:]
    # interleaved: copy after copy would change copies COPIES - 1 times; here they alternate within each of
    # the 14 connections' exchanges
    order = [data[14 + 14] for _, data, _ in merged]
    assert sum(a != b for a, b in zip(order, order[1:])) > COPIES * 14


_checksum = pcapgen._csum  # 0 over a span whose checksum (included in it) is valid


def _tcp_checksum_valid(ip: bytes) -> bool:
    ihl = (ip[0] & 15) * 4
    segment = ip[ihl:]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(segment))
    return _checksum(pseudo + segment) == 0


def _with_tcp_checksum(ip: bytes) -> bytes:
    ihl = (ip[0] & 15) * 4
    segment = ip[ihl:]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(segment))
    value = pcapgen._csum(pseudo + segment)
    return ip[:ihl + 16] + struct.pack("!H", value) + ip[ihl + 18:]


def test_checksums_and_traffic_copied_once(tmp_path):
    tcp = _with_tcp_checksum(pcapgen.ipv4_tcp("192.168.7.20", "192.168.7.9", 40000, 6650, 1, 2, payload=b"x" * 33))
    assert _tcp_checksum_valid(tcp)
    udp = pcapgen.ipv4_tcp("192.168.7.20", "192.168.7.9", 5353, 5353, proto=17)
    ipv6 = pcapgen.ipv6_tcp("::1", "::2", 40000, 6650, payload=b"y")
    fragment = pcapgen.ipv4_tcp("192.168.7.20", "192.168.7.9", 40000, 6650, frag=0x2000)
    hostile = [b"", b"\x02" * 13, pcapgen.ether(b"\x4f" + b"\0" * 30)[:40],  # cut short, IHL 60 not captured
               pcapgen.ether(b"", ethertype=0x8100) + b"\x00"]  # a VLAN tag cut short
    packets = [pcapgen.ether(tcp), pcapgen.ether(udp), pcapgen.ether(ipv6, ethertype=0x86DD),
               pcapgen.ether(fragment), *hostile, pcapgen.ether(tcp, vlans=[(0x8100, 5)]),
               pcapgen.ether(tcp)[:14 + 20 + 10]]  # TCP header cut before its checksum
    source = tmp_path / "mixed.pcap"
    pcapgen.write_pcap(source, [(1000.0 + n, data) for n, data in enumerate(packets)])
    made = write_fleet(source, tmp_path / "set", COPIES, 10_000_000, shift_s=SHIFT_S)
    assert len(made.pieces) == 1
    written = [data for _, data, _ in _packets(made.pieces[0])]
    rewritten = {0, 8, 9}  # the TCP packets (untagged, tagged, cut short)
    assert made.rewritten == COPIES * len(rewritten) and made.copied_once == len(packets) - len(rewritten)
    assert len(written) == made.packets == made.rewritten + made.copied_once
    for n, data in enumerate(packets):
        if n not in rewritten:
            assert written.count(data) == 1, n  # unchanged, once
    copies = [data for data in written if data not in packets]
    assert len(copies) == COPIES * len(rewritten)
    for copy in range(COPIES):
        untagged, tagged = (pcapgen.ether(tcp), pcapgen.ether(tcp, vlans=[(0x8100, 5)]))
        for original, at in ((untagged, 14), (tagged, 18)):
            ip = next(d for d in copies if len(d) == len(original) and d[at + 12:at + 20]
                      == bytes((10, 0, copy, 20, 10, 0, copy, 9)))[at:]
            assert _checksum(ip[:20]) == 0  # the IPv4 header checksum, computed afresh
            assert _tcp_checksum_valid(ip)  # and the TCP checksum, adjusted, still valid
            assert ip[20:36] == tcp[20:36] and ip[38:] == tcp[38:]


def test_bad_input(tmp_path, capsys):
    with pytest.raises(ValueError):
        write_fleet(SOURCE, tmp_path / "a", 0, PIECE_BYTES)
    with pytest.raises(ValueError):
        write_fleet(SOURCE, tmp_path / "a", 2, 0)
    empty = tmp_path / "empty.pcap"
    pcapgen.write_pcap(empty, [])
    with pytest.raises(ValueError):
        write_fleet(empty, tmp_path / "a", 2, PIECE_BYTES)
    with pytest.raises(CaptureError):
        write_fleet(ROOT / "README.md", tmp_path / "a", 2, PIECE_BYTES)
    assert not (tmp_path / "a").exists()
    assert fleet_main([str(tmp_path / "missing.pcap"), "--out", str(tmp_path / "b")]) == 1
    assert "no such file" in capsys.readouterr().err
