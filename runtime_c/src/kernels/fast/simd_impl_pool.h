/* Pooling part of simd_impl.h: max_pool2d, avg_pool2d, adaptive_avg_pool2d on float32 [*, H, W].
 *
 * One output row of a plane at a time: the window's input rows are first reduced vertically
 * (max or sum, vectorized along W) into a row buffer on the stack that also holds the padding
 * (-inf or 0), then each output takes the horizontal max / sum of its taps in that buffer:
 * vectorized for stride 1 and stride 2 (even lanes of two loads), scalar otherwise. Wide rows go
 * through the buffer in tiles of outputs. Max pooling is exact and propagates NaN like the
 * reference; averages are float sums divided once (the reference sums in double). */

#define SP_TMP 1024   /* row buffer columns */
#define SP_MAXWIN 512 /* widest window (kw - 1) * dw + 1 handled; wider ones decline */

enum { PP_PLANES, PP_H, PP_W, PP_OH, PP_OW, PP_KH, PP_KW, PP_SH, PP_SW, PP_PH, PP_PW, PP_DH, PP_DW, PP_CIP, PP_DIV };
enum { SP_MAX, SP_AVG, SP_ADAPTIVE };

typedef struct {
  const float *x;
  float *y;
  int mode;
  int64_t p[16];
} sp_ctx_t;

static inline float sp_max_nan_s(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }

/* tmp[c], c in [0, len): the vertical max / sum over `nrows` input rows (first row `x0`, the
 * next ones `rstep` elements apart) of input column c0 + c; `pad` outside [0, w) or when there
 * are no rows. Also pads 2 * VW columns past len (the stride-2 loads read one past). */
static void sp_vertical(float *tmp, const float *x0, int64_t rstep, int64_t nrows, int64_t c0, int64_t len, int64_t w,
                        int is_max) {
  const float pad = is_max ? -INFINITY : 0.0f;
  int64_t lo = simd_max64(0, -c0), hi = simd_min64(len, w - c0);
  if (nrows <= 0 || hi < lo) hi = lo;
  for (int64_t c = 0; c < lo; c++) tmp[c] = pad;
  for (int64_t c = hi; c < len + 2 * VW; c++) tmp[c] = pad;
  if (hi == lo) return;
  const float *src = x0 + (c0 + lo); /* c0 + lo >= 0 */
  float *dst = tmp + lo;
  const int64_t n = hi - lo;
  int64_t c = 0;
  for (; c + VW <= n; c += VW) {
    vf a = vf_load(src + c);
    for (int64_t r = 1; r < nrows; r++) {
      const vf v = vf_load(src + r * rstep + c);
      a = is_max ? vf_max_nan(a, v) : vf_add(a, v);
    }
    vf_store(dst + c, a);
  }
  if (c < n) {
    vf a = vf_load_part(src + c, n - c, pad);
    for (int64_t r = 1; r < nrows; r++) {
      const vf v = vf_load_part(src + r * rstep + c, n - c, pad);
      a = is_max ? vf_max_nan(a, v) : vf_add(a, v);
    }
    vf_store_part(dst + c, n - c, a);
  }
}

/* out[j] = max / sum over k < kw of tmp[j * sw + k * dw], j < n_out */
static void sp_horizontal(const float *tmp, float *out, int64_t n_out, int64_t kw, int64_t sw, int64_t dw, int is_max) {
  int64_t j = 0;
  if (sw == 1) {
    for (; j + VW <= n_out; j += VW) {
      vf a = vf_load(tmp + j);
      for (int64_t k = 1; k < kw; k++) {
        const vf v = vf_load(tmp + j + k * dw);
        a = is_max ? vf_max_nan(a, v) : vf_add(a, v);
      }
      vf_store(out + j, a);
    }
  } else if (sw == 2) {
    for (; j + VW <= n_out; j += VW) {
      const float *t = tmp + 2 * j;
      vf a = vf_even(vf_load(t), vf_load(t + VW));
      for (int64_t k = 1; k < kw; k++) {
        const vf v = vf_even(vf_load(t + k * dw), vf_load(t + k * dw + VW));
        a = is_max ? vf_max_nan(a, v) : vf_add(a, v);
      }
      vf_store(out + j, a);
    }
  }
  for (; j < n_out; j++) {
    const float *t = tmp + j * sw;
    float a = t[0];
    for (int64_t k = 1; k < kw; k++) a = is_max ? sp_max_nan_s(a, t[k * dw]) : a + t[k * dw];
    out[j] = a;
  }
}

