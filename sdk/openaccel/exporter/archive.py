"""What openaccel checks in a model archive before torch reads it, and the guard it loads under.

A `torch.export.save` archive (.pt2) and a `torch.save` file are zip archives. torch reads them
trustingly: `torch.export.load` unpickles members with `weights_only=False` on several routes
(the sample inputs, legacy weights and constants when the weights-only load fails; weights and
constants marked `use_pickle`; opaque objects with plain `pickle.loads`; TorchScript objects),
loads AOTInductor shared libraries it finds in the archive, and inflates members to their declared
size without a bound. So, before torch sees the file:

Sizes (`check_sizes`; every archive, and every archive nested in one, such as the sample inputs):
- members are stored or deflated (the two methods torch's reader knows); a stored member's size
  is its size in the file;
- a JSON, pickle or metadata member inflates to at most MAX_STRUCTURE_BYTES (128 MiB: ResNet-18's
  model.json is 150 KB for 193 graph nodes, so this is room for ~160,000 nodes);
- a deflated member over 1 MiB inflates at most MAX_INFLATION (100) times: tensor data deflates
  1-3x and JSON 10-30x, a zip bomb ~1000x;
- all members together inflate to at most 100x the archive's size plus 64 MiB;
- no member name appears twice (Python's zipfile and torch's reader would pick different ones).
Weights stored uncompressed, as torch.export.save writes them, pass whatever their size.

Code (`check_payloads`, then `refuse_unpickling` around torch.export.load): without opt-in, a
weight or constant marked `use_pickle`, any custom or opaque object and any AOTInductor code are
refused up front; then torch.export.load runs with torch.load forced to `weights_only=True` (the
restricted unpickler, which builds tensors and containers only) and with every other unpickling
entry point, and the AOTInductor loader, raising. A refusal is a ModelLoadError naming the
archive member.
"""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from ..errors import ModelLoadError

MAX_STRUCTURE_BYTES = 128 << 20
MAX_INFLATION = 100
SMALL_MEMBER_BYTES = 1 << 20
TOTAL_SLACK_BYTES = 64 << 20

_METADATA = {"archive_format", "archive_version", "version", "byteorder", "serialization_id",
             ".format_version", ".storage_alignment"}
_OPT_IN = ("Pass --allow-pickle (allow_pickle=True) only if you trust the file, or re-save the model "
           "with torch.export.save(torch.export.export(model, example_inputs), 'model.pt2')")


