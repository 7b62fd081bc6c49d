/* The op set and the case generators: for each op with a generator, several shapes and argument
 * combinations (op.<name>.<dtype> runs them through checks_ops.c). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "conformance.h"

/* Every op of the op set (sdk/openaccel/opset.py): the names supports_op is asked about. */
const char *const k_ops[] = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "silu", "hardswish", "hardsigmoid",
    "sin", "cos", "erf", "floor", "ceil", "round", "sign", "reciprocal", "log1p", "expm1", "gelu", "leaky_relu",
    "elu", "hardtanh", "clamp", "logical_not", "bitwise_not", "cast", "add", "sub", "mul", "div", "pow", "minimum",
    "maximum", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "where", "full", "arange", "linear", "matmul",
    "addmm", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm",
    "layer_norm", "group_norm", "upsample_nearest2d", "upsample_bilinear2d", "softmax", "log_softmax", "sum",
    "mean", "amax", "amin", "prod", "any", "all", "var", "argmax", "argmin", "cumsum", "copy", "permute",
    "expand", "slice", "select", "cat", "split", "pad", "flip", "repeat", "embedding", "index_select", "gather",
    "pad_mode", "as_strided", "index", "index_put", "scatter", "slice_scatter", "masked_scatter",
    "sdpa", "conv2d_winograd", "conv2d_nhwc", "mbconv_nhwc", "linear_packed",
    "quantize", "dequantize", "conv2d_q8", "linear_q8", "add_q8", "mean_q8", "mul_q8", "linear_dq8",
    "adaptive_max_pool2d", "batch_norm_training", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "topk",
    "kthvalue", "median", "mode", "nonzero_static",
    "acos", "asin", "atan", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "erfc",
    "erfinv", "erfcx", "ndtri", "lgamma", "digamma", "i0", "i0e", "i1", "i1e", "polygamma", "atan2", "copysign",
    "hypot", "nextafter", "fft_r2c", "fft_c2c", "fft_c2r",
    "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "grid_sampler_2d", "grid_sampler_3d",
    "cdist", "pdist", "embedding_bag", "upsample_nearest_nd", "upsample_linear_nd", "upsample_bicubic2d",
    "upsample_aa2d",
};
const size_t k_n_ops = sizeof k_ops / sizeof k_ops[0];

/* ---- op generators ------------------------------------------------------------------------------------------ */

static tspec_t shp(int32_t ndim, const int64_t *dims) {
  tspec_t t;
  memset(&t, 0, sizeof t);
  t.ndim = ndim;
  for (int32_t i = 0; i < ndim; i++) t.shape[i] = dims[i];
  t.present = 1;
  t.scale = 1.0f;
  return t;
}
#define S(...) shp((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static tspec_t scalar0(void) { return shp(0, NULL); }
static tspec_t absent(void) {
  tspec_t t;
  memset(&t, 0, sizeof t);
  return t;
}
static tspec_t weight(tspec_t t, float fan_in) {
  t.constant = 1;
  t.scale = 1.0f / sqrtf(fan_in);
  return t;
}
static tspec_t scaled(tspec_t t, float k) {
  t.scale = k;
  return t;
}

static op_case_t mk(const char *name, uint32_t n_in, const tspec_t *in, uint32_t n_out, const tspec_t *out,
                    uint32_t n_ints, const int64_t *ints, uint32_t n_floats, const double *floats) {
  op_case_t c;
  memset(&c, 0, sizeof c);
  c.name = name;
  c.n_in = n_in;
  c.n_out = n_out;
  for (uint32_t i = 0; i < n_in; i++) c.in[i] = in[i];
  for (uint32_t i = 0; i < n_out; i++) c.out[i] = out[i];
  c.n_ints = n_ints;
  for (uint32_t i = 0; i < n_ints; i++) c.ints[i] = ints[i];
  c.n_floats = n_floats;
  for (uint32_t i = 0; i < n_floats; i++) c.floats[i] = floats[i];
  return c;
}
#define IN(...) (sizeof((tspec_t[]){__VA_ARGS__}) / sizeof(tspec_t)), (tspec_t[]){__VA_ARGS__}
#define OUT(...) (sizeof((tspec_t[]){__VA_ARGS__}) / sizeof(tspec_t)), (tspec_t[]){__VA_ARGS__}
#define INTS(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define FLOATS(...) (sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__}
#define NOINTS 0, NULL
#define NOFLOATS 0, NULL


#define DT(x) OA_DTYPE_BIT(x)
#define DT_F32 DT(OA_DTYPE_FLOAT32)
#define DT_NUM (DT(OA_DTYPE_FLOAT32) | DT(OA_DTYPE_INT32) | DT(OA_DTYPE_INT64))

