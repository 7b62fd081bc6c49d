/* Reference convolutions: conv2d (groups, depthwise, dilation, fused act), its channels-last form
 * conv2d_nhwc, and conv_transpose2d.
 *
 * conv2d accumulates one output plane at a time: for each input channel and kernel tap, a
 * weight times a run of an input row is added to a run of an accumulator row (contiguous for
 * stride 1), with the valid output row/column ranges of every tap precomputed, so there is no
 * im2col buffer and no bounds test in the inner loop. Taps of up to CONV_BLOCK input channels
 * are summed in float, and those partial sums in double. conv_transpose2d does the same with
 * input rows scattered into accumulator rows. PyTorch sums in float in another order: tests
 * compare with rtol 1e-4 / atol 1e-5. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* Arguments are bounded so every index product below fits in int64 (shapes are <= 2^50). */
#define CONV_ARG_MAX ((int64_t)1 << 30)
#define CONV_BIG ((int64_t)1 << 62)
/* input channels whose taps are summed in float before the partial sum joins the double total */
#define CONV_BLOCK 16
/* widest weight panel of conv2d_nhwc */
#define CONV_MAX_BLOCK 1024

/* plan->params layout (shared by conv2d and conv_transpose2d) */
enum {
  P_N, P_C, P_H, P_W, P_O, P_OH, P_OW, P_KH, P_KW, P_SH, P_SW, P_PH, P_PW, P_DH, P_DW, P_G, P_HAS_BIAS, P_ACT,
  P_NHWC, P_BLOCK, P_IN_NCHW
};

/* Where the dims are: conv2d's NCHW input and [O, C/g, kH, kW] weight, conv_transpose2d's
 * [C, O/g, kH, kW] weight, conv2d_nhwc's NHWC input and [kH, kW, C/g, O] weight. */
typedef enum { LAYOUT_NCHW, LAYOUT_TRANSPOSED, LAYOUT_NHWC } conv_layout_t;

/* ints[i] / floats[i], or 0 when the instruction stops before it; i is an OA_ARG_* index */
static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static double farg(const oa_op_call_t *call, uint32_t i) { return i < call->n_floats ? call->floats[i] : 0.0; }

/* conv_common reads the three ops' shared leading ints (stride, padding, dilation, groups) by
 * conv2d's names, conv2d_check the act and act_min / act_max of conv2d and conv2d_nhwc: the
 * layouts in opset.py must agree. */
#define CONV_SAME_LEAD(OP)                                                                                        \
  (OA_ARG_##OP##_STRIDE_H == OA_ARG_CONV2D_STRIDE_H && OA_ARG_##OP##_STRIDE_W == OA_ARG_CONV2D_STRIDE_W &&        \
   OA_ARG_##OP##_PAD_H == OA_ARG_CONV2D_PAD_H && OA_ARG_##OP##_PAD_W == OA_ARG_CONV2D_PAD_W &&                    \
   OA_ARG_##OP##_DILATION_H == OA_ARG_CONV2D_DILATION_H && OA_ARG_##OP##_DILATION_W == OA_ARG_CONV2D_DILATION_W && \
   OA_ARG_##OP##_GROUPS == OA_ARG_CONV2D_GROUPS)
_Static_assert(CONV_SAME_LEAD(CONV2D_NHWC) && CONV_SAME_LEAD(CONV_TRANSPOSE2D),
               "conv2d_nhwc / conv_transpose2d no longer share conv2d's stride, padding, dilation, groups layout");
_Static_assert(OA_ARG_CONV2D_NHWC_ACT == OA_ARG_CONV2D_ACT && OA_ARG_CONV2D_NHWC_ACT_MIN == OA_ARG_CONV2D_ACT_MIN &&
                   OA_ARG_CONV2D_NHWC_ACT_MAX == OA_ARG_CONV2D_ACT_MAX,
               "conv2d_nhwc no longer shares conv2d's act, act_min, act_max layout");
/* the stride .. dilation arguments as one run, in the order of conv_common's names[] */
_Static_assert(OA_ARG_CONV2D_STRIDE_W == OA_ARG_CONV2D_STRIDE_H + 1 &&
                   OA_ARG_CONV2D_PAD_H == OA_ARG_CONV2D_STRIDE_H + 2 &&
                   OA_ARG_CONV2D_PAD_W == OA_ARG_CONV2D_STRIDE_H + 3 &&
                   OA_ARG_CONV2D_DILATION_H == OA_ARG_CONV2D_STRIDE_H + 4 &&
                   OA_ARG_CONV2D_DILATION_W == OA_ARG_CONV2D_STRIDE_H + 5,
               "conv2d: stride, padding, dilation are no longer one run of ints in opset.py");

/* a * b for non-negative operands, saturated at CONV_BIG. */
static int64_t smul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > CONV_BIG / b) return CONV_BIG;
  return a * b;
}

