"""Placement by capability, in two steps: `assign` puts each instruction on the first device of
the user's preference list that supports its op and dtype (from a device profile), else on the
CPU, right after lowering, so the CPU-only rewrites after it only ever see the CPU's instructions
(pipeline.py); `place_transfers`, once the rewrites are done, adds the transfers and events that
move data between devices and order the work.

Execution model this relies on (runtime_c/src/method/): CPU instructions run synchronously in
order; each accelerator slot has one in-order stream; a TRANSFER runs on the accelerator side's
stream; events are recorded on the recording device's stream and waited for either on the same
stream or by the host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ExportError
from ..ir import Graph, Instr, Source, Value, dtype_name
from .memory_plan import root_of

CPU = "cpu"


@dataclass
class DeviceProfile:
    """What one device kind supports: op name -> dtype names."""

    kind: str
    ops: dict[str, set[str]] = field(default_factory=dict)

    def supports(self, op: str, dtype: str) -> bool:
        return dtype in self.ops.get(op, set())


def load_profiles(source: str | Path | list[dict[str, Any]] | None) -> dict[str, DeviceProfile]:
    """Profiles from `openaccel devices --json` output (a file path or the parsed list)."""
    if source is None:
        return {}
    if isinstance(source, (str, Path)):
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ExportError(f"cannot read the device profile {source}: {e}") from None
    else:
        data = source
    if isinstance(data, dict):
        data = data.get("devices", [data])
    out: dict[str, DeviceProfile] = {}
    for d in data:
        kind = d.get("kind")
        if not kind:
            raise ExportError(f"device profile entry without a 'kind': {d}")
        prof = out.setdefault(kind, DeviceProfile(kind))
        for op, dts in (d.get("ops") or {}).items():
            prof.ops.setdefault(op, set()).update(dts)
    return out


def compute_dtype(ins: Instr) -> str:
    """The dtype an instruction computes in, as the profiles list it: its first input's."""
    for v in ins.inputs:
        if v is not None:
            return dtype_name(v.dtype)
    return dtype_name(ins.outputs[0].dtype)


@dataclass
class PlacementReport:
    device_kinds: list[str]
    counts: dict[str, int]
    transfers: int
    events: int


@dataclass
class Assignment:
    """Which device slot each instruction was given (assign)."""

    device_kinds: list[str]                  # slot -> kind; slot 0 is the CPU
    preferred: list[str]                     # the devices preferred over the CPU
    # ops that went to the CPU because no preferred device's profile has them: (op, dtype) -> count
    refused: dict[tuple[str, str], int] = field(default_factory=dict)

    def fallback_note(self) -> str | None:
        """How many ops run on the CPU against the preference, and why (None when none do)."""
        n = sum(self.refused.values())
        if not n:
            return None
        ops = ", ".join(f"{op} ({dt}) x{c}" for (op, dt), c in self.refused.items())
        if len(self.preferred) == 1:
            why = f"{self.preferred[0]} is preferred: its profile has no {ops}"
        else:
            why = f"{', '.join(self.preferred)} are preferred: none of their profiles has {ops}"
        return f"{n} op{'s' if n > 1 else ''} will run on the CPU although {why}"


def assign(graph: Graph, profiles: dict[str, DeviceProfile], prefer: list[str]) -> Assignment:
    """Give each instruction the first device of `prefer` whose profile supports its op and dtype,
    the CPU when none before it does (a device after "cpu" in `prefer` is never chosen)."""
    for kind in prefer:
        if kind != CPU and kind not in profiles:
            raise ExportError(f"preferred device '{kind}' is not in the device profile "
                              f"(profile has: {', '.join(profiles) or 'nothing'}); write one with "
                              "`openaccel devices --json [--device LIB] > devices.json`")
    preferred = list(prefer[:prefer.index(CPU)] if CPU in prefer else prefer)
    done = Assignment([CPU], preferred)
    for ins in graph.instrs:
        chosen = CPU
        for kind in preferred:
            if profiles[kind].supports(ins.op, compute_dtype(ins)):
                chosen = kind
                break
        if chosen == CPU and preferred and ins.kind == "op":
            key = (ins.op, compute_dtype(ins))
            done.refused[key] = done.refused.get(key, 0) + 1
        if chosen not in done.device_kinds:
            done.device_kinds.append(chosen)
        ins.device = done.device_kinds.index(chosen)
    return done


