"""scaled_dot_product_attention, kept as one fused op, against PyTorch (math backend)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import OpCase, randn, run_case

TOL = {"atol": 1e-5, "rtol": 1e-5}  # softmax and two dot products per element, summed in double


def q(*shape: int, seed: int) -> torch.Tensor:
    return randn(*shape, seed=seed)


CASES = [
    OpCase("attention_causal", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
           (q(1, 4, 16, 8, seed=1), q(1, 4, 16, 8, seed=2), q(1, 4, 16, 8, seed=3)), ops=("sdpa",), **TOL),
    OpCase("attention_plain_lneq_s", lambda a, b, c: F.scaled_dot_product_attention(a, b, c),
           (q(2, 3, 5, 16, seed=4), q(2, 3, 7, 16, seed=5), q(2, 3, 7, 12, seed=6)), ops=("sdpa",), **TOL),
    OpCase("attention_causal_lneq_s", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
           (q(1, 2, 4, 8, seed=7), q(1, 2, 6, 8, seed=8), q(1, 2, 6, 8, seed=9)), ops=("sdpa",), **TOL),
    OpCase("attention_scale_3d", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, scale=0.3),
           (q(3, 6, 8, seed=10), q(3, 6, 8, seed=11), q(3, 6, 8, seed=12)), ops=("sdpa",), **TOL),
    OpCase("attention_bool_mask", lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
           (q(1, 2, 6, 8, seed=13), q(1, 2, 6, 8, seed=14), q(1, 2, 6, 8, seed=15),
            torch.tensor([[True] * 6] * 6).tril() | torch.eye(6, dtype=torch.bool)), ops=("sdpa",), **TOL),
    OpCase("attention_float_mask_broadcast", lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
           (q(2, 2, 5, 8, seed=16), q(2, 2, 7, 8, seed=17), q(2, 2, 7, 4, seed=18), q(2, 1, 5, 7, seed=19)),
           ops=("sdpa",), **TOL),
    OpCase("attention_gqa", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, enable_gqa=True),
           (q(1, 8, 10, 16, seed=20), q(1, 2, 10, 16, seed=21), q(1, 2, 10, 16, seed=22)), ops=("sdpa",), **TOL),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


class _Dropout(torch.nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(a, a, a, dropout_p=0.5)


def test_dropout_is_rejected() -> None:
    with pytest.raises(oa.UnsupportedOpError, match="dropout_p"):
        oa.export(_Dropout().train(), (torch.randn(1, 2, 4, 8),))
