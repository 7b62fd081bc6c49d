"""The openaccel op set: every op the bytecode can contain, with its inputs, outputs and the
layout of its integer / float arguments. This module is the reference for the exporter's
lowering rules, the C kernels (runtime_c/src/cpu/kernels/) and `openaccel inspect`; docs/ops.md is
generated from it. It imports neither torch nor the runtime. Code reads and writes arguments by
these names (ir.Instr.arg / set_arg / become; C: runtime_c/src/oab_args.h), never by position.

Conventions
- Tensors are contiguous (row-major) and inputs of one op share a dtype unless noted; the
  exporter inserts `cast` where PyTorch would promote.
- Shapes are static: kernels read output shapes from the output tensors.
- Dims in arguments are already normalized (non-negative) by the exporter.
- Trailing integer / float arguments that a file omits default to 0 (so new optional arguments
  can be appended without a format change).
- `act` (fused activation) codes: 0 none, 1 relu, 2 clamp to [act_min, act_max].
- complex64 tensors hold interleaved float32 (real, imaginary) pairs; the exporter views them as
  float32 [..., 2] and back without a copy (view_as_real / view_as_complex).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

F32 = frozenset({"float32"})
INTS = frozenset({"int32", "int64"})
NUM = F32 | INTS
BOOL = frozenset({"bool"})
ANY = NUM | BOOL | frozenset({"uint8", "int8"})
C64 = frozenset({"complex64"})
MOVE = ANY | C64   # data movement: any element type, complex64 included


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[str, ...]          # "name?" optional, "name*" variadic (last)
    outputs: tuple[str, ...]         # "name*" variadic, "name?" optional trailing
    ints: tuple[str, ...] = ()       # "name*" = variadic tail
    floats: tuple[str, ...] = ()
    dtypes: frozenset[str] = F32     # element types the reference kernel computes in
    inplace: int | None = None       # input whose buffer the output may reuse
    doc: str = ""
    family: str = ""
    extra: dict[str, str] = field(default_factory=dict)


OPS: dict[str, OpDef] = {}


def _op(name: str, inputs: tuple[str, ...], outputs: tuple[str, ...] = ("out",), **kw: object) -> None:
    OPS[name] = OpDef(name, inputs, outputs, **kw)  # type: ignore[arg-type]


# ---- elementwise: unary (float32 unless noted) -------------------------------------------------
for _name, _doc in [
    ("neg", "-x"), ("abs", "|x|"), ("exp", "e^x"), ("log", "ln x"), ("sqrt", "sqrt x"),
    ("rsqrt", "1/sqrt x"), ("sigmoid", "1/(1+e^-x)"), ("tanh", "tanh x"), ("relu", "max(x, 0)"),
    ("silu", "x*sigmoid(x)"), ("hardswish", "x*relu6(x+3)/6"), ("hardsigmoid", "relu6(x+3)/6"),
    ("sin", "sin x"), ("cos", "cos x"), ("erf", "erf x"), ("floor", "floor x"), ("ceil", "ceil x"),
    ("round", "round half to even"), ("sign", "sign x"), ("reciprocal", "1/x"),
    ("log1p", "ln(1+x)"), ("expm1", "e^x-1"),
]:
    _dt = NUM if _name in ("neg", "abs", "relu", "sign") else F32
    if _name == "abs":
        _dt, _doc = NUM | C64, "|x|; complex64 -> float32 (hypot of the parts)"
    _op(_name, ("self",), dtypes=_dt, inplace=0, doc=_doc, family="elementwise")
_op("gelu", ("self",), ints=("approximate",), inplace=0, family="elementwise",
    doc="approximate: 0 exact (erf), 1 tanh")
_op("leaky_relu", ("self",), floats=("negative_slope",), inplace=0, family="elementwise")
_op("elu", ("self",), floats=("alpha", "scale", "input_scale"), inplace=0, family="elementwise",
    doc="scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))")
_op("hardtanh", ("self",), floats=("min_val", "max_val"), dtypes=NUM, inplace=0, family="elementwise",
    doc="clamp(x, min_val, max_val); relu6 is hardtanh(0, 6)")
_op("clamp", ("self",), ints=("has_min", "has_max"), floats=("min", "max"), dtypes=NUM, inplace=0,
    family="elementwise", doc="clamp with optional bounds; NaN (in x or a bound) propagates; integer inputs "
    "use ceil(min) / floor(max) saturated to the dtype")
_op("logical_not", ("self",), dtypes=ANY, family="elementwise", doc="output bool: x == 0")
_op("bitwise_not", ("self",), dtypes=INTS | BOOL, inplace=0, family="elementwise", doc="~x (not x for bool)")
_op("cast", ("self",), dtypes=ANY | C64 | frozenset({"int16", "float64"}), family="elementwise",
    doc="convert to the output tensor's dtype: int->int wraps; float->int32/int64 truncates toward zero, "
    "saturating (NaN -> 0); float->uint8/int8/int16 truncates to int64 then wraps (PyTorch's uint8 rule); "
    "->bool is x != 0; real->complex64 has imaginary part 0, complex64->real keeps the real part (->bool: "
    "either part nonzero)")

# ---- elementwise: binary with broadcasting ------------------------------------------------------
_op("add", ("self", "other"), floats=("alpha",), dtypes=NUM | C64, inplace=0, family="binary",
    doc="self + alpha * other (alpha missing = 1; an integer for integer inputs); integers wrap")
_op("sub", ("self", "other"), floats=("alpha",), dtypes=NUM | C64, inplace=0, family="binary",
    doc="self - alpha * other (alpha missing = 1; an integer for integer inputs); integers wrap")
_op("mul", ("self", "other"), dtypes=NUM | BOOL | C64, inplace=0, family="binary",
    doc="complex64: the product in double, rounded once per part")
_op("div", ("self", "other"), ints=("rounding_mode",), dtypes=NUM | C64, inplace=0, family="binary",
    doc="rounding_mode: 0 true division (float32, complex64 in double), 1 trunc, 2 floor; integer division by "
    "zero is a run-time error")
_op("pow", ("self", "other"), dtypes=NUM, inplace=0, family="binary",
    doc="integers: negative exponents give 0 unless |self| = 1; products wrap")
_op("minimum", ("self", "other"), dtypes=NUM, inplace=0, family="binary", doc="NaN propagates")
_op("maximum", ("self", "other"), dtypes=NUM, inplace=0, family="binary", doc="NaN propagates")
_op("remainder", ("self", "other"), dtypes=NUM, inplace=0, family="binary",
    doc="Python-style modulo (sign of the divisor); integer modulo by zero is a run-time error")
_op("fmod", ("self", "other"), dtypes=NUM, inplace=0, family="binary",
    doc="C-style modulo (sign of the dividend); integer modulo by zero is a run-time error")
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _op(_name, ("self", "other"), dtypes=NUM | BOOL, family="binary", doc="output bool")
for _name in ("logical_and", "logical_or", "logical_xor"):
    _op(_name, ("self", "other"), dtypes=ANY, family="binary", doc="nonzero test on inputs; output bool")
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _op(_name, ("self", "other"), dtypes=INTS | BOOL, inplace=0, family="binary")
_op("where", ("condition", "self", "other"), dtypes=ANY, family="binary",
    doc="condition (bool) ? self : other, all three broadcast")

# ---- math functions (float32; computed in double and rounded once, see ref/math.c) ---------------
for _name, _doc in [
    ("acos", "arccos x (nan outside [-1, 1])"), ("asin", "arcsin x (nan outside [-1, 1])"), ("atan", "arctan x"),
    ("tan", "tan x"), ("sinh", "sinh x"), ("cosh", "cosh x"), ("asinh", "arsinh x"),
    ("acosh", "arcosh x (nan below 1)"), ("atanh", "artanh x (+-inf at +-1, nan outside)"),
    ("log2", "log2 x"), ("log10", "log10 x"), ("exp2", "2^x"),
    ("erfc", "1 - erf x without cancellation"), ("erfinv", "inverse of erf (+-inf at +-1, nan outside [-1, 1])"),
    ("erfcx", "e^(x^2) erfc x (special_erfcx)"), ("ndtri", "inverse of the standard normal CDF (special_ndtri)"),
    ("lgamma", "ln |Gamma(x)|"), ("digamma", "Gamma'(x) / Gamma(x): -inf at +0, +inf at -0, nan at negative integers"),
    ("i0", "modified Bessel function I0"), ("i0e", "e^-|x| I0(x) (special_i0e)"),
    ("i1", "modified Bessel function I1 (special_i1)"), ("i1e", "e^-|x| I1(x) (special_i1e)"),
]:
    _op(_name, ("self",), inplace=0, doc=_doc, family="math")
_op("polygamma", ("self",), ints=("n",), inplace=0, family="math",
    doc="n-th derivative of digamma, n >= 0: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; at x = 0, -1, -2, ... "
    "+inf (odd n) or -inf (even n >= 2)")
for _name, _doc in [
    ("atan2", "arctan(self / other) in the quadrant of (other, self)"),
    ("copysign", "|self| with the sign bit of other"),
    ("hypot", "sqrt(self^2 + other^2) without overflow; inf if either is inf, even with a NaN"),
    ("nextafter", "the next float32 after self toward other"),
]:
    _op(_name, ("self", "other"), inplace=0, doc=_doc, family="binary")

# ---- creation ---------------------------------------------------------------------------------
_op("full", (), floats=("value",), dtypes=ANY, family="creation",
    doc="fill the output with value (an in-range integer for integer outputs); also torch.empty / empty_like / "
    "new_empty / empty_strided, uninitialized in PyTorch, which openaccel fills with zeros")
_op("arange", (), floats=("start", "step"), dtypes=NUM, family="creation",
    doc="1-D out[i] = start + i * step (length from the output; float32: computed in double then rounded; "
    "integers: exact, |values| <= 2^53)")

# ---- matrix products --------------------------------------------------------------------------
_op("linear", ("input", "weight", "bias?"), ints=("act",), floats=("act_min", "act_max"),
    family="matmul", doc="out[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]; fused act")
_op("linear_packed", ("input", "weight", "bias?"), ints=("act", "block"), floats=("act_min", "act_max"),
    family="matmul", doc="linear with the weight packed at export (exporter/pack.py) in panels of `block` output "
    "features, [ceil(N / block), K, block], zero past N (N: the output's last dim); the CPU's GEMM reads the "
    "panels in place where `linear` packs W^T on every run. Emitted for the CPU's linears with more than "
    "32 rows")
_op("matmul", ("self", "other"), family="matmul",
    doc="[..., M, K] x [..., K, N] with broadcast batch dims (mm, bmm)")
_op("addmm", ("bias", "mat1", "mat2"), floats=("beta", "alpha"), family="matmul",
    doc="beta * bias + alpha * (mat1 @ mat2), 2-D; bias broadcasts")

# ---- convolution, pooling, normalization, resize -----------------------------------------------
_op("conv2d", ("input", "weight", "bias?"),
    ints=("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "act"),
    floats=("act_min", "act_max"), family="conv",
    doc="NCHW input, weight [C_out, C_in/groups, kH, kW], bias [C_out]; fused act (1-D convs run as 2-D)")
_op("conv2d_nhwc", ("input", "weight", "bias?"),
    ints=("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "act", "block",
          "input_nchw"),
    floats=("act_min", "act_max"), family="conv",
    doc="channels-last conv2d (the exporter's layout pass, exporter/layout.py): input [N, H, W, C_in] "
    "(or [N, C_in, H, W] with input_nchw = 1: a network's image input read without a permute), "
    "bias [C_out], output [N, OH, OW, C_out]; fused act. weight [kH, kW, C_in/groups, C_out] (block 0), or "
    "with block > 0 (groups 1) packed in panels of `block` output channels, [ceil(C_out / block), kH, kW, "
    "C_in, block], zero past C_out. The CPU kernels run groups = 1 (block a multiple of their NR) and "
    "depthwise (groups = C_in = C_out) fast, other groups by the reference kernel")
_op("mbconv_nhwc", ("input", "expand_weight?", "expand_bias?", "dw_weight", "dw_bias?", "project_weight",
                    "project_bias?"),
    ints=("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "expand_act", "dw_act",
          "project_act", "block"),
    floats=("expand_min", "expand_max", "dw_min", "dw_max", "project_min", "project_max"), family="conv",
    doc="MobileNet's inverted-residual block fused (exporter/fuse.py): conv2d_nhwc 1x1 expand (optional: "
    "both expand inputs absent) -> conv2d_nhwc depthwise (stride, pad, dilation; weight [kH, kW, 1, E]) -> "
    "conv2d_nhwc 1x1 project, each with its bias and fused act (its min / max); expand and project weights "
    "packed in panels of `block` as conv2d_nhwc's. Input [N, H, W, C], output [N, OH, OW, O]; the "
    "expanded tensors are never written out")
_op("conv2d_winograd", ("input", "weight", "bias?", "addend?"), ints=("tile", "pad_h", "pad_w", "act", "block"),
    floats=("act_min", "act_max"), family="conv", inplace=3,
    doc="3x3 convolution, stride 1, dilation 1, groups 1, by Winograd F(tile x tile, 3x3) (tile 2 or 4; "
    "exporter/winograd.py has the transform matrices): input [N, C, H, W]; weight = the weights "
    "transformed at export, [(tile+2)^2, ceil(K / block), C, block] (U = G g G^T, output channels "
    "in blocks of `block`, zero-padded); output [N, K, H + 2 pad_h - 2, W + 2 pad_w - 2]; "
    "act(conv + bias + addend), addend shaped like the output (a fused residual add; the output may "
    "overwrite it: every element is read before its own is written); pad_h, pad_w 0 to 2")
_op("conv_transpose2d", ("input", "weight", "bias?"),
    ints=("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups",
          "output_pad_h", "output_pad_w"),
    family="conv", doc="NCHW input, weight [C_in, C_out/groups, kH, kW], bias [C_out]; "
    "output_pad < stride or < dilation")
_op("max_pool2d", ("input",), ("out", "indices?"),
    ints=("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h",
          "dilation_w", "ceil_mode"), dtypes=NUM | frozenset({"int8", "uint8"}), family="pool",
    doc="input [N, C, H, W] or [C, H, W]; pad <= kernel/2; NaN propagates; a window with no "
    "input element gives -inf (lowest for ints). Optional indices (int64, max_pool2d_with_indices): "
    "h * W + w of each max in its input plane, as PyTorch's CPU kernel: the first maximum, the last NaN")
_op("avg_pool2d", ("input",),
    ints=("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "ceil_mode",
          "count_include_pad", "divisor_override"), family="pool",
    doc="input [N, C, H, W] or [C, H, W]; divisor_override 0 = none; sums in double")
_op("adaptive_avg_pool2d", ("input",), family="pool",
    doc="output size from the output tensor; window [floor(i*in/out), ceil((i+1)*in/out))")
_op("adaptive_max_pool2d", ("input",), ("out", "indices?"), family="pool",
    doc="windows as adaptive_avg_pool2d, max and optional indices (int64, h * W + w in the input plane) as "
    "max_pool2d's")
_op("max_pool3d", ("input",), ("out", "indices?"),
    ints=("kernel_d", "kernel_h", "kernel_w", "stride_d", "stride_h", "stride_w", "pad_d", "pad_h", "pad_w",
          "dilation_d", "dilation_h", "dilation_w", "ceil_mode"), dtypes=ANY - BOOL, family="pool",
    doc="input [N, C, D, H, W] or [C, D, H, W]; pad <= kernel/2; NaN propagates (a window's last NaN is taken); "
    "a window with no input element gives -inf (lowest for ints); indices (int64) = d*H*W + h*W + w of the max "
    "within its plane (the first of equal maxima), an empty window's at its first position (PyTorch's "
    "max_pool3d_with_indices)")
_op("avg_pool3d", ("input",),
    ints=("kernel_d", "kernel_h", "kernel_w", "stride_d", "stride_h", "stride_w", "pad_d", "pad_h", "pad_w",
          "ceil_mode", "count_include_pad", "divisor_override"), dtypes=F32 | frozenset({"int64"}), family="pool",
    doc="input [N, C, D, H, W] or [C, D, H, W]; divisor_override 0 = none; float32 sums in float32 in window "
    "order then divides (PyTorch's CPU order); int64 sums wrapping and divides truncating; a window with no "
    "input element gives 0")
_op("adaptive_avg_pool3d", ("input",), family="pool",
    doc="input [N, C, D, H, W] or [C, D, H, W], output size from the output tensor; window [floor(i*in/out), "
    "ceil((i+1)*in/out)) per dim; float32 sum in window order divided by the window's depth, height and width "
    "in turn")
_op("adaptive_max_pool3d", ("input",), ("out", "indices?"), family="pool",
    doc="windows as adaptive_avg_pool3d; NaN propagates (the last NaN is taken); indices "
    "(int64) as max_pool3d's")
_op("batch_norm", ("input", "weight?", "bias?", "running_mean", "running_var"), floats=("eps",),
    family="norm", doc="inference batch norm over dim 1 of [N, C, *]")
_op("batch_norm_training", ("input", "weight?", "bias?"), ("out", "save_mean?", "save_invstd?"), floats=("eps",),
    family="norm", doc="batch norm with the batch's own statistics (training mode, or no running statistics) over "
    "dim 1 of [N, C, *]: per channel mean and biased variance in double, save_invstd = 1 / sqrt(var + eps) "
    "(1 or 3 outputs); the running-statistics update is not part of the op")
_op("layer_norm", ("input", "weight?", "bias?"), ("out", "mean?", "rstd?"),
    ints=("normalized_ndim",), floats=("eps",), family="norm",
    doc="normalize over the last normalized_ndim dims; 1 or 3 outputs, mean/rstd shaped "
    "input.shape[:-k] + [1] * k (native_layer_norm)")
_op("group_norm", ("input", "weight?", "bias?"), ("out", "mean?", "rstd?"), ints=("groups",),
    floats=("eps",), family="norm", doc="input [N, C, *]; 1 or 3 outputs, mean/rstd [N, groups]")
_op("upsample_nearest2d", ("input",), floats=("scale_h", "scale_w"), dtypes=NUM, family="resize",
    doc="NCHW; PyTorch's nearest_idx: out == in copies, out == 2*in halves, else src = "
    "min(floor(dst * scale), in-1) with scale = in/out (or 1/scale_factor when > 0), in float")
_op("upsample_bilinear2d", ("input",), ints=("align_corners",), floats=("scale_h", "scale_w"),
    family="resize", doc="NCHW; source index and weights as PyTorch's area_pixel_compute_scale / "
    "compute_source_index_and_lambda, in float; scale_* 0 = not given")
_op("upsample_nearest_nd", ("input",), ints=("exact",), floats=("scale_d", "scale_h", "scale_w"),
    dtypes=F32 | frozenset({"uint8"}), family="resize",
    doc="[N, C, *S] with 1 to 3 spatial dims S (the last ones' scales are read: scale_w for 1-D); PyTorch's "
    "generic CPU kernel: src = min(floor(dst * scale), in - 1), exact: min(floor(max(scale * (dst + 0.5) - 0.5, "
    "0) + 0.5), in - 1), scale = 1 / scale_* when given (> 0) else in / out, in float")
_op("upsample_linear_nd", ("input",), ints=("align_corners",), floats=("scale_d", "scale_h", "scale_w"),
    family="resize", doc="[N, C, *S] with 1 to 3 spatial dims (linear1d, trilinear3d; scales as "
    "upsample_nearest_nd); indices and weights per dim as upsample_bilinear2d, taps combined from the first "
    "spatial dim inward: (x0 * w0 + x1 * w1) per dim")
_op("upsample_bicubic2d", ("input",), ints=("align_corners",), floats=("scale_h", "scale_w"), family="resize",
    doc="NCHW; PyTorch's cubic convolution (A = -0.75) on 4 x 4 taps clamped to the border: source index "
    "without the clamp at 0, coefficients in float, the 4 taps of each row summed in order then the rows")
_op("upsample_aa2d", ("input",), ints=("mode", "align_corners"), floats=("scale_h", "scale_w"), family="resize",
    doc="antialiased resize (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa), NCHW: mode 0 triangle filter, "
    "1 cubic (A = -0.5); separable as PyTorch's CPU kernel: the width pass (into scratch when both dims "
    "change), then the height pass, each output the normalized-weight sum over the filter's support "
    "(support scaled by the downscale factor)")

# ---- softmax and reductions -------------------------------------------------------------------
_op("softmax", ("self",), ints=("dim",), family="reduce", doc="numerically stable (max subtracted), double sums")
_op("log_softmax", ("self",), ints=("dim",), family="reduce", doc="x - max - log(sum(exp(x - max)))")
for _name, _dt, _doc in [
    ("sum", NUM | BOOL, "output float32 for float32, int64 for ints/bool (int32 allowed for int32)"),
    ("mean", F32, "empty reduction gives nan"),
    ("amax", NUM, "nan propagates; an empty reduced dim is invalid"),
    ("amin", NUM, "nan propagates; an empty reduced dim is invalid"),
    ("prod", NUM | BOOL, "output dtype as sum"),
    ("any", ANY, "output bool (uint8 for a uint8 input)"),
    ("all", ANY, "output bool (uint8 for a uint8 input)"),
]:
    _op(_name, ("self",), ints=("keepdim", "dims*"), dtypes=_dt, family="reduce",
        doc=f"reduce over dims (none listed = all dims); {_doc}")
_op("var", ("self",), ("out", "mean?"), ints=("keepdim", "dims*"), floats=("correction",), family="reduce",
    doc="sum((x - mean)^2) / max(N - correction, 0) over dims (none listed = all dims), in double; the optional "
    "second output is the mean (var_mean)")
for _name in ("argmax", "argmin"):
    _op(_name, ("self",), ints=("has_dim", "dim", "keepdim"), dtypes=NUM, family="reduce",
        doc="output int64; first occurrence, nan counts as the extreme; without a dim, over the "
            "flattened input (keepdim: all dims 1)")
_op("cumsum", ("self",), ints=("dim",), dtypes=NUM | BOOL, family="reduce",
    doc="output float32 for float32, int64 for ints/bool (int32 allowed for int32)")
_op("cumprod", ("self",), ints=("dim",), dtypes=NUM | BOOL, family="reduce",
    doc="output dtype as cumsum; float products in double, rounded per element; integers wrap")
for _name, _cmp in (("cummax", ">="), ("cummin", "<=")):
    _op(_name, ("self",), ("values", "indices"), ints=("dim",), dtypes=ANY, family="reduce",
        doc=f"running {_name[3:]} along dim with its int64 index; as PyTorch, an element {_cmp} the running value "
        "takes its place and index (the last of equal ones), and a NaN always does: NaN propagates, the index "
        "of its latest NaN")
_op("logcumsumexp", ("self",), ints=("dim",), family="reduce",
    doc="log(cumsum(exp(x))) along dim, in double: acc = max + log1p(exp(min - max)) of (x_i, acc); NaN propagates, "
    "equal infinities stay")

# ---- sorting and selection (indices int64, along one dim of any rank; 0-d = one element) --------
_op("sort", ("self",), ("values", "indices"), ints=("dim", "descending"), dtypes=ANY, family="sort",
    doc="stable sort along dim (ties keep their input order, descending too); NaN is the largest value, "
    "-0.0 equals 0.0")
_op("topk", ("self",), ("values", "indices"), ints=("dim", "largest"), dtypes=NUM | frozenset({"uint8", "int8"}),
    family="sort", doc="the k = output.shape[dim] largest (largest 1) or smallest elements, sorted, NaN the largest; "
    "ties in input order (PyTorch leaves their order unspecified)")
_op("kthvalue", ("self",), ("values", "indices"), ints=("k", "dim", "keepdim"),
    dtypes=NUM | frozenset({"uint8", "int8"}), family="sort",
    doc="the k-th smallest element (1 <= k <= size) along dim, NaN the largest; among ties, the k-th of a stable "
    "sort (PyTorch leaves which index unspecified)")
_op("median", ("self",), ("values", "indices?"), ints=("dim", "keepdim", "ignore_nan"),
    dtypes=NUM | frozenset({"uint8", "int8"}), family="sort",
    doc="lower median along dim (element (n - 1) / 2 of a stable sort); a NaN in the row gives NaN and the first "
    "NaN's index; ignore_nan 1 (nanmedian): the median of the non-NaN elements, NaN if all are NaN")
_op("mode", ("self",), ("values", "indices"), ints=("dim", "keepdim"), dtypes=ANY, family="sort",
    doc="the most frequent value along dim (the smallest of equally frequent ones) and the index of its last "
    "occurrence; -0.0 equals 0.0, NaNs count as one value (PyTorch's NaN answer is unspecified)")
_op("nonzero_static", ("self",), ints=("fill_value",), dtypes=ANY, family="sort",
    doc="output int64 [size, ndim]: the indices of the first `size` nonzero elements in row-major order, rows past "
    "the count filled with fill_value. The fixed-size form of nonzero: aten.nonzero, masked_select and unique "
    "are refused (their output size depends on the input's values; see lower/sort.py)")

# ---- data movement ----------------------------------------------------------------------------
_op("copy", ("self",), dtypes=MOVE, family="shape", doc="contiguous copy (clone, or a reshape that cannot alias)")
_op("permute", ("self",), ints=("dims*",), dtypes=MOVE, family="shape")
_op("expand", ("self",), dtypes=MOVE, family="shape", doc="broadcast to the output shape")
_op("slice", ("self",), ints=("dim", "start", "end", "step"), dtypes=MOVE, family="shape",
    doc="0 <= start <= end <= size (clamped by the exporter), step >= 1")
_op("select", ("self",), ints=("dim", "index"), dtypes=MOVE, family="shape")
_op("cat", ("tensors*",), ints=("dim",), dtypes=MOVE, family="shape",
    doc="1 to 64 inputs (the exporter chains longer lists)")
_op("split", ("self",), ("outs*",), ints=("dim",), dtypes=MOVE, family="shape",
    doc="sizes from the output tensors")
_op("pad", ("self",), ints=("pads*",), floats=("value",), dtypes=MOVE, family="shape",
    doc="constant_pad_nd: pads = (last dim before, after, previous dim before, after, ...); negative crops; "
    "complex64 pads with (value, 0)")
_op("flip", ("self",), ints=("dims*",), dtypes=MOVE, family="shape")
_op("repeat", ("self",), dtypes=MOVE, family="shape", doc="tile to the output shape")
_op("pad_mode", ("self",), ints=("mode", "pads*"), dtypes=ANY, family="shape",
    doc="non-constant padding of the last len(pads) / 2 dims, pads as pad's (last dim before, after, ...; negative "
    "crops): mode 1 reflect (reflection_pad*: the border element not repeated, each pad < the dim's size), 2 "
    "replicate (replication_pad*: the border element repeated), 3 circular (_pad_circular: wraps around the dim "
    "after cropping, each pad <= its size)")
_op("as_strided", ("self",), ints=("storage_offset", "strides*"), dtypes=ANY, family="shape",
    doc="out[i0, i1, ...] = self.flat[storage_offset + i0 * strides[0] + i1 * strides[1] + ...], one stride per "
    "output dim (sizes from the output), strides >= 0, every element read inside self (checked when prepared): "
    "as_strided_copy, diagonal_copy and unfold_copy")
_op("embedding", ("weight", "indices"), dtypes=ANY, family="index",
    doc="out[..., :] = weight[indices[...], :]; weight 2-D; indices int32/int64, range-checked at run time")
_op("index_select", ("self", "index"), ints=("dim", "negative_wraps"), dtypes=MOVE, family="index",
    doc="index 0-/1-D int32/int64, range-checked at run time; negative_wraps 1: index < 0 counts from "
        "the end (aten.index), 0: an error (aten.index_select)")
_op("gather", ("self", "index"), ints=("dim",), dtypes=ANY, family="index",
    doc="out[i][j] = self[index[i][j]][j] (dim 0); index int32/int64, same ndim, range-checked at run time")
_op("embedding_bag", ("weight", "indices", "offsets", "per_sample_weights?"),
    ints=("mode", "include_last_offset", "padding_idx"), family="index",
    doc="weight [V, E], indices [L] and offsets [B (+1 with include_last_offset)] int32/int64 -> [B, E]: bag b = "
    "indices[offsets[b]:offsets[b + 1]] (the last to L, or to offsets[B] with include_last_offset); mode 0 sum "
    "(times per_sample_weights [L]: fused multiply-add without padding_idx, as PyTorch's fbgemm path), 1 mean, "
    "2 max (the first row, then strictly greater values); rows equal to padding_idx (-1 none) are skipped; an "
    "empty bag gives 0; PyTorch's CPU kernel counts indices past offsets[B] in the last bag's max and mean "
    "divisor (and sum, with padding_idx): so does this op; indices and offsets (offsets[0] = 0, "
    "non-decreasing, <= L) are checked at run time")

_op("index", ("self", "indices*"), ints=("dims*",), dtypes=ANY, family="index",
    doc="advanced indexing (aten.index.Tensor): indices[k] (int32/int64; < 0 counts from the end; range-checked "
    "at run time) indexes dim dims[k] of self (dims increasing, one per index tensor); the index tensors "
    "broadcast to one shape B; out = self.shape[:dims[0]] + B + self.shape[dims[-1] + 1:] when the dims are "
    "consecutive, else B + the unindexed dims in order (PyTorch's rule)")

# ---- scatter ----------------------------------------------------------------------------------
_op("scatter", ("self", "index", "src"), ints=("dim", "reduce", "include_self"), dtypes=ANY, inplace=0,
    family="scatter",
    doc="out = self, then for each position p of index: out[p with index[p] in dim `dim`] = reduce(that element, "
    "src[p]) (a 0-d src: the same value for every p); reduce 0 none (assign: targets named twice are undefined, "
    "as in PyTorch), 1 sum, 2 prod, 3 mean, 4 amax, 5 amin (NaN propagates); include_self 0: the targets start "
    "from the reduction's identity and mean does not count self; mean of integers floor-divides by the count "
    "(a count in the dtype, 0 taken as 1, PyTorch's rule); bool: sum = or, prod = and, no mean; index int32/int64, "
    "same ndim as self, no larger than src in any dim nor than self outside `dim`, 0 <= index < self.size(dim) "
    "(run-time check)")
_op("index_put", ("self", "values", "indices*"), ints=("accumulate", "dims*"), dtypes=ANY, inplace=0,
    family="scatter",
    doc="out = self with out[indices] = values (accumulate 1: += , integers wrap, bool or): the positions are "
    "those `index` reads with the same indices and dims, values broadcast to that result's shape; integer "
    "indices int32/int64 (< 0 counts from the end; range-checked at run time), or one bool mask (the only "
    "index) covering dims dims[0] .. dims[0] + mask.ndim - 1, whose true elements in row-major order form the "
    "result's dim (values' matching dim is 1 or the count of true elements, checked at run time); positions "
    "named twice without accumulate are undefined, as in PyTorch")
_op("slice_scatter", ("self", "src"), ints=("dim", "start", "end", "step"), dtypes=ANY, inplace=0, family="scatter",
    doc="out = self with out[start:end:step] along dim = src; bounds as slice's")
_op("masked_scatter", ("self", "mask", "source"), dtypes=ANY, inplace=0, family="scatter",
    doc="out = self broadcast with mask (bool) to the output's shape; the true positions of mask, in row-major "
    "order, take source's elements in order (source flattened; too few is a run-time error)")

# ---- FFT (complex64; double precision inside, see ref/fft.c) --------------------------------------
_FFT_DOC = ("over `dims` (the last listed is the real / Hermitian one), each signal length >= 1; "
            "normalization 0 none, 1 1/sqrt(n), 2 1/n with n the product of the signal lengths (the real side's)")
_op("fft_r2c", ("self",), ints=("normalization", "onesided", "dims*"), family="fft",
    doc="float32 -> complex64 forward DFT " + _FFT_DOC + "; onesided keeps bins 0 .. n/2 of the last dim")
_op("fft_c2c", ("self",), ints=("normalization", "forward", "dims*"), dtypes=C64, family="fft",
    doc="complex64 DFT, forward (e^-i) or backward (e^+i), " + _FFT_DOC)
_op("fft_c2r", ("self",), ints=("normalization", "dims*"), dtypes=C64, family="fft",
    doc="complex64 -> float32 backward DFT of a Hermitian signal (the inverse of fft_r2c onesided) " + _FFT_DOC
    + "; the output's last dim n, the input's n/2 + 1 (the imaginary parts of bins 0 and n/2 are ignored)")


# ---- spatial sampling and distances -------------------------------------------------------------
_op("grid_sampler_2d", ("input", "grid"), ints=("interpolation_mode", "padding_mode", "align_corners"),
    family="sampling",
    doc="input [N, C, H, W], grid [N, OH, OW, 2] (x, y in [-1, 1]) -> [N, C, OH, OW]; interpolation 0 bilinear, "
    "1 nearest (round half to even), 2 bicubic (A = -0.75, padding applied per tap); padding 0 zeros, 1 border, "
    "2 reflection; PyTorch's vectorized CPU kernel in float: unnormalize (x + 1) * (W - 1) / 2 (align_corners) or "
    "(x + 1) * W / 2 - 0.5, clip to [0, W - 1] (NaN -> 0), reflect about the borders (or the half-pixel edges); "
    "taps outside the input read 0")
_op("grid_sampler_3d", ("input", "grid"), ints=("interpolation_mode", "padding_mode", "align_corners"),
    family="sampling",
    doc="input [N, C, D, H, W], grid [N, OD, OH, OW, 3] (x, y, z) -> [N, C, OD, OH, OW]; interpolation 0 "
    "trilinear, 1 nearest; padding as grid_sampler_2d; PyTorch's scalar CPU kernel: ((x + 1) / 2) * (W - 1) or "
    "((x + 1) * W - 1) / 2, clip (NaN -> W - 1), reflect by fmod; corners outside the input are skipped")
_op("cdist", ("x1", "x2"), floats=("p",), family="distance",
    doc="x1 [*, P, M], x2 [*, R, M] with the same batch dims -> [*, P, R]: (sum |x1_i - x2_j|^p)^(1/p) summed in "
    "double; p 0 counts nonzero differences, inf takes the max |difference| (NaN skipped, as PyTorch's "
    "scalar max)")
_op("pdist", ("self",), floats=("p",), family="distance",
    doc="self [N, M] -> [N (N - 1) / 2]: the cdist of rows i < j in row-major order; inf: NaN propagates")

# ---- attention (kept as one op: the exporter asks to_edge to preserve SDPA) ---------------------
_op("sdpa", ("query", "key", "value", "attn_mask?"), ints=("is_causal", "gqa_groups"), floats=("scale",),
    family="attention",
    doc="softmax(query @ key^T * scale + mask) @ value over [..., L, E] x [..., S, E] x [..., S, Ev]; "
        "is_causal masks j > i (top-left aligned); a bool mask keeps True; gqa_groups > 1 shares each "
        "key/value head among that many query heads (dim -3)")


# ---- quantized (int8; the requantization rule: docs/quantization.md) ----------------------------
I8 = frozenset({"int8"})
_op("quantize", ("self",), ints=("zero_point", "qmin", "qmax"), floats=("scale",), dtypes=F32, family="quant",
    doc="float32 -> int8/uint8 (the output's dtype): clamp(round_half_even(x * float32(1 / scale)) + zero_point, "
    "qmin, qmax), PyTorch's quantize_per_tensor; NaN -> zero_point")
_op("dequantize", ("self",), ints=("zero_point",), floats=("scale",), dtypes=I8 | frozenset({"uint8"}),
    family="quant", doc="int8/uint8 -> float32: float32(x - zero_point) * float32(scale)")
_op("conv2d_q8", ("input", "weight", "bias?", "multiplier", "shift"),
    ints=("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "input_zp", "output_zp",
          "act_min", "act_max"),
    floats=("input_scale", "output_scale"), dtypes=I8, family="quant",
    doc="int8 NCHW conv2d: input int8 (zero point input_zp; padding reads input_zp), weight int8 [C_out, "
    "C_in/groups, kH, kW] symmetric (zero point 0), bias float32 [C_out] in output steps (a multiple of 2^-12), "
    "multiplier int32 and shift int8 [C_out] (or [1]; an int32 shift, from a file before format 1.2, or an int32 "
    "bias in accumulator steps, before format 1.3, is refused: export again); with B = bias * 2^12, "
    "out = clamp(round_half_even((sat32(sum (x - input_zp) * w) * multiplier + B * 2^(shift - 12)) / 2^shift) "
    "+ output_zp, act_min, act_max); shift 12..62, multiplier 0..2^31-1, |B| < 2^(73 - shift); the scales "
    "are informational")
_op("linear_q8", ("input", "weight", "bias?", "multiplier", "shift"),
    ints=("input_zp", "output_zp", "act_min", "act_max"), floats=("input_scale", "output_scale"), dtypes=I8,
    family="quant", doc="int8 linear: input [..., K], weight int8 [N, K], bias float32 [N] (output steps), "
    "multiplier int32 and shift int8 [N] (or [1]); the conv2d_q8 rule")
_op("add_q8", ("self", "other"),
    ints=("self_zp", "other_zp", "output_zp", "self_multiplier", "other_multiplier", "shift", "act_min", "act_max"),
    floats=("self_scale", "other_scale", "output_scale"), dtypes=I8, family="quant",
    doc="int8 add with broadcasting: out = clamp(round_half_even(((a - self_zp) * self_multiplier + "
    "(b - other_zp) * other_multiplier) / 2^shift) + output_zp, act_min, act_max); multipliers 0..2^31-1, "
    "shift 0..62; the scales are informational")
_op("mul_q8", ("self", "other"),
    ints=("self_zp", "other_zp", "output_zp", "multiplier", "shift", "act_min", "act_max"),
    floats=("self_scale", "other_scale", "output_scale"), dtypes=I8, family="quant",
    doc="int8 mul with broadcasting: out = clamp(round_half_even((a - self_zp) * (b - other_zp) * multiplier / "
    "2^shift) + output_zp, act_min, act_max), multiplier / 2^shift = self_scale * other_scale / output_scale "
    "(one rounding); multiplier 0..2^31-1, shift 0..62; the scales are informational")
_op("mean_q8", ("self",),
    ints=("input_zp", "output_zp", "multiplier", "shift", "act_min", "act_max", "keepdim", "dims*"),
    floats=("input_scale", "output_scale"), dtypes=I8, family="quant",
    doc="int8 mean over dims (none listed = all dims; at most 2^23 elements per output): out = "
    "clamp(round_half_even(sum (x - input_zp) * multiplier / 2^shift) + output_zp, act_min, act_max), the sum "
    "exact, multiplier / 2^shift = input_scale / (output_scale * count) (one rounding); multiplier "
    "0..2^31-1, shift 0..62; the scales are informational")

_op("linear_dq8", ("input", "weight", "weight_scale", "bias?"), ints=("qmin", "qmax", "per_token"), floats=("eps",),
    dtypes=F32, family="quant",
    doc="dynamically quantized linear (PT2E 8da8w): input float32 [..., K], weight int8 [N, K] symmetric (zero point "
    "0), weight_scale float32 [N] (or [1]), bias float32 [N]; per call (per_token 0: per tensor, PyTorch's "
    "choose_qparams.tensor) in float32: lo = min(min x, 0), hi = max(max x, 0), s = max((hi - lo) / (qmax - qmin), "
    "eps), zp = clamp(qmin - round_half_even(lo / s), qmin, qmax), x_q = the quantize op's rule; per_token 1: per "
    "row, choose_qparams_per_token_asymmetric's zero point and quantize_per_token's double rounding "
    "(docs/quantization.md); acc = sum (x_q - zp) * w exact; out = float32(double(acc) * (double(s) * "
    "double(weight_scale[c])) + double(bias[c])); a NaN or inf in the input (its row when per_token) makes those "
    "outputs NaN; qmin < qmax within int8, eps > 0")

# ---- CPU tuning shared by the exporter and the CPU kernels --------------------------------------
# `make schema` writes these into runtime_c/src/oab_args.h as OA_CPU_<NAME>; tests/test_opset.py
# ties the C kernels' own copies to them.
# A linear with at most this many rows runs the GEMV kernel, which reads W in place; the exporter
# packs the weights of longer ones only (exporter/pack.py; C: GEMV_MAX_ROWS in the fast linear).
CPU_GEMV_MAX_ROWS = 32
# Output channels per weight panel packed at export (linear_packed, conv2d_nhwc, conv2d_winograd):
# the widest GEMM micro-kernel's NR (AVX2: 16); NEON's 8 and the portable kernels' 4 or 8 read the
# same panels through row offsets, so every NR must divide it.
CPU_PANEL_BLOCK = 16
CPU_TUNING = {"GEMV_MAX_ROWS": CPU_GEMV_MAX_ROWS, "PANEL_BLOCK": CPU_PANEL_BLOCK}


def op(name: str) -> OpDef:
    return OPS[name]


# ---- arguments by name ------------------------------------------------------------------------
ArgValue = int | float | Sequence[int]


@dataclass(frozen=True)
class ArgSlot:
    """Where a named argument sits: in `ints` or `floats`, at `index` (a variadic one: the tail
    from `index` on)."""

    name: str
    kind: str        # "ints" or "floats"
    index: int
    variadic: bool = False


@functools.cache
def arg_slots(op_name: str) -> dict[str, ArgSlot]:
    """Every named argument of `op_name`, in layout order."""
    d = OPS.get(op_name)
    if d is None:
        raise KeyError(f"'{op_name}' is not an op of the op set")
    slots: dict[str, ArgSlot] = {}
    for kind, names in (("ints", d.ints), ("floats", d.floats)):
        for k, n in enumerate(names):
            slot = ArgSlot(n.rstrip("*"), kind, k, n.endswith("*"))
            slots[slot.name] = slot
    return slots


def arg_slot(op_name: str, name: str) -> ArgSlot:
    """The slot of argument `name` of `op_name` (a KeyError listing the op's arguments if none)."""
    slots = arg_slots(op_name)
    if name not in slots:
        raise KeyError(f"op '{op_name}' has no argument '{name}' (its arguments: {', '.join(slots) or 'none'})")
    return slots[name]


def encode_args(op_name: str, **values: ArgValue) -> tuple[list[int], list[float]]:
    """The ints and floats of an `op_name` instruction from named values. Each list ends at the
    last argument given (the arguments a file omits are 0) and the ones before it not given are 0."""
    ints: list[int] = []
    floats: list[float] = []
    for name, value in sorted(values.items(), key=lambda kv: arg_slot(op_name, kv[0]).index):
        slot = arg_slot(op_name, name)
        if slot.kind == "ints":
            ints.extend([0] * (slot.index - len(ints)))
            if slot.variadic:
                assert not isinstance(value, (int, float)), f"{op_name}.{name} takes a list"
                ints.extend(int(v) for v in value)
            else:
                assert isinstance(value, (int, float)), f"{op_name}.{name} takes one integer"
                ints.append(int(value))
        else:
            assert isinstance(value, (int, float)), f"{op_name}.{name} takes one number"
            floats.extend([0.0] * (slot.index - len(floats)))
            floats.append(float(value))
    return ints, floats


def arg_names(name: str, ints: list[int], floats: list[float]) -> list[tuple[str, object]]:
    """Pair an instruction's arguments with their names (for inspect and messages)."""
    d = OPS.get(name)
    if d is None:
        return [(f"i{k}", v) for k, v in enumerate(ints)] + [(f"f{k}", v) for k, v in enumerate(floats)]
    out: list[tuple[str, object]] = []
    for names, values in ((d.ints, ints), (d.floats, floats)):
        k = 0
        for n in names:
            if n.endswith("*"):
                out.append((n[:-1], list(values[k:])))
                k = len(values)
                break
            if k < len(values):
                out.append((n, values[k]))
            k += 1
        for extra in values[k:]:
            out.append((f"arg{k}", extra))
            k += 1
    return out


def render_markdown(coverage: bool = True) -> str:
    """docs/ops.md: the op reference, generated from OPS, then (`coverage`) the core ATen coverage
    table and the OpInfo sweep's figures (openaccel/coverage.py; that part imports torch and the
    exporter's rules, here only when called)."""
    lines = ["# openaccel op set", "",
             "Generated from `sdk/openaccel/opset.py` (`make docs`). Each instruction names one op;",
             "its integer and float arguments follow the layouts below.", ""]
    families: dict[str, list[OpDef]] = {}
    for d in OPS.values():
        families.setdefault(d.family, []).append(d)
    for fam, defs in families.items():
        lines += [f"## {fam}", "", "| op | inputs | outputs | ints | floats | dtypes | notes |",
                  "|---|---|---|---|---|---|---|"]
        for d in defs:
            lines.append(
                f"| `{d.name}` | {', '.join(d.inputs) or '-'} | {', '.join(d.outputs)} | "
                f"{', '.join(d.ints) or '-'} | {', '.join(d.floats) or '-'} | "
                f"{', '.join(sorted(d.dtypes))} | {d.doc} |")
        lines.append("")
    if coverage:
        from .coverage import render_coverage

        lines.append(render_coverage())
    return "\n".join(lines).rstrip("\n")