/* Checks shared by the three ops: arity, dtypes, ranks, the int arguments, bias. Fills the
 * common params. */
static oa_status_t conv_common(const oa_op_call_t *call, oa_op_plan_t *plan, uint32_t n_ints, conv_layout_t layout,
                               oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 3, 1, n_ints, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, w, x, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, x, "output 0", diag))) return st;
  /* conv2d_nhwc with block > 0: weights pre-packed in panels [ceil(O / block), kH, kW, C, block] */
  const int64_t block = layout == LAYOUT_NHWC ? iarg(call, OA_ARG_CONV2D_NHWC_BLOCK) : 0;
  if (block < 0 || block > CONV_MAX_BLOCK)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument block = %lld is out of range (expected 0 to %lld)",
                        (long long)block, (long long)CONV_MAX_BLOCK);
  /* conv2d_nhwc with input_nchw = 1: the input is [N, C, H, W] (a network's image input read in
   * place instead of permuted); the weights and the output stay channels-last */
  const int64_t in_nchw = layout == LAYOUT_NHWC ? iarg(call, OA_ARG_CONV2D_NHWC_INPUT_NCHW) : 0;
  if (in_nchw < 0 || in_nchw > 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument input_nchw = %lld is out of range (expected 0 to 1)",
                        (long long)in_nchw);
  if ((st = oa_check_ndim(call, x, 4, 4, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, block ? 5 : 4, block ? 5 : 4, "input 1 (weight)", diag))) return st;
  if (block && (st = oa_check_ndim(call, out, 4, 4, "output 0", diag))) return st;
  static const char *const names[] = {"stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w"};
  for (uint32_t i = 0; i < 6; i++) {
    const uint32_t a = (uint32_t)OA_ARG_CONV2D_STRIDE_H + i;
    int64_t lo = (a == OA_ARG_CONV2D_PAD_H || a == OA_ARG_CONV2D_PAD_W) ? 0 : 1;
    if ((st = oa_check_int_arg(call, a, names[i], lo, CONV_ARG_MAX, diag))) return st;
  }
  const int nhwc = layout == LAYOUT_NHWC, x_nhwc = nhwc && !in_nchw;
  const int64_t c = x->shape[x_nhwc ? 3 : 1], g = iarg(call, OA_ARG_CONV2D_GROUPS);
  /* weight dims: output channels (conv), input channels per group, kernel rows and columns */
  const int wd_o = nhwc ? 3 : 0, wd_cg = nhwc ? 2 + (block > 0) : 1, wd_kh = nhwc ? (block > 0) : 2;
  const int wd_kw = nhwc ? 1 + (block > 0) : 3;
  if (g < 1 || g > (c > 0 ? c : 1))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument groups = %lld is out of range (expected 1 to %lld)",
                        (long long)g, (long long)(c > 0 ? c : 1));
  if (c % g)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument groups = %lld does not divide the %lld input channels of input 0 ('%s')", (long long)g,
                        (long long)c, x->name);
  char s[128];
  int64_t o;
  if (block) {
    o = out->shape[3];
    if (g != 1)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument block = %lld needs groups = 1 (received %lld): grouped weights are not packed",
                          (long long)block, (long long)g);
    if (w->shape[4] != block || w->shape[0] != (o + block - 1) / block)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (weight) ('%s'): expected [%lld, kH, kW, C, %lld] (panels of block = %lld of %lld "
                          "output channels), received %s",
                          w->name, (long long)((o + block - 1) / block), (long long)block, (long long)block,
                          (long long)o, oa_shape_str(w, s, sizeof s));
  }
  if (layout != LAYOUT_TRANSPOSED) {
    if (!block) o = w->shape[wd_o];
    if (w->shape[wd_cg] != c / g)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (weight) ('%s'): expected %lld input channels per group (dim %d) for %lld channels "
                          "and %lld groups, received %s",
                          w->name, (long long)(c / g), wd_cg, (long long)c, (long long)g, oa_shape_str(w, s, sizeof s));
    if (o % g)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (weight) ('%s'): %lld output channels are not divisible by groups = %lld", w->name,
                          (long long)o, (long long)g);
  } else {
    if (w->shape[0] != c)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (weight) ('%s'): expected %lld input channels (dim 0), received %s", w->name,
                          (long long)c, oa_shape_str(w, s, sizeof s));
    o = smul(w->shape[1], g);
  }
  if (b) {
    if ((st = oa_check_same_dtype(call, b, x, "input 2 (bias)", diag))) return st;
    if ((st = oa_check_shape(call, b, &o, 1, "input 2 (bias)", diag))) return st;
  }
  int64_t kh = w->shape[wd_kh], kw = w->shape[wd_kw];
  if (kh < 1 || kw < 1 || kh > CONV_ARG_MAX || kw > CONV_ARG_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (weight) ('%s'): kernel size %s is out of range",
                        w->name, oa_shape_str(w, s, sizeof s));
  plan->params[P_N] = x->shape[0];
  plan->params[P_C] = c;
  plan->params[P_H] = x->shape[x_nhwc ? 1 : 2];
  plan->params[P_W] = x->shape[x_nhwc ? 2 : 3];
  plan->params[P_NHWC] = nhwc;
  plan->params[P_IN_NCHW] = in_nchw;
  plan->params[P_BLOCK] = block;
  plan->params[P_O] = o;
  plan->params[P_KH] = kh;
  plan->params[P_KW] = kw;
  plan->params[P_SH] = iarg(call, OA_ARG_CONV2D_STRIDE_H);
  plan->params[P_SW] = iarg(call, OA_ARG_CONV2D_STRIDE_W);
  plan->params[P_PH] = iarg(call, OA_ARG_CONV2D_PAD_H);
  plan->params[P_PW] = iarg(call, OA_ARG_CONV2D_PAD_W);
  plan->params[P_DH] = iarg(call, OA_ARG_CONV2D_DILATION_H);
  plan->params[P_DW] = iarg(call, OA_ARG_CONV2D_DILATION_W);
  plan->params[P_G] = g;
  plan->params[P_HAS_BIAS] = b != NULL;
  return OA_OK;
}