def place(graph: Graph, profiles: dict[str, DeviceProfile], prefer: list[str]) -> PlacementReport:
    """Assign devices, insert transfers and events. Slot 0 is always the CPU."""
    return place_transfers(graph, assign(graph, profiles, prefer).device_kinds)


def place_transfers(graph: Graph, kinds: list[str]) -> PlacementReport:
    """Insert the transfers and events that instructions placed on `kinds` (slot -> kind, by
    assign) need: each reads its inputs from its own device's memory, the method's outputs end in
    host memory, and work on different devices is ordered by events."""
    counts = {k: sum(1 for i in graph.instrs if i.device == s) for s, k in enumerate(kinds)}
    if len(kinds) == 1:
        return PlacementReport(kinds, counts, 0, 0)

    # where each value lives: graph inputs on the CPU, results where they were produced,
    # aliases with their source (views never cross devices)
    home: dict[Value, int] = {root_of(v)[0]: 0 for v in graph.inputs}
    out: list[Instr] = []
    copies: dict[tuple[Value, int], Value] = {}
    n_events = 0
    pending_upload: list[int] = []   # events of uploads a later CPU instruction must wait for
    ready: dict[Value, int] = {}     # value on the CPU produced by a download -> its event

    def residency(v: Value) -> int | None:
        r, _ = root_of(v)
        if r.is_const:
            return None  # constants live in the file; the runtime wraps them for accelerators
        return home.get(r, 0)

    def transfer(v: Value, to: int, src: Source) -> Value:
        nonlocal n_events
        key = (v, to)
        if key in copies:
            return copies[key]
        frm = residency(v)
        assert frm is not None and frm != to
        if frm != 0 and to != 0:  # accelerator to accelerator: stage through the CPU
            v = transfer(v, 0, src)
            frm = 0
        dst = Value(name=f"{v.name}@{kinds[to]}", dtype=v.dtype, shape=v.shape)
        home[dst] = to
        t = Instr(op="transfer", inputs=[v], outputs=[dst], source=src, device=to if to != 0 else frm,
                  kind="transfer", signal=n_events)
        if frm == 0:
            # the CPU must not overwrite `v` while the accelerator still reads it
            pending_upload.append(n_events)
        else:
            ready[dst] = n_events
        if v in ready:
            t.waits = [ready[v]]
        n_events += 1
        out.append(t)
        copies[key] = dst
        return dst

    for ins in graph.instrs:
        waits: list[int] = []
        for k, v in enumerate(ins.inputs):
            if v is None:
                continue
            where = residency(v)
            if where is None or where == ins.device:
                if ins.device == 0 and root_of(v)[0] in ready:
                    waits.append(ready[root_of(v)[0]])
                continue
            moved = transfer(v, ins.device, ins.source)
            ins.inputs[k] = moved
            if ins.device == 0 and moved in ready:
                waits.append(ready[moved])
        if ins.device == 0 and pending_upload:
            waits.extend(pending_upload)
            pending_upload.clear()
        ins.waits = sorted(set(waits))
        for o in ins.outputs:
            home[root_of(o)[0]] = ins.device
        out.append(ins)
    # method outputs must be host memory
    final: list[Value] = []
    for v in graph.outputs:
        if residency(v) not in (None, 0):
            moved = transfer(v, 0, Source(node="output"))
            # the method's output keeps the model's name; the device-side copy gets the suffix
            moved.name, v.name = v.name, f"{v.name}@{kinds[residency(v) or 0]}"
            final.append(moved)
        else:
            final.append(v)
    graph.outputs = final
    graph.instrs = out
    graph.num_events = n_events
    graph.homes = home
    transfers = sum(1 for i in out if i.op == "transfer")
    return PlacementReport(kinds, counts, transfers, n_events)
