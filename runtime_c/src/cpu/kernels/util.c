/* Shared checks and helpers for kernels. */
#include <math.h>
#include <string.h>

#include "kernel.h"
#include "kernels/quant_rule.h"

const char *oa_shape_str(const oa_tensor_t *t, char *buf, size_t size) {
  size_t n = oa_format(buf, size, "[");
  for (int32_t d = 0; d < t->ndim && n + 1 < size; d++)
    n += oa_format(buf + n, size - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
  if (n + 1 < size) oa_format(buf + n, size - n, "]");
  return buf;
}

oa_status_t oa_check_arity(const oa_op_call_t *call, uint32_t min_in, uint32_t max_in, uint32_t n_out,
                           uint32_t min_ints, uint32_t min_floats, oa_diag_t *diag) {
  if (call->n_inputs < min_in || call->n_inputs > max_in) {
    if (min_in == max_in)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected %u inputs, received %u", min_in, call->n_inputs);
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected %u to %u inputs, received %u", min_in, max_in,
                        call->n_inputs);
  }
  if (call->n_outputs != n_out)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected %u outputs, received %u", n_out, call->n_outputs);
  if (call->n_ints < min_ints)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected at least %u integer arguments, received %u", min_ints,
                        call->n_ints);
  if (call->n_floats < min_floats)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected at least %u float arguments, received %u",
                        min_floats, call->n_floats);
  for (uint32_t i = 0; i < call->n_outputs; i++)
    if (!call->outputs[i]) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output %u is missing", i);
  return OA_OK;
}

oa_status_t oa_check_present(const oa_op_call_t *call, uint32_t i, const char *arg, oa_diag_t *diag) {
  if (i >= call->n_inputs || !call->inputs[i])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s is required but absent", arg);
  return OA_OK;
}

oa_status_t oa_check_dtype(const oa_op_call_t *call, const oa_tensor_t *t, uint64_t allowed, const char *arg,
                           oa_diag_t *diag) {
  (void)call;
  if (t->dtype < 0 || t->dtype > 63 || !(allowed & OA_DTYPE_BIT(t->dtype))) {
    char names[160];
    size_t n = 0;
    names[0] = '\0';
    for (int32_t d = 0; d < 64; d++)
      if (allowed & OA_DTYPE_BIT(d)) n += oa_format(names + n, sizeof names - n, n ? ", %s" : "%s", oa_dtype_name(d));
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s ('%s'): dtype %s is not supported (expected one of: %s)", arg,
                        t->name, oa_dtype_name(t->dtype), names);
  }
  return OA_OK;
}

/* An input of conv2d_q8 / linear_q8 whose dtype changed with a file format: the dtype of older files
 * gets a message that says what changed and to export the model again */
static oa_status_t q8_format_dtype(const oa_op_call_t *call, const oa_tensor_t *t, const char *arg, int32_t want,
                                   const char *was, oa_diag_t *diag) {
  if (t->dtype == OA_DTYPE_INT32)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s: %s ('%s'): dtype int32, expected %s (%s; a file from an older "
                        "openaccel: export the model again)", call->op, arg, t->name, oa_dtype_name(want), was);
  return oa_check_dtype(call, t, OA_DTYPE_BIT(want), arg, diag);
}

oa_status_t oa_check_q8_shift_dtype(const oa_op_call_t *call, const oa_tensor_t *t, oa_diag_t *diag) {
  return q8_format_dtype(call, t, "input 4 (shift)", OA_DTYPE_INT8, "shifts are int8 since file format 1.2", diag);
}

oa_status_t oa_check_q8_bias_dtype(const oa_op_call_t *call, const oa_tensor_t *t, oa_diag_t *diag) {
  return q8_format_dtype(call, t, "input 2 (bias)", OA_DTYPE_FLOAT32,
                         "the bias is in output steps since file format 1.3", diag);
}

