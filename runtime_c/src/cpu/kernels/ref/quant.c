/* Reference int8 kernels: quantize, dequantize, conv2d_q8, linear_q8, add_q8, mean_q8, mul_q8.
 *
 * THE REQUANTIZATION RULE (docs/quantization.md; the exporter's half is
 * sdk/openaccel/exporter/quant.py). Integer-only, so every ISA and thread count gives the same
 * bytes; an optimized int8 kernel must reproduce it exactly.
 *
 *   acc = sat_int32(sum_k (x_k - input_zp) * w[c][k])                  exact integer sum
 *   A   = round_half_even(bias[c] * 2^shift[c])                        the bias's addend, exact
 *   p   = acc * multiplier[c] + A                                       int64, |p| < 2^63
 *   r   = round_half_even(p / 2^shift[c])                               ties to even, symmetric
 *   out = clamp(r + output_zp, act_min, act_max)                        act_* within [-128, 127]
 *
 * multiplier in [0, 2^31 - 1], shift in [12, 62], |A| < 2^61: the exporter writes
 * M = round_half_even(m * 2^n) with 24 significant bits (exact in float32: the AVX-512 kernels'
 * float path needs no bracket) for the real multiplier m = s_in * s_w[c] / s_out, and the bias in
 * output steps as float32: bias[c] = float32(b[c] / s_out), rounded to nearest even once (format
 * 1.4; 1.3 rounded it to a multiple of 2^-12, up to 2^-13 of a step off, which changed about one
 * output in 10^4 against PyTorch's reference; 1.2 had an int32 bias in accumulator steps, before
 * the multiply, which lost up to m / 2 of a step). Ties go to even because
 * PyTorch's quantize (torch.round) and ExecuTorch's portable
 * kernels (nearbyint) do: where the real value is exactly half-way we agree with the reference.
 * Padding reads input_zp (a real zero), so it adds nothing to acc. add_q8 has one shift for both
 * inputs: p = (a - self_zp) * self_multiplier + (b - other_zp) * other_multiplier (|p| < 2^41),
 * then the same rounding, zero point and clamp.
 *
 * quantize (float32 -> int8/uint8) is PyTorch's quantize_per_tensor in float32:
 * clamp(round_half_even(x * (float)(1.0 / scale)) + zero_point, qmin, qmax), NaN -> zero_point;
 * dequantize is (float)(q - zero_point) * (float)scale. One IEEE float32 multiply each, no
 * contraction possible, so they are exact and portable too. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "kernels/quant_rule.h"

#define Q8_ARG_MAX ((int64_t)1 << 30)

/* ---- shared checks --------------------------------------------------------------------------- */

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

static oa_status_t check_int(const oa_op_call_t *call, uint32_t i, const char *name, int64_t lo, int64_t hi,
                             oa_diag_t *diag) {
  int64_t v = iarg(call, i);
  if (v < lo || v > hi)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld is out of range (expected %lld to %lld)",
                        name, (long long)v, (long long)lo, (long long)hi);
  return OA_OK;
}

static oa_status_t check_scale(const oa_op_call_t *call, uint32_t i, const char *name, int required,
                               oa_diag_t *diag) {
  double s = i < call->n_floats ? call->floats[i] : 0.0;
  if (!required && s == 0.0) return OA_OK; /* informational, not given */
  if (!(s > 0.0) || !isfinite(s) || !((float)s > 0.0f) || !isfinite((float)s))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument %s = %g: expected a positive finite float32 scale", name, s);
  return OA_OK;
}

/* zero point and clamp bounds within int8; act_min <= act_max */
static oa_status_t check_out_q(const oa_op_call_t *call, uint32_t zp, uint32_t lo, uint32_t hi, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = check_int(call, zp, "output_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, lo, "act_min", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, hi, "act_max", iarg(call, lo), INT8_MAX, diag))) return st;
  return OA_OK;
}

/* An int32 vector (the shift: int8; the bias: float32) of length n (or 1 when `one_ok`). */
static oa_status_t check_vec(const oa_op_call_t *call, uint32_t i, const char *arg, int64_t n, int one_ok,
                             oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_present(call, i, arg, diag))) return st;
  const oa_tensor_t *t = call->inputs[i];
  if (i == 4) {
    if ((st = oa_check_q8_shift_dtype(call, t, diag))) return st;
  } else if (i == 2) {
    if ((st = oa_check_q8_bias_dtype(call, t, diag))) return st;
  } else if ((st = oa_check_dtype(call, t, OA_DT_I32, arg, diag))) {
    return st;
  }
  if (t->ndim != 1 || (t->shape[0] != n && !(one_ok && t->shape[0] == 1))) {
    char s[96];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected shape [%lld]%s, received %s", arg,
                        t->name, (long long)n, one_ok ? " or [1]" : "", oa_shape_str(t, s, sizeof s));
  }
  return OA_OK;
}

