"""Stage 1: read packets from a classic pcap or pcapng capture file (optionally gzip-compressed).

The reading is the compiled core's (``crates/engine/src/capture/``): streaming, memory bounded by the read size
(1 MiB) plus the largest record, whatever the file size. This module is its Python face: the packets as
``CapturedPacket``s, the notes' texts (registered here, the one place of them), open_capture. A pipeline stage
can also read the core's reader itself, many packets per call (``pipeline.read_file``).

    with open_capture("x.pcapng.gz") as reader:
        for pkt in reader:            # CapturedPacket(index, timestamp, linktype, data, orig_len)
            ...
        if reader.truncated: print(reader.truncated)
        for note in reader.problems: print(note.id, note.params)   # registered ids (problems.py)

Packet numbering (``index``) is 1-based and counts exactly the packet records (pcap records; pcapng EPB,
SPB and obsolete PB), which is Wireshark's ``frame.number``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dissector import _core as _core

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

#: Link types that the network layers can decode, and the names of link types (the core's tables).
SUPPORTED_LINKTYPES = frozenset(_core.SUPPORTED_LINKTYPES)
LINKTYPE_NAMES = dict(_core.LINKTYPE_NAMES)

# ------------------------------------------------------------------------------------------------ limits
CHUNK_SIZE = _core.CHUNK_SIZE  # bytes read from the file at a time
# A record claiming more than this is treated as corruption, not as a real packet (Wireshark's own limit for
# most link types is 256 KiB; some USB/D-Bus captures use up to 128 MiB).
MAX_RECORD_SIZE = _core.MAX_RECORD_SIZE


@dataclass(slots=True)
class CapturedPacket:
    index: int  # 1-based packet number in the file (Wireshark's frame.number)
    timestamp: float  # epoch seconds
    linktype: int  # LINKTYPE_* value of the packet's interface
    data: bytes  # captured bytes (caplen)
    orig_len: int  # original length on the wire


#: The input cannot be read as a capture at all (missing file, not a capture, header truncated).
CaptureError = _core.CaptureError


class CaptureReader:
    """Iterable of :class:`CapturedPacket` over one capture file; a context manager that closes the file.

    ``stream`` is a binary file object (read with its ``read1``, else ``read``; closed by ``close`` when
    ``own_stream``); ``open_capture`` also takes a path, which the core opens itself.

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
        self._stream = stream
        self._own = own_stream
        try:
            self._core = _core.CaptureReader(stream, name, CapturedPacket)
        except BaseException:
            self._core = None
            self.close()
            raise

    @classmethod
    def _open(cls, path: str) -> "CaptureReader":
        """The capture file at ``path``, opened by the core (OSError as ``open`` raises it)."""
        reader = cls.__new__(cls)
        reader.name = path
        reader._stream = None
        reader._own = False
        reader._core = _core.CaptureReader.open(path, path, CapturedPacket)
        return reader

    format = property(lambda self: self._core.format)
    compressed = property(lambda self: self._core.compressed)
    truncated = property(lambda self: self._core.truncated)
    packets = property(lambda self: self._core.packets)
    linktype = property(lambda self: self._core.linktype)
    snaplen = property(lambda self: self._core.snaplen)
    fcs_len = property(lambda self: self._core.fcs_len)

    @property
    def problems(self) -> list[Finding]:
        return [Finding(pid, params) for pid, params in self._core.notes]

    def __iter__(self):
        return self._core  # single pass

    def __next__(self) -> CapturedPacket:
        return next(self._core)

    def close(self) -> None:
        if self._core is not None:
            self._core.close()
        if self._own and self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                pass

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
            return CaptureReader._open(name)
        except CaptureError:
            raise
        except FileNotFoundError:
            raise CaptureError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise CaptureError(f"{name}: is a directory, not a capture file") from None
        except OSError as exc:
            raise CaptureError(f"{name}: cannot open: {exc.strerror or exc}") from None
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