/* Output shape check; scratch = `words` 8-byte words (saturated at CONV_BIG by smul). */
static oa_status_t check_out(const oa_op_call_t *call, oa_op_plan_t *plan, int64_t words, oa_diag_t *diag) {
  const oa_tensor_t *out = call->outputs[0];
  const int64_t *p = plan->params;
  int64_t want[4] = {p[P_N], p[P_O], p[P_OH], p[P_OW]};
  if (p[P_NHWC]) {
    want[1] = p[P_OH];
    want[2] = p[P_OW];
    want[3] = p[P_O];
  }
  oa_status_t st = oa_check_shape(call, out, want, 4, "output 0", diag);
  if (st) return st;
  if (words >= CONV_BIG / 2 || (uint64_t)words > (uint64_t)(SIZE_MAX / sizeof(double)))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "output plane %lld x %lld is too large for this platform",
                        (long long)plan->params[P_OH], (long long)plan->params[P_OW]);
  plan->scratch_bytes = (size_t)words * sizeof(double);
  return OA_OK;
}

/* ---- conv2d ---------------------------------------------------------------------------------- */

/* Output size of a convolution along one dim; -1 when the dilated kernel exceeds the padded input. */
static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t span = smul(d, k - 1) + 1, padded = in + 2 * p;
  if (span > padded) return -1;
  return (padded - span) / s + 1;
}

/* conv2d and conv2d_nhwc: arguments and output size */
static oa_status_t conv2d_check(const oa_op_call_t *call, oa_op_plan_t *plan, conv_layout_t layout,
                                oa_diag_t *diag) {
  oa_status_t st;
  if ((st = conv_common(call, plan, 7, layout, diag))) return st;
  int64_t act = iarg(call, OA_ARG_CONV2D_ACT);
  if (act < 0 || act > 2)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "argument act = %lld is not a known activation (0, 1, 2)",
                        (long long)act);
  plan->params[P_ACT] = act;
  const int64_t *p = plan->params;
  int64_t oh = conv_out_size(p[P_H], p[P_KH], p[P_SH], p[P_PH], p[P_DH]);
  int64_t ow = conv_out_size(p[P_W], p[P_KW], p[P_SW], p[P_PW], p[P_DW]);
  if (oh < 1 || ow < 1) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): padded input %s (pad %lld, %lld) is smaller than the dilated kernel "
                        "(%lld x %lld, dilation %lld, %lld)",
                        call->inputs[0]->name, oa_shape_str(call->inputs[0], s, sizeof s), (long long)p[P_PH],
                        (long long)p[P_PW], (long long)p[P_KH], (long long)p[P_KW], (long long)p[P_DH],
                        (long long)p[P_DW]);
  }
  plan->params[P_OH] = oh;
  plan->params[P_OW] = ow;
  return OA_OK;
}

