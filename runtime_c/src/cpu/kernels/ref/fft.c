/* Reference kernels of the fft family: fft_r2c (float32 -> complex64), fft_c2c (complex64) and
 * fft_c2r (complex64 -> float32), over one or more dims, ATen's _fft_r2c / _fft_c2c / _fft_c2r.
 *
 * complex64 elements are interleaved float32 (real, imaginary) pairs. Every transform runs in double
 * and each output is rounded to float once, so the result is the float32 value nearest the exact DFT
 * (the tests compare with PyTorch in float64; float32 PyTorch, pocketfft in float, is an ulp or so
 * further from it). A 1-D transform of length n is a mixed-radix Cooley-Tukey FFT (decimation in
 * time by the smallest prime factor of n, each combine in place): O(n log n) for lengths with small
 * factors, O(n^2) (a plain DFT) for a prime n. The roots of unity are computed by octant so that the
 * exact ones (1, i, -1, -i) are exact.
 *
 * Several dims: r2c transforms the last listed dim real-to-complex, then the others complex-to-
 * complex; c2r the others (backward) first, then the last one complex-to-real (bins past n/2 are the
 * conjugates of the first ones; the imaginary parts of bin 0 and, for an even n, bin n/2 are ignored,
 * as pocketfft does). The intermediate is a double copy of the signal in scratch.
 *
 * Scratch (planned in prepare): four rows of the longest signal, complex double (the line, its
 * transform, the combine's temporary and the roots of unity), plus with several dims the double copy. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

#define OA_PI 3.14159265358979323846

enum fft_kind { K_R2C, K_C2C, K_C2R };

/* plan->params */
enum { P_NDIMS, P_MAXN, P_WORK };

/* ---- 1-D transform -------------------------------------------------------------------------- */

/* cos and sin of 2 pi k / n, reduced to [0, pi/4] by the octant symmetries (exact at multiples of pi/2). */
static void unit_root(int64_t k, int64_t n, double *c, double *s) {
  k %= n;
  int neg_s = 0, neg_c = 0, swap = 0;
  if (2 * k > n) { /* 2 pi - a */
    k = n - k;
    neg_s = 1;
  }
  int64_t num = 2 * k; /* angle = pi num / n in [0, pi] */
  if (2 * num > n) {    /* pi - a */
    num = n - num;
    neg_c = 1;
  }
  /* angle = pi num / (n) in [0, pi/2]; past pi/4 use pi/2 - a */
  double a;
  if (4 * num > n) {
    swap = 1;
    a = OA_PI * (double)(n - 2 * num) / (2.0 * (double)n);
  } else {
    a = OA_PI * (double)num / (double)n;
  }
  double cc = cos(a), ss = sin(a);
  if (swap) {
    double t = cc;
    cc = ss;
    ss = t;
  }
  *c = neg_c ? -cc : cc;
  *s = neg_s ? -ss : ss;
}

/* w[k] = e^(sign 2 pi i k / n), k < n (interleaved re, im) */
static void roots(double *w, int64_t n, int sign) {
  for (int64_t k = 0; k < n; k++) {
    double c, s;
    unit_root(k, n, &c, &s);
    w[2 * k] = c;
    w[2 * k + 1] = sign < 0 ? -s : s;
  }
}

static int64_t smallest_factor(int64_t n) {
  if (n % 2 == 0) return 2;
  for (int64_t p = 3; p <= n / p; p += 2)
    if (n % p == 0) return p;
  return n;
}

/* out[k] = sum_j x[j stride] W^(j k wstep), k < n, for W the table's root of unity (n * wstep = its
 * length). Decimation in time by p, the smallest prime factor of n: the p sub-transforms of the
 * inputs j = r mod p land at out[r m .. r m + m), m = n / p; output k + m q (q < p) then needs exactly
 * the p values at k + m r, so each k is combined in place through `tmp` (p entries). */
