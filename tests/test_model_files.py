"""Model files from strangers: nothing in a .pt2 or torch.save file is unpickled without
--allow-pickle, whatever route torch takes inside the archive (every pickle test asserts that its
payload's marker file never appears); zip bombs are refused before torch inflates them; pickles of
classes defined in the saving script load with --model-module; dynamic Dims are named."""

from __future__ import annotations

import io
import json
import pickle
import resource
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.errors import ModelLoadError
from openaccel.exporter import archive
from openaccel.exporter.loader import load_model


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=600)


def assert_user_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    text = " ".join((r.stdout + r.stderr).split())
    for n in needles:
        assert n in text, f"{n!r} not in {text!r}"


class _Payload:
    """Unpickling this creates `marker` (through builtins.exec: what a hostile file would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str]]:
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def _torch_saved(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def rewrite(src: Path, dst: Path, replace: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None,
            method: int = zipfile.ZIP_STORED) -> None:
    """Copy a torch.export archive, replacing or adding members (names relative to its root)."""
    replace, add = replace or {}, add or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zin.namelist()[0].split("/", 1)[0]
        for info in zin.infolist():
            rel = info.filename.split("/", 1)[1]
            zout.writestr(info.filename, replace.get(rel, zin.read(info)), compress_type=method)
        for rel, data in add.items():
            zout.writestr(f"{root}/{rel}", data, compress_type=method)


def _member(path: Path, rel: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(f"{z.namelist()[0].split('/', 1)[0]}/{rel}")


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("files") / "mlp.pt2"
    torch.export.save(torch.export.export(zoo.MLP((8, 16, 4)).eval(), (torch.randn(1, 8),)), str(path))
    return path


WEIGHTS_CONFIG = "data/weights/model_weights_config.json"
CONSTANTS_CONFIG = "data/constants/model_constants_config.json"


def _hostile(kind: str, good: Path, tmp: Path, marker: Path) -> Path:
    """A valid archive with one member replaced so that torch.export.load would run `_Payload`:
    sample inputs (torch.load falls back to weights_only=False), a weight marked use_pickle
    (torch.load weights_only=False), an opaque constant (plain pickle.loads), AOTInductor code."""
    out = tmp / f"{kind}.pt2"
    if kind == "sample_inputs":
        rewrite(good, out, replace={"data/sample_inputs/model.pt": _torch_saved(_Payload(marker))})
    elif kind == "use_pickle_weight":
        cfg = json.loads(_member(good, WEIGHTS_CONFIG))
        fqn = next(iter(cfg["config"]))
        cfg["config"][fqn].update(use_pickle=True, path_name="weight_evil")
        rewrite(good, out, replace={WEIGHTS_CONFIG: json.dumps(cfg).encode()},
                add={"data/weights/weight_evil": _torch_saved(_Payload(marker))})
    elif kind == "aoti_code":  # a shared library torch.export.load would hand to the AOTI loader
        rewrite(good, out, add={"data/aotinductor/model/model.wrapper.so": b"\x7fELF" + bytes(60)})
    else:
        cfg = json.loads(_member(good, CONSTANTS_CONFIG))
        cfg["config"]["evil"] = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True,
                                 "tensor_meta": None}
        rewrite(good, out, replace={CONSTANTS_CONFIG: json.dumps(cfg).encode()},
                add={"data/constants/opaque_obj_0": pickle.dumps(_Payload(marker))})
    return out


ROUTES = ["sample_inputs", "use_pickle_weight", "opaque_constant", "aoti_code"]
WHERE = {"sample_inputs": "data/sample_inputs/model.pt", "use_pickle_weight": "data/weights/weight_evil",
         "opaque_constant": "data/constants/opaque_obj_0", "aoti_code": "data/aotinductor/"}


@pytest.mark.parametrize("route", ROUTES)
def test_hostile_archive_is_refused_before_its_payload_runs(good: Path, tmp_path: Path, route: str) -> None:
    marker = tmp_path / "PWNED"
    bad = _hostile(route, good, tmp_path, marker)
    with pytest.raises(ModelLoadError) as e:
        load_model(bad)
    assert not marker.exists(), "the archive's pickle payload ran"
    msg = str(e.value)
    assert WHERE[route] in msg and "--allow-pickle" in msg


@pytest.mark.parametrize("route", ROUTES)
def test_guard_alone_refuses_every_unpickling_route(good: Path, tmp_path: Path, route: str) -> None:
    """The load-time guard, without the up-front config check, still refuses each route torch
    takes (so a route the config check does not know about is refused too)."""
    marker = tmp_path / "PWNED"
    bad = _hostile(route, good, tmp_path, marker)
    with pytest.raises(ModelLoadError) as e, archive.refuse_unpickling(str(bad)):
        torch.export.load(str(bad))
    assert not marker.exists(), "the archive's pickle payload ran"
    assert WHERE[route] in str(e.value)
    assert torch.load.__module__ == "torch.serialization" and pickle.loads.__module__ == "_pickle"  # restored


def test_payload_is_live_with_allow_pickle(good: Path, tmp_path: Path) -> None:
    """The hostile file really runs code when the user opts in (so the tests above could fail)."""
    marker = tmp_path / "PWNED"
    bad = _hostile("sample_inputs", good, tmp_path, marker)
    with pytest.raises(ModelLoadError):  # torch wanted a tuple of inputs, not what the payload returned
        load_model(bad, allow_pickle=True)
    assert marker.exists()


def test_hostile_archive_on_the_cli(good: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bad = _hostile("use_pickle_weight", good, tmp_path, marker)
    r = cli("export", str(bad), "-o", str(tmp_path / "x.oab"))
    assert not marker.exists()
    assert_user_error(r, "data/weights/weight_evil", "use_pickle", "--allow-pickle")
    assert not (tmp_path / "x.oab").exists()


def test_clean_archives_still_load(good: Path, tmp_path: Path) -> None:
    """The guard leaves torch's weights-only route alone: a plain archive, and one re-zipped with
    deflate (members compressed), load and give the model's outputs."""
    ep, args = load_model(good)
    deflated = tmp_path / "deflated.pt2"
    rewrite(good, deflated, method=zipfile.ZIP_DEFLATED)
    ep2, args2 = load_model(deflated)
    torch.testing.assert_close(ep2.module()(*args2), ep.module()(*args))


