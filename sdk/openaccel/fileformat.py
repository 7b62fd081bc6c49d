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
# 1.2: an empty QuantParams.zero_point means all zero; conv2d_q8 / linear_q8 shifts int8
# 1.3: conv2d_q8 / linear_q8 biases in 1/4096 output steps, added after the multiply
# 1.4: conv2d_q8 / linear_q8 biases any float32 (output steps; a 1.3 runtime refused off-grid values)
FORMAT_MINOR = 4


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


# The tree walk of the C loader (runtime_c/src/program/verify.c; its table is generated from the schema
# by runtime_c/tools/gen_schema_h.py `tree()`, and tests/test_bad_input.py checks this copy agrees):
# for each table, the fields that hold an offset, as (slot, kind, element size, table type).
_TREE: dict[str, tuple[tuple[int, str, int, str], ...]] = {
    "QuantParams": ((0, "VECTOR", 4, ""), (1, "VECTOR", 8, "")),
    "Tensor": ((0, "STRING", 4, ""), (2, "VECTOR", 8, ""), (3, "VECTOR", 1, ""), (9, "TABLE", 4, "QuantParams")),
    "Instruction": ((1, "VECTOR", 4, ""), (2, "VECTOR", 4, ""), (3, "VECTOR", 8, ""), (4, "VECTOR", 8, ""),
                    (8, "VECTOR", 4, ""), (10, "STRING", 4, "")),
    "Operator": ((0, "STRING", 4, ""),),
    "DeviceSlot": ((0, "STRING", 4, ""),),
    "MemoryPool": (),
    "MemoryPlan": ((0, "TABLES", 4, "MemoryPool"),),
    "SourceLocation": ((0, "STRING", 4, ""), (2, "STRING", 4, ""), (3, "STRING", 4, ""), (4, "STRING", 4, "")),
    "TensorData": ((1, "VECTOR", 8, ""),),
    "TestCase": ((0, "STRING", 4, ""), (1, "TABLES", 4, "TensorData"), (2, "TABLES", 4, "TensorData")),
    "Method": ((0, "STRING", 4, ""), (1, "VECTOR", 4, ""), (2, "VECTOR", 4, ""), (3, "TABLES", 4, "Tensor"),
               (4, "TABLES", 4, "Instruction"), (5, "TABLES", 4, "DeviceSlot"), (6, "TABLE", 4, "MemoryPlan"),
               (7, "TABLES", 4, "TestCase"), (8, "TABLES", 4, "SourceLocation")),
    "Segment": (),
    "Program": ((2, "STRING", 4, ""), (3, "STRING", 4, ""), (4, "STRINGS", 4, ""), (5, "TABLES", 4, "Operator"),
                (6, "TABLES", 4, "Method"), (7, "TABLES", 4, "Segment")),
}