oa_status_t oa_ref_conv2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = conv2d_check(call, plan, LAYOUT_NCHW, diag))) return st;
  const int64_t *p = plan->params;
  int64_t oh = p[P_OH], ow = p[P_OW];
  /* a double and a float accumulator per output element of one plane, then [lo, hi) per kernel
   * row and column (see conv2d_run) */
  int64_t plane = smul(oh, ow);
  return check_out(call, plan, plane + (plane + 1) / 2 + 2 * (p[P_KH] + p[P_KW]), diag);
}

/* Range [lo, hi) of output positions o (o in [0, n_out)) whose input position o * s + off lies in
 * [0, n_in). */
static void tap_range(int64_t n_out, int64_t n_in, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / s + 1;
  if (b > n_out) b = n_out;
  *lo = a;
  *hi = b > a ? b : a;
}

oa_status_t oa_ref_conv2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_batch = p[P_N], c = p[P_C], h = p[P_H], wd = p[P_W], o = p[P_O], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t kh_n = p[P_KH], kw_n = p[P_KW], sh = p[P_SH], sw = p[P_SW], ph = p[P_PH], pw = p[P_PW];
  const int64_t dh = p[P_DH], dw = p[P_DW], groups = p[P_G], act = p[P_ACT];
  const int64_t cg = c / groups, og = o / groups, plane = oh_n * ow_n;
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const float *bias = p[P_HAS_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  /* scratch: the double accumulator plane, a float partial-sum plane, then the tap ranges:
   * output rows [rh[2k], rh[2k+1]) read input rows for kernel row k; likewise columns */
  double *acc = (double *)scratch;
  float *part = (float *)(acc + plane);
  int64_t *rh = (int64_t *)(acc + plane + (plane + 1) / 2), *rw = rh + 2 * kh_n;
  for (int64_t k = 0; k < kh_n; k++) tap_range(oh_n, h, sh, k * dh - ph, &rh[2 * k], &rh[2 * k + 1]);
  for (int64_t k = 0; k < kw_n; k++) tap_range(ow_n, wd, sw, k * dw - pw, &rw[2 * k], &rw[2 * k + 1]);
  double lo = farg(call, OA_ARG_CONV2D_ACT_MIN), hi = farg(call, OA_ARG_CONV2D_ACT_MAX);
  for (int64_t n = 0; n < n_batch; n++) {
    for (int64_t oc = 0; oc < o; oc++) {
      const int64_t g = oc / og;
      const float *x_g = x + (n * c + g * cg) * h * wd;
      const float *w_oc = w + oc * cg * kh_n * kw_n;
      const double b0 = bias ? (double)bias[oc] : 0.0;
      for (int64_t i = 0; i < plane; i++) acc[i] = b0;
      for (int64_t ic0 = 0; ic0 < cg; ic0 += CONV_BLOCK) {
        const int64_t ic1 = ic0 + CONV_BLOCK < cg ? ic0 + CONV_BLOCK : cg;
        for (int64_t i = 0; i < plane; i++) part[i] = 0.0f;
        for (int64_t ic = ic0; ic < ic1; ic++) {
          const float *x_c = x_g + ic * h * wd;
          const float *w_c = w_oc + ic * kh_n * kw_n;
          for (int64_t kh = 0; kh < kh_n; kh++) {
            const int64_t oh0 = rh[2 * kh], oh1 = rh[2 * kh + 1], offh = kh * dh - ph;
            for (int64_t kw = 0; kw < kw_n; kw++) {
              const float wv = w_c[kh * kw_n + kw];
              const int64_t ow0 = rw[2 * kw], ow1 = rw[2 * kw + 1], offw = kw * dw - pw;
              for (int64_t oh = oh0; oh < oh1; oh++) {
                const float *row = x_c + (oh * sh + offh) * wd;
                float *pr = part + oh * ow_n;
                if (sw == 1) {
                  for (int64_t i = ow0; i < ow1; i++) pr[i] += wv * row[i + offw];
                } else {
                  for (int64_t i = ow0; i < ow1; i++) pr[i] += wv * row[i * sw + offw];
                }
              }
            }
          }
        }
        for (int64_t i = 0; i < plane; i++) acc[i] += (double)part[i];
      }
      float *y_oc = y + (n * o + oc) * plane;
      for (int64_t i = 0; i < plane; i++) y_oc[i] = oa_fused_act_to_float(acc[i], act, lo, hi);
    }
  }
  return OA_OK;
}

