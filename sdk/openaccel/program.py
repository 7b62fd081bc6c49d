"""oa.Program: an exported .oab file and a parsed, read-only view of it (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import dtypes
from .errors import ProgramError
from .fileformat import Header, segment_bytes, unpack
from .opset import arg_names


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    index: int
    op: str
    device: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    args: tuple[tuple[str, object], ...]
    source: str
    events: str = ""
    note: str = ""      # why the exporter left it so (a float32 op in a quantized program: the reason)


@dataclass(frozen=True)
class QuantSpec:
    """The quantization parameters of one int8 / uint8 tensor (real = (q - zero_point) * scale):
    per tensor (axis -1) or per channel along `axis`."""

    tensor: str
    dtype: str
    shape: tuple[int, ...]
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int
    # False: the file stores no zero points (format 1.2: an empty vector means every one is 0);
    # zero_point then holds the zeros it stands for, one per scale
    zero_point_stored: bool = True

    def describe(self) -> str:
        unstored = "" if self.zero_point_stored else " (not stored: all 0)"
        if self.axis < 0 and len(self.scale) == 1 and len(self.zero_point) == 1:
            return f"scale {self.scale[0]:.6g}, zero point {self.zero_point[0]}{unstored}"
        lo, hi = (min(self.scale), max(self.scale)) if self.scale else (0.0, 0.0)
        zps = sorted(set(self.zero_point))
        zp = "none" if not zps else str(zps[0]) if len(zps) == 1 else f"{zps[0]}..{zps[-1]}"
        zp += unstored
        return f"per channel (axis {self.axis}): {len(self.scale)} scales {lo:.6g}..{hi:.6g}, zero point {zp}"


def _s(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


class Program:
    """A .oab program: `.buffer` holds the bytes; the rest is read from them."""

    def __init__(self, buffer: bytes) -> None:
        self.buffer = bytes(buffer)
        self._fb, self._header = unpack(self.buffer)
        methods = self._fb.methods or []
        if not methods:
            raise ProgramError("file has no methods")
        self._m = methods[0]

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Program:
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise ProgramError(f"{p}: no such file") from None
        except OSError as e:
            raise ProgramError(f"{p}: cannot read ({e.strerror})") from None
        try:
            return cls(data)
        except ProgramError as e:
            raise ProgramError(f"{p}: {e}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.buffer)

    # ---- facts -------------------------------------------------------------------------------
    @property
    def header(self) -> Header:
        return self._header

    @property
    def producer(self) -> str:
        return _s(self._fb.producer)

    @property
    def target(self) -> str:
        return _s(self._fb.target)

    @property
    def format_version(self) -> tuple[int, int]:
        return self._fb.formatMajor, self._fb.formatMinor

    @property
    def required_features(self) -> list[str]:
        return [_s(f) for f in (self._fb.requiredFeatures or [])]

    @property
    def ops(self) -> list[str]:
        """Op names of the manifest, in first-use order."""
        return [_s(o.name) for o in (self._fb.operators or [])]

    def _tensor(self, i: int) -> TensorSpec:
        tensors = self._m.tensors or []
        if not 0 <= i < len(tensors):
            raise ProgramError(f"tensor index {i} out of range (method has {len(tensors)})")
        t = tensors[i]
        shape = tuple(int(d) for d in (t.shape if t.shape is not None else []))
        return TensorSpec(_s(t.name), dtypes.name_of(int(t.dtype)), shape)

    @property
    def inputs(self) -> list[TensorSpec]:
        return [self._tensor(int(i)) for i in (self._m.inputs if self._m.inputs is not None else [])]

    @property
    def outputs(self) -> list[TensorSpec]:
        return [self._tensor(int(i)) for i in (self._m.outputs if self._m.outputs is not None else [])]

    @property
    def memory_plan(self) -> dict[str, int]:
        """Planned bytes per pool ('pool0', ...), plus the unplanned total for comparison."""
        plan = self._m.memoryPlan
        out: dict[str, int] = {}
        if plan is not None:
            for k, pool in enumerate(plan.pools or []):
                out[f"pool{k}"] = int(pool.size)
            out["naive"] = int(plan.naiveBytes)
        return out

    @property
    def arena_bytes(self) -> int:
        return sum(v for k, v in self.memory_plan.items() if k.startswith("pool"))

    @property
    def constant_bytes(self) -> int:
        return self._header.segment_size - sum(
            int(d.nbytes) for tc in (self._m.tests or []) for d in (tc.inputs or []) + (tc.outputs or []))

    @property
    def devices(self) -> list[str]:
        return [_s(d.kind) for d in (self._m.devices or [])]

    @property
    def instructions(self) -> list[Placement]:
        out = []
        tensors = self._m.tensors or []
        debug = self._m.debug or []
        devs = self.devices
        ops = self.ops
        for i, ins in enumerate(self._m.instructions or []):
            if ins.kind == 1:
                op = "transfer"
            else:
                op = ops[ins.op] if 0 <= ins.op < len(ops) else f"<op {ins.op}>"

            def tname(t: int) -> str:
                return "-" if t < 0 else (_s(tensors[t].name) if t < len(tensors) else f"<{t}>")

            src = ""
            if 0 <= ins.debug < len(debug):
                d = debug[ins.debug]
                src = f"{_s(d.file)}:{d.line}" if d.file else ""
            ints = [int(v) for v in (ins.ints if ins.ints is not None else [])]
            floats = [float(v) for v in (ins.floats if ins.floats is not None else [])]
            waits = [int(w) for w in (ins.waitEvents if ins.waitEvents is not None else [])]
            sync = (f"wait {','.join(map(str, waits))} " if waits else "") + (
                f"signal {ins.signalEvent}" if ins.signalEvent >= 0 else "")
            out.append(Placement(
                index=i, op=op, device=devs[ins.device] if ins.device < len(devs) else f"<{ins.device}>",
                events=sync.strip(), note=_s(ins.note),
                inputs=tuple(tname(int(t)) for t in (ins.inputs if ins.inputs is not None else [])),
                outputs=tuple(tname(int(t)) for t in (ins.outputs if ins.outputs is not None else [])),
                args=tuple(arg_names(op, ints, floats)), source=src))
        return out

    def quant_params(self) -> list[QuantSpec]:
        """The quantization parameters the file gives its tensors (Tensor.quant), in tensor order."""
        out = []
        for t in self._m.tensors or []:
            q = t.quant
            if q is None:
                continue
            shape = tuple(int(d) for d in (t.shape if t.shape is not None else []))
            code = int(t.dtype)
            dt = dtypes.name_of(code) if code in dtypes.known_codes() else f"<dtype {code}>"
            scale = tuple(float(x) for x in (q.scale if q.scale is not None else []))
            zps = tuple(int(z) for z in (q.zeroPoint if q.zeroPoint is not None else []))
            stored = bool(zps)
            if not stored:   # not stored: all zero (format 1.2)
                zps = (0,) * len(scale)
            out.append(QuantSpec(_s(t.name), dt, shape, scale, zps, int(q.axis), stored))
        return out

    def tests(self) -> list[tuple[str, list[np.ndarray], list[np.ndarray], float, float]]:
        """Bundled test vectors: (name, inputs, expected outputs, atol, rtol). A vector whose dtype,
        shape and size disagree is a ProgramError naming the test and the tensor."""
        out = []
        for ti, tc in enumerate(self._m.tests or []):
            name = _s(tc.name)
            out.append((name, self._test_arrays(ti, name, tc.inputs, "input"),
                        self._test_arrays(ti, name, tc.outputs, "output"), float(tc.atol), float(tc.rtol)))
        return out

    def _test_arrays(self, ti: int, name: str, items: list | None, kind: str) -> list[np.ndarray]:
        res = []
        sig = self._m.inputs if kind == "input" else self._m.outputs
        tensors = self._m.tensors or []
        for j, d in enumerate(items or []):
            where = f"test {ti} ('{name}') {kind} {j}"
            if sig is not None and j < len(sig) and 0 <= int(sig[j]) < len(tensors):
                where += f" ('{_s(tensors[int(sig[j])].name)}')"
            code = int(d.dtype)
            if code not in dtypes.known_codes():
                raise ProgramError(f"{where}: unknown dtype {code}")
            shape = tuple(int(x) for x in (d.shape if d.shape is not None else []))
            if any(x < 0 for x in shape):
                raise ProgramError(f"{where}: shape {list(shape)} has a negative dim")
            want = int(np.prod(shape, dtype=object)) * dtypes.size_of(code)
            if int(d.nbytes) != want:
                raise ProgramError(f"{where}: {dtypes.name_of(code)}{list(shape)} is {want} bytes, the file gives "
                                   f"{int(d.nbytes)}")
            try:
                raw = segment_bytes(self.buffer, self._fb, self._header, int(d.segment), int(d.offset), int(d.nbytes))
            except ProgramError as e:
                raise ProgramError(f"{where}: {e}") from None
            res.append(np.frombuffer(raw, dtype=dtypes.numpy_of(code)).reshape(shape).copy())
        return res

    def summary(self) -> str:
        """A human-readable description: signature, ops, memory, sizes."""
        lines = [f"openaccel program ({len(self.buffer):,} bytes, format {self.format_version[0]}."
                 f"{self.format_version[1]}, target {self.target or '?'})",
                 f"  producer: {self.producer}",
                 f"  required CPU features: {', '.join(self.required_features) or 'none'}"]
        for kind, specs in (("input", self.inputs), ("output", self.outputs)):
            for s in specs:
                lines.append(f"  {kind:6} {s.name}: {s.dtype}{list(s.shape)}")
        counts: dict[str, int] = {}
        for p in self.instructions:
            counts[p.op] = counts.get(p.op, 0) + 1
        lines.append(f"  instructions: {sum(counts.values())} ({len(counts)} ops: "
                     + ", ".join(f"{k} x{v}" for k, v in counts.items()) + ")")
        per_dev: dict[str, int] = {}
        for p in self.instructions:
            if p.op != "transfer":
                per_dev[p.device] = per_dev.get(p.device, 0) + 1
        transfers = counts.get("transfer", 0)
        lines.append("  devices: " + ", ".join(f"{d} ({per_dev.get(d, 0)} ops)" for d in self.devices)
                     + (f"; {transfers} transfers between them" if transfers else ""))
        plan = self.memory_plan
        naive = plan.get("naive", 0)
        pools = [k for k in plan if k.startswith("pool")]
        if len(pools) > 1:
            lines.append("  pools: " + ", ".join(f"{self.devices[int(k[4:])] if int(k[4:]) < len(self.devices) else k} "
                                                 f"{plan[k]:,} bytes" for k in pools))
        saved = f", {100 * (1 - self.arena_bytes / naive):.0f}% below no reuse ({naive:,})" if naive else ""
        lines.append(f"  memory plan: arena {self.arena_bytes:,} bytes{saved}")
        lines.append(f"  constants: {self.constant_bytes:,} bytes; bundled tests: {len(self._m.tests or [])}")
        qps = self.quant_params()
        if qps:
            per_channel = sum(1 for q in qps if q.axis >= 0)
            lines.append(f"  quantization parameters: {len(qps)} tensors ({len(qps) - per_channel} per tensor, "
                         f"{per_channel} per channel)")
        islands = self.float32_in_quantized()
        if islands:
            lines.append(f"  quantized program: {len(islands)} instruction(s) stay float32 between dequantize / "
                         "quantize (not an int8 pattern):")
            lines += [f"    #{p.index} {p.op}" + (f" at {p.source}" if p.source else "")
                      + (f": {p.note.removeprefix('stays float32: ')}" if p.note else "") for p in islands]
        return "\n".join(lines)

    def float32_in_quantized(self) -> list[Placement]:
        """In a quantized program (one with int8 instructions): the instructions that compute in
        float32 (not quantize / dequantize), i.e. what the exporter could not fold into an int8
        instruction (its ExportWarning gave each one's reason); empty for a float program."""
        quant_ops = {"quantize", "dequantize"}
        instrs = self.instructions
        raw = self._m.instructions or []
        tensors = self._m.tensors or []
        int8 = dtypes.code_of("int8")

        def int8_out(k: int) -> bool:
            outs = raw[k].outputs if raw[k].outputs is not None else []
            return any(0 <= int(t) < len(tensors) and tensors[int(t)].dtype == int8 for t in outs)

        if not any(p.op.endswith("_q8") or p.op == "quantize" for p in instrs):
            return []
        return [p for k, p in enumerate(instrs) if p.op not in quant_ops and p.op != "transfer" and not int8_out(k)]

    def __repr__(self) -> str:
        return f"<openaccel.Program {len(self.buffer):,} bytes, {len(self.instructions)} instructions>"
