#!/usr/bin/env python3
"""A capture set that looks like a fleet, made from one real capture: K copies of its traffic, each copy
between its own client and broker addresses, merged in time order and written as rotated pieces the way
`tcpdump -C` writes them (NAME, NAME1, NAME2 ...), and optionally also as one merged file.

    python benchmarks/gen/fleet.py CAPTURE --copies 8 --piece-mb 256 --out DIR [--merged FILE]

    from benchmarks.gen.fleet import write_fleet
    made = write_fleet("perf_big.pcap", "out/set", copies=8, piece_bytes=256_000_000, merged="out/merged.pcap")

Everything streams: K readers over the same file (the page cache serves them; each holds the core reader's
1 MiB buffer), one heap merge, one packet in hand at a time.

Copy i's IPv4 addresses become 10.X.Y.d with X.Y = i (X < 128) and d the address's last octet, so each copy
is its own set of hosts and the copies' connections never collide. Traffic a host sends to itself (a
loopback capture: 127.0.0.1 at both ends) would keep one address for both ends, so there the end with the
higher port (the client's ephemeral port) gets X + 128: the broker is 10.X.Y.d, its client 10.(X+128).Y.d.
The rule depends on the packet's own addresses and ports only, so both directions of a connection agree.
Two original hosts whose addresses share the last octet become one host in a copy (their connections stay
apart by their ports unless those collide too).

The IPv4 header checksum is computed afresh; the TCP checksum (its pseudo-header holds the addresses) is
adjusted incrementally (RFC 1624), which keeps a valid checksum valid. A loopback capture's TCP checksums
are not valid to begin with (checksum offload: the kernel never fills them in), and stay as they were
apart from the same adjustment; the dissector does not check them.

Copy i's timestamps are shifted by i × --shift-ms (1 ms) so that the copies interleave instead of
running in lockstep on equal timestamps.

Only IPv4 TCP packets (not fragments) are copied K times. Anything else (IPv6, other IPv4 protocols, IP
fragments, link types not handled here, headers cut short) is written once, unchanged, with copy 0: K
identical copies of it would make one connection with every segment K times (retransmissions to the
dissector), not K connections.
"""
from __future__ import annotations

import argparse
import heapq
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

if __name__ == "__main__":  # run as a script: the repository's dissector package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dissector.capture.files import CaptureError, CapturedPacket, open_capture  # noqa: E402
from dissector.capture.writer import PcapWriter  # noqa: E402

MAX_COPIES = 128 * 256  # copy numbers fill the 2nd octet's low 7 bits and the 3rd octet
PCAP_HEADER = 24
RECORD_HEADER = 16
_VLAN_TAGS = (b"\x81\x00", b"\x88\xa8", b"\x91\x00", b"\x92\x00")


def ipv4_offset(linktype: int, data: bytes) -> int | None:
    """Where the IPv4 header starts in a packet of ``linktype``, or None (not IPv4, or a link type this
    generator leaves alone). Covers the link types captures are commonly written with; the rest are copied
    once, unchanged."""
    if linktype == 1:  # Ethernet, with any 802.1Q/802.1ad tags
        ethertype, offset = data[12:14], 14
        while ethertype in _VLAN_TAGS:
            ethertype, offset = data[offset + 2:offset + 4], offset + 4
        return offset if ethertype == b"\x08\x00" else None
    if linktype == 113:  # Linux cooked v1: ethertype at 14, 16-byte header
        return 16 if data[14:16] == b"\x08\x00" else None
    if linktype == 276:  # Linux cooked v2: ethertype at 0, 20-byte header
        return 20 if data[0:2] == b"\x08\x00" else None
    if linktype in (101, 12, 14):  # raw IP: the version nibble tells
        return 0 if data[:1] and data[0] >> 4 == 4 else None
    if linktype == 228:  # raw IPv4
        return 0
    if linktype == 0:  # BSD loopback: AF_INET (2) in the capturing host's byte order
        return 4 if data[0:4] in (b"\x02\x00\x00\x00", b"\x00\x00\x00\x02") else None
    if linktype == 108:  # OpenBSD loopback: network byte order
        return 4 if data[0:4] == b"\x00\x00\x00\x02" else None
    return None


