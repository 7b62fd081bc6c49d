"""A fixed, cheap subset of the OpInfo sweep (scripts/opinfo_sweep.py): PyTorch's own samples of ops
from every family, exported, run on the host and compared with eager. No op may give a wrong
answer or fail after export (load, prepare, run); the ops that matched when the subset was chosen
must keep matching. The full sweep and its figures: docs/ops.md, "OpInfo sweep"."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# 42 ops across the families (elementwise, math, binary, reductions, matmul, conv, pool, norm, shape,
# index, sort, softmax, resize, creation, dtype conversion, a refusal), each op's first 3 samples
SUBSET = [
    "sigmoid", "nn.functional.gelu", "add", "div.floor_rounding", "remainder", "pow", "xlogy", "where",
    "fmax", "addcmul", "ne", "sum", "amax", "var", "logsumexp", "cumsum", "max.reduction_with_dim", "mm", "addmm",
    "einsum", "nn.functional.conv2d", "nn.functional.conv_transpose1d", "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool1d", "nn.functional.layer_norm", "nn.functional.group_norm", "cat", "fliplr",
    "unbind", "nn.functional.pad.reflect", "gather", "index_select", "__getitem__", "masked_fill", "log_softmax",
    "nn.functional.interpolate.bilinear", "arange", "to", "sort", "acos", "nn.functional.conv3d", "linalg.inv",
]
# refused on purpose (lower/refused.py): a clear refusal naming the op, never a crash
REFUSED = {"linalg.inv": "aten.linalg_inv_ex.default"}


@functools.cache
def _sweep() -> Any:
    spec = importlib.util.spec_from_file_location("opinfo_sweep", ROOT / "scripts" / "opinfo_sweep.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def _ops() -> dict[str, Any]:
    return dict(_sweep()._op_db())


def test_the_subset_names_opinfo_ops() -> None:
    missing = [n for n in SUBSET if n not in _ops()]
    assert not missing, f"not OpInfo ops with a float32 CPU variant in this torch: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_opinfo_op(name: str) -> None:
    res = _sweep().run_op(name, _ops())
    bad = [s for s in res["samples"] if s["status"] in ("wrong", "crash")]
    assert not bad, f"{name}: {bad}"
    if name in REFUSED:
        assert res["status"] == "refused" and REFUSED[name] in res["ops"], res
        return
    assert res["status"] == "match", f"{name}: {res['status']}: {res.get('why')} ({res['samples']})"


def test_the_categories_catch_what_they_should(monkeypatch: pytest.MonkeyPatch) -> None:
    """a rule that answers wrongly is a wrong answer, one that raises a non-openaccel error a crash"""
    from openaccel.exporter import lower

    sweep = _sweep()
    lower.supported_edge_ops()
    base = lower.RULES["aten.neg.default"]

    def wrong(ctx: Any, node: Any) -> None:
        base(ctx, node)
        ctx.instrs[-1].op = "abs"

    def broken(ctx: Any, node: Any) -> None:
        raise KeyError("bug")

    monkeypatch.setitem(lower.RULES, "aten.neg.default", wrong)
    assert sweep.run_op("neg", _ops())["status"] == "wrong"
    monkeypatch.setitem(lower.RULES, "aten.neg.default", broken)
    res = sweep.run_op("neg", _ops())
    assert res["status"] == "crash" and "KeyError" in res["why"]