def _is_structure(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith((".json", ".pkl")) or base in _METADATA


def check_sizes(members: Iterable[zipfile.ZipInfo], archive_bytes: int, label: str) -> None:
    """Refuse an archive whose members' declared sizes are absurd (see the module docstring);
    `members`: ZipFile.infolist(), the central directory, before anything is read."""
    seen: set[str] = set()
    total = 0
    for info in members:
        name = info.filename
        if name in seen:
            raise ModelLoadError(f"{label}: archive member '{name}' appears twice; refusing an ambiguous archive "
                                 "(torch.export.save writes each member once)")
        seen.add(name)
        size, packed = info.file_size, info.compress_size
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelLoadError(f"{label}: archive member '{name}' uses zip compression method "
                                 f"{info.compress_type}; expected stored (0) or deflated (8)")
        if info.compress_type == zipfile.ZIP_STORED and size != packed:
            raise ModelLoadError(f"{label}: archive member '{name}' is stored uncompressed but declares "
                                 f"{size:,} bytes for {packed:,} bytes of data")
        if _is_structure(name) and size > MAX_STRUCTURE_BYTES:
            raise ModelLoadError(f"{label}: archive member '{name}' inflates to {size:,} bytes; a model's "
                                 f"JSON, pickle and metadata members are at most {MAX_STRUCTURE_BYTES:,} bytes "
                                 "(ResNet-18's model.json is 150 KB)")
        if (info.compress_type == zipfile.ZIP_DEFLATED and size > SMALL_MEMBER_BYTES
                and size > MAX_INFLATION * packed):
            raise ModelLoadError(f"{label}: archive member '{name}' inflates {size / max(packed, 1):,.0f}x "
                                 f"({packed:,} -> {size:,} bytes); expected at most {MAX_INFLATION}x "
                                 "(a zip bomb?). torch.export.save stores members uncompressed")
        total += size
    limit = MAX_INFLATION * archive_bytes + TOTAL_SLACK_BYTES
    if total > limit:
        raise ModelLoadError(f"{label}: the archive's members inflate to {total:,} bytes from {archive_bytes:,}; "
                             f"expected at most {limit:,} ({MAX_INFLATION}x the archive plus "
                             f"{TOTAL_SLACK_BYTES >> 20} MiB)")


def check_nested(z: zipfile.ZipFile, name: str, label: str) -> None:
    """check_sizes on a member that is itself a zip archive (torch.save format), if it is one."""
    with z.open(name) as f:
        if f.read(4) != b"PK\x03\x04":
            return
    info = z.getinfo(name)
    with z.open(name) as f, zipfile.ZipFile(f) as inner:
        check_sizes(inner.infolist(), info.file_size, f"{label}: member '{name}'")


def read_json(z: zipfile.ZipFile, name: str, label: str) -> Any:
    """A JSON member, read with a bound even if its declared size lies."""
    with z.open(name) as f:
        data = f.read(MAX_STRUCTURE_BYTES + 1)
    if len(data) > MAX_STRUCTURE_BYTES:
        raise ModelLoadError(f"{label}: archive member '{name}' is larger than {MAX_STRUCTURE_BYTES:,} bytes")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{label}: archive member '{name}' is not valid JSON ({e})") from None


def check_payloads(z: zipfile.ZipFile, label: str) -> None:
    """Refuse, before torch reads anything, weights and constants that torch.export.load would
    unpickle with weights_only=False (use_pickle) or plain pickle (custom / opaque objects), and
    AOTInductor code (shared libraries torch.export.load would load and run)."""
    for name in z.namelist():
        if "/data/aotinductor/" in f"/{name}":
            raise ModelLoadError(f"{label}: archive member '{name}' is AOTInductor-compiled code, which "
                                 "torch.export.load loads and runs; openaccel needs only the exported program "
                                 f"and refuses it. {_OPT_IN}")
    for cfg_name in z.namelist():
        base = cfg_name.rsplit("/", 1)[-1]
        if not (base.endswith(("_weights_config.json", "_constants_config.json")) and "data/" in cfg_name):
            continue
        cfg = read_json(z, cfg_name, label)
        entries = cfg.get("config") if isinstance(cfg, dict) else None
        if not isinstance(entries, dict):
            raise ModelLoadError(f"{label}: archive member '{cfg_name}' has no 'config' table; expected a "
                                 "torch.export payload config")
        folder = cfg_name.rsplit("/", 1)[0]
        kind = "weight" if base.endswith("_weights_config.json") else "constant"
        for fqn, meta in entries.items():
            if not isinstance(meta, dict):
                raise ModelLoadError(f"{label}: {kind} '{fqn}' in '{cfg_name}' is not a table")
            path_name = str(meta.get("path_name", ""))
            member = f"{folder}/{path_name}"
            if path_name.startswith(("custom_obj_", "opaque_obj_")):
                raise ModelLoadError(
                    f"{label}: {kind} '{fqn}' (archive member '{member}') is a pickled Python or TorchScript "
                    f"object; loading it runs code from the file, and openaccel refuses it. {_OPT_IN}")
            if meta.get("use_pickle"):
                raise ModelLoadError(
                    f"{label}: {kind} '{fqn}' (archive member '{member}') is marked use_pickle: torch would "
                    f"unpickle it with weights_only=False, which runs code from the file, and openaccel "
                    f"refuses it. {_OPT_IN}")


# ---- the guard -------------------------------------------------------------------------------
_GUARD = threading.Lock()


def _why_not_weights_only(real_load: Callable[..., Any], data: bytes) -> str:
    """The restricted unpickler's reason for refusing `data`, in one line."""
    try:
        real_load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        text = str(e)
        m = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        if m:
            return f"it refers to {m.group(1)}, which the weights-only unpickler does not allow"
        m = re.search(r"WeightsUnpickler error: ([^\n]*)", text)
        return (m.group(1) if m else (text.strip().splitlines() or [type(e).__name__])[0]).strip()
    return "the weights-only load succeeds, but torch asked for a full unpickle"


@contextmanager
def refuse_unpickling(label: str, root: str = "") -> Iterator[None]:
    """Within this block torch.load is weights-only and every other unpickler raises a
    ModelLoadError naming the archive member torch was reading (`root`: the archive's top folder,
    which torch's reader leaves out of member names). Refusals that torch catches and works
    around are raised when the block ends."""
    import pickle

    import torch

    members: list[tuple[str, bytes]] = []
    refused: list[ModelLoadError] = []
    real_load = torch.load

    def member_of(data: bytes | None) -> str:
        if data is not None:
            for name, blob in members:
                if len(blob) == len(data) and blob == data:
                    return f"archive member '{root}/{name}'" if root else f"archive member '{name}'"
        return "a member of the archive"

    def bytes_of(f: Any) -> bytes | None:
        if isinstance(f, (bytes, bytearray, memoryview)):
            return bytes(f)
        if isinstance(f, io.BytesIO):
            return f.getvalue()
        return None

    def refuse(route: str, f: Any) -> ModelLoadError:
        data = bytes_of(f)
        why = f" ({_why_not_weights_only(real_load, data)})" if data is not None and route.startswith("torch.load") \
            else ""
        err = ModelLoadError(f"{label}: {member_of(data)} is a pickle that torch reads with {route}{why}; "
                             f"unpickling it can run code from the file, and openaccel refuses it. {_OPT_IN}")
        refused.append(err)
        return err

    def refuse_code(*args: Any, **kwargs: Any) -> Any:
        err = ModelLoadError(f"{label}: the archive holds AOTInductor-compiled code (data/aotinductor/), which "
                             f"torch would load and run; openaccel refuses it. {_OPT_IN}")
        refused.append(err)
        raise err

    class RefusedPackageLoader:
        load_metadata_from_package = staticmethod(refuse_code)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            refuse_code()

    def load(f: Any, map_location: Any = None, pickle_module: Any = None, *, weights_only: bool | None = None,
             mmap: bool | None = None, **kwargs: Any) -> Any:
        if weights_only is False or pickle_module is not None:
            raise refuse("torch.load(weights_only=False)", f)
        return real_load(f, map_location=map_location, weights_only=True, mmap=mmap, **kwargs)

    def refuser(route: str) -> Callable[..., Any]:
        def refused_call(data: Any = None, *args: Any, **kwargs: Any) -> Any:
            raise refuse(route, data)
        return refused_call

    class RefusedUnpickler:
        def __init__(self, file: IO[bytes], *args: Any, **kwargs: Any) -> None:
            raise refuse("pickle.Unpickler", None)

    patches: list[tuple[Any, str, Any]] = [
        (torch, "load", load), (torch.serialization, "load", load),
        (pickle, "load", refuser("pickle.load")), (pickle, "loads", refuser("pickle.loads")),
        (pickle, "Unpickler", RefusedUnpickler),
        (torch._C, "_pickle_load_obj", refuser("the TorchScript unpickler")),
        (torch.jit, "load", refuser("torch.jit.load")),
        (torch._C._aoti, "AOTIModelPackageLoader", RefusedPackageLoader),
    ]
    import torch.export.pt2_archive as pt2

    reader = getattr(pt2, "PT2ArchiveReader", None)  # another torch: still refused, member unnamed
    if reader is not None:
        real_read = reader.read_bytes

        def read_bytes(self: Any, name: str) -> bytes:
            data: bytes = real_read(self, name)
            members.append((name, data))
            return data

        patches.append((reader, "read_bytes", read_bytes))

    with _GUARD:
        saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
        try:
            for obj, attr, new in patches:
                setattr(obj, attr, new)
            try:
                yield
            except Exception:
                if refused:  # whatever torch made of the refusal, the refusal is the error
                    raise refused[0] from None
                raise
        finally:
            for obj, attr, old in saved:
                setattr(obj, attr, old)
    if refused:
        raise refused[0]