static void fft_rec(const double *x, int64_t stride, int64_t n, double *out, const double *w, int64_t wstep,
                    int64_t wlen, double *tmp) {
  if (n == 1) {
    out[0] = x[0];
    out[1] = x[1];
    return;
  }
  const int64_t p = smallest_factor(n), m = n / p;
  for (int64_t r = 0; r < p; r++) fft_rec(x + 2 * r * stride, stride * p, m, out + 2 * r * m, w, wstep * p, wlen, tmp);
  for (int64_t k = 0; k < m; k++) {
    for (int64_t r = 0; r < p; r++) { /* tmp[r] = Y_r[k] W^(r k wstep) */
      const double yr = out[2 * (r * m + k)], yi = out[2 * (r * m + k) + 1];
      const int64_t e = (r * k % wlen) * wstep % wlen;
      const double cr = w[2 * e], ci = w[2 * e + 1];
      tmp[2 * r] = yr * cr - yi * ci;
      tmp[2 * r + 1] = yr * ci + yi * cr;
    }
    for (int64_t q = 0; q < p; q++) { /* out[k + m q] = sum_r tmp[r] W^(r q m wstep) */
      double sr = 0.0, si = 0.0;
      const int64_t step = (q * m % wlen) * wstep % wlen;
      int64_t e = 0;
      for (int64_t r = 0; r < p; r++) {
        const double cr = w[2 * e], ci = w[2 * e + 1];
        sr += tmp[2 * r] * cr - tmp[2 * r + 1] * ci;
        si += tmp[2 * r] * ci + tmp[2 * r + 1] * cr;
        e += step;
        if (e >= wlen) e -= wlen;
      }
      out[2 * (q * m + k)] = sr;
      out[2 * (q * m + k) + 1] = si;
    }
  }
}

/* ---- lines of a tensor ------------------------------------------------------------------------- */

typedef struct {
  double *a, *b, *tmp, *w; /* rows: the line, its transform, the combine's temporary, the roots */
  int64_t wlen;            /* n of the roots in w (0: none yet) */
  int wsign;
} rows_t;

/* the roots of unity for length n in direction sign, computed once per run of equal lines */
static void want_roots(rows_t *R, int64_t n, int sign) {
  if (R->wlen == n && R->wsign == sign) return;
  roots(R->w, n, sign);
  R->wlen = n;
  R->wsign = sign;
}

/* the line's transform: R->b = DFT(R->a), length n */
static void transform(rows_t *R, int64_t n, int sign) {
  want_roots(R, n, sign);
  fft_rec(R->a, 1, n, R->b, R->w, 1, n, R->tmp);
}

/* outer / inner sizes of dim d of a shape: a line along d starts at o * len * inner + i, stride inner */
static void line_geometry(const int64_t *shape, int32_t ndim, int32_t d, int64_t *outer, int64_t *inner) {
  int64_t o = 1, in = 1;
  for (int32_t k = 0; k < d; k++) o *= shape[k];
  for (int32_t k = d + 1; k < ndim; k++) in *= shape[k];
  *outer = o;
  *inner = in;
}

/* c2c along dim d of the double complex buffer B (shape, ndim), in place */
static void c2c_dim(double *B, const int64_t *shape, int32_t ndim, int32_t d, int sign, rows_t *R) {
  int64_t outer, inner;
  const int64_t n = shape[d];
  line_geometry(shape, ndim, d, &outer, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double *base = B + 2 * (o * n * inner + i);
      for (int64_t j = 0; j < n; j++) {
        R->a[2 * j] = base[2 * j * inner];
        R->a[2 * j + 1] = base[2 * j * inner + 1];
      }
      transform(R, n, sign);
      for (int64_t j = 0; j < n; j++) {
        base[2 * j * inner] = R->b[2 * j];
        base[2 * j * inner + 1] = R->b[2 * j + 1];
      }
    }
}

/* ---- arguments and prepare ------------------------------------------------------------------- */

typedef struct {
  int kind;
  int64_t norm;
  int64_t flag;      /* r2c: onesided; c2c: forward */
  int32_t ndims;
  int32_t dims[OA_MAX_DIMS];
} fft_args_t;