static int gen_unary(op_case_t *c) {
  int n = 0;
  c[n++] = mk("1-D [7]", IN(S(7)), OUT(S(7)), NOINTS, NOFLOATS);
  c[n++] = mk("2-D [4, 5]", IN(S(4, 5)), OUT(S(4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("4-D [2, 3, 4, 5]", IN(scaled(S(2, 3, 4, 5), 6.0f)), OUT(S(2, 3, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("0-d", IN(scalar0()), OUT(scalar0()), NOINTS, NOFLOATS);
  c[n++] = mk("size-1 dims [1, 1, 3]", IN(S(1, 1, 3)), OUT(S(1, 1, 3)), NOINTS, NOFLOATS);
  return n;
}

static int gen_relu(int32_t dtype, op_case_t *c) {
  (void)dtype;
  return gen_unary(c);
}

static int gen_sigmoid(int32_t dtype, op_case_t *c) {
  (void)dtype;
  return gen_unary(c);
}

static int gen_binary(int32_t dtype, op_case_t *c, int with_alpha) {
  int n = 0;
  int fl = dtype == OA_DTYPE_FLOAT32;
  double a1 = 1.0, a2 = fl ? 0.5 : 2.0, a3 = fl ? -2.0 : -3.0;
  uint32_t nf = with_alpha ? 1 : 0;
  c[n++] = mk("same shape [4, 5]", IN(S(4, 5), S(4, 5)), OUT(S(4, 5)), NOINTS, nf, (double[]){a1});
  c[n++] = mk("row broadcast [4, 5] x [5]", IN(S(4, 5), S(5)), OUT(S(4, 5)), NOINTS, nf, (double[]){a2});
  c[n++] = mk("both broadcast [2, 1, 4] x [3, 1]", IN(S(2, 1, 4), S(3, 1)), OUT(S(2, 3, 4)), NOINTS, nf, (double[]){a3});
  c[n++] = mk("0-d x [3, 4]", IN(scalar0(), S(3, 4)), OUT(S(3, 4)), NOINTS, nf, (double[]){a2});
  c[n++] = mk("[3, 1, 5] x [1, 4, 1], default alpha", IN(S(3, 1, 5), S(1, 4, 1)), OUT(S(3, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("4-D [2, 3, 4, 5] x [2, 1, 1, 5]", IN(S(2, 3, 4, 5), S(2, 1, 1, 5)), OUT(S(2, 3, 4, 5)), NOINTS, nf,
              (double[]){a1});
  return n;
}

static int gen_add(int32_t dtype, op_case_t *c) { return gen_binary(dtype, c, 1); }
static int gen_mul(int32_t dtype, op_case_t *c) { return gen_binary(dtype, c, 0); }

/* conv2d ints: stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, act; floats act_min, act_max */
static int gen_conv2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("plain 3x3 [1, 3, 8, 8] -> 4", IN(S(1, 3, 8, 8), weight(S(4, 3, 3, 3), 27)), OUT(S(1, 4, 6, 6)),
              INTS(1, 1, 0, 0, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("stride 2, pad 1, bias", IN(S(2, 3, 9, 9), weight(S(5, 3, 3, 3), 27), weight(S(5), 27)),
              OUT(S(2, 5, 5, 5)), INTS(2, 2, 1, 1, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("depthwise 3x3, groups 4", IN(S(1, 4, 7, 7), weight(S(4, 1, 3, 3), 9), weight(S(4), 9)),
              OUT(S(1, 4, 7, 7)), INTS(1, 1, 1, 1, 1, 1, 4, 0), NOFLOATS);
  c[n++] = mk("grouped, groups 2", IN(S(1, 4, 6, 6), weight(S(6, 2, 3, 3), 18)), OUT(S(1, 6, 4, 4)),
              INTS(1, 1, 0, 0, 1, 1, 2, 0), NOFLOATS);
  c[n++] = mk("dilation 2, pad 2", IN(S(1, 2, 9, 9), weight(S(3, 2, 3, 3), 18)), OUT(S(1, 3, 9, 9)),
              INTS(1, 1, 2, 2, 2, 2, 1, 0), NOFLOATS);
  c[n++] = mk("1x1, bias, fused relu", IN(S(1, 3, 6, 6), weight(S(4, 3, 1, 1), 3), weight(S(4), 3)),
              OUT(S(1, 4, 6, 6)), INTS(1, 1, 0, 0, 1, 1, 1, 1), NOFLOATS);
  c[n++] = mk("3x1, stride (2, 1), pad (1, 0), bias, fused clamp",
              IN(S(1, 3, 7, 5), weight(S(2, 3, 3, 1), 9), weight(S(2), 9)), OUT(S(1, 2, 4, 5)),
              INTS(2, 1, 1, 0, 1, 1, 1, 2), FLOATS(-0.25, 0.25));
  return n;
}

/* conv2d_winograd inputs input, weight [(tile+2)^2, ceil(K / block), C, block], bias?, addend?;
 * ints tile, pad_h, pad_w, act, block; floats act_min, act_max. Random transformed weights (the
 * kernels take any): the reference computes the same Winograd sums in double. F(4x4)'s output
 * transform scales by up to 8 in each direction, so its random weights are 8x smaller (real
 * transformed weights are too: G's rows 1 - 4 hold 1/6 .. 1/24) to keep float rounding within the
 * tolerance. */
static int gen_conv2d_winograd(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("F(4x4) [1, 8, 8, 8] -> 16, pad 1, bias",
              IN(S(1, 8, 8, 8), weight(S(36, 1, 8, 16), 72 * 64), weight(S(16), 72)), OUT(S(1, 16, 8, 8)),
              INTS(4, 1, 1, 0, 16), NOFLOATS);
  c[n++] = mk("F(2x2) [2, 5, 7, 6] -> 20, pad (0, 1), addend, fused relu",
              IN(S(2, 5, 7, 6), weight(S(16, 2, 5, 16), 45), absent(), S(2, 20, 5, 6)), OUT(S(2, 20, 5, 6)),
              INTS(2, 0, 1, 1, 16), NOFLOATS);
  c[n++] = mk("F(4x4) [1, 3, 5, 6] -> 4, pad 2, bias, addend, fused clamp",
              IN(S(1, 3, 5, 6), weight(S(36, 1, 3, 16), 27 * 64), weight(S(4), 27), S(1, 4, 7, 8)), OUT(S(1, 4, 7, 8)),
              INTS(4, 2, 2, 2, 16), FLOATS(-0.25, 0.25));
  return n;
}

/* conv2d_nhwc inputs input [N, H, W, C] ([N, C, H, W] with input_nchw), weight [kH, kW, C/g, O]
 * (block 0) or packed panels [ceil(O / block), kH, kW, C, block], bias?; ints stride, pad,
 * dilation (h, w), groups, act, block, input_nchw?; floats act_min, act_max */
static int gen_conv2d_nhwc(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("1x1 [1, 6, 8, 5] -> 20, packed in 16s, bias", IN(S(1, 6, 8, 5), weight(S(2, 1, 1, 5, 16), 5),
              weight(S(20), 5)), OUT(S(1, 6, 8, 20)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 16), NOFLOATS);
  c[n++] = mk("3x3 stride 2, pad 1, packed, bias, fused relu", IN(S(1, 9, 9, 3), weight(S(1, 3, 3, 3, 16), 27),
              weight(S(8), 27)), OUT(S(1, 5, 5, 8)), INTS(2, 2, 1, 1, 1, 1, 1, 1, 16), NOFLOATS);
  c[n++] = mk("depthwise 3x3 [1, 7, 7, 12], bias, fused clamp", IN(S(1, 7, 7, 12), weight(S(3, 3, 1, 12), 9),
              weight(S(12), 9)), OUT(S(1, 7, 7, 12)), INTS(1, 1, 1, 1, 1, 1, 12, 2, 0), FLOATS(-0.25, 0.25));
  c[n++] = mk("3x3 [2, 5, 5, 4] -> 6, weights [kH, kW, C, O]", IN(S(2, 5, 5, 4), weight(S(3, 3, 4, 6), 36)),
              OUT(S(2, 3, 3, 6)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 reading an NCHW input [1, 3, 9, 9] (input_nchw), packed, bias",
              IN(S(1, 3, 9, 9), weight(S(1, 3, 3, 3, 16), 27), weight(S(8), 27)), OUT(S(1, 5, 5, 8)),
              INTS(2, 2, 1, 1, 1, 1, 1, 0, 16, 1), NOFLOATS);
  return n;
}

/* mbconv_nhwc inputs input, expand weight? / bias?, dw weight [kH, kW, 1, E] / bias?, project
 * weight / bias? (expand and project packed in panels of `block`); ints dw stride, pad, dilation
 * (h, w), expand / dw / project act, block; floats min, max of each act */
static int gen_mbconv_nhwc(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[1, 9, 9, 8]: expand to 24, relu6, dw 3x3 pad 1, relu6, project to 8",
              IN(S(1, 9, 9, 8), weight(S(2, 1, 1, 8, 16), 8), weight(S(24), 8), weight(S(3, 3, 1, 24), 9),
                 weight(S(24), 9), weight(S(1, 1, 1, 24, 16), 24), weight(S(8), 24)),
              OUT(S(1, 9, 9, 8)), INTS(1, 1, 1, 1, 1, 1, 2, 2, 0, 16), FLOATS(0, 6, 0, 6, 0, 0));
  c[n++] = mk("[1, 10, 10, 16], no expansion, dw stride 2, relu, project to 12",
              IN(S(1, 10, 10, 16), absent(), absent(), weight(S(3, 3, 1, 16), 9), absent(),
                 weight(S(1, 1, 1, 16, 16), 16), absent()),
              OUT(S(1, 5, 5, 12)), INTS(2, 2, 1, 1, 1, 1, 0, 1, 0, 16), NOFLOATS);
  return n;
}

/* linear_packed inputs input [..., K], weight [ceil(N / block), K, block] (N: the output's last
 * dim), bias? [N]; ints act, block; floats act_min, act_max */
static int gen_linear_packed(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[40, 8] -> 20 features in panels of 16, bias", IN(S(40, 8), weight(S(2, 8, 16), 8), weight(S(20), 8)),
              OUT(S(40, 20)), INTS(0, 16), NOFLOATS);
  c[n++] = mk("3-D [2, 3, 32] -> 16, fused relu", IN(S(2, 3, 32), weight(S(1, 32, 16), 32)), OUT(S(2, 3, 16)),
              INTS(1, 16), NOFLOATS);
  return n;
}

/* linear ints: act; floats act_min, act_max */
static int gen_linear(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[3, 8] x [5, 8]", IN(S(3, 8), weight(S(5, 8), 8)), OUT(S(3, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("[4, 16] x [6, 16] + bias", IN(S(4, 16), weight(S(6, 16), 16), weight(S(6), 16)), OUT(S(4, 6)), INTS(0),
              NOFLOATS);
  c[n++] = mk("3-D [2, 3, 32], bias, fused relu", IN(S(2, 3, 32), weight(S(4, 32), 32), weight(S(4), 32)),
              OUT(S(2, 3, 4)), INTS(1), NOFLOATS);
  c[n++] = mk("[5, 64], bias, fused clamp", IN(S(5, 64), weight(S(7, 64), 64), weight(S(7), 64)), OUT(S(5, 7)),
              INTS(2), FLOATS(-0.3, 0.3));
  c[n++] = mk("1-D [8] x [3, 8]", IN(S(8), weight(S(3, 8), 8)), OUT(S(3)), NOINTS, NOFLOATS);
  return n;
}

static int gen_matmul(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 6] x [6, 5]", IN(S(4, 6), S(6, 5)), OUT(S(4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("batch [2, 4, 6] x [2, 6, 5]", IN(S(2, 4, 6), S(2, 6, 5)), OUT(S(2, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("broadcast [2, 1, 3, 4] x [5, 4, 2]", IN(S(2, 1, 3, 4), S(5, 4, 2)), OUT(S(2, 5, 3, 2)), NOINTS, NOFLOATS);
  c[n++] = mk("[1, 33] x [33, 17]", IN(S(1, 33), S(33, 17)), OUT(S(1, 17)), NOINTS, NOFLOATS);
  return n;
}

static int gen_softmax(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 10] dim 1", IN(scaled(S(4, 10), 4.0f)), OUT(S(4, 10)), INTS(1), NOFLOATS);
  c[n++] = mk("[2, 3, 5] dim 1", IN(scaled(S(2, 3, 5), 4.0f)), OUT(S(2, 3, 5)), INTS(1), NOFLOATS);
  c[n++] = mk("[2, 3, 5] dim 0", IN(scaled(S(2, 3, 5), 4.0f)), OUT(S(2, 3, 5)), INTS(0), NOFLOATS);
  c[n++] = mk("[7] dim 0", IN(scaled(S(7), 4.0f)), OUT(S(7)), INTS(0), NOFLOATS);
  c[n++] = mk("[3, 4, 6] dim 2", IN(scaled(S(3, 4, 6), 4.0f)), OUT(S(3, 4, 6)), INTS(2), NOFLOATS);
  return n;
}

/* max_pool2d ints: kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, ceil_mode */
static int gen_max_pool2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("2x2 stride 2", IN(S(1, 3, 8, 8)), OUT(S(1, 3, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 pad 1", IN(S(2, 2, 7, 7)), OUT(S(2, 2, 4, 4)), INTS(3, 3, 2, 2, 1, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 dilation 2", IN(S(1, 2, 9, 9)), OUT(S(1, 2, 5, 5)), INTS(3, 3, 1, 1, 0, 0, 2, 2, 0), NOFLOATS);
  c[n++] = mk("2x2 stride 2 ceil_mode", IN(S(1, 1, 7, 7)), OUT(S(1, 1, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 1), NOFLOATS);
  c[n++] = mk("3-D [3, 6, 6] 2x2", IN(S(3, 6, 6)), OUT(S(3, 3, 3)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  return n;
}

/* avg_pool2d ints: kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, ceil_mode, count_include_pad, divisor_override */
static int gen_avg_pool2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("2x2 stride 2", IN(S(1, 3, 8, 8)), OUT(S(1, 3, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 0, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 pad 1 count_include_pad", IN(S(1, 2, 7, 7)), OUT(S(1, 2, 7, 7)), INTS(3, 3, 1, 1, 1, 1, 0, 1, 0),
              NOFLOATS);
  c[n++] = mk("3x3 pad 1 exclude pad", IN(S(1, 2, 7, 7)), OUT(S(1, 2, 7, 7)), INTS(3, 3, 1, 1, 1, 1, 0, 0, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 ceil_mode", IN(S(1, 1, 8, 8)), OUT(S(1, 1, 4, 4)), INTS(3, 3, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  c[n++] = mk("divisor_override 3", IN(S(1, 2, 6, 6)), OUT(S(1, 2, 3, 3)), INTS(2, 2, 2, 2, 0, 0, 0, 1, 3), NOFLOATS);
  c[n++] = mk("3-D [2, 5, 5] 2x2 stride 1", IN(S(2, 5, 5)), OUT(S(2, 4, 4)), INTS(2, 2, 1, 1, 0, 0, 0, 1, 0), NOFLOATS);
  return n;
}

/* layer_norm inputs input, weight?, bias?; outputs out, mean?, rstd?; ints normalized_ndim; floats eps */
static int gen_layer_norm(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 16] weight + bias", IN(scaled(S(4, 16), 3.0f), S(16), S(16)), OUT(S(4, 16)), INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 3, 8] over 2 dims, no affine", IN(S(2, 3, 8)), OUT(S(2, 3, 8)), INTS(2), FLOATS(1e-5));
  c[n++] = mk("[3, 10] weight only, mean and rstd outputs", IN(S(3, 10), S(10)), OUT(S(3, 10), S(3, 1), S(3, 1)),
              INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 6] bias only", IN(S(2, 6), absent(), S(6)), OUT(S(2, 6)), INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 2, 3, 4] over 3 dims, eps 1e-3", IN(S(2, 2, 3, 4), S(2, 3, 4), S(2, 3, 4)), OUT(S(2, 2, 3, 4)), INTS(3),
              FLOATS(1e-3));
  return n;
}

/* ---- int8 ---------------------------------------------------------------------------------------
 * The int8 ops run the requantization rule of docs/quantization.md; a device must give the reference
 * kernels' bytes (tolerance 0), ties and saturation included. Inputs span the whole int8 range with
 * zero points at both ends; multipliers (int32) and shifts (int8) are constants of the file, from the
 * typical (multiplier in [2^23, 2^24) as the exporter writes them, or [2^30, 2^31), shift 30..41)
 * to the extremes (conv2d_q8 / linear_q8: shift 12 and 62, multiplier 0, 1 and 2^31 - 1, biases at
 * the rule's bound |bias * 2^shift| < 2^61; the other ops: shift 0 and 62), and "ties" cases
 * (multiplier 2^11 with shift 12, or 1 with shift 1) where every odd sum lies half-way between two
 * outputs. conv2d_q8 / linear_q8 biases are float32 output steps (format 1.4), here multiples of 2^-20
 * (off format 1.3's grid of 2^-12, and their addends bias * 2^shift round when shift < 20). Tensors carry their quantization parameters
 * (oa_tensor_t.quant) as the executor hands them over. */

#define M30 ((int64_t)1 << 30)
#define MMAX (((int64_t)1 << 31) - 1)
#define M23 ((int64_t)1 << 23)
#define M24 (((int64_t)1 << 24) - 1)
#define BIAS_ONE ((int64_t)1 << 20)     /* one output step in biasv's 2^-20 steps */
#define STEPS(k) ((int64_t)(k) * BIAS_ONE) /* k output steps */
#define BIAS_MAX62 (BIAS_ONE / 2 - 1)   /* the largest bias with shift 62 (addend below 2^61) */

static tspec_t as_dt(tspec_t t, int32_t dtype) {
  t.dtype = dtype + 1;
  return t;
}
static tspec_t ranged(tspec_t t, int64_t lo, int64_t hi) {
  t.ranged = 1;
  t.lo = lo;
  t.hi = hi;
  return t;
}
static tspec_t cst(tspec_t t) {
  t.constant = 1;
  return t;
}
static tspec_t qpt(tspec_t t, float scale, int64_t zp) { /* per-tensor parameters */
  t.quant = 1;
  t.qscale = scale;
  t.qzp = zp;
  return t;
}
static tspec_t qpc(tspec_t t) { /* per-channel (axis 0) parameters */
  t.quant = 2;
  return t;
}
static tspec_t special(tspec_t t, float step) {
  t.special = 1;
  t.scale = step;
  return t;
}
/* an int8 weight (symmetric: -127..127), a constant */
static tspec_t w8(tspec_t t) { return cst(ranged(t, -127, 127)); }
/* an int32 constant vector of n values in [lo, hi] (bias, multiplier) */
static tspec_t i32v(int64_t n, int64_t lo, int64_t hi) { return cst(ranged(as_dt(S(n), OA_DTYPE_INT32), lo, hi)); }
/* a float32 constant vector of n biases: whole numbers of 2^-20 output steps in [lo, hi] (the
 * conv2d_q8 / linear_q8 bias: float32 output steps since file format 1.3, any value since 1.4) */
static tspec_t biasv(int64_t n, int64_t lo, int64_t hi) {
  tspec_t t = cst(ranged(as_dt(S(n), OA_DTYPE_FLOAT32), lo, hi));
  t.scale = 1.0f / (float)BIAS_ONE;
  return t;
}
/* an int8 constant vector of n values in [lo, hi] (shift: int8 since file format 1.2) */
static tspec_t i8v(int64_t n, int64_t lo, int64_t hi) { return cst(ranged(as_dt(S(n), OA_DTYPE_INT8), lo, hi)); }

/* conv2d_q8 inputs input, weight, bias?, multiplier, shift; ints stride, pad, dilation (h, w), groups,
 * input_zp, output_zp, act_min, act_max; floats input_scale, output_scale */
static int gen_conv2d_q8(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("3x3 [1, 3, 8, 8] -> 4, per-channel requantization, bias",
              IN(qpt(S(1, 3, 8, 8), 0.02f, -3), qpc(w8(S(4, 3, 3, 3))), biasv(4, -STEPS(40), STEPS(40)),
                 i32v(4, M23, M24), i8v(4, 30, 34)),
              OUT(qpt(S(1, 4, 6, 6), 0.05f, 4)), INTS(1, 1, 0, 0, 1, 1, 1, -3, 4, -128, 127), FLOATS(0.02, 0.05));
  c[n++] = mk("stride 2, pad 1, batch 2, one multiplier, zero points -128",
              IN(qpt(S(2, 3, 9, 9), 0.1f, -128), qpt(w8(S(5, 3, 3, 3)), 0.01f, 0), absent(), i32v(1, M30, MMAX),
                 i8v(1, 38, 40)),
              OUT(qpt(S(2, 5, 5, 5), 0.2f, -128)), INTS(2, 2, 1, 1, 1, 1, 1, -128, -128, -128, 127), FLOATS(0.1, 0.2));
  c[n++] = mk("depthwise 3x3, groups 4, bias, fused relu (act_min = output_zp)",
              IN(S(1, 4, 7, 7), w8(S(4, 1, 3, 3)), biasv(4, -STEPS(30), STEPS(30)), i32v(4, M23, M24), i8v(4, 27, 31)),
              OUT(S(1, 4, 7, 7)), INTS(1, 1, 1, 1, 1, 1, 4, 10, -20, -20, 127), NOFLOATS);
  c[n++] = mk("grouped 2, dilation 2, pad 2, input_zp 127, clamp [-60, 60]",
              IN(S(1, 4, 9, 9), w8(S(6, 2, 3, 3)), biasv(6, -STEPS(60), STEPS(60)), i32v(6, M30, MMAX), i8v(6, 36, 40)),
              OUT(S(1, 6, 9, 9)), INTS(1, 1, 2, 2, 2, 2, 2, 127, 0, -60, 60), NOFLOATS);
  c[n++] = mk("ties: multiplier 2^11, shift 12 (every odd sum is half-way)",
              IN(ranged(S(1, 2, 6, 6), -20, 20), cst(ranged(S(3, 2, 3, 3), -1, 1)), absent(), i32v(1, 2048, 2048),
                 i8v(1, 12, 12)),
              OUT(S(1, 3, 4, 4)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 0, -128, 127), NOFLOATS);
  c[n++] = mk("shift 62, multiplier 2^31 - 1, biases at the bound 2^11",
              IN(S(1, 2, 5, 5), w8(S(3, 2, 3, 3)), biasv(3, -BIAS_MAX62, BIAS_MAX62), i32v(3, MMAX, MMAX), i8v(3, 62, 62)),
              OUT(S(1, 3, 3, 3)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 0, -128, 127), NOFLOATS);
  c[n++] = mk("shift 12, multipliers 0 and 1: the biases, up to the clamp [-100, 100]",
              IN(S(1, 2, 5, 5), w8(S(3, 2, 3, 3)), biasv(3, -STEPS(140), STEPS(140)), i32v(3, 0, 1), i8v(3, 12, 12)),
              OUT(S(1, 3, 3, 3)), INTS(1, 1, 0, 0, 1, 1, 1, -7, 5, -100, 100), NOFLOATS);
  c[n++] = mk("1x1 [2, 16, 5, 5] -> 8, stride (1, 2)",
              IN(S(2, 16, 5, 5), qpc(w8(S(8, 16, 1, 1))), biasv(8, -STEPS(20), STEPS(20)), i32v(8, M30, MMAX), i8v(8, 35, 39)),
              OUT(S(2, 8, 5, 3)), INTS(1, 2, 0, 0, 1, 1, 1, -1, 3, -128, 127), NOFLOATS);
  return n;
}

/* linear_q8 inputs input [..., K], weight [N, K], bias?, multiplier, shift; ints input_zp, output_zp,
 * act_min, act_max; floats input_scale, output_scale */
static int gen_linear_q8(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[3, 8] x [5, 8], per-channel requantization, bias",
              IN(qpt(S(3, 8), 0.05f, 2), qpc(w8(S(5, 8))), biasv(5, -STEPS(20), STEPS(20)), i32v(5, M23, M24), i8v(5, 28, 32)),
              OUT(qpt(S(3, 5), 0.1f, -1)), INTS(2, -1, -128, 127), FLOATS(0.05, 0.1));
  c[n++] = mk("3-D [2, 3, 32], one multiplier, input_zp -128, clamp [0, 127]",
              IN(S(2, 3, 32), w8(S(4, 32)), biasv(4, -STEPS(60), STEPS(60)), i32v(1, M30, MMAX), i8v(1, 38, 40)),
              OUT(S(2, 3, 4)), INTS(-128, 0, 0, 127), NOFLOATS);
  c[n++] = mk("1-D [16] x [3, 16], no bias, input_zp 127",
              IN(S(16), w8(S(3, 16)), absent(), i32v(3, M30, MMAX), i8v(3, 36, 40)), OUT(S(3)), INTS(127, 0, -128, 127),
              NOFLOATS);
  c[n++] = mk("ties: multiplier 2^11, shift 12",
              IN(ranged(S(4, 6), -20, 20), cst(ranged(S(5, 6), -1, 1)), absent(), i32v(1, 2048, 2048), i8v(1, 12, 12)),
              OUT(S(4, 5)), INTS(0, 0, -128, 127), NOFLOATS);
  c[n++] = mk("shift 62, multiplier 2^31 - 1, biases at the bound 2^11",
              IN(S(2, 8), w8(S(3, 8)), biasv(3, -BIAS_MAX62, BIAS_MAX62), i32v(3, MMAX, MMAX), i8v(3, 62, 62)), OUT(S(2, 3)),
              INTS(5, -5, -128, 127), NOFLOATS);
  c[n++] = mk("[3, 300] x [2, 300], output_zp 127, clamp [-128, 127]",
              IN(S(3, 300), w8(S(2, 300)), biasv(2, -STEPS(300), STEPS(300)), i32v(2, M30, MMAX), i8v(2, 38, 41)),
              OUT(S(3, 2)),
              INTS(-9, 127, -128, 127), NOFLOATS);
  return n;
}

/* add_q8 ints self_zp, other_zp, output_zp, self_multiplier, other_multiplier, shift, act_min, act_max;
 * floats self_scale, other_scale, output_scale */
static int gen_add_q8(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("same shape [4, 5]", IN(qpt(S(4, 5), 0.02f, 3), qpt(S(4, 5), 0.03f, -7)), OUT(qpt(S(4, 5), 0.04f, 1)),
              INTS(3, -7, 1, M30, 3 * (M30 / 4), 31, -128, 127), FLOATS(0.02, 0.03, 0.04));
  c[n++] = mk("row broadcast [4, 5] x [5], zero points -128 and 127", IN(S(4, 5), S(5)), OUT(S(4, 5)),
              INTS(-128, 127, 0, M30 / 2, M30 / 2, 31, -128, 127), NOFLOATS);
  c[n++] = mk("both broadcast [2, 1, 4] x [3, 1], fused relu", IN(S(2, 1, 4), S(3, 1)), OUT(S(2, 3, 4)),
              INTS(0, 0, -10, M30, MMAX, 32, -10, 127), NOFLOATS);
  c[n++] = mk("0-d x [3, 4]", IN(scalar0(), S(3, 4)), OUT(S(3, 4)), INTS(5, -5, 0, MMAX, M30, 32, -128, 127), NOFLOATS);
  c[n++] = mk("ties: multipliers 1, shift 1", IN(S(6, 7), S(6, 7)), OUT(S(6, 7)), INTS(0, 0, 0, 1, 1, 1, -128, 127),
              NOFLOATS);
  c[n++] = mk("shift 62, multipliers 2^31 - 1", IN(S(3, 5), S(3, 5)), OUT(S(3, 5)),
              INTS(-128, 127, 0, MMAX, MMAX, 62, -128, 127), NOFLOATS);
  c[n++] = mk("shift 0, multipliers 0 and 2^31 - 1, clamp [-3, 3]", IN(S(3, 5), S(3, 5)), OUT(S(3, 5)),
              INTS(1, 2, 0, 0, MMAX, 0, -3, 3), NOFLOATS);
  c[n++] = mk("4-D [2, 3, 4, 5] x [2, 1, 1, 5]", IN(S(2, 3, 4, 5), S(2, 1, 1, 5)), OUT(S(2, 3, 4, 5)),
              INTS(-1, 1, 2, 1500000000, 700000000, 31, -128, 127), NOFLOATS);
  return n;
}

/* mul_q8 ints self_zp, other_zp, output_zp, multiplier, shift, act_min, act_max; floats the scales */
static int gen_mul_q8(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("same shape [4, 5]", IN(qpt(S(4, 5), 0.02f, 5), qpt(S(4, 5), 0.03f, -5)), OUT(qpt(S(4, 5), 0.05f, 0)),
              INTS(5, -5, 0, M30 + 12345, 37, -128, 127), FLOATS(0.02, 0.03, 0.05));
  c[n++] = mk("row broadcast [4, 5] x [5], zero points -128 and 127", IN(S(4, 5), S(5)), OUT(S(4, 5)),
              INTS(-128, 127, 3, MMAX, 39, -128, 127), NOFLOATS);
  c[n++] = mk("both broadcast [2, 1, 4] x [3, 1], fused relu", IN(S(2, 1, 4), S(3, 1)), OUT(S(2, 3, 4)),
              INTS(0, 0, -10, M30, 36, -10, 127), NOFLOATS);
  c[n++] = mk("0-d x [3, 4]", IN(scalar0(), S(3, 4)), OUT(S(3, 4)), INTS(2, -2, 1, 1700000000, 37, -128, 127), NOFLOATS);
  c[n++] = mk("ties: multiplier 1, shift 1", IN(ranged(S(6, 7), -15, 15), ranged(S(6, 7), -15, 15)), OUT(S(6, 7)),
              INTS(0, 0, 0, 1, 1, -128, 127), NOFLOATS);
  c[n++] = mk("shift 62, multiplier 2^31 - 1", IN(S(3, 5), S(3, 5)), OUT(S(3, 5)), INTS(-128, 127, 0, MMAX, 62, -128, 127),
              NOFLOATS);
  c[n++] = mk("shift 0, multiplier 1, clamp [-50, 50]", IN(S(3, 5), S(3, 5)), OUT(S(3, 5)), INTS(1, 2, 0, 1, 0, -50, 50),
              NOFLOATS);
  return n;
}

/* mean_q8 ints input_zp, output_zp, multiplier, shift, act_min, act_max, keepdim, dims...; floats the scales */
static int gen_mean_q8(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("global average [1, 8, 4, 4] over (2, 3), keepdim: exact 1/16 (half-way sums)",
              IN(qpt(S(1, 8, 4, 4), 0.1f, 3)), OUT(qpt(S(1, 8, 1, 1), 0.1f, -2)),
              INTS(3, -2, M30, 34, -128, 127, 1, 2, 3), FLOATS(0.1, 0.1));
  c[n++] = mk("[2, 3, 5] over dim 1, zero points -128", IN(S(2, 3, 5)), OUT(S(2, 5)),
              INTS(-128, -128, 1431655765, 32, -128, 127, 0, 1), NOFLOATS);
  c[n++] = mk("[4, 6] over every dim (no dims listed) -> 0-d", IN(S(4, 6)), OUT(scalar0()),
              INTS(0, 7, 1789569707, 32, -128, 127, 0), NOFLOATS);
  c[n++] = mk("[3, 4, 5] over dims (0, 2), input_zp 127, clamp [-20, 20]", IN(S(3, 4, 5)), OUT(S(4)),
              INTS(127, 0, 1431655765, 33, -20, 20, 0, 0, 2), NOFLOATS);
  c[n++] = mk("ties: multiplier 1, shift 1, [2, 7] over dim 0", IN(S(2, 7)), OUT(S(7)),
              INTS(0, 0, 1, 1, -128, 127, 0, 0), NOFLOATS);
  c[n++] = mk("shift 62, multiplier 2^31 - 1", IN(S(3, 9)), OUT(S(3, 1)), INTS(-128, 0, MMAX, 62, -128, 127, 1, 1),
              NOFLOATS);
  return n;
}

/* quantize (float32 in) ints zero_point, qmin, qmax; floats scale */
static int gen_quantize(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 5] -> int8, scale 0.05, zero point 3", IN(scaled(S(4, 5), 8.0f)),
              OUT(qpt(as_dt(S(4, 5), OA_DTYPE_INT8), 0.05f, 3)), INTS(3, -128, 127), FLOATS(0.05));
  c[n++] = mk("[2, 3, 4] -> uint8, zero point 128", IN(scaled(S(2, 3, 4), 3.0f)),
              OUT(qpt(as_dt(S(2, 3, 4), OA_DTYPE_UINT8), 0.02f, 128)), INTS(128, 0, 255), FLOATS(0.02));
  c[n++] = mk("NaN, +-inf, -0.0, +-3e38 and half-way points -> int8, scale 0.25", IN(special(S(40), 0.25f)),
              OUT(as_dt(S(40), OA_DTYPE_INT8)), INTS(-1, -128, 127), FLOATS(0.25));
  c[n++] = mk("the same -> uint8, scale 2^-10, zero point 0", IN(special(S(30), 1.0f / 1024.0f)),
              OUT(as_dt(S(30), OA_DTYPE_UINT8)), INTS(0, 0, 255), FLOATS(1.0 / 1024.0));
  c[n++] = mk("scale 1e-30 (everything saturates), range [-100, 100]", IN(S(3, 4)), OUT(as_dt(S(3, 4), OA_DTYPE_INT8)),
              INTS(-5, -100, 100), FLOATS(1e-30));
  c[n++] = mk("scale 1e30, zero point -128", IN(scaled(S(3, 4), 1e30f)), OUT(as_dt(S(3, 4), OA_DTYPE_INT8)),
              INTS(-128, -128, 127), FLOATS(1e30));
  c[n++] = mk("0-d -> uint8", IN(scaled(scalar0(), 2.0f)), OUT(as_dt(scalar0(), OA_DTYPE_UINT8)), INTS(255, 0, 255),
              FLOATS(0.01));
  return n;
}

/* dequantize (int8 or uint8 in, float32 out) ints zero_point; floats scale */
static int gen_dequantize(int32_t dtype, op_case_t *c) {
  int n = 0, u8 = dtype == OA_DTYPE_UINT8;
  c[n++] = mk("[4, 5], scale 0.05", IN(qpt(S(4, 5), 0.05f, u8 ? 128 : 3)), OUT(as_dt(S(4, 5), OA_DTYPE_FLOAT32)),
              INTS(u8 ? 128 : 3), FLOATS(0.05));
  c[n++] = mk("[2, 3, 4], lowest zero point, scale 1e-30", IN(S(2, 3, 4)), OUT(as_dt(S(2, 3, 4), OA_DTYPE_FLOAT32)),
              INTS(u8 ? 0 : -128), FLOATS(1e-30));
  c[n++] = mk("[7, 3], highest zero point, scale 3e38 (some results overflow to -inf)", IN(S(7, 3)),
              OUT(as_dt(S(7, 3), OA_DTYPE_FLOAT32)), INTS(u8 ? 255 : 127), FLOATS(3e38));
  c[n++] = mk("0-d, scale 0.1", IN(scalar0()), OUT(as_dt(scalar0(), OA_DTYPE_FLOAT32)), INTS(u8 ? 7 : -7), FLOATS(0.1));
  return n;
}

static const gen_t k_gens[] = {
    {"relu", DT_NUM, 0, gen_relu},
    {"sigmoid", DT_F32, 0, gen_sigmoid},
    {"add", DT_NUM, 0, gen_add},
    {"mul", DT_NUM | DT(OA_DTYPE_BOOL), 0, gen_mul},
    {"conv2d", DT_F32, 1, gen_conv2d},
    {"conv2d_winograd", DT_F32, 1, gen_conv2d_winograd},
    {"conv2d_nhwc", DT_F32, 1, gen_conv2d_nhwc},
    {"mbconv_nhwc", DT_F32, 1, gen_mbconv_nhwc},
    {"linear", DT_F32, 1, gen_linear},
    {"linear_packed", DT_F32, 1, gen_linear_packed},
    {"matmul", DT_F32, 1, gen_matmul},
    {"softmax", DT_F32, 1, gen_softmax},
    {"max_pool2d", DT_NUM | DT(OA_DTYPE_INT8) | DT(OA_DTYPE_UINT8), 0, gen_max_pool2d},
    {"avg_pool2d", DT_F32, 1, gen_avg_pool2d},
    {"layer_norm", DT_F32, 1, gen_layer_norm},
    {"conv2d_q8", DT(OA_DTYPE_INT8), TOL_EXACT, gen_conv2d_q8},
    {"linear_q8", DT(OA_DTYPE_INT8), TOL_EXACT, gen_linear_q8},
    {"add_q8", DT(OA_DTYPE_INT8), TOL_EXACT, gen_add_q8},
    {"mul_q8", DT(OA_DTYPE_INT8), TOL_EXACT, gen_mul_q8},
    {"mean_q8", DT(OA_DTYPE_INT8), TOL_EXACT, gen_mean_q8},
    {"quantize", DT_F32, TOL_EXACT, gen_quantize},
    {"dequantize", DT(OA_DTYPE_INT8) | DT(OA_DTYPE_UINT8), TOL_EXACT, gen_dequantize},
};
#define N_GENS (sizeof k_gens / sizeof k_gens[0])

const gen_t *find_gen(const char *op) {
  for (size_t i = 0; i < N_GENS; i++)
    if (strcmp(k_gens[i].op, op) == 0) return &k_gens[i];
  return NULL;
}

