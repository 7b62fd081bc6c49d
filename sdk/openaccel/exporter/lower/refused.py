"""Ops refused on purpose, with the reason the export error and docs/ops.md give. Family modules
declare their own refusals beside their rules; the ones that belong to no family live here."""

from __future__ import annotations

from . import refuse

refuse("aten.rand.default", "aten.randn.default", "aten.randperm.default", "aten.randint.default",
       "aten.randint.low", "aten.rand_like.default", "aten.randn_like.default", "aten.bernoulli.default",
       "aten.bernoulli.p", "aten.normal.Tensor_float", "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor",
       "aten.uniform.default", "aten.multinomial.default",
       why="random numbers: a deployed model gets its randomness as an input tensor (generate it in the "
           "application and pass it in), so that a file gives the same answers on every board")

refuse("aten._local_scalar_dense.default", "aten.item.default",
       why="Tensor.item() (or float(t), int(t), bool(t)) turns a tensor's value into a Python number while the "
           "model is traced, so the program would depend on one example's data; keep the value a tensor "
           "(x * t rather than x * t.item())")
