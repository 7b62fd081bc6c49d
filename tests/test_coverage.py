"""Issue 16: every core ATen overload is lowered, or refused on purpose with a reason, and
docs/ops.md's coverage table (openaccel/coverage.py) says which, as generated from the rules."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from openaccel import coverage, opset

ROOT = Path(__file__).resolve().parents[1]

# Core overloads with neither a lowering rule nor a refusal, allowed while they are being added. Empty
# since issue 16's ops landed; keep it empty: a new torch version's core op gets a rule or a refusal.
STILL_MISSING: frozenset[str] = frozenset()


@functools.cache
def _table() -> tuple[list[coverage.Row], dict[str, list[str]]]:
    return coverage.coverage()


def _rows(status: str) -> dict[str, coverage.Row]:
    return {r.overload: r for r in _table()[0] if r.status == status}


def test_the_table_has_every_core_overload() -> None:
    import torch

    rows, excluded = _table()
    names = [r.overload for r in rows]
    everything = set(names) | {n for v in excluded.values() for n in v}
    core = {f"aten.{p}.{ov}" for p in dir(torch.ops.aten)
            if isinstance(pk := getattr(torch.ops.aten, p, None), torch._ops.OpOverloadPacket)
            for ov in pk.overloads() if torch.Tag.core in getattr(pk, ov).tags}
    assert everything == core and len(names) == len(set(names))
    assert len(core) > 150, f"only {len(core)} core overloads: did torch stop tagging them?"
    # the exclusions are what they say
    assert all("backward" in n for n in excluded["backward ops"])
    assert all(n.split(".")[1].startswith("sym_") for n in excluded["sym_* size queries"])
    assert "aten.add.Tensor" in names and "aten.view.default" in names and "aten.avg_pool1d.default" in names


def test_every_core_overload_is_lowered_or_refused() -> None:
    missing = set(_rows("missing"))
    new = sorted(missing - STILL_MISSING)
    assert not new, ("core ATen overloads with neither a lowering rule nor a refusal "
                     f"(lower/__init__.py refuse(..., why=...)): {new}")
    done = sorted(STILL_MISSING - missing)
    assert not done, f"no longer missing, remove from STILL_MISSING in tests/test_coverage.py: {done}"


def test_refusals_give_a_reason_and_rules_do_not_contradict_them() -> None:
    from openaccel.exporter.lower import REFUSED, RULES, supported_edge_ops

    supported_edge_ops()
    assert all(len(why) > 20 for why in REFUSED.values()), REFUSED
    assert not set(REFUSED) & set(RULES), "an op is both lowered and refused"
    assert "aten._local_scalar_dense.default" in _rows("refused")


def test_every_lowered_overload_lowers_its_sample() -> None:
    """a rule that refuses its sample in every dtype would leave the table's row empty"""
    lowered = _rows("lowered")
    empty = sorted(n for n, r in lowered.items() if not r.dtypes)
    assert not empty, f"the rule refuses the sample of {empty} in every dtype: fix the sample in coverage.py"
    # spot checks of what the table reads from the rules
    assert lowered["aten.add.Tensor"].ops[0] == "add" and "int8" in lowered["aten.add.Tensor"].dtypes
    assert lowered["aten.view.default"].edge == "aten.view_copy.default" and lowered["aten.view.default"].ops == []
    assert lowered["aten._to_copy.default"].edge == "dim_order_ops._to_dim_order_copy.default"
    assert lowered["aten._to_copy.default"].ops == ["cast"]
    assert lowered["aten.mm.default"].ops == ["matmul"] and lowered["aten.mm.default"].dtypes == ["float32"]
    assert lowered["aten.bitwise_and.Tensor"].dtypes[0] == "int32"  # no float32: eager refuses it too
    # to_edge decomposes avg_pool1d (its decomposition table): the row shows the parts
    pool1d = lowered["aten.avg_pool1d.default"]
    assert "aten.avg_pool2d.default" in pool1d.edge and pool1d.ops == ["avg_pool2d"], pool1d


def test_a_rule_that_crashes_on_its_sample_fails_the_generator(monkeypatch: Any) -> None:
    import pytest

    from openaccel.exporter.lower import RULES

    def broken(ctx: Any, node: Any) -> None:
        raise IndexError("bug")

    monkeypatch.setitem(RULES, "aten.flip.default", broken)
    with pytest.raises(IndexError):
        coverage._lower_once("aten.flip.default", coverage._samples()["aten.flip.default"], "float32", False)


def test_ops_md_is_up_to_date() -> None:
    want = opset.render_markdown() + "\n"
    have = (ROOT / "docs/ops.md").read_text()
    assert have == want, "docs/ops.md is stale: run `make docs` (or the command in the brief) and commit it"
    assert "## Core ATen coverage" in have