/* ---- conv2d_nhwc ---------------------------------------------------------------------------- */

oa_status_t oa_ref_conv2d_nhwc_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = conv2d_check(call, plan, LAYOUT_NHWC, diag))) return st;
  return check_out(call, plan, 0, diag);
}

/* One output element at a time, summed in double over (kernel row, kernel column, channel): the
 * plain definition, the yardstick of the channels-last fast kernels. */
oa_status_t oa_ref_conv2d_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                   const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  (void)scratch;
  const int64_t *p = plan->params;
  const int64_t n_batch = p[P_N], c = p[P_C], h = p[P_H], wd = p[P_W], o = p[P_O], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t kh_n = p[P_KH], kw_n = p[P_KW], sh = p[P_SH], sw = p[P_SW], ph = p[P_PH], pw = p[P_PW];
  const int64_t dh = p[P_DH], dw = p[P_DW], groups = p[P_G], act = p[P_ACT], block = p[P_BLOCK];
  const int64_t cg = c / groups, og = o / groups;
  /* channel stride of the input: 1 channels-last, a plane with input_nchw */
  const int64_t xs = p[P_IN_NCHW] ? h * wd : 1;
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const float *bias = p[P_HAS_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const double lo = farg(call, OA_ARG_CONV2D_NHWC_ACT_MIN), hi = farg(call, OA_ARG_CONV2D_NHWC_ACT_MAX);
  for (int64_t n = 0; n < n_batch; n++) {
    for (int64_t oh = 0; oh < oh_n; oh++) {
      for (int64_t ow = 0; ow < ow_n; ow++) {
        float *y_px = y + ((n * oh_n + oh) * ow_n + ow) * o;
        for (int64_t oc = 0; oc < o; oc++) {
          const int64_t c0 = (oc / og) * cg;
          double acc = bias ? (double)bias[oc] : 0.0;
          for (int64_t kh = 0; kh < kh_n; kh++) {
            const int64_t ih = oh * sh - ph + kh * dh;
            if (ih < 0 || ih >= h) continue;
            for (int64_t kw = 0; kw < kw_n; kw++) {
              const int64_t iw = ow * sw - pw + kw * dw;
              if (iw < 0 || iw >= wd) continue;
              const float *x_px = p[P_IN_NCHW] ? x + ((n * c + c0) * h + ih) * wd + iw
                                                : x + ((n * h + ih) * wd + iw) * c + c0;
              /* w[kh][kw][ic][oc], or panel oc / block of [kh][kw][ic][block] */
              const int64_t tap = kh * kw_n + kw, ws = block ? block : o;
              const float *w_tap = block ? w + ((oc / block) * kh_n * kw_n + tap) * cg * block + oc % block
                                         : w + tap * cg * o + oc;
              for (int64_t ic = 0; ic < cg; ic++) acc += (double)x_px[ic * xs] * (double)w_tap[ic * ws];
            }
          }
          y_px[oc] = oa_fused_act_to_float(acc, act, lo, hi);
        }
      }
    }
  }
  return OA_OK;
}

/* ---- conv_transpose2d ------------------------------------------------------------------------ */

