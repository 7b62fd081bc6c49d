"""FFTs (fft_r2c / fft_c2c / fft_c2r) and complex64 tensors against PyTorch eager: torch.fft's
rfft / irfft / fft / ifft / rfftn / irfftn / fftn over one and several dims, every normalization, odd,
prime and power-of-two lengths, n= padding and slicing; complex64 arithmetic (add, sub, mul, div,
abs), casts, data movement and the zero-copy views (view_as_real / view_as_complex, .real / .imag);
complex64 graph inputs and outputs.

Reference: the kernels transform in double and round each output once; float32 eager (pocketfft in
float) is an ulp or so of the largest value away from that, so the cases compare with eager in
float64 (a complex input made inside the model with view_as_complex, so that it is complex128 there)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randn, run_case

X = randn(3, 16)            # batch of 3 signals of 16
W = randn(9, seed=1)        # a filter on rfft's 9 bins (a buffer of the model)


class _Filter(torch.nn.Module):
    """irfft(rfft(x) * w, n): a frequency-domain filter with a real weight (cast to complex64)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", W)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        spec = torch.fft.rfft(x)
        return torch.fft.irfft(spec * self.w, 16), spec.abs(), torch.view_as_real(spec)


def _z(x: torch.Tensor) -> torch.Tensor:
    """A complex tensor made from a float one [..., 2] (complex128 in the float64 reference)."""
    return torch.view_as_complex(x)


CASES = [
    OpCase("fft_filter", lambda x: x, (X,), module=_Filter(), ops=("fft_r2c", "fft_c2r", "mul", "abs"),
           reference="float64"),
    # one dim: norms, dims other than the last (of a transposed, non-contiguous input), onesided=False,
    # n= (pad / slice of the input), odd / prime / power-of-two / mixed lengths, irfft of odd length
    OpCase("fft_1d",
           lambda x, p, q: (torch.fft.rfft(x, norm="ortho"), torch.fft.rfft(x.t(), dim=0, norm="forward"),
                            torch.fft.fft(x), torch.fft.rfft(x, n=20), torch.fft.rfft(x, n=10),
                            torch.fft.irfft(torch.fft.rfft(x), 15, norm="forward"),
                            torch.fft.irfft(torch.fft.rfft(p), 97, norm="ortho"), torch.fft.rfft(q),
                            torch.fft.ifft(torch.fft.fft(p)).real, torch.fft.hfft(torch.fft.rfft(x) * 0.5, 30)),
           (X, randn(2, 97, seed=2), randn(105, seed=3)), ops=("fft_r2c", "fft_c2c", "fft_c2r", "pad", "slice"),
           reference="float64"),
    # several dims: rfft2 / irfft2 / rfftn over chosen dims / fftn / ifftn (eager refuses an empty batch)
    OpCase("fft_nd",
           lambda x: (torch.fft.rfft2(x), torch.fft.irfft2(torch.fft.rfft2(x), s=(6, 10)),
                         torch.fft.rfftn(x, dim=(2, 0), norm="ortho"), torch.fft.fftn(x),
                         torch.fft.irfftn(torch.fft.rfftn(x, dim=(0, 1)), s=(3, 6), dim=(0, 1)),
                         torch.fft.ifftn(torch.fft.fftn(x, dim=(0, 2)), dim=(2, 0)).imag),
           (randn(3, 6, 10, seed=4),), ops=("fft_r2c", "fft_c2c", "fft_c2r"),
           reference="float64"),
    # complex64 arithmetic with broadcasting, a real operand (cast to complex64), abs, real / imag; data
    # movement of complex tensors: permute + clone, cat, slice, flip, pad, index_select (fftshift)
    OpCase("fft_complex_ops",
           lambda a, b, x: (_z(a) * _z(b) + _z(a) - _z(b)[0] * 2, _z(a) / (_z(b) + 1), (_z(a) * x).abs(),
                            torch.view_as_real(_z(a).t().contiguous()), torch.cat([_z(a), _z(b)], 0).real,
                            torch.view_as_real(torch.fft.fftshift(torch.fft.fft(x), dim=1)),
                            torch.view_as_real(F.pad(_z(b), (1, 2))), torch.flip(_z(a), (1,)).imag,
                            torch.view_as_real(_z(a)[:, 1:4])),
           (randn(3, 5, 2, seed=5), randn(2, 5, 2, seed=6)[:1].expand(3, 5, 2).contiguous(), randn(3, 5, seed=7)),
           ops=("mul", "add", "sub", "div", "abs", "cast", "permute", "cat", "index_select", "pad", "flip"),
           reference="float64"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_complex64_inputs_and_outputs() -> None:
    """complex64 tensors in and out through the Python API (the bundled vectors compare their parts
    as float32); the model's transforms run in float32 eager, hence the tolerance of a few ulps of
    the largest value."""
    g = torch.Generator().manual_seed(8)
    z = torch.randn(6, 5, dtype=torch.complex64, generator=g)
    case = OpCase("fft_complex_io", lambda z: (torch.fft.ifft(z, dim=0), z * z.conj().resolve_conj(), z.abs()),
                  (z,), ops=("fft_c2c", "mul", "abs"), atol=1e-6, rtol=1e-5)
    run_case(case)


def test_bad_arguments_are_refused_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten._fft_r2c.default", lambda x: torch.fft.rfft(x), X,
                   r"fft_r2c.*argument normalization = 3", ints={0: 3})


def test_bad_dims_are_refused_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten._fft_c2r.default", lambda x: torch.fft.irfft(torch.fft.rfft(x)), X,
                   r"fft_c2r.*argument dims\[0\] = 2 is out of range for a 2-dim input", ints={1: 2})


def test_complex_ops_without_a_kernel_are_unsupported() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.exp\.default.*complex64"):
        oa.export(Fn(lambda x: torch.view_as_real(torch.exp(torch.fft.rfft(x)))), (X,))