def test_zip_bomb_is_refused_before_inflating(good: Path, tmp_path: Path) -> None:
    """model.json replaced by 256 MiB of spaces deflated to ~256 KB: refused from the declared
    size, without the memory torch would spend inflating it."""
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bomb, "w") as zout:
        for info in zin.infolist():
            if info.filename.endswith("models/model.json"):
                zi = zipfile.ZipInfo(info.filename)
                zi.compress_type = zipfile.ZIP_DEFLATED
                with zout.open(zi, "w", force_zip64=True) as f:
                    chunk = b" " * (4 << 20)
                    for _ in range(64):
                        f.write(chunk)
            else:
                zout.writestr(info, zin.read(info))
    assert bomb.stat().st_size < 2 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ModelLoadError, match=r"models/model.json' inflates to 268,435,456 bytes"):
        load_model(bomb)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 64 << 10, f"peak memory grew by {grown_kb} KB"


def _info(name: str, size: int, packed: int, method: int = zipfile.ZIP_STORED) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(name)
    zi.file_size, zi.compress_size, zi.compress_type = size, packed, method
    return zi


def test_size_limits_refuse_inflation_not_big_weights() -> None:
    gib = 1 << 30
    # 3 GiB of weights stored as torch.export.save writes them, and weights deflated 1.2x: fine
    archive.check_sizes([_info("m/data/weights/weight_0", 3 * gib, 3 * gib),
                         _info("m/models/model.json", 40 << 20, 40 << 20)], 3 * gib + (41 << 20), "ok.pt2")
    archive.check_sizes([_info("m/data/weights/weight_0", 1200 << 20, 1000 << 20, zipfile.ZIP_DEFLATED)],
                        1001 << 20, "ok.pt2")
    cases = [
        ([_info("m/models/model.json", 200 << 20, 200 << 20)], 201 << 20, "at most 134,217,728 bytes"),
        ([_info("m/data/weights/weight_0", 500 << 20, 1 << 20, zipfile.ZIP_DEFLATED)], 2 << 20, "inflates 500x"),
        ([_info(f"m/data/weights/weight_{i}", 1 << 20, 1 << 10, zipfile.ZIP_DEFLATED) for i in range(200)],
         1 << 20, "expected at most"),
        ([_info("m/data/weights/weight_0", 10, 5)], 100, "stored uncompressed but declares"),
        ([_info("m/models/model.json", 10, 10), _info("m/models/model.json", 10, 10)], 100, "appears twice"),
        ([_info("m/models/model.json", 10, 10, zipfile.ZIP_LZMA)], 100, "compression method 14"),
    ]
    for members, size, needle in cases:
        with pytest.raises(ModelLoadError, match=needle):
            archive.check_sizes(members, size, "bad.pt2")