oa_status_t oa_ref_conv_transpose2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                            oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = conv_common(call, plan, 7, LAYOUT_TRANSPOSED, diag))) return st;
  plan->params[P_ACT] = 0;
  const int64_t *p = plan->params;
  int64_t opad[2] = {iarg(call, OA_ARG_CONV_TRANSPOSE2D_OUTPUT_PAD_H),
                     iarg(call, OA_ARG_CONV_TRANSPOSE2D_OUTPUT_PAD_W)};
  static const char *const names[] = {"output_pad_h", "output_pad_w"};
  int64_t out_size[2];
  for (int i = 0; i < 2; i++) {
    int64_t s = p[P_SH + i], d = p[P_DH + i];
    int64_t lim = (s > d ? s : d) - 1;
    if (opad[i] < 0 || opad[i] > lim)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument %s = %lld is out of range (expected 0 to %lld: smaller than stride or dilation)",
                          names[i], (long long)opad[i], (long long)lim);
    /* (in - 1) * s - 2 * pad + d * (k - 1) + output_pad + 1 */
    int64_t in = p[P_H + i], k = p[P_KH + i], pad = p[P_PH + i];
    int64_t full = smul(in > 0 ? in - 1 : 0, s);
    int64_t span = smul(d, k - 1);
    if (full >= CONV_BIG / 4 || span >= CONV_BIG / 4)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output size along dim %d is too large", 2 + i);
    out_size[i] = full + span + opad[i] + 1 - 2 * pad;
    if (in == 0 || out_size[i] < 1)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "output size along dim %d would be %lld (input %lld, kernel %lld, stride %lld, pad %lld, "
                          "dilation %lld, output_pad %lld); expected at least 1",
                          2 + i, (long long)out_size[i], (long long)in, (long long)k, (long long)s, (long long)pad,
                          (long long)d, (long long)opad[i]);
  }
  plan->params[P_OH] = out_size[0];
  plan->params[P_OW] = out_size[1];
  int64_t plane = smul(out_size[0], out_size[1]);
  return check_out(call, plan, plane + (plane + 1) / 2 + 2 * (p[P_KH] + p[P_KW]), diag); /* as conv2d */
}

oa_status_t oa_ref_conv_transpose2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                        const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_batch = p[P_N], c = p[P_C], h = p[P_H], wd = p[P_W], o = p[P_O], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t kh_n = p[P_KH], kw_n = p[P_KW], sh = p[P_SH], sw = p[P_SW], ph = p[P_PH], pw = p[P_PW];
  const int64_t dh = p[P_DH], dw = p[P_DW], groups = p[P_G];
  const int64_t cg = c / groups, og = o / groups, plane = oh_n * ow_n;
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const float *bias = p[P_HAS_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  /* out[oh, ow] += in[ih, iw] * w[ic, oc, kh, kw] with oh = ih * sh - ph + kh * dh and
   * ow = iw * sw - pw + kw * dw: per tap, each input row scatters (stride sw) into one
   * accumulator row. Scratch as in conv2d; the ranges are of input rows / columns. */
  double *acc = (double *)scratch;
  float *part = (float *)(acc + plane);
  int64_t *rh = (int64_t *)(acc + plane + (plane + 1) / 2), *rw = rh + 2 * kh_n;
  for (int64_t k = 0; k < kh_n; k++) tap_range(h, oh_n, sh, k * dh - ph, &rh[2 * k], &rh[2 * k + 1]);
  for (int64_t k = 0; k < kw_n; k++) tap_range(wd, ow_n, sw, k * dw - pw, &rw[2 * k], &rw[2 * k + 1]);
  for (int64_t n = 0; n < n_batch; n++) {
    for (int64_t oc = 0; oc < o; oc++) {
      const int64_t g = oc / og, ocl = oc % og;
      const float *x_g = x + (n * c + g * cg) * h * wd;
      const double b0 = bias ? (double)bias[oc] : 0.0;
      for (int64_t i = 0; i < plane; i++) acc[i] = b0;
      for (int64_t ic0 = 0; ic0 < cg; ic0 += CONV_BLOCK) {
        const int64_t ic1 = ic0 + CONV_BLOCK < cg ? ic0 + CONV_BLOCK : cg;
        for (int64_t i = 0; i < plane; i++) part[i] = 0.0f;
        for (int64_t ic = ic0; ic < ic1; ic++) {
          const float *x_c = x_g + ic * h * wd;
          const float *w_c = w + ((g * cg + ic) * og + ocl) * kh_n * kw_n;
          for (int64_t kh = 0; kh < kh_n; kh++) {
            const int64_t ih0 = rh[2 * kh], ih1 = rh[2 * kh + 1], offh = kh * dh - ph;
            for (int64_t kw = 0; kw < kw_n; kw++) {
              const float wv = w_c[kh * kw_n + kw];
              const int64_t iw0 = rw[2 * kw], iw1 = rw[2 * kw + 1], offw = kw * dw - pw;
              for (int64_t ih = ih0; ih < ih1; ih++) {
                const float *row = x_c + ih * wd;
                float *pr = part + (ih * sh + offh) * ow_n;
                for (int64_t iw = iw0; iw < iw1; iw++) pr[iw * sw + offw] += wv * row[iw];
              }
            }
          }
        }
        for (int64_t i = 0; i < plane; i++) acc[i] += (double)part[i];
      }
      float *y_oc = y + (n * o + oc) * plane;
      for (int64_t i = 0; i < plane; i++) y_oc[i] = (float)acc[i];
    }
  }
  return OA_OK;
}