/* ---- quantize / dequantize ------------------------------------------------------------------- */

oa_status_t oa_ref_quantize_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                    oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, OA_ARG_QUANTIZE_NUM_INTS, OA_ARG_QUANTIZE_NUM_FLOATS, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8 | OA_DT_U8, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  int64_t lo = y->dtype == OA_DTYPE_INT8 ? INT8_MIN : 0, hi = y->dtype == OA_DTYPE_INT8 ? INT8_MAX : 255;
  if ((st = check_scale(call, OA_ARG_QUANTIZE_SCALE, "scale", 1, diag))) return st;
  if ((st = check_int(call, OA_ARG_QUANTIZE_QMIN, "qmin", lo, hi, diag))) return st;
  if ((st = check_int(call, OA_ARG_QUANTIZE_QMAX, "qmax", iarg(call, OA_ARG_QUANTIZE_QMIN), hi, diag))) return st;
  return check_int(call, OA_ARG_QUANTIZE_ZERO_POINT, "zero_point", lo, hi, diag);
}

oa_status_t oa_ref_quantize_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const float inv = (float)(1.0 / call->floats[OA_ARG_QUANTIZE_SCALE]);
  const int64_t zp = iarg(call, OA_ARG_QUANTIZE_ZERO_POINT);
  const float lo = (float)iarg(call, OA_ARG_QUANTIZE_QMIN), hi = (float)iarg(call, OA_ARG_QUANTIZE_QMAX);
  const float *xp = (const float *)x->data;
  for (int64_t i = 0; i < x->numel; i++) {
    float v = xp[i] * inv;
    float q;
    if (v != v) {
      q = (float)zp;
    } else {
      /* round half to even, then + zp, clamped (in float: exact for |v| < 2^23, beyond it saturates) */
      float r = nearbyintf(v);
      if (r > 1e9f) r = 1e9f;
      if (r < -1e9f) r = -1e9f;
      q = r + (float)zp;
    }
    q = q < lo ? lo : (q > hi ? hi : q);
    if (y->dtype == OA_DTYPE_INT8)
      ((int8_t *)y->data)[i] = (int8_t)q;
    else
      ((uint8_t *)y->data)[i] = (uint8_t)q;
  }
  return OA_OK;
}

oa_status_t oa_ref_dequantize_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, OA_ARG_DEQUANTIZE_NUM_INTS, OA_ARG_DEQUANTIZE_NUM_FLOATS, diag)))
    return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_I8 | OA_DT_U8, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_F32, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  if ((st = check_scale(call, OA_ARG_DEQUANTIZE_SCALE, "scale", 1, diag))) return st;
  int64_t lo = x->dtype == OA_DTYPE_INT8 ? INT8_MIN : 0, hi = x->dtype == OA_DTYPE_INT8 ? INT8_MAX : 255;
  return check_int(call, OA_ARG_DEQUANTIZE_ZERO_POINT, "zero_point", lo, hi, diag);
}

oa_status_t oa_ref_dequantize_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const float scale = (float)call->floats[OA_ARG_DEQUANTIZE_SCALE];
  const int32_t zp = (int32_t)iarg(call, OA_ARG_DEQUANTIZE_ZERO_POINT);
  float *yp = (float *)y->data;
  for (int64_t i = 0; i < x->numel; i++) {
    int32_t q = x->dtype == OA_DTYPE_INT8 ? ((const int8_t *)x->data)[i] : ((const uint8_t *)x->data)[i];
    yp[i] = (float)(q - zp) * scale;
  }
  return OA_OK;
}

/* ---- conv2d_q8 --------------------------------------------------------------------------------- */