/* multiplier / shift / bias values (constants: checked at prepare when bound, always at run):
 * multiplier >= 0, shift in [12, 62], the bias finite with an addend below 2^61 (q8_bias_addend) */
oa_status_t oa_check_q8_requant_values(const oa_op_call_t *call, oa_diag_t *diag) {
  const oa_tensor_t *m = call->inputs[3], *s = call->inputs[4], *b = call->inputs[2];
  if (!m->data || !s->data || (b && !b->data)) return OA_OK;
  const int32_t *mv = (const int32_t *)m->data;
  const int8_t *sv = (const int8_t *)s->data;
  for (int64_t c = 0; c < m->numel; c++)
    if (mv[c] < 0)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "%s: input 3 (multiplier) ('%s'): element %lld = %ld: expected 0 to 2147483647", call->op,
                          m->name, (long long)c, (long)mv[c]);
  for (int64_t c = 0; c < s->numel; c++)
    if (sv[c] < Q8_MAC_SHIFT_MIN || sv[c] > Q8_SHIFT_MAX)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: input 4 (shift) ('%s'): element %lld = %d: expected %d to %d",
                          call->op, s->name, (long long)c, (int)sv[c], Q8_MAC_SHIFT_MIN, Q8_SHIFT_MAX);
  if (b) {
    const float *bv = (const float *)b->data;
    for (int64_t c = 0; c < b->numel; c++) {
      const int32_t sh = sv[s->numel == 1 ? 0 : c];
      if (!q8_bias_ok(bv[c], sh))
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                            "%s: input 2 (bias) ('%s'): element %lld = %.9g: expected a finite value below 2^%d "
                            "output steps in magnitude with shift %d", call->op, b->name, (long long)c, (double)bv[c],
                            Q8_BADD_BITS - sh, (int)sh);
    }
  }
  return OA_OK;
}

oa_status_t oa_check_same_dtype(const oa_op_call_t *call, const oa_tensor_t *t, const oa_tensor_t *ref,
                                const char *arg, oa_diag_t *diag) {
  (void)call;
  if (t->dtype != ref->dtype)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected dtype %s, received %s", arg, t->name,
                        oa_dtype_name(ref->dtype), oa_dtype_name(t->dtype));
  return OA_OK;
}

oa_status_t oa_check_ndim(const oa_op_call_t *call, const oa_tensor_t *t, int32_t min_ndim, int32_t max_ndim,
                          const char *arg, oa_diag_t *diag) {
  (void)call;
  if (t->ndim < min_ndim || t->ndim > max_ndim) {
    char s[128];
    if (min_ndim == max_ndim)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected %d dims, received %d (%s)", arg, t->name,
                          min_ndim, t->ndim, oa_shape_str(t, s, sizeof s));
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected %d to %d dims, received %d (%s)", arg,
                        t->name, min_ndim, max_ndim, t->ndim, oa_shape_str(t, s, sizeof s));
  }
  return OA_OK;
}

oa_status_t oa_check_shape(const oa_op_call_t *call, const oa_tensor_t *t, const int64_t *shape, int32_t ndim,
                           const char *arg, oa_diag_t *diag) {
  (void)call;
  int same = t->ndim == ndim;
  for (int32_t d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (!same) {
    oa_tensor_t want;
    memset(&want, 0, sizeof want);
    want.ndim = ndim;
    for (int32_t d = 0; d < ndim && d < OA_MAX_DIMS; d++) want.shape[d] = shape[d];
    char a[128], b[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected shape %s, received %s", arg, t->name,
                        oa_shape_str(&want, a, sizeof a), oa_shape_str(t, b, sizeof b));
  }
  return OA_OK;
}

oa_status_t oa_check_linear_io(const oa_op_call_t *call, const oa_tensor_t *x, int64_t k, const oa_tensor_t *out,
                               int64_t n, oa_diag_t *diag) {
  if (x->shape[x->ndim - 1] != k)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): last dim %lld does not match the weight's in_features %lld", x->name,
                        (long long)x->shape[x->ndim - 1], (long long)k);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  want[x->ndim - 1] = n;
  return oa_check_shape(call, out, want, x->ndim, "output 0", diag);
}