/* One output row (plane, oh) of max_pool2d / avg_pool2d. */
static void sp_window_row(const sp_ctx_t *c, int64_t plane, int64_t oh, float *tmp, float *dv) {
  const int64_t *p = c->p;
  const int64_t h = p[PP_H], w = p[PP_W], ow_n = p[PP_OW], kh = p[PP_KH], kw = p[PP_KW];
  const int64_t sh = p[PP_SH], sw = p[PP_SW], ph = p[PP_PH], pw = p[PP_PW], dh = p[PP_DH], dw = p[PP_DW];
  const int is_max = c->mode == SP_MAX;
  const float *xp = c->x + plane * h * w;
  float *yp = c->y + (plane * p[PP_OH] + oh) * ow_n;
  /* valid window rows ih0 + k dh, k in [k_lo, k_hi) */
  const int64_t ih0 = oh * sh - ph;
  const int64_t k_lo = ih0 < 0 ? (-ih0 + dh - 1) / dh : 0;
  const int64_t k_hi = ih0 > h - 1 ? 0 : simd_min64(kh, (h - 1 - ih0) / dh + 1);
  const int64_t nrows = simd_max64(0, k_hi - k_lo);
  const float *x0 = xp + (nrows > 0 ? (ih0 + k_lo * dh) * w : 0);
  const int64_t span = (kw - 1) * dw + 1;
  const int64_t tile = (SP_TMP - span) / sw + 1;
  /* avg: rows counted by the divisor (count_include_pad: up to h + pad) */
  const int64_t pool_h = simd_min64(ih0 + kh, h + ph) - ih0;
  for (int64_t t0 = 0; t0 < ow_n; t0 += tile) {
    const int64_t n_out = simd_min64(tile, ow_n - t0);
    const int64_t c0 = t0 * sw - pw, len = (n_out - 1) * sw + span;
    sp_vertical(tmp, x0, dh * w, nrows, c0, len, w, is_max);
    sp_horizontal(tmp, yp + t0, n_out, kw, sw, dw, is_max);
    if (is_max) continue;
    /* divisors (exact in float: checked in prepare); an empty window sums to 0 and divides by 1 */
    const int64_t cip = p[PP_CIP], divisor = p[PP_DIV];
    for (int64_t j = 0; j < n_out; j++) {
      const int64_t iw0 = (t0 + j) * sw - pw, iw1 = simd_min64(iw0 + kw, w + pw);
      const int64_t valid_w = simd_min64(iw1, w) - simd_max64(iw0, 0);
      const int64_t div = divisor ? divisor : (cip ? pool_h * (iw1 - iw0) : nrows * valid_w);
      dv[j] = nrows <= 0 || valid_w <= 0 ? 1.0f : (float)div;
    }
    float *o = yp + t0;
    int64_t j = 0;
    for (; j + VW <= n_out; j += VW) vf_store(o + j, vf_div(vf_load(o + j), vf_load(dv + j)));
    for (; j < n_out; j++) o[j] = o[j] / dv[j];
  }
}

/* One output row of adaptive_avg_pool2d (w <= SP_TMP), or a whole plane for a 1 x 1 output. */
static void sp_adaptive_row(const sp_ctx_t *c, int64_t plane, int64_t oh, float *tmp) {
  const int64_t *p = c->p;
  const int64_t h = p[PP_H], w = p[PP_W], oh_n = p[PP_OH], ow_n = p[PP_OW];
  const float *xp = c->x + plane * h * w;
  float *yp = c->y + (plane * oh_n + oh) * ow_n;
  if (oh_n == 1 && ow_n == 1) {
    yp[0] = (float)(simd_sum(xp, h * w) / (double)h / (double)w);
    return;
  }
  const int64_t ih0 = (oh * h) / oh_n, ih1 = ((oh + 1) * h + oh_n - 1) / oh_n;
  sp_vertical(tmp, xp + ih0 * w, w, ih1 - ih0, 0, w, w, 0);
  for (int64_t ow = 0; ow < ow_n; ow++) {
    const int64_t iw0 = (ow * w) / ow_n, iw1 = ((ow + 1) * w + ow_n - 1) / ow_n;
    float s = 0.0f;
    for (int64_t i = iw0; i < iw1; i++) s += tmp[i];
    yp[ow] = s / (float)((ih1 - ih0) * (iw1 - iw0));
  }
}

static void sp_range(void *pc, int64_t t0, int64_t t1) {
  const sp_ctx_t *c = (const sp_ctx_t *)pc;
  float tmp[SP_TMP + 2 * VW], dv[SP_TMP];
  const int64_t oh_n = c->p[PP_OH];
  for (int64_t t = t0; t < t1; t++) {
    if (c->mode == SP_ADAPTIVE) sp_adaptive_row(c, t / oh_n, t % oh_n, tmp);
    else sp_window_row(c, t / oh_n, t % oh_n, tmp, dv);
  }
}