class _Walk:
    """Every table and vector reachable from the root, each counted where it is referenced, with
    the C loader's bounds checks. A file that stores each table once adds up to at most its own
    size; one whose offsets point at one table from many places (N offsets to one Method whose
    tensors vector holds N offsets to one Tensor: 8N bytes, N^2 objects) runs out of budget
    before the object tree is built, so reading stays linear in the file size."""

    def __init__(self, buf: bytes, size: int) -> None:
        self.buf, self.size, self.budget = buf, size, size

    def bad(self, at: int, what: str, value: int, limit: int) -> ProgramError:
        return ProgramError(f"malformed flatbuffer at byte offset {at}: {what} ({value}, limit {limit})")

    def u32(self, at: int) -> int:
        return int(struct.unpack_from("<I", self.buf, at)[0])

    def charge(self, n: int, at: int, table: str, slot: int) -> None:
        if n <= self.budget:
            self.budget -= n
            return
        what = f"a {table} table" if slot < 0 else f"the vector in field {slot} of a {table} table"
        raise ProgramError(f"malformed flatbuffer at byte offset {at} ({what}): the tables and vectors reachable "
                           f"from the root add up to more than the flatbuffer's {self.size} bytes, so some are "
                           "referenced from more than one place; every table and vector must be stored once, "
                           "where it is used")

    def table_at(self, pos: int) -> tuple[int, int, int]:
        """(vtable position, vtable size, table size) of the table at `pos`."""
        size = self.size
        if pos > size or size - pos < 4:
            raise self.bad(pos, "table start outside buffer", pos, size)
        (soff,) = struct.unpack_from("<i", self.buf, pos)
        vt = pos - soff
        if vt < 0 or vt > size or size - vt < 4:
            raise self.bad(pos, "vtable offset outside buffer", max(vt, 0), size)
        vt_size, tbl_size = struct.unpack_from("<HH", self.buf, vt)
        if vt_size < 4 or vt_size & 1:
            raise self.bad(vt, "vtable size invalid", vt_size, 4)
        if size - vt < vt_size:
            raise self.bad(vt, "vtable runs past end", vt_size, size - vt)
        if tbl_size < 4:
            raise self.bad(pos, "table size invalid", tbl_size, 4)
        if size - pos < tbl_size:
            raise self.bad(pos, "table runs past end", tbl_size, size - pos)
        return vt, vt_size, tbl_size

    def follow(self, at: int) -> int:
        off = self.u32(at)
        if off == 0 or off > self.size - at:
            raise self.bad(at, "offset points outside buffer", off, self.size - at)
        return at + off

    def string(self, pos: int) -> None:
        if self.size - pos < 4:
            raise self.bad(pos, "string length outside buffer", pos, self.size)
        n = self.u32(pos)
        if n >= self.size - pos - 4:
            raise self.bad(pos, "string runs past end", n, self.size - pos - 4)
        if self.buf[pos + 4 + n] != 0:
            raise self.bad(pos, "string not NUL-terminated", n, n)

    def vector(self, pos: int, elem: int) -> int:
        if self.size - pos < 4:
            raise self.bad(pos, "vector length outside buffer", pos, self.size)
        count = self.u32(pos)
        avail = self.size - pos - 4
        if count * elem > avail:
            raise self.bad(pos, "vector runs past end (elements)", count, avail // elem)
        return count

    def table(self, pos: int, kind: str) -> None:
        vt, vt_size, tbl_size = self.table_at(pos)
        self.charge(tbl_size, pos, kind, -1)
        for slot, fkind, elem, target in _TREE[kind]:
            entry = 4 + 2 * slot
            if entry + 2 > vt_size:
                continue
            (voff,) = struct.unpack_from("<H", self.buf, vt + entry)
            if voff == 0:
                continue
            if voff + 4 > tbl_size:
                raise self.bad(pos, "field runs past its table", voff + 4, tbl_size)
            at = self.follow(pos + voff)
            if fkind == "STRING":
                self.string(at)
            elif fkind == "TABLE":
                self.table(at, target)
            else:
                count = self.vector(at, elem)
                if not count:
                    continue
                self.charge(4 + count * elem, at, kind, slot)
                for i in range(count) if fkind in ("STRINGS", "TABLES") else ():
                    el = self.follow(at + 4 + 4 * i)
                    if fkind == "STRINGS":
                        self.string(el)
                    else:
                        self.table(el, target)


def check_tree(buf: bytes, flatbuffer_size: int) -> None:
    """Refuse a flatbuffer whose tables and vectors, counted where they are referenced, add up to
    more than the flatbuffer (shared tables), or whose offsets are malformed; linear in its size."""
    if flatbuffer_size < 8:
        raise ProgramError(f"malformed flatbuffer: {flatbuffer_size} bytes, too small (limit 8)")
    w = _Walk(buf, flatbuffer_size)
    w.table(w.u32(0), "Program")


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
    check_tree(buf, header.flatbuffer_size)
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