oa_status_t oa_check_same_shape(const oa_op_call_t *call, const oa_tensor_t *t, const oa_tensor_t *ref,
                                const char *arg, oa_diag_t *diag) {
  return oa_check_shape(call, t, ref->shape, ref->ndim, arg, diag);
}

int32_t oa_norm_dim(int64_t dim, int32_t ndim) {
  int32_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) return -1;
  return (int32_t)(dim < 0 ? dim + n : dim);
}

void oa_contiguous_strides(const int64_t *shape, int32_t ndim, int64_t *out_strides) {
  int64_t s = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    out_strides[d] = s;
    s *= shape[d];
  }
}

oa_status_t oa_broadcast_strides(const oa_op_call_t *call, const oa_tensor_t *t, const int64_t *out_shape,
                                 int32_t out_ndim, int64_t *out_strides, const char *arg, oa_diag_t *diag) {
  (void)call;
  if (t->ndim > out_ndim) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): shape %s has more dims than the output (%d)", arg,
                        t->name, oa_shape_str(t, s, sizeof s), out_ndim);
  }
  int64_t own[OA_MAX_DIMS];
  oa_contiguous_strides(t->shape, t->ndim, own);
  int32_t lead = out_ndim - t->ndim;
  for (int32_t d = 0; d < out_ndim; d++) {
    if (d < lead) {
      out_strides[d] = 0;
      continue;
    }
    int64_t n = t->shape[d - lead];
    if (n == out_shape[d]) {
      out_strides[d] = n == 1 ? 0 : own[d - lead];
    } else if (n == 1) {
      out_strides[d] = 0;
    } else {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "%s ('%s'): shape %s does not broadcast to the output (dim %d: %lld vs %lld)", arg, t->name,
                          oa_shape_str(t, s, sizeof s), d, (long long)n, (long long)out_shape[d]);
    }
  }
  return OA_OK;
}

void oa_nd_iter_init(oa_nd_iter_t *it, const int64_t *shape, int32_t ndim, int32_t n_operands, const int64_t *s0,
                     const int64_t *s1, const int64_t *s2) {
  const int64_t *s[3] = {s0, s1, s2};
  it->ndim = ndim;
  it->n_operands = n_operands;
  for (int32_t d = 0; d < ndim; d++) {
    it->shape[d] = shape[d];
    it->idx[d] = 0;
    for (int32_t k = 0; k < n_operands; k++) it->strides[k][d] = s[k][d];
  }
  for (int32_t k = 0; k < 3; k++) it->off[k] = 0;
}

double oa_load_as_double(const void *data, int32_t dtype, int64_t i) {
  switch (dtype) {
    case OA_DTYPE_FLOAT32: return ((const float *)data)[i];
    case OA_DTYPE_FLOAT64: return ((const double *)data)[i];
    case OA_DTYPE_COMPLEX64: return ((const float *)data)[2 * i]; /* the real part */
    case OA_DTYPE_INT32: return ((const int32_t *)data)[i];
    case OA_DTYPE_INT64: return (double)((const int64_t *)data)[i];
    case OA_DTYPE_INT16: return ((const int16_t *)data)[i];
    case OA_DTYPE_INT8: return ((const int8_t *)data)[i];
    case OA_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case OA_DTYPE_BOOL: return ((const uint8_t *)data)[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

/* Float -> integer conversion is undefined in C outside the target range; saturate instead (and
 * map NaN to 0) so hostile inputs cannot trigger undefined behaviour. */
static double clampd(double v, double lo, double hi) {
  if (v != v) return 0.0;
  return v < lo ? lo : (v > hi ? hi : v);
}

void oa_store_from_double(void *data, int32_t dtype, int64_t i, double v) {
  switch (dtype) {
    case OA_DTYPE_FLOAT32: ((float *)data)[i] = (float)v; break;
    case OA_DTYPE_FLOAT64: ((double *)data)[i] = v; break;
    case OA_DTYPE_COMPLEX64:
      ((float *)data)[2 * i] = (float)v;
      ((float *)data)[2 * i + 1] = 0.0f;
      break;
    case OA_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)clampd(v, -2147483648.0, 2147483647.0); break;
    case OA_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)clampd(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case OA_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)clampd(v, -32768.0, 32767.0); break;
    case OA_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)clampd(v, -128.0, 127.0); break;
    case OA_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)clampd(v, 0.0, 255.0); break;
    case OA_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0.0; break;
    default: break;
  }
}