/* input [*, H, W] (3 or 4 dims) float32, output [*, OH, OW]: fills planes and sizes */
static int sp_io(const oa_op_call_t *call, int64_t *p) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return 0;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!simd_is_f32(x) || !simd_is_f32(y) || x->ndim < 3 || x->ndim > 4 || y->ndim != x->ndim) return 0;
  int64_t planes = 1;
  for (int32_t d = 0; d < x->ndim - 2; d++) {
    if (y->shape[d] != x->shape[d]) return 0;
    planes *= x->shape[d];
  }
  p[PP_PLANES] = planes;
  p[PP_H] = x->shape[x->ndim - 2];
  p[PP_W] = x->shape[x->ndim - 1];
  p[PP_OH] = y->shape[y->ndim - 2];
  p[PP_OW] = y->shape[y->ndim - 1];
  return planes > 0 && p[PP_H] > 0 && p[PP_W] > 0 && p[PP_OH] > 0 && p[PP_OW] > 0;
}

static oa_status_t sp_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, int mode) {
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  int64_t *p = plan->params;
  if (!sp_io(call, p)) return OA_ERR_UNSUPPORTED;
  if (mode == SP_ADAPTIVE) {
    if (!(p[PP_OH] == 1 && p[PP_OW] == 1)) {
      if (p[PP_W] > SP_TMP) return OA_ERR_UNSUPPORTED;
      /* window sizes (<= ceil(in / out) + 1 each) must be exact as floats */
      const int64_t wh = p[PP_H] / p[PP_OH] + 2, ww = p[PP_W] / p[PP_OW] + 2;
      if (wh > (1 << 12) || ww > (1 << 12)) return OA_ERR_UNSUPPORTED;
    }
    return OA_OK;
  }
  const uint32_t need = mode == SP_MAX ? 8u : 6u;
  if (call->n_ints < need) return OA_ERR_UNSUPPORTED;
  for (uint32_t i = 0; i < 6; i++) p[PP_KH + i] = call->ints[i];
  p[PP_DH] = mode == SP_MAX ? call->ints[6] : 1;
  p[PP_DW] = mode == SP_MAX ? call->ints[7] : 1;
  p[PP_CIP] = mode == SP_AVG && call->n_ints > 7 ? call->ints[7] : 0;
  p[PP_DIV] = mode == SP_AVG && call->n_ints > 8 ? call->ints[8] : 0;
  if (p[PP_KH] < 1 || p[PP_KW] < 1 || p[PP_SH] < 1 || p[PP_SW] < 1 || p[PP_DH] < 1 || p[PP_DW] < 1) return OA_ERR_UNSUPPORTED;
  if (p[PP_PH] < 0 || p[PP_PW] < 0 || p[PP_KH] > (1 << 20) || p[PP_KW] > (1 << 20)) return OA_ERR_UNSUPPORTED;
  if (p[PP_SH] > (1 << 30) || p[PP_SW] > (1 << 30) || p[PP_DH] > (1 << 30) || p[PP_DW] > (1 << 30)) return OA_ERR_UNSUPPORTED;
  if ((p[PP_KW] - 1) * p[PP_DW] + 1 > SP_MAXWIN) return OA_ERR_UNSUPPORTED;
  if (mode == SP_AVG && (p[PP_KH] * p[PP_KW] > (1 << 24) || p[PP_DIV] > (1 << 24) || p[PP_DIV] < -(1 << 24)))
    return OA_ERR_UNSUPPORTED; /* divisors must be exact floats */
  return OA_OK;
}

static oa_status_t sp_run(const oa_op_call_t *call, const oa_op_plan_t *plan, const oa_kernel_env_t *env, int mode) {
  sp_ctx_t c;
  c.x = (const float *)call->inputs[0]->data;
  c.y = (float *)call->outputs[0]->data;
  c.mode = mode;
  memcpy(c.p, plan->params, sizeof c.p);
  const int64_t rows = c.p[PP_PLANES] * c.p[PP_OH];
  int64_t work = c.p[PP_OW] * (mode == SP_ADAPTIVE ? c.p[PP_H] * c.p[PP_W] / c.p[PP_OH] / c.p[PP_OW] + 1
                                                   : c.p[PP_KH] * c.p[PP_KW]);
  oa_parallel_for(env ? env->pool : NULL, rows, simd_max64(1, 16384 / simd_max64(work, 1)), sp_range, &c);
  return OA_OK;
}

#define SIMD_POOL(name, mode)                                                                              \
  oa_status_t OA_SIMD_FN(name##_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env,             \
                                         oa_op_plan_t *plan, oa_diag_t *diag) {                            \
    (void)diag;                                                                                            \
    return sp_prepare(call, env, plan, mode);                                                              \
  }                                                                                                        \
  oa_status_t OA_SIMD_FN(name##_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,    \
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {                        \
    (void)scratch;                                                                                         \
    (void)diag;                                                                                            \
    return sp_run(call, plan, env, mode);                                                                  \
  }

SIMD_POOL(max_pool2d, SP_MAX)
SIMD_POOL(avg_pool2d, SP_AVG)
SIMD_POOL(adaptive_avg_pool2d, SP_ADAPTIVE)