def _fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _words(data: bytes | bytearray) -> int:
    """The sum of ``data``'s 16-bit big-endian words (even length), unfolded."""
    return sum(struct.unpack(f"!{len(data) // 2}H", data))


def fleet_address(copy: int, address: bytes, client_end: bool) -> bytes:
    """Copy ``copy``'s address for an original IPv4 ``address`` (see the module's docstring)."""
    return bytes((10, (copy >> 8) | (0x80 if client_end else 0), copy & 0xFF, address[3]))


class CopyRewriter:
    """Rewrites packets into copy ``copy``: new addresses, IPv4 checksum afresh, TCP checksum adjusted."""

    def __init__(self, copy: int) -> None:
        if not 0 <= copy < MAX_COPIES:
            raise ValueError(f"copy {copy} out of range 0..{MAX_COPIES - 1}")
        self.copy = copy
        # (original addresses, which end is the client's) -> (new addresses, TCP checksum delta)
        self._pairs: dict[tuple[bytes, int], tuple[bytes, int]] = {}

    def _pair(self, addresses: bytes, client_end: int) -> tuple[bytes, int]:
        new = (fleet_address(self.copy, addresses[:4], client_end == 1)
               + fleet_address(self.copy, addresses[4:], client_end == 2))
        # RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), for the four address words at once: ~m + m' here
        delta = sum(~w & 0xFFFF for w in struct.unpack("!4H", addresses)) + _words(new)
        self._pairs[addresses, client_end] = pair = (new, delta)
        return pair

    def __call__(self, linktype: int, data: bytes) -> bytes | None:
        """The packet as copy ``copy`` has it; None when it is not an IPv4 TCP packet this can rewrite."""
        ip = ipv4_offset(linktype, data)
        if ip is None or len(data) < ip + 20:
            return None
        version_ihl, protocol = data[ip], data[ip + 9]
        ihl = (version_ihl & 0x0F) * 4
        fragment = (data[ip + 6] << 8 | data[ip + 7]) & 0x3FFF
        tcp = ip + ihl
        if version_ihl >> 4 != 4 or ihl < 20 or protocol != 6 or fragment or len(data) < tcp + 4:
            return None
        addresses = data[ip + 12:ip + 20]
        client_end = 0
        if addresses[:4] == addresses[4:]:  # a host talking to itself: the higher port is the client's
            source_port, destination_port = struct.unpack_from("!HH", data, tcp)
            client_end = 1 if source_port > destination_port else 2 if destination_port > source_port else 0
        new, delta = self._pairs.get((addresses, client_end)) or self._pair(addresses, client_end)
        out = bytearray(data)
        out[ip + 12:ip + 20] = new
        out[ip + 10:ip + 12] = b"\0\0"
        out[ip + 10:ip + 12] = struct.pack("!H", ~_fold(_words(out[ip:tcp])) & 0xFFFF)
        if len(out) >= tcp + 18:  # the TCP checksum was captured
            (checksum,) = struct.unpack_from("!H", out, tcp + 16)
            struct.pack_into("!H", out, tcp + 16, ~_fold((~checksum & 0xFFFF) + delta) & 0xFFFF)
        return bytes(out)


@dataclass
class FleetSet:
    """What ``write_fleet`` wrote."""

    pieces: list[Path] = field(default_factory=list)
    merged: Path | None = None
    packets: int = 0  # records written (in the pieces; the merged file has the same)
    bytes: int = 0  # bytes of the pieces together
    rewritten: int = 0  # IPv4 TCP packets written, all copies
    copied_once: int = 0  # other packets, written unchanged with copy 0


def _copy(capture: str, copy: int, shift_s: float, made: FleetSet) -> Iterator[CapturedPacket]:
    rewrite = CopyRewriter(copy)
    shift = copy * shift_s
    with open_capture(capture) as reader:
        for packet in reader:
            data = rewrite(packet.linktype, packet.data)
            if data is None:
                if copy:
                    continue
                made.copied_once += 1
            else:
                packet.data = data
                made.rewritten += 1
            packet.timestamp += shift
            yield packet