enum { C_N, C_CIN, C_H, C_W, C_COUT, C_KH, C_KW, C_OH, C_OW, C_G, C_SH, C_SW, C_PH, C_PW, C_DH, C_DW, C_MONE, C_BIAS };

oa_status_t oa_ref_conv2d_q8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 5, 5, 1, OA_ARG_CONV2D_Q8_ACT_MAX + 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) || (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *y = call->outputs[0];
  const oa_tensor_t *b = call->inputs[2];
  if ((st = oa_check_dtype(call, x, OA_DT_I8, "input 0 (input)", diag))) return st;
  if ((st = oa_check_dtype(call, w, OA_DT_I8, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 4, 4, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, 4, 4, "input 1 (weight)", diag))) return st;
  static const struct { uint32_t at; const char *name; int64_t lo; } win[] = {
      {OA_ARG_CONV2D_Q8_STRIDE_H, "stride_h", 1},     {OA_ARG_CONV2D_Q8_STRIDE_W, "stride_w", 1},
      {OA_ARG_CONV2D_Q8_PAD_H, "pad_h", 0},           {OA_ARG_CONV2D_Q8_PAD_W, "pad_w", 0},
      {OA_ARG_CONV2D_Q8_DILATION_H, "dilation_h", 1}, {OA_ARG_CONV2D_Q8_DILATION_W, "dilation_w", 1},
      {OA_ARG_CONV2D_Q8_GROUPS, "groups", 1}};
  for (uint32_t i = 0; i < sizeof win / sizeof win[0]; i++)
    if ((st = check_int(call, win[i].at, win[i].name, win[i].lo, Q8_ARG_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_CONV2D_Q8_INPUT_ZP, "input_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_out_q(call, OA_ARG_CONV2D_Q8_OUTPUT_ZP, OA_ARG_CONV2D_Q8_ACT_MIN, OA_ARG_CONV2D_Q8_ACT_MAX, diag)))
    return st;
  if ((st = check_scale(call, OA_ARG_CONV2D_Q8_INPUT_SCALE, "input_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_CONV2D_Q8_OUTPUT_SCALE, "output_scale", 0, diag))) return st;
  int64_t sh = iarg(call, OA_ARG_CONV2D_Q8_STRIDE_H), sw = iarg(call, OA_ARG_CONV2D_Q8_STRIDE_W);
  int64_t ph = iarg(call, OA_ARG_CONV2D_Q8_PAD_H), pw = iarg(call, OA_ARG_CONV2D_Q8_PAD_W);
  int64_t dh = iarg(call, OA_ARG_CONV2D_Q8_DILATION_H), dw = iarg(call, OA_ARG_CONV2D_Q8_DILATION_W);
  int64_t g = iarg(call, OA_ARG_CONV2D_Q8_GROUPS);
  int64_t n = x->shape[0], cin = x->shape[1], h = x->shape[2], wd = x->shape[3];
  int64_t cout = w->shape[0], kh = w->shape[2], kw = w->shape[3];
  char s1[96], s2[96];
  if (cin % g != 0 || cout % g != 0 || w->shape[1] * g != cin)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 1 (weight) ('%s'): %s does not fit input %s with groups = %lld (expected [C_out, "
                        "C_in / groups, kH, kW], C_out and C_in multiples of groups)",
                        w->name, oa_shape_str(w, s1, sizeof s1), oa_shape_str(x, s2, sizeof s2), (long long)g);
  if (kh < 1 || kw < 1 || kh > Q8_ARG_MAX || kw > Q8_ARG_MAX || h > Q8_ARG_MAX || wd > Q8_ARG_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (weight) ('%s'): kernel %lld x %lld: expected 1 to 2^30",
                        w->name, (long long)kh, (long long)kw);
  int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  if (h + 2 * ph - dh * (kh - 1) - 1 < 0 || wd + 2 * pw - dw * (kw - 1) - 1 < 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): %s is too small for kernel %lld x %lld (pad %lld, %lld, dilation "
                        "%lld, %lld)", x->name, oa_shape_str(x, s1, sizeof s1), (long long)kh, (long long)kw,
                        (long long)ph, (long long)pw, (long long)dh, (long long)dw);
  int64_t want[4] = {n, cout, oh, ow};
  if ((st = oa_check_shape(call, y, want, 4, "output 0", diag))) return st;
  if (b) {
    if ((st = check_vec(call, 2, "input 2 (bias)", cout, 0, diag))) return st;
  }
  if ((st = check_vec(call, 3, "input 3 (multiplier)", cout, 1, diag))) return st;
  if ((st = check_vec(call, 4, "input 4 (shift)", cout, 1, diag))) return st;
  if (call->inputs[3]->shape[0] != call->inputs[4]->shape[0])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "inputs 3 (multiplier) and 4 (shift): lengths %lld and %lld differ",
                        (long long)call->inputs[3]->shape[0], (long long)call->inputs[4]->shape[0]);
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  int64_t *p = plan->params;
  p[C_N] = n, p[C_CIN] = cin, p[C_H] = h, p[C_W] = wd, p[C_COUT] = cout, p[C_KH] = kh, p[C_KW] = kw;
  p[C_OH] = oh, p[C_OW] = ow, p[C_G] = g, p[C_SH] = sh, p[C_SW] = sw, p[C_PH] = ph, p[C_PW] = pw;
  p[C_DH] = dh, p[C_DW] = dw, p[C_MONE] = call->inputs[3]->shape[0] == 1, p[C_BIAS] = b != NULL;
  return OA_OK;
}

oa_status_t oa_ref_conv2d_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  oa_status_t st;
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  const int64_t *p = plan->params;
  const int64_t n = p[C_N], cin = p[C_CIN], h = p[C_H], wd = p[C_W], cout = p[C_COUT], kh = p[C_KH], kw = p[C_KW];
  const int64_t oh_n = p[C_OH], ow_n = p[C_OW], g = p[C_G], sh = p[C_SH], sw = p[C_SW], ph = p[C_PH], pw = p[C_PW];
  const int64_t dh = p[C_DH], dw = p[C_DW];
  const int8_t *x = (const int8_t *)call->inputs[0]->data, *w = (const int8_t *)call->inputs[1]->data;
  const float *bias = p[C_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  const int32_t *mult = (const int32_t *)call->inputs[3]->data;
  const int8_t *shift = (const int8_t *)call->inputs[4]->data;
  int8_t *y = (int8_t *)call->outputs[0]->data;
  const int64_t zin = iarg(call, OA_ARG_CONV2D_Q8_INPUT_ZP), zout = iarg(call, OA_ARG_CONV2D_Q8_OUTPUT_ZP);
  const int64_t lo = iarg(call, OA_ARG_CONV2D_Q8_ACT_MIN), hi = iarg(call, OA_ARG_CONV2D_Q8_ACT_MAX);
  const int64_t cin_g = cin / g, cout_g = cout / g;
  for (int64_t b = 0; b < n; b++) {
    for (int64_t oc = 0; oc < cout; oc++) {
      const int64_t grp = oc / cout_g;
      const int8_t *wc = w + oc * cin_g * kh * kw;
      const int64_t m = mult[p[C_MONE] ? 0 : oc];
      const int32_t s = shift[p[C_MONE] ? 0 : oc];
      int64_t badd = 0; /* checked at the call's start (oa_check_q8_requant_values) */
      if (bias && !q8_bias_addend(bias[oc], s, &badd)) badd = 0;
      int8_t *yp = y + (b * cout + oc) * oh_n * ow_n;
      for (int64_t oh = 0; oh < oh_n; oh++) {
        for (int64_t ow = 0; ow < ow_n; ow++) {
          int64_t acc = 0;
          for (int64_t ic = 0; ic < cin_g; ic++) {
            const int8_t *xc = x + (b * cin + grp * cin_g + ic) * h * wd;
            const int8_t *wk = wc + ic * kh * kw;
            for (int64_t i = 0; i < kh; i++) {
              int64_t ih = oh * sh - ph + i * dh;
              if (ih < 0 || ih >= h) continue; /* padding reads input_zp: adds 0 */
              for (int64_t j = 0; j < kw; j++) {
                int64_t iw = ow * sw - pw + j * dw;
                if (iw < 0 || iw >= wd) continue;
                acc += ((int64_t)xc[ih * wd + iw] - zin) * wk[i * kw + j];
              }
            }
          }
          yp[oh * ow_n + ow] = q8_requant(acc, m, s, badd, zout, lo, hi);
        }
      }
    }
  }
  return OA_OK;
}

/* ---- linear_q8 --------------------------------------------------------------------------------- */

enum { LQ_M, LQ_N, LQ_K, LQ_MONE, LQ_BIAS };

oa_status_t oa_ref_linear_q8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 5, 5, 1, OA_ARG_LINEAR_Q8_ACT_MAX + 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) || (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *y = call->outputs[0];
  const oa_tensor_t *b = call->inputs[2];
  if ((st = oa_check_dtype(call, x, OA_DT_I8, "input 0 (input)", diag))) return st;
  if ((st = oa_check_dtype(call, w, OA_DT_I8, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, 2, 2, "input 1 (weight)", diag))) return st;
  if ((st = check_int(call, OA_ARG_LINEAR_Q8_INPUT_ZP, "input_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_out_q(call, OA_ARG_LINEAR_Q8_OUTPUT_ZP, OA_ARG_LINEAR_Q8_ACT_MIN, OA_ARG_LINEAR_Q8_ACT_MAX, diag)))
    return st;
  if ((st = check_scale(call, OA_ARG_LINEAR_Q8_INPUT_SCALE, "input_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_LINEAR_Q8_OUTPUT_SCALE, "output_scale", 0, diag))) return st;
  int64_t nn = w->shape[0], k = w->shape[1];
  if ((st = oa_check_linear_io(call, x, k, y, nn, diag))) return st;
  if (b) {
    if ((st = check_vec(call, 2, "input 2 (bias)", nn, 0, diag))) return st;
  }
  if ((st = check_vec(call, 3, "input 3 (multiplier)", nn, 1, diag))) return st;
  if ((st = check_vec(call, 4, "input 4 (shift)", nn, 1, diag))) return st;
  if (call->inputs[3]->shape[0] != call->inputs[4]->shape[0])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "inputs 3 (multiplier) and 4 (shift): lengths %lld and %lld differ",
                        (long long)call->inputs[3]->shape[0], (long long)call->inputs[4]->shape[0]);
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  plan->params[LQ_M] = k ? x->numel / k : 0;
  if (!k) {
    int64_t m = 1;
    for (int32_t d = 0; d < x->ndim - 1; d++) m *= x->shape[d];
    plan->params[LQ_M] = m;
  }
  plan->params[LQ_N] = nn, plan->params[LQ_K] = k;
  plan->params[LQ_MONE] = call->inputs[3]->shape[0] == 1, plan->params[LQ_BIAS] = b != NULL;
  return OA_OK;
}

oa_status_t oa_ref_linear_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  oa_status_t st;
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  const int64_t m_n = plan->params[LQ_M], n_n = plan->params[LQ_N], k_n = plan->params[LQ_K];
  const int64_t mone = plan->params[LQ_MONE];
  const int8_t *x = (const int8_t *)call->inputs[0]->data, *w = (const int8_t *)call->inputs[1]->data;
  const float *bias = plan->params[LQ_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  const int32_t *mult = (const int32_t *)call->inputs[3]->data;
  const int8_t *shift = (const int8_t *)call->inputs[4]->data;
  int8_t *y = (int8_t *)call->outputs[0]->data;
  const int64_t zin = iarg(call, OA_ARG_LINEAR_Q8_INPUT_ZP), zout = iarg(call, OA_ARG_LINEAR_Q8_OUTPUT_ZP);
  const int64_t lo = iarg(call, OA_ARG_LINEAR_Q8_ACT_MIN), hi = iarg(call, OA_ARG_LINEAR_Q8_ACT_MAX);
  for (int64_t i = 0; i < m_n; i++) {
    const int8_t *xr = x + i * k_n;
    for (int64_t j = 0; j < n_n; j++) {
      const int8_t *wr = w + j * k_n;
      const int32_t s = shift[mone ? 0 : j];
      int64_t acc = 0, badd = 0; /* checked at the call's start (oa_check_q8_requant_values) */
      if (bias && !q8_bias_addend(bias[j], s, &badd)) badd = 0;
      for (int64_t k = 0; k < k_n; k++) acc += ((int64_t)xr[k] - zin) * wr[k];
      y[i * n_n + j] = q8_requant(acc, mult[mone ? 0 : j], s, badd, zout, lo, hi);
    }
  }
  return OA_OK;
}

/* ---- add_q8 ------------------------------------------------------------------------------------ */

oa_status_t oa_ref_add_q8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, OA_ARG_ADD_Q8_ACT_MAX + 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) || (st = oa_check_present(call, 1, "input 1 (other)", diag)))
    return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, a, OA_DT_I8, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, b, OA_DT_I8, "input 1 (other)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8, "output 0", diag))) return st;
  if ((st = check_int(call, OA_ARG_ADD_Q8_SELF_ZP, "self_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_ADD_Q8_OTHER_ZP, "other_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_ADD_Q8_SELF_MULTIPLIER, "self_multiplier", 0, Q8_MULT_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_ADD_Q8_OTHER_MULTIPLIER, "other_multiplier", 0, Q8_MULT_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_ADD_Q8_SHIFT, "shift", 0, Q8_SHIFT_MAX, diag))) return st;
  if ((st = check_out_q(call, OA_ARG_ADD_Q8_OUTPUT_ZP, OA_ARG_ADD_Q8_ACT_MIN, OA_ARG_ADD_Q8_ACT_MAX, diag))) return st;
  if ((st = check_scale(call, OA_ARG_ADD_Q8_SELF_SCALE, "self_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_ADD_Q8_OTHER_SCALE, "other_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_ADD_Q8_OUTPUT_SCALE, "output_scale", 0, diag))) return st;
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS];
  if ((st = oa_broadcast_strides(call, a, y->shape, y->ndim, sa, "input 0 (self)", diag))) return st;
  return oa_broadcast_strides(call, b, y->shape, y->ndim, sb, "input 1 (other)", diag);
}

oa_status_t oa_ref_add_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *y = call->outputs[0];
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS];
  oa_status_t st;
  if ((st = oa_broadcast_strides(call, a, y->shape, y->ndim, sa, "input 0 (self)", diag))) return st;
  if ((st = oa_broadcast_strides(call, b, y->shape, y->ndim, sb, "input 1 (other)", diag))) return st;
  const int64_t za = iarg(call, OA_ARG_ADD_Q8_SELF_ZP), zb = iarg(call, OA_ARG_ADD_Q8_OTHER_ZP);
  const int64_t ma = iarg(call, OA_ARG_ADD_Q8_SELF_MULTIPLIER), mb = iarg(call, OA_ARG_ADD_Q8_OTHER_MULTIPLIER);
  const int32_t s = (int32_t)iarg(call, OA_ARG_ADD_Q8_SHIFT);
  const int64_t zo = iarg(call, OA_ARG_ADD_Q8_OUTPUT_ZP);
  const int64_t lo = iarg(call, OA_ARG_ADD_Q8_ACT_MIN), hi = iarg(call, OA_ARG_ADD_Q8_ACT_MAX);
  const int8_t *ap = (const int8_t *)a->data, *bp = (const int8_t *)b->data;
  int8_t *yp = (int8_t *)y->data;
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, y->shape, y->ndim, 2, sa, sb, NULL);
  for (int64_t i = 0; i < y->numel; i++) {
    int64_t pa = ((int64_t)ap[it.off[0]] - za) * ma, pb = ((int64_t)bp[it.off[1]] - zb) * mb;
    yp[i] = q8_finish(q8_round_shift(pa + pb, s), zo, lo, hi);
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}

/* ---- mean_q8 ----------------------------------------------------------------------------------- */
/* out = clamp(round_half_even(sum (x - input_zp) * multiplier / 2^shift) + output_zp, act_min, act_max)
 * over the reduced dims: the sum is exact (|sum| <= 255 * count, count <= 2^23, so |p| < 2^62) and the
 * exporter folded 1 / count into the multiplier, so there is one rounding, as for conv2d_q8. */

#define Q8_MEAN_COUNT_MAX ((int64_t)1 << 23)
enum { MQ_MASK, MQ_COUNT };

oa_status_t oa_ref_mean_q8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, OA_ARG_MEAN_Q8_NUM_INTS, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_I8, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8, "output 0", diag))) return st;
  if ((st = check_int(call, OA_ARG_MEAN_Q8_INPUT_ZP, "input_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_out_q(call, OA_ARG_MEAN_Q8_OUTPUT_ZP, OA_ARG_MEAN_Q8_ACT_MIN, OA_ARG_MEAN_Q8_ACT_MAX, diag)))
    return st;
  if ((st = check_int(call, OA_ARG_MEAN_Q8_MULTIPLIER, "multiplier", 0, Q8_MULT_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_MEAN_Q8_SHIFT, "shift", 0, Q8_SHIFT_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_MEAN_Q8_KEEPDIM, "keepdim", 0, 1, diag))) return st;
  if ((st = check_scale(call, OA_ARG_MEAN_Q8_INPUT_SCALE, "input_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_MEAN_Q8_OUTPUT_SCALE, "output_scale", 0, diag))) return st;
  const int32_t lim = x->ndim > 0 ? x->ndim : 1;
  const uint32_t ndims = call->n_ints - OA_ARG_MEAN_Q8_DIMS;
  uint32_t mask = 0;
  if (ndims > (uint32_t)lim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: %u dims listed, the input has %d", ndims, x->ndim);
  for (uint32_t i = 0; i < ndims; i++) {
    int64_t d = call->ints[OA_ARG_MEAN_Q8_DIMS + i];
    if (d < 0 || d >= lim)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld: expected 0 <= dim < %d", i,
                          (long long)d, lim);
    if (mask & (1u << d))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld appears more than once", i,
                          (long long)d);
    mask |= 1u << d;
  }
  if (ndims == 0) mask = (1u << lim) - 1u;
  if (x->ndim == 0) mask = 0;
  const int keepdim = iarg(call, OA_ARG_MEAN_Q8_KEEPDIM) == 1;
  int64_t want[OA_MAX_DIMS], count = 1;
  int32_t nd = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (mask & (1u << d)) {
      count = x->shape[d] > Q8_MEAN_COUNT_MAX ? Q8_MEAN_COUNT_MAX + 1 : count * x->shape[d];
      if (count > Q8_MEAN_COUNT_MAX) break; /* refused below, before any overflow */
      if (keepdim) want[nd++] = 1;
    } else {
      want[nd++] = x->shape[d];
    }
  }
  if (count < 1 || count > Q8_MEAN_COUNT_MAX) {
    char s[96];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (self) ('%s'): %s reduces %s elements per output (expected 1 to %lld)", x->name,
                        oa_shape_str(x, s, sizeof s), count < 1 ? "no" : "too many", (long long)Q8_MEAN_COUNT_MAX);
  }
  if ((st = oa_check_shape(call, y, want, nd, "output 0", diag))) return st;
  plan->params[MQ_MASK] = mask;
  plan->params[MQ_COUNT] = count;
  return OA_OK;
}

oa_status_t oa_ref_mean_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const uint32_t mask = (uint32_t)plan->params[MQ_MASK];
  const int64_t count = plan->params[MQ_COUNT];
  /* kept dims (row-major, the output's order) and reduced dims, each with its input stride */
  int64_t cs[OA_MAX_DIMS], ks[OA_MAX_DIMS], kst[OA_MAX_DIMS], rs[OA_MAX_DIMS], rst[OA_MAX_DIMS];
  int32_t nk = 0, nr = 0;
  oa_contiguous_strides(x->shape, x->ndim, cs);
  for (int32_t d = 0; d < x->ndim; d++) {
    if (mask & (1u << d)) {
      rs[nr] = x->shape[d], rst[nr++] = cs[d];
    } else {
      ks[nk] = x->shape[d], kst[nk++] = cs[d];
    }
  }
  const int64_t zin = iarg(call, OA_ARG_MEAN_Q8_INPUT_ZP), zout = iarg(call, OA_ARG_MEAN_Q8_OUTPUT_ZP);
  const int64_t m = iarg(call, OA_ARG_MEAN_Q8_MULTIPLIER);
  const int32_t s = (int32_t)iarg(call, OA_ARG_MEAN_Q8_SHIFT);
  const int64_t lo = iarg(call, OA_ARG_MEAN_Q8_ACT_MIN), hi = iarg(call, OA_ARG_MEAN_Q8_ACT_MAX);
  const int8_t *xp = (const int8_t *)x->data;
  int8_t *yp = (int8_t *)y->data;
  int64_t kidx[OA_MAX_DIMS] = {0}, koff = 0;
  for (int64_t o = 0; o < y->numel; o++) {
    int64_t ridx[OA_MAX_DIMS] = {0}, roff = 0, sum = 0;
    for (int64_t c = 0; c < count; c++) {
      sum += (int64_t)xp[koff + roff] - zin;
      for (int32_t d = nr - 1; d >= 0; d--) { /* next reduced element */
        roff += rst[d];
        if (++ridx[d] < rs[d]) break;
        roff -= rst[d] * rs[d];
        ridx[d] = 0;
      }
    }
    yp[o] = q8_finish(q8_round_shift(sum * m, s), zout, lo, hi);
    for (int32_t d = nk - 1; d >= 0; d--) { /* next output */
      koff += kst[d];
      if (++kidx[d] < ks[d]) break;
      koff -= kst[d] * ks[d];
      kidx[d] = 0;
    }
  }
  return OA_OK;
}

/* ---- mul_q8 ------------------------------------------------------------------------------------ */
/* out = clamp(round_half_even((a - self_zp) * (b - other_zp) * multiplier / 2^shift) + output_zp, ...):
 * the product is exact (|.| <= 256^2), times a multiplier < 2^31: |p| < 2^47; one rounding. */

oa_status_t oa_ref_mul_q8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, OA_ARG_MUL_Q8_NUM_INTS, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) || (st = oa_check_present(call, 1, "input 1 (other)", diag)))
    return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, a, OA_DT_I8, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, b, OA_DT_I8, "input 1 (other)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I8, "output 0", diag))) return st;
  if ((st = check_int(call, OA_ARG_MUL_Q8_SELF_ZP, "self_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_MUL_Q8_OTHER_ZP, "other_zp", INT8_MIN, INT8_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_MUL_Q8_MULTIPLIER, "multiplier", 0, Q8_MULT_MAX, diag))) return st;
  if ((st = check_int(call, OA_ARG_MUL_Q8_SHIFT, "shift", 0, Q8_SHIFT_MAX, diag))) return st;
  if ((st = check_out_q(call, OA_ARG_MUL_Q8_OUTPUT_ZP, OA_ARG_MUL_Q8_ACT_MIN, OA_ARG_MUL_Q8_ACT_MAX, diag))) return st;
  if ((st = check_scale(call, OA_ARG_MUL_Q8_SELF_SCALE, "self_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_MUL_Q8_OTHER_SCALE, "other_scale", 0, diag))) return st;
  if ((st = check_scale(call, OA_ARG_MUL_Q8_OUTPUT_SCALE, "output_scale", 0, diag))) return st;
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS];
  if ((st = oa_broadcast_strides(call, a, y->shape, y->ndim, sa, "input 0 (self)", diag))) return st;
  return oa_broadcast_strides(call, b, y->shape, y->ndim, sb, "input 1 (other)", diag);
}

oa_status_t oa_ref_mul_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *y = call->outputs[0];
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS];
  oa_status_t st;
  if ((st = oa_broadcast_strides(call, a, y->shape, y->ndim, sa, "input 0 (self)", diag))) return st;
  if ((st = oa_broadcast_strides(call, b, y->shape, y->ndim, sb, "input 1 (other)", diag))) return st;
  const int64_t za = iarg(call, OA_ARG_MUL_Q8_SELF_ZP), zb = iarg(call, OA_ARG_MUL_Q8_OTHER_ZP);
  const int64_t m = iarg(call, OA_ARG_MUL_Q8_MULTIPLIER);
  const int32_t s = (int32_t)iarg(call, OA_ARG_MUL_Q8_SHIFT);
  const int64_t zo = iarg(call, OA_ARG_MUL_Q8_OUTPUT_ZP);
  const int64_t lo = iarg(call, OA_ARG_MUL_Q8_ACT_MIN), hi = iarg(call, OA_ARG_MUL_Q8_ACT_MAX);
  const int8_t *ap = (const int8_t *)a->data, *bp = (const int8_t *)b->data;
  int8_t *yp = (int8_t *)y->data;
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, y->shape, y->ndim, 2, sa, sb, NULL);
  for (int64_t i = 0; i < y->numel; i++) {
    int64_t p = ((int64_t)ap[it.off[0]] - za) * ((int64_t)bp[it.off[1]] - zb);
    yp[i] = q8_finish(q8_round_shift(p * m, s), zo, lo, hi);
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}