static uint32_t first_dim_arg(int kind) {
  return kind == K_R2C ? OA_ARG_FFT_R2C_DIMS : kind == K_C2C ? OA_ARG_FFT_C2C_DIMS : OA_ARG_FFT_C2R_DIMS;
}

static void read_args(const oa_op_call_t *call, int kind, fft_args_t *A) {
  memset(A, 0, sizeof *A);
  A->kind = kind;
  A->norm = call->ints[kind == K_R2C ? OA_ARG_FFT_R2C_NORMALIZATION
                       : kind == K_C2C ? OA_ARG_FFT_C2C_NORMALIZATION
                                       : OA_ARG_FFT_C2R_NORMALIZATION];
  A->flag = kind == K_R2C ? call->ints[OA_ARG_FFT_R2C_ONESIDED] : kind == K_C2C ? call->ints[OA_ARG_FFT_C2C_FORWARD] : 0;
  const uint32_t first = first_dim_arg(kind);
  A->ndims = (int32_t)(call->n_ints - first);
  for (int32_t k = 0; k < A->ndims && k < OA_MAX_DIMS; k++) A->dims[k] = (int32_t)call->ints[first + (uint32_t)k];
}

static oa_status_t fft_prepare(const oa_op_call_t *call, int kind, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  const uint32_t first = first_dim_arg(kind);
  if ((st = oa_check_arity(call, 1, 1, 1, first + 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, kind == K_R2C ? OA_DT_F32 : OA_DT_C64, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, kind == K_C2R ? OA_DT_F32 : OA_DT_C64, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  const uint32_t nd = call->n_ints - first;
  if (nd > (uint32_t)x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: %u dims for a %d-dim input", nd, x->ndim);
  fft_args_t A;
  read_args(call, kind, &A);
  if (A.norm < 0 || A.norm > 2)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument normalization = %lld: expected 0 (none), 1 (1/sqrt(n)) or 2 (1/n)", (long long)A.norm);
  if (A.flag != 0 && A.flag != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld: expected 0 or 1",
                        kind == K_R2C ? "onesided" : "forward", (long long)A.flag);
  int seen[OA_MAX_DIMS] = {0};
  for (uint32_t k = 0; k < nd; k++) {
    const int64_t d = call->ints[first + k];
    if (d < 0 || d >= x->ndim)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld is out of range for a %d-dim input",
                          k, (long long)d, x->ndim);
    if (seen[d]++)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld is listed twice", k, (long long)d);
  }
  /* shapes: the output is the input's but for the last listed dim (r2c onesided: n / 2 + 1; c2r: the
   * input has n / 2 + 1 of the output's n) */
  const int32_t last = A.dims[nd - 1];
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  if (kind == K_R2C && A.flag) want[last] = x->shape[last] / 2 + 1;
  if (kind == K_C2R) {
    if ((st = oa_check_ndim(call, y, x->ndim, x->ndim, "output 0", diag))) return st;
    want[last] = y->shape[last];
    if (x->shape[last] != y->shape[last] / 2 + 1) {
      char a[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 0 (self) ('%s') %s: dim %d has %lld bins, expected %lld for an output of length %lld",
                          x->name, oa_shape_str(x, a, sizeof a), (int)last, (long long)x->shape[last],
                          (long long)(y->shape[last] / 2 + 1), (long long)y->shape[last]);
    }
  }
  if ((st = oa_check_shape(call, y, want, x->ndim, "output 0", diag))) return st;
  /* signal lengths (the real side's for the last dim) must be >= 1 */
  const oa_tensor_t *sig = kind == K_C2R ? y : x;
  int64_t maxn = 1;
  for (uint32_t k = 0; k < nd; k++) {
    const int64_t n = sig->shape[A.dims[k]];
    if (n < 1) {
      char a[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s') %s: dim %d is empty (an FFT needs at least 1 point)",
                          kind == K_C2R ? "output 0" : "input 0 (self)", sig->name, oa_shape_str(sig, a, sizeof a),
                          (int)A.dims[k]);
    }
    if (n > maxn) maxn = n;
  }
  /* scratch in doubles: 4 rows of maxn complex values, plus the signal in double with several dims
   * (r2c: the output's size, c2c / c2r: the input's) */
  const int64_t work = nd > 1 ? (kind == K_R2C ? y->numel : x->numel) : 0;
  const uint64_t limit = (uint64_t)SIZE_MAX / sizeof(double); /* doubles */
  if ((uint64_t)maxn > limit / 16 || (uint64_t)work > limit / 4)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the transform (length %lld, %lld elements) needs more scratch than "
                        "this platform can address", (long long)maxn, (long long)work);
  plan->scratch_bytes = (size_t)(8 * maxn + 2 * work) * sizeof(double);
  plan->params[P_NDIMS] = nd;
  plan->params[P_MAXN] = maxn;
  plan->params[P_WORK] = work;
  return OA_OK;
}

/* ---- run ------------------------------------------------------------------------------------- */

static double scale_of(const fft_args_t *A, const oa_tensor_t *sig) {
  if (A->norm == 0) return 1.0;
  double n = 1.0;
  for (int32_t k = 0; k < A->ndims; k++) n *= (double)sig->shape[A->dims[k]];
  return A->norm == 1 ? 1.0 / sqrt(n) : 1.0 / n;
}

/* r2c along dim `last` of the float input into a complex destination: double (D, when `out` is NULL)
 * or complex64 `out` scaled by s; the output keeps `keep` bins */
static void r2c_lines(const oa_tensor_t *x, int32_t last, int64_t keep, double s, double *D, float *out, rows_t *R) {
  int64_t outer, inner;
  const int64_t n = x->shape[last];
  line_geometry(x->shape, x->ndim, last, &outer, &inner);
  const float *in = (const float *)x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const float *src = in + o * n * inner + i;
      for (int64_t j = 0; j < n; j++) {
        R->a[2 * j] = (double)src[j * inner];
        R->a[2 * j + 1] = 0.0;
      }
      transform(R, n, -1);
      const int64_t base = o * keep * inner + i;
      for (int64_t k = 0; k < keep; k++) {
        const int64_t at = 2 * (base + k * inner);
        if (out) {
          out[at] = (float)(R->b[2 * k] * s);
          out[at + 1] = (float)(R->b[2 * k + 1] * s);
        } else {
          D[at] = R->b[2 * k];
          D[at + 1] = R->b[2 * k + 1];
        }
      }
    }
}

/* c2r along dim `last`: source lines from `src` (double D or complex64 `in`, shape `shape` with h bins
 * on `last`) into the float output of length n there, scaled by s */
static void c2r_lines(const int64_t *shape, int32_t ndim, int32_t last, const double *D, const float *in,
                      const oa_tensor_t *y, double s, rows_t *R) {
  int64_t outer, inner;
  const int64_t h = shape[last], n = y->shape[last];
  line_geometry(shape, ndim, last, &outer, &inner);
  float *out = (float *)y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const int64_t base = o * h * inner + i;
      for (int64_t k = 0; k < h; k++) {
        const int64_t at = 2 * (base + k * inner);
        R->a[2 * k] = D ? D[at] : (double)in[at];
        R->a[2 * k + 1] = D ? D[at + 1] : (double)in[at + 1];
      }
      R->a[1] = 0.0;
      if (n % 2 == 0) R->a[2 * (n / 2) + 1] = 0.0;
      for (int64_t k = 1; k < h && n - k >= h; k++) { /* the Hermitian half */
        R->a[2 * (n - k)] = R->a[2 * k];
        R->a[2 * (n - k) + 1] = -R->a[2 * k + 1];
      }
      transform(R, n, 1);
      float *dst = out + o * n * inner + i;
      for (int64_t j = 0; j < n; j++) dst[j * inner] = (float)(R->b[2 * j] * s);
    }
}

