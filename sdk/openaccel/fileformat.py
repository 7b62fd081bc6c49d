"""The .oab container: a flatbuffer (schema runtime_c/schema/oab.fbs) with a 32-byte extended
header after the file identifier, followed by 64-byte-aligned data segments.

This module packs and unpacks the container only; it imports neither torch nor the runtime.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import flatbuffers

from .errors import ProgramError
from .oab.Program import Program as _FbProgram
from .oab.Program import ProgramT

IDENTIFIER = b"OAB1"
HEADER_MAGIC = b"OAXH"
HEADER_SIZE = 32
PREFIX = 8 + HEADER_SIZE  # root offset + identifier + extended header
SEGMENT_ALIGNMENT = 64
FORMAT_MAJOR = 1
FORMAT_MINOR = 0


def _align(n: int, a: int = SEGMENT_ALIGNMENT) -> int:
    return (n + a - 1) // a * a


class SegmentWriter:
    """Collects data segments and hands out their indices (identical payloads are stored once)."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []
        self.offsets: list[int] = []
        self._size = 0
        self._dedupe: dict[bytes, int] = {}

    def add(self, data: bytes) -> int:
        if data in self._dedupe:
            return self._dedupe[data]
        index = len(self.blobs)
        self.offsets.append(self._size)
        self.blobs.append(data)
        self._size = _align(self._size + len(data))
        self._dedupe[data] = index
        return index

    @property
    def size(self) -> int:
        return self._size


def pack(program: ProgramT, segments: SegmentWriter) -> bytes:
    """Serialize `program` (its `segments` field is filled here) and the segment data."""
    from .oab.Segment import SegmentT

    program.segments = []
    for off, blob in zip(segments.offsets, segments.blobs):
        s = SegmentT()
        s.offset = off
        s.size = len(blob)
        program.segments.append(s)
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(program.Pack(builder), file_identifier=IDENTIFIER)
    return container(bytes(builder.Output()), segments)


def container(fb: bytes, segments: SegmentWriter) -> bytes:
    """The .oab file of a finished flatbuffer `fb` (root offset and identifier first, as
    `Builder.Finish(..., file_identifier=IDENTIFIER)` writes them) and the segment data: the
    extended header goes in after the identifier, the segments after the flatbuffer."""
    (root,) = struct.unpack_from("<I", fb, 0)
    fb_size = len(fb) + HEADER_SIZE
    seg_base = _align(fb_size)
    header = HEADER_MAGIC + struct.pack("<IQQQ", HEADER_SIZE, fb_size, seg_base, segments.size)
    out = bytearray(struct.pack("<I", root + HEADER_SIZE) + fb[4:8] + header + fb[8:])
    out += bytes(seg_base - len(out))
    for off, blob in zip(segments.offsets, segments.blobs):
        assert len(out) == seg_base + off
        out += blob
        out += bytes(_align(len(out)) - len(out))
    return bytes(out)


@dataclass(frozen=True)
class Header:
    flatbuffer_size: int
    segment_base: int
    segment_size: int


def read_header(buf: bytes) -> Header:
    """Check the container header; errors name the byte offset that is wrong."""
    if len(buf) < PREFIX:
        raise ProgramError(f"file is {len(buf)} bytes, too small for an .oab header ({PREFIX} bytes)")
    if buf[4:8] != IDENTIFIER:
        raise ProgramError(f"not an .oab file: bytes 4..8 are {bytes(buf[4:8])!r}, expected {IDENTIFIER!r}")
    if buf[8:12] != HEADER_MAGIC:
        raise ProgramError(f"bad extended header magic at byte offset 8: {bytes(buf[8:12])!r}")
    hsize, fb_size, seg_base, seg_size = struct.unpack_from("<IQQQ", buf, 12)
    if hsize < HEADER_SIZE:
        raise ProgramError(f"extended header size {hsize} at byte offset 12 is below {HEADER_SIZE}")
    if not PREFIX <= fb_size <= len(buf):
        raise ProgramError(f"flatbuffer size {fb_size} (byte offset 16) does not fit the "
                           f"{len(buf)}-byte file (truncated?)")
    if seg_base < fb_size or seg_base % SEGMENT_ALIGNMENT or seg_base + seg_size > len(buf):
        raise ProgramError(f"segment data [{seg_base}, +{seg_size}) (byte offsets 24, 32) does not "
                           f"fit the {len(buf)}-byte file (truncated?)")
    return Header(fb_size, seg_base, seg_size)


def unpack(buf: bytes) -> tuple[ProgramT, Header]:
    """Parse an .oab file into the flatbuffers object tree. Refuses newer major versions."""
    header = read_header(buf)
    try:
        fb = _FbProgram.GetRootAs(buf[: header.flatbuffer_size], 0)
        major, minor = fb.FormatMajor(), fb.FormatMinor()
    except Exception as e:  # the flatbuffers package raises assorted errors on bad offsets
        raise ProgramError(f"malformed flatbuffer: {e}") from None
    if major == 0:
        raise ProgramError("file has no format version (byte offsets of the root table are damaged)")
    if major > FORMAT_MAJOR:
        raise ProgramError(f"file format {major}.{minor} is newer than this openaccel reads "
                           f"({FORMAT_MAJOR}.x); update openaccel")
    try:
        program = ProgramT.InitFromObj(fb)
    except Exception as e:
        raise ProgramError(f"malformed flatbuffer: {type(e).__name__}: {e}") from None
    for i, s in enumerate(program.segments or []):
        if s.offset % SEGMENT_ALIGNMENT or s.offset + s.size > header.segment_size:
            raise ProgramError(f"segment {i} [{s.offset}, +{s.size}) is misaligned or runs past the "
                               f"segment data ({header.segment_size} bytes)")
    return program, header


def segment_bytes(buf: bytes, program: ProgramT, header: Header, index: int, offset: int,
                  nbytes: int) -> memoryview:
    segs = program.segments or []
    if not 0 <= index < len(segs):
        raise ProgramError(f"segment index {index} out of range (file has {len(segs)})")
    s = segs[index]
    if offset < 0 or offset + nbytes > s.size:
        raise ProgramError(f"bytes [{offset}, +{nbytes}) run past segment {index} ({s.size} bytes)")
    start = header.segment_base + s.offset + offset
    return memoryview(buf)[start:start + nbytes]