def test_nested_sample_inputs_bomb_is_refused(good: Path, tmp_path: Path) -> None:
    """The sample inputs are a torch.save archive inside the archive; their sizes are checked too."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        zi = zipfile.ZipInfo("model/data.pkl")
        zi.compress_type = zipfile.ZIP_DEFLATED
        with z.open(zi, "w") as f:
            for _ in range(40):
                f.write(b"\0" * (4 << 20))
    bad = tmp_path / "nested.pt2"
    rewrite(good, bad, replace={"data/sample_inputs/model.pt": inner.getvalue()})
    with pytest.raises(ModelLoadError, match=r"member '[^']*data/sample_inputs/model.pt': archive member "
                                             r"'model/data.pkl' inflates to 167,772,160 bytes"):
        load_model(bad)


# ---- pickles of classes defined in the saving script ----------------------------------------
NET_SOURCE = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


if __name__ == "__main__":
    open(MARKER, "w").close()  # "training": must not run when openaccel imports this file
'''


def _save_from_main(tmp: Path) -> tuple[Path, Path, torch.nn.Module]:
    """torch.save a model whose class is defined in the saving script (`__main__.Net`, as
    `python train.py` pickles it), and write that script as net.py."""
    script = tmp / "net.py"
    marker = tmp / "TRAINED"
    script.write_text(f"MARKER = {str(marker)!r}\n" + NET_SOURCE)
    ns: dict[str, object] = {"__name__": "__main__", "MARKER": str(tmp / "ignored")}
    exec(compile(NET_SOURCE, str(script), "exec"), ns)
    main = sys.modules["__main__"]
    main.Net = ns["Net"]  # type: ignore[attr-defined]
    try:
        torch.manual_seed(0)
        model = ns["Net"]().eval()  # type: ignore[operator]
        path = tmp / "net.pt"
        torch.save(model, str(path))
    finally:
        del main.Net  # type: ignore[attr-defined]
    return path, script, model


def test_pickle_of_a_main_class_says_what_to_do(tmp_path: Path) -> None:
    path, _, _ = _save_from_main(tmp_path)
    with pytest.raises(ModelLoadError) as e:
        load_model(path, allow_pickle=True, input_shapes=["x=1x8"])
    msg = str(e.value)
    assert "__main__.Net" in msg and "--model-module FILE.py" in msg and "torch.export.save" in msg
    assert "Can't get attribute" not in msg


def test_model_module_resolves_main_classes(tmp_path: Path) -> None:
    path, script, model = _save_from_main(tmp_path)
    loaded, (x,) = load_model(path, allow_pickle=True, input_shapes=["x=1x8"], model_module=script)
    assert type(loaded).__name__ == "Net" and tuple(x.shape) == (1, 8)
    torch.testing.assert_close(loaded(x), model(x))  # the file's weights, the module's code
    assert not (tmp_path / "TRAINED").exists(), "the module's __main__ block ran"
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ModelLoadError, match="does not define 'Net'"):
        load_model(path, allow_pickle=True, input_shapes=["x=1x8"], model_module=empty)


def test_pickle_of_a_class_from_a_module_not_on_the_path(tmp_path: Path) -> None:
    """`from netlib import Net` in the saving script pickles `netlib.Net`: where netlib is not
    importable the error says so, and --model-module netlib.py resolves it."""
    lib = tmp_path / "netlib.py"
    lib.write_text("MARKER = 'unused'\n" + NET_SOURCE)
    sys.path.insert(0, str(tmp_path))
    try:
        import netlib  # type: ignore[import-not-found]

        torch.manual_seed(0)
        model = netlib.Net().eval()
        torch.save(model, str(tmp_path / "net.pt"))
    finally:
        sys.path.remove(str(tmp_path))
        del sys.modules["netlib"]
    with pytest.raises(ModelLoadError, match=r"module 'netlib' cannot be imported here .*--model-module "
                                             r"path/to/netlib.py"):
        load_model(tmp_path / "net.pt", allow_pickle=True, input_shapes=["x=1x8"])
    loaded, (x,) = load_model(tmp_path / "net.pt", allow_pickle=True, input_shapes=["x=1x8"], model_module=lib)
    torch.testing.assert_close(loaded(x), model(x))


@pytest.mark.slow
def test_model_module_on_the_cli(tmp_path: Path) -> None:
    path, script, _ = _save_from_main(tmp_path)
    out = tmp_path / "net.oab"
    r = cli("export", str(path), "--allow-pickle", "--input-shape", "x=1x8", "--model-module", str(script),
            "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = cli("test", str(out))
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), r.stdout + r.stderr


# ---- paper cuts ------------------------------------------------------------------------------
def _dynamic_batch() -> torch.export.ExportedProgram:
    batch = torch.export.Dim("batch", min=1, max=64)
    return torch.export.export(zoo.MLP((16, 4)).eval(), (torch.randn(2, 16),), dynamic_shapes={"x": {0: batch}})


def test_dynamic_dim_is_named_not_fixed_to_the_example(tmp_path: Path) -> None:
    with pytest.raises(oa.ExportError) as e:
        oa.export(_dynamic_batch(), (torch.randn(2, 16),))
    msg = str(e.value)
    assert "dimension 0 of input 'x'" in msg and "Dim 'batch'" in msg and "range 1..64" in msg
    assert "does not support yet" in msg


def test_dynamic_dim_from_an_archive_on_the_cli(tmp_path: Path) -> None:
    archive_path = tmp_path / "dyn.pt2"
    torch.export.save(_dynamic_batch(), str(archive_path))
    r = cli("export", str(archive_path), "-o", str(tmp_path / "dyn.oab"))
    assert_user_error(r, "dynamic shapes", "dimension 0 of input 'x' is dynamic", "range 1..64")
    assert not (tmp_path / "dyn.oab").exists()