int64_t oa_load_index(const oa_tensor_t *t, int64_t i) {
  if (t->dtype == OA_DTYPE_INT32) return ((const int32_t *)t->data)[i];
  return ((const int64_t *)t->data)[i];
}

const char *oa_position_str(const oa_tensor_t *t, int64_t i, char *buf, size_t size) {
  int64_t idx[OA_MAX_DIMS];
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d] > 0 ? t->shape[d] : 1;
    idx[d] = i % n;
    i /= n;
  }
  size_t w = oa_format(buf, size, "[");
  for (int32_t d = 0; d < t->ndim && w + 1 < size; d++)
    w += oa_format(buf + w, size - w, d ? ", %lld" : "%lld", (long long)idx[d]);
  if (w + 1 < size) oa_format(buf + w, size - w, "]");
  return buf;
}

void oa_copy_elem(void *dst, int64_t i, const void *src, int64_t j, size_t es) {
  uint8_t *d = (uint8_t *)dst;
  const uint8_t *s = (const uint8_t *)src;
  switch (es) {
    case 1: d[i] = s[j]; break;
    case 2: ((uint16_t *)dst)[i] = ((const uint16_t *)src)[j]; break;
    case 4: ((uint32_t *)dst)[i] = ((const uint32_t *)src)[j]; break;
    case 8: ((uint64_t *)dst)[i] = ((const uint64_t *)src)[j]; break;
    default: memcpy(d + i * (int64_t)es, s + j * (int64_t)es, es); break;
  }
}

oa_status_t oa_check_int_arg(const oa_op_call_t *call, uint32_t i, const char *name, int64_t lo, int64_t hi,
                             oa_diag_t *diag) {
  const int64_t v = i < call->n_ints ? call->ints[i] : 0;
  if (v < lo || v > hi)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld is out of range (expected %lld to %lld)",
                        name, (long long)v, (long long)lo, (long long)hi);
  return OA_OK;
}

/* floor division for a possibly negative numerator, positive d */
static int64_t div_floor(int64_t a, int64_t d) {
  int64_t q = a / d;
  return (a % d != 0 && a < 0) ? q - 1 : q;
}

int64_t oa_pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, int ceil_mode) {
  int64_t o = div_floor(in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) o--;
  return o;
}

oa_status_t oa_check_slice(const oa_tensor_t *x, int64_t dim, int64_t start, int64_t end, int64_t step,
                           int64_t *out_shape, oa_diag_t *diag) {
  if (dim < 0 || dim >= x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dim = %lld is out of range for a %d-dim tensor "
                        "(expected 0 to %d)", (long long)dim, x->ndim, x->ndim - 1);
  const int64_t size = x->shape[dim];
  if (step < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument step = %lld: expected a positive step",
                        (long long)step);
  if (start < 0 || start > size || end < start || end > size)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "arguments start = %lld, end = %lld: expected 0 <= start <= end <= %lld (size of dim %lld)",
                        (long long)start, (long long)end, (long long)size, (long long)dim);
  for (int32_t d = 0; d < x->ndim; d++) out_shape[d] = x->shape[d];
  out_shape[dim] = end == start ? 0 : (end - start - 1) / step + 1;
  return OA_OK;
}
