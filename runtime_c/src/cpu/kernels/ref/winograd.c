/* Reference conv2d_winograd: a 3x3, stride-1 convolution computed by Winograd F(m x m, 3 x 3)
 * (m = 2 or 4) from weights the exporter transformed (sdk/openaccel/exporter/winograd.py: U =
 * G g G^T in the layout [(m+2)^2, ceil(K / block), C, block]). For every output tile:
 *   V_c = B^T d_c B for each input channel c (d_c: the (m+2) x (m+2) input tile, zero-padded),
 *   M[xi] = sum_c U[xi][k][c] V_c[xi] for each output channel k,
 *   Y = A^T M A, + bias + addend, activation, stored where the output exists.
 * Everything after the stored U is computed in double, so this kernel's error is U's rounding
 * to float32 alone (about 2e-6 of the output's magnitude for m = 4; see winograd.py); the
 * optimized kernels (opt/winograd.c) compute in float.
 * Transform terms with a zero coefficient are skipped, as the optimized kernels' formulas do, so
 * NaN and infinity spread the same way in both: to the outputs of every tile whose input tile
 * holds them (a superset of the direct convolution's; an infinity can become NaN). */
#include <stdint.h>

#include "kernels/kernel.h"

#define WINO_PAD_MAX 2 /* kernel size - 1: a larger pad only adds outputs that see no input */
#define WINO_BLOCK_MAX 64

/* plan->params */
enum { W_N, W_C, W_H, W_W, W_K, W_OH, W_OW, W_M, W_PH, W_PW, W_ACT, W_BLOCK, W_KB };

static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                 {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* ints[i] / floats[i], or 0 when the instruction stops before it; i is an OA_ARG_CONV2D_WINOGRAD_* index */
static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static double farg(const oa_op_call_t *call, uint32_t i) { return i < call->n_floats ? call->floats[i] : 0.0; }

oa_status_t oa_ref_conv2d_winograd_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                           oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 4, 1, 5, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const oa_tensor_t *add = call->n_inputs > 3 ? call->inputs[3] : NULL;
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, w, x, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 4, 4, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, 4, 4, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_ndim(call, out, 4, 4, "output 0", diag))) return st;
  const int64_t m = iarg(call, OA_ARG_CONV2D_WINOGRAD_TILE), ph = iarg(call, OA_ARG_CONV2D_WINOGRAD_PAD_H);
  const int64_t pw = iarg(call, OA_ARG_CONV2D_WINOGRAD_PAD_W), act = iarg(call, OA_ARG_CONV2D_WINOGRAD_ACT);
  const int64_t block = iarg(call, OA_ARG_CONV2D_WINOGRAD_BLOCK);
  if (m != 2 && m != 4)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "argument tile = %lld is not supported (expected 2 or 4)",
                        (long long)m);
  if (ph < 0 || ph > WINO_PAD_MAX || pw < 0 || pw > WINO_PAD_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "arguments pad_h = %lld, pad_w = %lld are out of range (expected 0 to %d)", (long long)ph,
                        (long long)pw, WINO_PAD_MAX);
  if (act < 0 || act > 2)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "argument act = %lld is not a known activation (0, 1, 2)",
                        (long long)act);
  if (block < 1 || block > WINO_BLOCK_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument block = %lld is out of range (expected 1 to %d)",
                        (long long)block, WINO_BLOCK_MAX);
  const int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], wd = x->shape[3];
  const int64_t k = out->shape[1], a = m + 2;
  const int64_t oh = h + 2 * ph - 2, ow = wd + 2 * pw - 2;
  char s[128];
  if (oh < 1 || ow < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): padded input %s (pad %lld, %lld) is smaller than the 3 x 3 kernel",
                        x->name, oa_shape_str(x, s, sizeof s), (long long)ph, (long long)pw);
  const int64_t want_out[4] = {n, k, oh, ow};
  if ((st = oa_check_shape(call, out, want_out, 4, "output 0", diag))) return st;
  if (k < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): expected at least 1 output channel",
                        out->name);
  const int64_t kb = (k + block - 1) / block;
  const int64_t want_w[4] = {a * a, kb, c, block};
  if ((st = oa_check_shape(call, w, want_w, 4, "input 1 (weight)", diag))) return st;
  if (b) {
    if ((st = oa_check_same_dtype(call, b, x, "input 2 (bias)", diag))) return st;
    if ((st = oa_check_shape(call, b, &k, 1, "input 2 (bias)", diag))) return st;
  }
  if (add) {
    if ((st = oa_check_same_dtype(call, add, x, "input 3 (addend)", diag))) return st;
    if ((st = oa_check_same_shape(call, add, out, "input 3 (addend)", diag))) return st;
  }
  int64_t *p = plan->params;
  p[W_N] = n;
  p[W_C] = c;
  p[W_H] = h;
  p[W_W] = wd;
  p[W_K] = k;
  p[W_OH] = oh;
  p[W_OW] = ow;
  p[W_M] = m;
  p[W_PH] = ph;
  p[W_PW] = pw;
  p[W_ACT] = act;
  p[W_BLOCK] = block;
  p[W_KB] = kb;
  /* V of every input channel of one tile, then M and a row pass temporary: (c + 2) a^2 doubles
   * (c < 2^50 / (a^2 kb block) since the weight passed the loader's size limit) */
  if ((uint64_t)c > (uint64_t)(SIZE_MAX / sizeof(double) / 36 - 2))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "input 0 (input): %lld channels are too many for this platform",
                        (long long)c);
  plan->scratch_bytes = (size_t)(c + 2) * (size_t)(a * a) * sizeof(double);
  return OA_OK;
}

