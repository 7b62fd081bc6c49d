"""F.embedding_bag / nn.EmbeddingBag against PyTorch: sum / mean / max, offsets with empty bags,
include_last_offset (also with offsets[-1] short of the indices: PyTorch's CPU kernel then counts the
rest in the last bag's max and mean divisor), per_sample_weights, padding_idx, int32 / int64
indices, 2-D inputs, the module (which exports aten._embedding_bag), NaN rows; the run-time checks
of offsets and indices, and the refusal of the bookkeeping outputs. Exact: the kernel adds in
PyTorch's order with its rounding (fbgemm's fused multiply-add for per_sample_weights)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import FLOAT32_DEFINED, Fn, OpCase, check_rejected, export_case, randint, randn, run_case

W = randn(30, 6, seed=1)
IDX = randint(0, 30, 25, seed=2)
OFF = torch.tensor([0, 3, 3, 10, 17, 22])  # bag 1 is empty
PAD = int(IDX[4])
WN = W.clone()
WN[IDX[0], 1] = float("nan")  # first row of bag 0: NaN stays in max
WN[IDX[12], 2] = float("nan")  # inside bag 3: ignored by max


def _modes(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, psw: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = []
    for mode in ("sum", "mean", "max"):
        outs += [F.embedding_bag(i, w, o, mode=mode),
                 F.embedding_bag(i, w, o, mode=mode, padding_idx=PAD),
                 F.embedding_bag(i, w, o, mode=mode, include_last_offset=True),  # offsets[-1] = 22 < 25
                 F.embedding_bag(i, w, o, mode=mode, include_last_offset=True, padding_idx=PAD),
                 F.embedding_bag(i[:20].view(4, 5), w, mode=mode)]
    outs += [F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw),
             F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw, padding_idx=PAD),
             F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw, include_last_offset=True)]
    return tuple(outs)


class Bag(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(30, 8, mode="max", padding_idx=0)

    def forward(self, i: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        return self.bag(i, o)


CASES = [
    # PyTorch's float32 kernel (fbgemm) and its float64 one disagree on the last bag when offsets[-1] < L
    # (the float64 path also sums indices[offsets[-1]:]): a float32 model runs the former, on every CPU
    OpCase("embedding_bag_modes", _modes, (W, IDX, OFF, torch.rand(25, generator=torch.Generator().manual_seed(3))),
           ops=("embedding_bag",), tags=(FLOAT32_DEFINED,)),
    OpCase("embedding_bag_int32_nan",
           lambda w, i, o: (F.embedding_bag(i, w, o, mode="max"), F.embedding_bag(i, w, o, mode="mean"),
                            F.embedding_bag(i[:0], w, o[:1], mode="mean")),  # one empty bag
           (WN, IDX.int(), OFF.int()), ops=("embedding_bag",)),
    OpCase("embedding_bag_module", lambda i, o: i, (torch.tensor([0, 5, 7, 0, 29, 3, 0]), torch.tensor([0, 2, 4, 4])),
           module=Bag(), ops=("embedding_bag",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_offsets_and_indices_checked_at_run_time() -> None:
    case = OpCase("embedding_bag_range", lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"), (W, IDX, OFF))
    mod = oa.load(export_case(case))
    for i, o, match in [
        (IDX, torch.tensor([1, 3, 3, 10, 17, 22]), r"offset 1 at position \[0\] is out of range \(expected 0 to 0"),
        (IDX, torch.tensor([0, 3, 2, 10, 17, 22]), r"offset 2 at position \[2\] is out of range \(expected 3 to 25"),
        (IDX, torch.tensor([0, 3, 3, 10, 17, 26]), r"offset 26 at position \[5\]"),
        (torch.where(IDX == IDX[7], 30, IDX), OFF, r"index 30 at position \[7\] is out of range .* 30 rows"),
        (torch.where(IDX == IDX[7], -1, IDX), OFF, r"index -1 at position \[7\]"),
    ]:
        with pytest.raises(oa.OpenAccelError, match=match):
            mod(W, i, o)
    torch.testing.assert_close(mod(W, IDX, OFF)[0], F.embedding_bag(IDX, W, OFF, mode="mean"), rtol=0, atol=0)


def test_bookkeeping_outputs_unsupported() -> None:
    m = Fn(lambda w, i, o: torch.ops.aten._embedding_bag_forward_only(w, i, o, False, 2)[3])
    with pytest.raises(oa.UnsupportedOpError, match=r"_embedding_bag_forward_only.*max_indices are read"):
        oa.export(m, (W, IDX, OFF))


@pytest.mark.parametrize("ints,match", [
    ({0: 3}, r"embedding_bag.*mode = 3 is out of range"),
    ({2: 30}, r"embedding_bag.*padding_idx = 30 is out of range \(expected -1 to 29\)"),
])
def test_embedding_bag_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int], match: str) -> None:
    check_rejected(monkeypatch, "aten._embedding_bag_forward_only.default",
                   lambda i, w=W, o=OFF: F.embedding_bag(i, w, o, mode="sum"), IDX, match, ints)
