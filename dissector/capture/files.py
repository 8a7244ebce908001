"""Stage 1: read packets from a classic pcap or pcapng capture file (optionally gzip-compressed).

Streaming, one packet at a time, pure Python (``struct`` on a large byte buffer).  Memory use is bounded by
the read chunk size plus the largest single record, independent of the file size.

    with open_capture("x.pcapng.gz") as reader:
        for pkt in reader:            # CapturedPacket(index, timestamp, linktype, data, orig_len)
            ...
        if reader.truncated: print(reader.truncated)
        for note in reader.problems: print(note.id, note.params)   # registered ids (problems.py)

Packet numbering (``index``) is 1-based and counts exactly the packet records (pcap records; pcapng EPB,
SPB and obsolete PB), which is Wireshark's ``frame.number``.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

from ..problems import NOTE, Finding, register

__all__ = [
    "CapturedPacket",
    "CaptureError",
    "CaptureReader",
    "open_capture",
    "LINKTYPE_NULL",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_RAW",
    "LINKTYPE_LOOP",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_DLT_RAW1",
    "LINKTYPE_DLT_RAW2",
    "SUPPORTED_LINKTYPES",
    "LINKTYPE_NAMES",
]

# --------------------------------------------------------------------------------------------- link types
# Notes about the capture file itself (odd but harmless): each becomes a CAPTURE_NOTE event.
register("capture.modified_pcap", NOTE, "modified (Kuznetzov) pcap format: extra per-record fields ignored")
register("capture.pcap_version", NOTE, "unusual pcap version {version}; reading it as 2.4")
register("capture.linktype_reserved_bits", NOTE, "reserved bits set in the link-type field (0x{field:08x}); ignored")
register("capture.unsupported_linktype", NOTE, "unsupported link type {linktype} on {where}: its packets are read "
         "but cannot be decoded")
register("capture.undefined_interface", NOTE, "packet refers to undefined {interface}; skipped")
register("capture.short_block", NOTE, lambda p: f"malformed {p['block']} (too short)"
         + ("" if p["block"] == "Interface Description Block" else " skipped"))
register("capture.caplen_beyond_block", NOTE, "Enhanced Packet Block at byte offset {offset} claims more captured "
         "bytes than it holds; data cut to the block")
register("capture.concatenated", NOTE, "another pcap file starts at byte offset {offset} (files joined with cat): "
         "read on with its header, from packet {packet}")
register("capture.pcapng_version", NOTE, "pcapng section {section} has version {version}; read as 1.0")
register("capture.simple_block_skipped", NOTE, "Simple Packet Block without interface 0 (or too short); skipped")
register("capture.simple_block_time", NOTE, "Simple Packet Blocks carry no timestamp: they were given the previous "
         "packet's")
register("capture.block_skipped", NOTE, lambda p: (f"{p['block']}s" if p.get("block") else "unknown pcapng block")
         + f" (type 0x{p['type']:08x}) skipped")

LINKTYPE_NULL = 0  # BSD loopback, 4-byte address family in the capturing host's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_DLT_RAW1 = 12  # DLT_RAW on most platforms (written by old libpcaps)
LINKTYPE_DLT_RAW2 = 14  # DLT_RAW on BSD/OS
LINKTYPE_RAW = 101  # raw IPv4 or IPv6 (version nibble)
LINKTYPE_LOOP = 108  # OpenBSD loopback, address family in network byte order
LINKTYPE_LINUX_SLL = 113  # Linux cooked capture v1
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276  # Linux cooked capture v2

#: Link types that ``dissector.netlayers`` can decode.
SUPPORTED_LINKTYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_DLT_RAW1,
        LINKTYPE_DLT_RAW2,
        LINKTYPE_RAW,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        LINKTYPE_LINUX_SLL2,
    }
)

LINKTYPE_NAMES = {
    0: "NULL",
    1: "ETHERNET",
    6: "IEEE802_5",
    9: "PPP",
    12: "RAW",
    14: "RAW",
    101: "RAW",
    104: "C_HDLC",
    105: "IEEE802_11",
    108: "LOOP",
    113: "LINUX_SLL",
    127: "IEEE802_11_RADIOTAP",
    147: "USER0",
    195: "IEEE802_15_4",
    220: "USB_LINUX_MMAPPED",
    228: "IPV4",
    229: "IPV6",
    249: "NETLINK",
    276: "LINUX_SLL2",
}

# ------------------------------------------------------------------------------------------------ limits
CHUNK_SIZE = 1 << 20  # bytes read from the file at a time
# A record claiming more than this is treated as corruption, not as a real packet (Wireshark's own limit for
# most link types is 256 KiB; some USB/D-Bus captures use up to 128 MiB).
MAX_RECORD_SIZE = 64 << 20


@dataclass(slots=True)
class CapturedPacket:
    index: int  # 1-based packet number in the file (Wireshark's frame.number)
    timestamp: float  # epoch seconds
    linktype: int  # LINKTYPE_* value of the packet's interface
    data: bytes  # captured bytes (caplen)
    orig_len: int  # original length on the wire


class CaptureError(Exception):
    """The input cannot be read as a capture at all (missing file, not a capture, header truncated)."""


# ------------------------------------------------------------------------------------------------ helpers
_GZIP_MAGIC = b"\x1f\x8b"
_PCAPNG_SHB = 0x0A0D0D0A
_BOM = 0x1A2B3C4D

_PCAP_MAGICS = {
    # magic as read little-endian -> (byte order, units per second, record header size)
    0xA1B2C3D4: ("<", 1_000_000, 16),
    0xD4C3B2A1: (">", 1_000_000, 16),
    0xA1B23C4D: ("<", 1_000_000_000, 16),
    0x4D3CB2A1: (">", 1_000_000_000, 16),
    0xA1B2CD34: ("<", 1_000_000, 24),  # Kuznetzov "modified" pcap: 8 extra bytes per record
    0x34CDB2A1: (">", 1_000_000, 24),
}
# A global header read as a record header puts its magic where the seconds are, in either byte order.
_HEADER_AS_SECONDS = frozenset(_PCAP_MAGICS) | frozenset(int.from_bytes(m.to_bytes(4, "little"), "big")
                                                         for m in _PCAP_MAGICS)

_BLOCK_NAMES = {
    0x00000001: "Interface Description Block",
    0x00000002: "Packet Block",
    0x00000003: "Simple Packet Block",
    0x00000004: "Name Resolution Block",
    0x00000005: "Interface Statistics Block",
    0x00000006: "Enhanced Packet Block",
    0x00000009: "systemd Journal Export Block",
    0x0000000A: "Decryption Secrets Block",
    0x00000BAD: "Custom Block",
    0x40000BAD: "Custom Block",
    _PCAPNG_SHB: "Section Header Block",
}
# Blocks that carry nothing we need and are normal in captures: skipped without a note.
_SILENT_SKIP = frozenset({0x00000004, 0x00000005})


def _hex_prefix(b: bytes) -> str:
    return " ".join(f"{x:02x}" for x in b[:4])


class _PrefixedStream(io.RawIOBase):
    """Non-seekable stream with some already-consumed bytes pushed back in front."""

    def __init__(self, prefix: bytes, f):
        self._prefix = prefix
        self._f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._f.read(len(b))
        if not data:
            return 0
        n = len(data)
        b[:n] = data
        return n


def _pcapng_ts(ts_hi: int, ts_lo: int, units: int, offset: int) -> float:
    """Epoch seconds of a pcapng timestamp (``units`` per second, plus if_tsoffset seconds)."""
    t = (ts_hi << 32) | ts_lo
    if t < 1 << 53:  # exact as a float: one correctly rounded division
        return t / units + offset
    sec, frac = divmod(t, units)
    return sec + frac / units + offset


def _interface_name(iface_id: int, section: int) -> str:
    return f"interface {iface_id}" if section == 1 else f"interface {iface_id} of section {section}"


class _Interface:
    __slots__ = ("linktype", "snaplen", "units", "offset", "fcs")

    def __init__(self, linktype: int, snaplen: int):
        self.linktype = linktype
        self.snaplen = snaplen
        self.units = 1_000_000  # timestamp units per second (if_tsresol default 10^-6)
        self.offset = 0  # if_tsoffset, seconds
        self.fcs = 0  # if_fcslen, bytes of FCS at the end of each frame


# --------------------------------------------------------------------------------------------- the reader
class CaptureReader:
    """Iterable of :class:`CapturedPacket` over one capture file; a context manager that closes the file.

    Attributes:
        format: ``"pcap"`` or ``"pcapng"``.
        compressed: ``True`` when the file was gzip-compressed.
        truncated: after iteration, ``None`` if the file ended cleanly; otherwise a message explaining why
            reading stopped early: ``"capture file truncated: ..."`` (cut off in the middle of a record) or
            ``"capture file corrupt: ..."`` (a record header that cannot be right).  All packets before the
            damage were yielded.
        problems: non-fatal notes as ``Finding``s with registered ``capture.*`` ids (unknown block types
            skipped, unsupported link types, ...).  Each kind of note is recorded once, so the list does not
            grow with the file size.
        packets: number of packets yielded so far.
        linktype, snaplen, fcs_len: classic pcap only, from the global header (``None`` for pcapng, where
            each interface has its own; every packet carries its own ``linktype``).
    """

    def __init__(self, stream, *, name: str = "<stream>", own_stream: bool = True):
        self.name = name
        self.format = ""
        self.compressed = False
        self.truncated: str | None = None
        self.problems: list[Finding] = []
        self.packets = 0
        self.linktype: int | None = None
        self.snaplen: int | None = None
        self.fcs_len: int | None = None
        self._problem_keys: set = set()
        self._own = own_stream
        self._extra_close: list = []  # wrappers we created (closed before the stream)
        self._stream = stream  # what we were given / opened
        self._f = stream  # what we read from (a GzipFile over the stream when compressed)
        self._read = None
        self._buf = b""
        self._pos = 0
        self._base = 0  # file offset (in the uncompressed stream) of self._buf[0]
        self._eof = False
        self._stream_error: str | None = None
        self._iter: Iterator[CapturedPacket] | None = None
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -------------------------------------------------------------------------------- setup / sniffing
    def _start(self) -> None:
        f = self._f
        first = f.read(4) if not hasattr(f, "peek") else f.peek(4)[:4]
        if first is None:
            first = b""
        if first[:2] == _GZIP_MAGIC:
            if not hasattr(f, "peek"):
                # we consumed the bytes: push them back
                f = io.BufferedReader(_PrefixedStream(first, f), CHUNK_SIZE)
                self._extra_close.append(f)
            gz = gzip.GzipFile(fileobj=f, mode="rb")
            self._extra_close.append(gz)
            self._f = gz
            self.compressed = True
            first = b""
        elif hasattr(f, "peek"):
            first = b""  # peeked, not consumed
        self._read = getattr(self._f, "read1", None) or self._f.read
        self._buf = first
        self._fill(24)
        buf = self._buf
        what = f"{self.name}" + (" (gzip)" if self.compressed else "")
        if not buf:
            if self._stream_error:
                kind = "corrupt or truncated gzip data" if self.compressed else "cannot read"
                raise CaptureError(f"{what}: {kind}: {self._stream_error}")
            raise CaptureError(f"{what}: empty file (0 bytes), not a capture")
        if len(buf) < 4:
            raise CaptureError(
                f"{what}: file too short ({len(buf)} bytes) to be a pcap or pcapng file "
                f"(starts with {_hex_prefix(buf)})"
            )
        (magic,) = struct.unpack_from("<I", buf, 0)
        if magic == _PCAPNG_SHB:
            self.format = "pcapng"
            if len(buf) < 12:
                raise CaptureError(
                    f"{what}: pcapng section header truncated (file has only {len(buf)} bytes)"
                )
            if struct.unpack_from("<I", buf, 8)[0] != _BOM and struct.unpack_from(">I", buf, 8)[0] != _BOM:
                raise CaptureError(
                    f"{what}: starts like pcapng but the section header has no valid byte-order magic "
                    f"(bytes 8-11: {_hex_prefix(buf[8:12])}); not a pcapng file or corrupt"
                )
            # Check the first SHB eagerly so header problems are CaptureErrors, not truncation.
            self._check_first_shb(what)
            self._iter = self._iter_pcapng()
            return
        if magic in _PCAP_MAGICS:
            self.format = "pcap"
            if len(buf) < 24:
                raise CaptureError(
                    f"{what}: pcap global header truncated: file has {len(buf)} bytes, the header needs 24"
                )
            self._pos = 24
            self._iter = self._iter_pcap(*self._pcap_header(buf, 0, "the file"))
            return
        raise CaptureError(f"{what}: not a pcap or pcapng file (starts with {_hex_prefix(buf)})")

    def _block_packet(self, buf, ifaces, section, iface_id, ts_hi, ts_lo, start, dend, orig_len,
                      index) -> CapturedPacket | None:
        """The packet of an Enhanced or obsolete Packet Block; None (noted) if its interface is undefined."""
        if iface_id >= len(ifaces):
            self._note(("noiface", section, iface_id), "capture.undefined_interface",
                       interface=_interface_name(iface_id, section))
            return None
        itf = ifaces[iface_id]
        if itf.fcs:
            dend, orig_len = _strip_fcs(itf.fcs, start, dend, orig_len)
        return CapturedPacket(index, _pcapng_ts(ts_hi, ts_lo, itf.units, itf.offset), itf.linktype,
                              buf[start:dend], orig_len)

    def _note(self, key, pid: str, **params) -> None:
        """Record a note once per ``key`` (a registered id and its parameters: text is made at output)."""
        if key not in self._problem_keys:
            self._problem_keys.add(key)
            self.problems.append(Finding(pid, params))

    def _check_linktype(self, linktype: int, where: str) -> None:
        if linktype not in SUPPORTED_LINKTYPES:
            name = LINKTYPE_NAMES.get(linktype)
            label = f"{linktype} ({name})" if name else str(linktype)
            self._note(("linktype", linktype), "capture.unsupported_linktype", linktype=label, where=where)

    # ----------------------------------------------------------------------------------- buffering
    def _fill(self, need: int) -> bool:
        """Make sure ``need`` bytes are available from ``self._pos``; False if the stream ends first."""
        buf = self._buf
        pos = self._pos
        have = len(buf) - pos
        if have >= need:
            return True
        if self._eof:
            return False
        parts = [buf[pos:]] if have else []
        self._base += pos
        read = self._read
        want = max(CHUNK_SIZE, need - have)
        while have < need:
            try:
                chunk = read(want)
            except (EOFError, OSError, zlib.error) as exc:  # truncated / corrupt gzip stream, I/O error
                self._stream_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                chunk = b""
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self._buf = parts[0] if len(parts) == 1 else b"".join(parts)
        self._pos = 0
        return have >= need

    def _stream_end_message(self, index: int) -> str:
        src = "gzip stream" if self.compressed else "read"
        return f"capture file truncated after packet record {index}: {src} error: {self._stream_error}"

    def _cut_message(self, what: str, start: int, need: int) -> str:
        """Message for a record starting at buffer position ``start`` needing ``need`` bytes from there."""
        end = self._base + len(self._buf)
        more = need - (len(self._buf) - start)
        msg = (
            f"capture file truncated: {what} (starting at byte offset {self._base + start}) "
            f"cut off at byte offset {end} (needs {more} more byte{'s' if more != 1 else ''})"
        )
        if self._stream_error:
            msg += f"; {'gzip stream' if self.compressed else 'read'} error: {self._stream_error}"
        return msg

    # ------------------------------------------------------------------------------------------- pcap
    def _pcap_header(self, buf, at: int, where: str) -> tuple[str, int, int, int, int]:
        """(byte order, units per second, record header size, link type, FCS bytes) of the pcap global header
        at ``at`` (24 bytes there, magic checked)."""
        order, units, rec_hdr = _PCAP_MAGICS[struct.unpack_from("<I", buf, at)[0]]
        vmaj, vmin, _zone, _sigfigs, snaplen, network = struct.unpack_from(order + "HHiIII", buf, at + 4)
        if rec_hdr == 24:
            self._note("modified", "capture.modified_pcap")
        if vmaj != 2:
            self._note("version", "capture.pcap_version", version=f"{vmaj}.{vmin}")
        self.snaplen = snaplen
        fcs = 0
        if network & 0x04000000:  # "FCS length present" bit
            fcs = ((network >> 28) & 0xF) * 2  # in 16-bit words
        linktype = network & 0xFFFF
        if network & 0x03FF0000:
            self._note("ltreserved", "capture.linktype_reserved_bits", field=network)
        self.linktype = linktype
        self.fcs_len = fcs
        self._check_linktype(linktype, where)
        return order, units, rec_hdr, linktype, fcs

    @staticmethod
    def _another_pcap_header(buf, pos: int) -> bool:
        """A second pcap file starts at ``pos`` (``cat`` of rotated files): its magic and version 2.x are there."""
        if pos + 24 > len(buf):
            return False
        magic = struct.unpack_from("<I", buf, pos)[0]
        if magic not in _PCAP_MAGICS:
            return False
        return struct.unpack_from(_PCAP_MAGICS[magic][0] + "H", buf, pos + 4)[0] == 2

    def _iter_pcap(self, order: str, units: int, rec_hdr: int, linktype: int, fcs: int):
        unpack = struct.Struct(order + "IIII").unpack_from
        unpack_caplen = struct.Struct(order + "I").unpack_from
        scale = 1.0 / units
        index = 0
        fill = self._fill
        buf = self._buf
        pos = self._pos
        n = len(buf)
        try:
            while True:
                if pos + rec_hdr > n:
                    self._pos = pos
                    if not fill(rec_hdr):
                        have = len(self._buf) - self._pos
                        if have >= 12:  # the captured length is there: report the whole record
                            caplen = unpack_caplen(self._buf, self._pos + 8)[0]
                            self.truncated = self._cut_message(
                                f"packet record {index + 1}", self._pos, rec_hdr + caplen
                            )
                        elif have:
                            self.truncated = self._cut_message(
                                f"packet record {index + 1} header", self._pos, rec_hdr
                            )
                        elif self._stream_error:
                            self.truncated = (
                                self._stream_end_message(index)
                            )
                        return
                    buf = self._buf
                    pos = self._pos
                    n = len(buf)
                sec, frac, caplen, orig_len = unpack(buf, pos)
                if sec in _HEADER_AS_SECONDS:
                    self._pos = pos
                    fill(24)  # may move the buffer
                    buf, pos = self._buf, self._pos
                    n = len(buf)
                if sec in _HEADER_AS_SECONDS and self._another_pcap_header(buf, pos):
                    # the next file of a rotation, appended by cat: read on with its own header
                    self._note(("concatenated", self._base + pos), "capture.concatenated", offset=self._base + pos,
                               packet=index + 1)
                    order, units, rec_hdr, linktype, fcs = self._pcap_header(buf, pos, f"the file at byte "
                                                                             f"{self._base + pos}")
                    unpack = struct.Struct(order + "IIII").unpack_from
                    unpack_caplen = struct.Struct(order + "I").unpack_from
                    scale = 1.0 / units
                    pos += 24
                    n = len(buf)
                    continue
                start = pos + rec_hdr
                end = start + caplen
                if end > n:
                    if caplen > MAX_RECORD_SIZE:
                        self.truncated = (
                            f"capture file corrupt: packet record {index + 1} at byte offset "
                            f"{self._base + pos} claims {caplen} captured bytes (more than the "
                            f"{MAX_RECORD_SIZE}-byte limit); stopped reading"
                        )
                        return
                    self._pos = pos
                    if not fill(rec_hdr + caplen):
                        self.truncated = self._cut_message(
                            f"packet record {index + 1}", self._pos, rec_hdr + caplen
                        )
                        return
                    buf = self._buf
                    pos = self._pos
                    n = len(buf)
                    start = pos + rec_hdr
                    end = start + caplen
                index += 1
                self.packets = index
                data_end = end
                if fcs:
                    data_end, orig_len = _strip_fcs(fcs, start, end, orig_len)
                data = buf[start:data_end]
                yield CapturedPacket(index, sec + frac * scale, linktype, data, orig_len)
                pos = end
        finally:
            self._pos = pos

    # ----------------------------------------------------------------------------------------- pcapng
    def _check_first_shb(self, what: str) -> None:
        # Called before iteration; the buffer holds at least 12 bytes.
        buf = self._buf
        order = "<" if struct.unpack_from("<I", buf, 8)[0] == _BOM else ">"
        (blen,) = struct.unpack_from(order + "I", buf, 4)
        if blen < 28 or blen % 4:
            raise CaptureError(f"{what}: pcapng section header block has invalid length {blen}")
        if blen > MAX_RECORD_SIZE:
            raise CaptureError(f"{what}: pcapng section header block length {blen} is implausible")
        if not self._fill(blen):
            raise CaptureError(
                f"{what}: pcapng section header truncated: block is {blen} bytes, file has only "
                f"{len(self._buf)}"
            )

    def _parse_options(self, buf: bytes, p: int, end: int, order: str):
        """Yield (code, value bytes) of an options list in buf[p:end]; stops quietly at malformed data."""
        unpack = struct.Struct(order + "HH").unpack_from
        while p + 4 <= end:
            code, length = unpack(buf, p)
            if code == 0:
                return
            p += 4
            if p + length > end:
                return
            yield code, buf[p : p + length]
            p += (length + 3) & ~3

    @staticmethod
    def _block_what(btype: int, index: int) -> str:
        name = _BLOCK_NAMES.get(btype, f"block of type 0x{btype:08x}")
        if btype in (6, 3, 2):
            return f"packet record {index + 1} ({name})"
        return f"{name} after packet record {index}"

    def _iter_pcapng(self):
        fill = self._fill
        index = 0
        section = 0
        ifaces: list[_Interface] = []
        last_ts = 0.0
        order = "<"
        hdr = struct.Struct("<II").unpack_from
        u32 = struct.Struct("<I").unpack_from
        epb = struct.Struct("<IIIII").unpack_from
        epbh = struct.Struct("<IIIIIII").unpack_from  # block header + EPB fixed fields, for the fast path
        fast: list = []  # per interface: (linktype, units, offset), or None when FCS stripping is needed
        nfast = 0
        bom_le = struct.Struct("<I").unpack_from
        buf = self._buf
        pos = self._pos
        n = len(buf)
        try:
            while True:
                # ---- fast path: a complete, well-formed EPB already in the buffer
                if pos + 28 <= n:
                    btype, blen, iface_id, ts_hi, ts_lo, caplen, orig_len = epbh(buf, pos)
                    end = pos + blen
                    if (
                        btype == 6
                        and end <= n
                        and caplen + 32 <= blen
                        and not blen & 3
                        and iface_id < nfast
                        and u32(buf, end - 4)[0] == blen
                    ):
                        itf_fast = fast[iface_id]
                        if itf_fast is not None:
                            linktype, units, offset = itf_fast
                            if ts_hi < 0x200000:  # same as _pcapng_ts(), inlined
                                last_ts = ((ts_hi << 32) | ts_lo) / units + offset
                            else:
                                last_ts = _pcapng_ts(ts_hi, ts_lo, units, offset)
                            index += 1
                            self.packets = index
                            start = pos + 28
                            yield CapturedPacket(index, last_ts, linktype, buf[start : start + caplen], orig_len)
                            pos = end
                            continue
                # ---- block header
                if pos + 12 > n:
                    self._pos = pos
                    if not fill(12):
                        have = len(self._buf) - self._pos
                        if have >= 8 and hdr(self._buf, self._pos)[0] != _PCAPNG_SHB:
                            btype, blen = hdr(self._buf, self._pos)
                            self.truncated = self._cut_message(
                                self._block_what(btype, index), self._pos, max(blen, 12)
                            )
                        elif have:
                            self.truncated = self._cut_message(
                                f"block header after packet record {index}", self._pos, 12
                            )
                        elif self._stream_error:
                            self.truncated = (
                                self._stream_end_message(index)
                            )
                        return
                    buf = self._buf
                    pos = self._pos
                    n = len(buf)
                btype, blen = hdr(buf, pos)
                if btype == _PCAPNG_SHB:
                    # new section: byte order from the byte-order magic
                    if bom_le(buf, pos + 8)[0] == _BOM:
                        order = "<"
                    elif struct.unpack_from(">I", buf, pos + 8)[0] == _BOM:
                        order = ">"
                    else:
                        self.truncated = (
                            f"capture file corrupt: section header block at byte offset {self._base + pos} "
                            f"has no valid byte-order magic; stopped reading"
                        )
                        return
                    hdr = struct.Struct(order + "II").unpack_from
                    u32 = struct.Struct(order + "I").unpack_from
                    epb = struct.Struct(order + "IIIII").unpack_from
                    epbh = struct.Struct(order + "IIIIIII").unpack_from
                    btype, blen = hdr(buf, pos)
                if blen < 12 or blen & 3 or blen > MAX_RECORD_SIZE:
                    self.truncated = (
                        f"capture file corrupt: block at byte offset {self._base + pos} "
                        f"(type 0x{btype:08x}) has invalid length {blen}; stopped reading"
                    )
                    return
                end = pos + blen
                if end > n:
                    self._pos = pos
                    if not fill(blen):
                        self.truncated = self._cut_message(self._block_what(btype, index), self._pos, blen)
                        return
                    buf = self._buf
                    pos = self._pos
                    n = len(buf)
                    end = pos + blen
                if u32(buf, end - 4)[0] != blen:
                    self.truncated = (
                        f"capture file corrupt: block at byte offset {self._base + pos} "
                        f"(type 0x{btype:08x}): trailing length {u32(buf, end - 4)[0]} does not match "
                        f"leading length {blen}; stopped reading"
                    )
                    return
                body = pos + 8
                bend = end - 4
                # ---- Enhanced Packet Block (the common case first)
                if btype == 6:
                    if bend - body < 20:
                        self._note("short-epb", "capture.short_block", block="Enhanced Packet Block")
                        pos = end
                        continue
                    iface_id, ts_hi, ts_lo, caplen, orig_len = epb(buf, body)
                    start = body + 20
                    dend = start + caplen
                    if dend > bend:
                        self._note("epb-caplen", "capture.caplen_beyond_block", offset=self._base + pos)
                        dend = bend
                    pkt = self._block_packet(buf, ifaces, section, iface_id, ts_hi, ts_lo, start, dend, orig_len,
                                             index + 1)
                    if pkt is None:
                        pos = end
                        continue
                    index = self.packets = pkt.index
                    last_ts = pkt.timestamp
                    yield pkt
                    pos = end
                    continue
                if btype == 1:  # Interface Description Block
                    if bend - body < 8:
                        self._note("short-idb", "capture.short_block", block="Interface Description Block")
                        itf = _Interface(-1, 0)
                    else:
                        linktype, _res, snaplen = struct.unpack_from(order + "HHI", buf, body)
                        itf = _Interface(linktype, snaplen)
                        for code, val in self._parse_options(buf, body + 8, bend, order):
                            if code == 9 and len(val) >= 1:  # if_tsresol
                                r = val[0]
                                itf.units = (2 ** (r & 0x7F)) if r & 0x80 else (10**r)
                            elif code == 14 and len(val) >= 8:  # if_tsoffset
                                itf.offset = struct.unpack_from(order + "q", val, 0)[0]
                            elif code == 13 and len(val) >= 1:  # if_fcslen
                                itf.fcs = val[0]
                        self._check_linktype(linktype, _interface_name(len(ifaces), section))
                    ifaces.append(itf)
                    fast.append(None if itf.fcs else (itf.linktype, itf.units, itf.offset))
                    nfast = len(fast)
                elif btype == _PCAPNG_SHB:
                    section += 1
                    ifaces = []
                    fast = []
                    nfast = 0
                    if bend - body >= 8:
                        vmaj, vmin = struct.unpack_from(order + "HH", buf, body + 4)
                        if vmaj != 1:
                            self._note(("shbver", vmaj, vmin), "capture.pcapng_version", section=section,
                                       version=f"{vmaj}.{vmin}")
                elif btype == 3:  # Simple Packet Block: interface 0
                    if bend - body < 4 or not ifaces:
                        self._note(("spb", section), "capture.simple_block_skipped")
                        pos = end
                        continue
                    (orig_len,) = u32(buf, body)
                    itf = ifaces[0]
                    caplen = orig_len
                    if itf.snaplen and itf.snaplen < caplen:
                        caplen = itf.snaplen
                    start = body + 4
                    if caplen > bend - start:
                        caplen = bend - start
                    if itf.fcs:
                        caplen, orig_len = _strip_fcs(itf.fcs, 0, caplen, orig_len)
                    index += 1
                    self.packets = index
                    self._note("spb-ts", "capture.simple_block_time")
                    yield CapturedPacket(
                        index, last_ts, itf.linktype, buf[start : start + caplen], orig_len
                    )
                elif btype == 2:  # obsolete Packet Block
                    if bend - body < 20:
                        self._note("short-pb", "capture.short_block", block="Packet Block")
                        pos = end
                        continue
                    iface_id, _drops, ts_hi, ts_lo, caplen, orig_len = struct.unpack_from(
                        order + "HHIIII", buf, body
                    )
                    start = body + 20
                    dend = min(start + caplen, bend)
                    pkt = self._block_packet(buf, ifaces, section, iface_id, ts_hi, ts_lo, start, dend, orig_len,
                                             index + 1)
                    if pkt is None:
                        pos = end
                        continue
                    index = self.packets = pkt.index
                    last_ts = pkt.timestamp
                    yield pkt
                elif btype in _SILENT_SKIP:
                    pass
                else:
                    name = _BLOCK_NAMES.get(btype)
                    if name:
                        self._note(("block", btype), "capture.block_skipped", block=name, type=btype)
                    else:
                        self._note(("block", btype), "capture.block_skipped", block=None, type=btype)
                pos = end
        finally:
            self._pos = pos

    # ---------------------------------------------------------------------------------- public API
    def __iter__(self) -> Iterator[CapturedPacket]:
        return self._iter  # single pass

    def __next__(self) -> CapturedPacket:
        return next(self._iter)

    def close(self) -> None:
        it = self._iter
        if it is not None:
            it.close()
        # Our wrappers first (a GzipFile does not close the file object it reads from; the push-back
        # wrapper does not close the caller's stream), then the file if we opened it.
        for w in reversed(self._extra_close):
            try:
                w.close()
            except Exception:
                pass
        self._extra_close = []
        if self._own and self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                pass
        self._buf = b""

    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<CaptureReader {self.name!r} format={self.format} packets={self.packets}>"


def open_capture(source) -> CaptureReader:
    """Open a pcap / pcapng capture (plain or gzip-compressed) for streaming.

    ``source`` is a path (``str`` / ``os.PathLike``) or a binary file object.  Raises :class:`CaptureError`
    with a user-facing message when the input is not a readable capture.  A file object passed in is not
    closed by the reader (files it opened itself are).
    """
    if isinstance(source, (str, bytes, os.PathLike)):
        name = os.fsdecode(source)
        try:
            f = open(source, "rb", buffering=0)
        except FileNotFoundError:
            raise CaptureError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise CaptureError(f"{name}: is a directory, not a capture file") from None
        except OSError as exc:
            raise CaptureError(f"{name}: cannot open: {exc.strerror or exc}") from None
        # Raw file: our own 1 MiB chunked buffer does the buffering (no double copy).
        try:
            return CaptureReader(io.BufferedReader(f, CHUNK_SIZE), name=name, own_stream=True)
        except CaptureError:
            raise
        except OSError as exc:
            raise CaptureError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not hasattr(source, "read"):
        raise TypeError(f"open_capture() needs a path or a binary file object, not {type(source).__name__}")
    name = getattr(source, "name", None)
    name = os.fsdecode(name) if isinstance(name, (str, bytes)) else "<stream>"
    try:
        return CaptureReader(source, name=name, own_stream=False)
    except CaptureError:
        raise
    except OSError as exc:
        raise CaptureError(f"{name}: cannot read: {exc}") from None


def _strip_fcs(fcs_len: int, start: int, end: int, orig_len: int) -> tuple[int, int]:
    """(new end, new orig_len) of packet data [start:end] without its trailing frame check sequence."""
    keep = max(orig_len - fcs_len, 0)
    return min(end, start + keep), keep