static oa_status_t fft_run(const oa_op_call_t *call, int kind, const oa_op_plan_t *plan, void *scratch,
                           oa_diag_t *diag) {
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  fft_args_t A;
  read_args(call, kind, &A);
  if (A.ndims != plan->params[P_NDIMS]) return oa_diag_fail(diag, OA_ERR_INTERNAL, "plan mismatch (prepare skipped)");
  if (y->numel == 0) return OA_OK;
  const int64_t maxn = plan->params[P_MAXN], work = plan->params[P_WORK];
  double *base = (double *)scratch;
  rows_t R = {base, base + 2 * maxn, base + 4 * maxn, base + 6 * maxn, 0, 0};
  double *D = base + 8 * maxn;
  const int32_t last = A.dims[A.ndims - 1];
  const double s = scale_of(&A, kind == K_C2R ? y : x);
  if (kind == K_R2C) {
    if (A.ndims == 1) {
      r2c_lines(x, last, y->shape[last], s, NULL, (float *)y->data, &R);
      return OA_OK;
    }
    r2c_lines(x, last, y->shape[last], 1.0, D, NULL, &R);
    for (int32_t k = 0; k < A.ndims - 1; k++) c2c_dim(D, y->shape, y->ndim, A.dims[k], -1, &R);
  } else if (kind == K_C2C) {
    const float *in = (const float *)x->data;
    if (A.ndims == 1) { /* line by line from the input, no copy of it */
      int64_t outer, inner;
      const int64_t n = x->shape[last];
      line_geometry(x->shape, x->ndim, last, &outer, &inner);
      float *out = (float *)y->data;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
          const int64_t b0 = o * n * inner + i;
          for (int64_t j = 0; j < n; j++) {
            R.a[2 * j] = (double)in[2 * (b0 + j * inner)];
            R.a[2 * j + 1] = (double)in[2 * (b0 + j * inner) + 1];
          }
          transform(&R, n, A.flag ? -1 : 1);
          for (int64_t j = 0; j < n; j++) {
            out[2 * (b0 + j * inner)] = (float)(R.b[2 * j] * s);
            out[2 * (b0 + j * inner) + 1] = (float)(R.b[2 * j + 1] * s);
          }
        }
      return OA_OK;
    }
    for (int64_t e = 0; e < 2 * work; e++) D[e] = (double)in[e];
    for (int32_t k = 0; k < A.ndims; k++) c2c_dim(D, x->shape, x->ndim, A.dims[k], A.flag ? -1 : 1, &R);
  } else {
    if (A.ndims == 1) {
      c2r_lines(x->shape, x->ndim, last, NULL, (const float *)x->data, y, s, &R);
      return OA_OK;
    }
    const float *in = (const float *)x->data;
    for (int64_t e = 0; e < 2 * work; e++) D[e] = (double)in[e];
    for (int32_t k = 0; k < A.ndims - 1; k++) c2c_dim(D, x->shape, x->ndim, A.dims[k], 1, &R);
    c2r_lines(x->shape, x->ndim, last, D, NULL, y, s, &R);
    return OA_OK;
  }
  /* r2c / c2c over several dims: D holds the output's values */
  float *out = (float *)y->data;
  for (int64_t e = 0; e < 2 * y->numel; e++) out[e] = (float)(D[e] * s);
  return OA_OK;
}

#define FFT_KERNEL(name, kind)                                                                             \
  oa_status_t oa_ref_##name##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                      oa_diag_t *diag) {                                                   \
    (void)env;                                                                                             \
    return fft_prepare(call, kind, plan, diag);                                                            \
  }                                                                                                        \
  oa_status_t oa_ref_##name##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,        \
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {                           \
    (void)env;                                                                                             \
    return fft_run(call, kind, plan, scratch, diag);                                                       \
  }

FFT_KERNEL(fft_r2c, K_R2C)
FFT_KERNEL(fft_c2c, K_C2C)
FFT_KERNEL(fft_c2r, K_C2R)