def fleet_packets(capture, copies: int, shift_s: float = 0.001,
                  made: FleetSet | None = None) -> Iterator[CapturedPacket]:
    """The packets of ``copies`` copies of ``capture``, merged by timestamp (a copy's own packets keep their
    order; equal times go lower copy first). ``made`` counts what was rewritten and what was copied once."""
    if not 1 <= copies <= MAX_COPIES:
        raise ValueError(f"copies must be 1..{MAX_COPIES}, not {copies}")
    made = made if made is not None else FleetSet()
    streams = [_copy(str(capture), copy, shift_s, made) for copy in range(copies)]
    return heapq.merge(*streams, key=lambda packet: packet.timestamp)


def write_fleet(capture, directory, copies: int, piece_bytes: int, *, name: str = "fleet.pcap", merged=None,
                shift_s: float = 0.001) -> FleetSet:
    """``copies`` copies of ``capture`` (see the module's docstring) as rotated pieces of about
    ``piece_bytes`` each under ``directory``, named ``name``, ``name``1, ``name``2 ... (as tcpdump -C: a new
    piece starts once the current one has passed ``piece_bytes``), and, when ``merged`` is a path, the same
    packets as that one file. Classic pcap, nanosecond timestamps, the capture's link type."""
    if piece_bytes < 1:
        raise ValueError(f"pieces must be at least 1 byte, not {piece_bytes}")
    directory = Path(directory)
    made = FleetSet(merged=Path(merged) if merged is not None else None)
    piece = whole = linktype = None
    size = 0
    try:
        for packet in fleet_packets(capture, copies, shift_s, made):
            if linktype is None:
                linktype = packet.linktype
                if made.merged is not None:
                    whole = PcapWriter(made.merged, linktype)
            elif packet.linktype != linktype:
                raise ValueError(f"{capture}: packets of link types {linktype} and {packet.linktype}; "
                                 "a pcap file holds one")
            if piece is None or size > piece_bytes:
                if piece is not None:
                    piece.close()
                else:
                    directory.mkdir(parents=True, exist_ok=True)
                made.pieces.append(directory / f"{name}{len(made.pieces) or ''}")
                piece = PcapWriter(made.pieces[-1], packet.linktype)
                made.bytes += PCAP_HEADER
                size = PCAP_HEADER
            piece.write(packet)
            if whole is not None:
                whole.write(packet)
            record = RECORD_HEADER + len(packet.data)
            size += record
            made.bytes += record
            made.packets += 1
    finally:
        for writer in (piece, whole):
            if writer is not None:
                writer.close()
    if not made.packets:
        raise ValueError(f"{capture}: no packets")
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", help="the capture to copy (pcap or pcapng, gzip is fine)")
    ap.add_argument("--copies", type=int, default=8, help="copies of its traffic (default 8)")
    ap.add_argument("--piece-mb", type=float, default=256, help="rotate after this many MB (10^6 bytes) as "
                    "tcpdump -C does (default 256)")
    ap.add_argument("--out", required=True, help="directory for the pieces")
    ap.add_argument("--name", default="fleet.pcap", help="the first piece's name (default fleet.pcap)")
    ap.add_argument("--merged", help="also write every packet to this one file")
    ap.add_argument("--shift-ms", type=float, default=1.0, help="copy i's timestamps move by i times this")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    try:
        made = write_fleet(a.capture, a.out, a.copies, max(1, int(a.piece_mb * 1e6)), name=a.name,
                           merged=a.merged, shift_s=a.shift_ms / 1000)
    except (CaptureError, ValueError, OSError) as exc:
        print(f"fleet: {exc}", file=sys.stderr)
        return 1
    print(f"{len(made.pieces)} pieces, {made.bytes / 1e6:.1f} MB, {made.packets:,} packets "
          f"({made.rewritten:,} rewritten, {made.copied_once:,} copied once)"
          + (f"; merged: {made.merged}" if made.merged else "") + f"; {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