oa_status_t oa_ref_conv2d_winograd_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                       const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_batch = p[W_N], c_n = p[W_C], h = p[W_H], wd = p[W_W], k_n = p[W_K], oh = p[W_OH], ow = p[W_OW];
  const int64_t m = p[W_M], ph = p[W_PH], pw = p[W_PW], act = p[W_ACT], block = p[W_BLOCK], kb_n = p[W_KB];
  const int64_t a = m + 2, aa = a * a;
  const double *bt = m == 2 ? &BT2[0][0] : &BT4[0][0];
  const double *at = m == 2 ? &AT2[0][0] : &AT4[0][0];
  const float *x = (const float *)call->inputs[0]->data;
  const float *u = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const oa_tensor_t *ta = call->n_inputs > 3 ? call->inputs[3] : NULL;
  const float *bias = tb ? (const float *)tb->data : NULL;
  const float *addend = ta ? (const float *)ta->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const double lo = farg(call, OA_ARG_CONV2D_WINOGRAD_ACT_MIN), hi = farg(call, OA_ARG_CONV2D_WINOGRAD_ACT_MAX);
  double *v = (double *)scratch;    /* [c][aa] */
  double *mm = v + c_n * aa;        /* [aa] */
  double *tmp = mm + aa;            /* [aa] */
  const int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  for (int64_t nb = 0; nb < n_batch; nb++) {
    const float *xn = x + nb * c_n * h * wd;
    for (int64_t ty = 0; ty < th; ty++) {
      for (int64_t tx = 0; tx < tw; tx++) {
        /* input transform of every channel: tmp = B^T d, V = tmp B */
        for (int64_t c = 0; c < c_n; c++) {
          const float *xc = xn + c * h * wd;
          double d[36];
          for (int64_t i = 0; i < a; i++) {
            const int64_t iy = ty * m + i - ph;
            for (int64_t j = 0; j < a; j++) {
              const int64_t ix = tx * m + j - pw;
              d[i * a + j] = (iy >= 0 && iy < h && ix >= 0 && ix < wd) ? (double)xc[iy * wd + ix] : 0.0;
            }
          }
          for (int64_t i = 0; i < a; i++)
            for (int64_t j = 0; j < a; j++) {
              double s = 0.0;
              for (int64_t r = 0; r < a; r++)
                if (bt[i * a + r] != 0.0) s += bt[i * a + r] * d[r * a + j];
              tmp[i * a + j] = s;
            }
          double *vc = v + c * aa;
          for (int64_t i = 0; i < a; i++)
            for (int64_t j = 0; j < a; j++) {
              double s = 0.0;
              for (int64_t r = 0; r < a; r++)
                if (bt[j * a + r] != 0.0) s += tmp[i * a + r] * bt[j * a + r];
              vc[i * a + j] = s;
            }
        }
        for (int64_t k = 0; k < k_n; k++) {
          const int64_t kb = k / block, kj = k % block;
          for (int64_t xi = 0; xi < aa; xi++) {
            const float *uk = u + (xi * kb_n + kb) * c_n * block + kj;
            double s = 0.0;
            for (int64_t c = 0; c < c_n; c++) s += (double)uk[c * block] * v[c * aa + xi];
            mm[xi] = s;
          }
          /* output transform: tmp = A^T M (m x a), Y = tmp A (m x m) */
          for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < a; j++) {
              double s = 0.0;
              for (int64_t i = 0; i < a; i++)
                if (at[r * a + i] != 0.0) s += at[r * a + i] * mm[i * a + j];
              tmp[r * a + j] = s;
            }
          const int64_t plane = (nb * k_n + k) * oh * ow;
          for (int64_t r = 0; r < m; r++) {
            const int64_t oy = ty * m + r;
            if (oy >= oh) break;
            for (int64_t q = 0; q < m; q++) {
              const int64_t ox = tx * m + q;
              if (ox >= ow) break;
              double s = 0.0;
              for (int64_t j = 0; j < a; j++)
                if (at[q * a + j] != 0.0) s += tmp[r * a + j] * at[q * a + j];
              if (bias) s += (double)bias[k];
              if (addend) s += (double)addend[plane + oy * ow + ox];
              y[plane + oy * ow + ox] = oa_fused_act_to_float(s, act, lo, hi);
            }
          }
        }
      }
    }
  }
  return OA_OK;
}
