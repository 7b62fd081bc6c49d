/* Reference binary elementwise kernels with N-d broadcasting: arithmetic, comparisons, logical and
 * bitwise ops, and the 3-way `where`.
 *
 * Structure: prepare validates dtypes and that the output shape is exactly the broadcast of the
 * inputs. run collapses the broadcast into rows: size-1 dims are dropped and neighbouring dims
 * that are contiguous for every operand are merged, so the innermost dim is a row in which each
 * operand has stride 1 (contiguous) or 0 (broadcast). Equal shapes are one row of numel elements;
 * a scalar operand is a row with stride 0. A row function computes one row with a loop specialized
 * for those stride cases; the outer rows are walked with oa_nd_iter.
 *
 * The output may be input 0's own buffer (in-place, same shape as the output): rows read element
 * i of each input before writing element i, and input 0 is never broadcast in that case.
 *
 * Numerics follow ATen's CPU kernels: float32 math in float; integer arithmetic wraps around
 * (computed in unsigned types, so there is no signed overflow); integer division, remainder and
 * fmod by zero fail at run time naming the element. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

enum bin_op {
  B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MIN, B_MAX, B_REM, B_FMOD, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE,
  B_LAND, B_LOR, B_LXOR, B_BAND, B_BOR, B_BXOR, B_WHERE, B_ATAN2, B_COPYSIGN, B_HYPOT, B_NEXTAFTER
};

/* plan->params layout */
enum { P_MODE, P_ALPHA_I };

/* add and sub share the alpha code, which reads it by add's name */
_Static_assert(OA_ARG_SUB_ALPHA == OA_ARG_ADD_ALPHA, "sub's alpha no longer sits where add's does in opset.py");

typedef struct bin_args {
  int64_t ialpha;
  float falpha;
} bin_args_t;

/* One row: n elements; in[k] points at operand k's first element, s[k] is 0 (broadcast) or 1.
 * Returns -1, or the position of an element that cannot be computed (integer division by 0). */
typedef int64_t (*row_fn)(const char *const *in, const int64_t *s, char *out, int64_t n, const bin_args_t *P);

/* ---- element helpers ------------------------------------------------------------------------ */

static inline int32_t wrap_i32(uint32_t u) {
  return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - UINT32_C(0x80000000)) + INT32_MIN;
}
static inline int64_t wrap_i64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : (int64_t)(u - UINT64_C(0x8000000000000000)) + INT64_MIN;
}

/* ATen div_floor_floating */
static inline float div_floor_f32(float a, float b) {
  if (b == 0.0f) return a / b;
  float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) div -= 1.0f;
  float floordiv;
  if (div != 0.0f) {
    floordiv = floorf(div);
    if (div - floordiv > 0.5f) floordiv += 1.0f;
  } else {
    floordiv = copysignf(0.0f, a / b);
  }
  return floordiv;
}

/* ATen remainder: fmod, then moved to the divisor's sign */
static inline float rem_f32(float a, float b) {
  float mod = fmodf(a, b);
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) mod += b;
  return mod;
}

/* PyTorch's minimum / maximum propagate NaN */
static inline float min_f32(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
static inline float max_f32(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }

/* ATen powi: negative exponents give 1 / a^-b truncated (0 unless |a| == 1); wrap-around product */
static inline int32_t pow_i32(int32_t a, int32_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  uint32_t r = 1, base = (uint32_t)a, e = (uint32_t)b;
  while (e) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return wrap_i32(r);
}
static inline int64_t pow_i64(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  uint64_t r = 1, base = (uint64_t)a, e = (uint64_t)b;
  while (e) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return wrap_i64(r);
}

/* Integer division helpers; b != 0 is checked by the caller. b == -1 is special-cased because
 * INT_MIN / -1 overflows (PyTorch wraps to INT_MIN). */
#define INT_DIV_HELPERS(T, U, W, SUFFIX)                                                       \
  static inline T divt_##SUFFIX(T a, T b) { return b == -1 ? W((U)0 - (U)a) : a / b; }          \
  static inline T divf_##SUFFIX(T a, T b) {                                                      \
    if (b == -1) return W((U)0 - (U)a);                                                          \
    T q = a / b, r = a % b;                                                                      \
    return (r != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;                                         \
  }                                                                                              \
  static inline T rem_##SUFFIX(T a, T b) {                                                       \
    if (b == -1) return 0;                                                                       \
    T r = a % b;                                                                                 \
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;                                         \
  }                                                                                              \
  static inline T fmod_##SUFFIX(T a, T b) { return b == -1 ? 0 : a % b; }

INT_DIV_HELPERS(int32_t, uint32_t, wrap_i32, i32)
INT_DIV_HELPERS(int64_t, uint64_t, wrap_i64, i64)

/* ---- row functions ---------------------------------------------------------------------------- */

/* O[i] = EXPR(a, b) with a, b of type T; four loops for the stride cases. */
#define ROW2(NAME, T, TO, EXPR)                                                                           \
  static int64_t row_##NAME(const char *const *in, const int64_t *s, char *out, int64_t n, const bin_args_t *P) { \
    const T *A = (const T *)(const void *)in[0];                                                          \
    const T *B = (const T *)(const void *)in[1];                                                          \
    TO *O = (TO *)(void *)out;                                                                            \
    (void)P;                                                                                              \
    if (s[0] && s[1]) {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                                   \
        const T a = A[i], b = B[i];                                                                       \
        O[i] = (TO)(EXPR);                                                                                \
      }                                                                                                   \
    } else if (s[0]) {                                                                                    \
      const T b = B[0];                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                                   \
        const T a = A[i];                                                                                 \
        O[i] = (TO)(EXPR);                                                                                \
      }                                                                                                   \
    } else if (s[1]) {                                                                                    \
      const T a = A[0];                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                                   \
        const T b = B[i];                                                                                 \
        O[i] = (TO)(EXPR);                                                                                \
      }                                                                                                   \
    } else {                                                                                              \
      const T a = A[0], b = B[0];                                                                         \
      const TO v = (TO)(EXPR);                                                                            \
      for (int64_t i = 0; i < n; i++) O[i] = v;                                                           \
    }                                                                                                     \
    return -1;                                                                                            \
  }

/* Same, for integer ops that fail when b == 0 (returns the element's position in the row). */
#define ROW2Z(NAME, T, EXPR)                                                                              \
  static int64_t row_##NAME(const char *const *in, const int64_t *s, char *out, int64_t n, const bin_args_t *P) { \
    const T *A = (const T *)(const void *)in[0];                                                          \
    const T *B = (const T *)(const void *)in[1];                                                          \
    T *O = (T *)(void *)out;                                                                              \
    (void)P;                                                                                              \
    if (s[1]) {                                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                                   \
        const T a = A[s[0] ? i : 0], b = B[i];                                                            \
        if (b == 0) return i;                                                                             \
        O[i] = (EXPR);                                                                                    \
      }                                                                                                   \
    } else {                                                                                              \
      const T b = B[0];                                                                                   \
      if (b == 0) return 0;                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                                   \
        const T a = A[s[0] ? i : 0];                                                                      \
        O[i] = (EXPR);                                                                                    \
      }                                                                                                   \
    }                                                                                                     \
    return -1;                                                                                            \
  }

/* float32 */
ROW2(add_f32, float, float, a + P->falpha * b)
ROW2(sub_f32, float, float, a - P->falpha * b)
ROW2(mul_f32, float, float, a * b)
ROW2(div_f32, float, float, a / b)
ROW2(divt_f32, float, float, truncf(a / b))
ROW2(divf_f32, float, float, div_floor_f32(a, b))
ROW2(pow_f32, float, float, powf(a, b))
ROW2(min_f32, float, float, min_f32(a, b))
ROW2(max_f32, float, float, max_f32(a, b))
ROW2(rem_f32, float, float, rem_f32(a, b))
ROW2(fmod_f32, float, float, fmodf(a, b))
/* the float math of two arguments (ref/math.c's rule): atan2 and hypot in double, rounded once
 * (hypot keeps C's inf over NaN); copysign and nextafter are exact in float */
ROW2(atan2_f32, float, float, (float)atan2((double)a, (double)b))
ROW2(copysign_f32, float, float, copysignf(a, b))
ROW2(hypot_f32, float, float, (float)hypot((double)a, (double)b))
ROW2(nextafter_f32, float, float, nextafterf(a, b))

/* complex64 (interleaved float32 pairs): add / sub in float as the float32 rows (alpha real); mul and
 * div in double (the float products are exact there), each part rounded once */
typedef struct c64 {
  float re, im;
} c64_t;

#define ROWC(NAME, BODY)                                                                                  \
  static int64_t row_##NAME(const char *const *in, const int64_t *s, char *out, int64_t n, const bin_args_t *P) { \
    const c64_t *A = (const c64_t *)(const void *)in[0];                                                  \
    const c64_t *B = (const c64_t *)(const void *)in[1];                                                  \
    c64_t *O = (c64_t *)(void *)out;                                                                      \
    (void)P;                                                                                              \
    for (int64_t i = 0; i < n; i++) {                                                                     \
      const c64_t a = A[s[0] ? i : 0], b = B[s[1] ? i : 0];                                               \
      c64_t r;                                                                                            \
      BODY;                                                                                               \
      O[i] = r;                                                                                           \
    }                                                                                                     \
    return -1;                                                                                            \
  }

ROWC(add_c64, r.re = a.re + P->falpha * b.re; r.im = a.im + P->falpha * b.im)
ROWC(sub_c64, r.re = a.re - P->falpha * b.re; r.im = a.im - P->falpha * b.im)
ROWC(mul_c64, r.re = (float)((double)a.re * b.re - (double)a.im * b.im);
     r.im = (float)((double)a.re * b.im + (double)a.im * b.re))
ROWC(div_c64, const double den = (double)b.re * b.re + (double)b.im * b.im;
     r.re = (float)(((double)a.re * b.re + (double)a.im * b.im) / den);
     r.im = (float)(((double)a.im * b.re - (double)a.re * b.im) / den))

/* integers: T, unsigned U, wrap W */
#define INT_ROWS(T, U, W, SFX)                                                 \
  ROW2(add_##SFX, T, T, W((U)a + (U)P->ialpha * (U)b))                        \
  ROW2(sub_##SFX, T, T, W((U)a - (U)P->ialpha * (U)b))                        \
  ROW2(mul_##SFX, T, T, W((U)a * (U)b))                                       \
  ROW2Z(divt_##SFX, T, divt_##SFX(a, b))                                      \
  ROW2Z(divf_##SFX, T, divf_##SFX(a, b))                                      \
  ROW2Z(rem_##SFX, T, rem_##SFX(a, b))                                  \
  ROW2Z(fmod_##SFX, T, fmod_##SFX(a, b))                                \
  ROW2(pow_##SFX, T, T, pow_##SFX(a, b))                                      \
  ROW2(min_##SFX, T, T, b < a ? b : a)                                        \
  ROW2(max_##SFX, T, T, a < b ? b : a)                                        \
  ROW2(band_##SFX, T, T, a & b)                                               \
  ROW2(bor_##SFX, T, T, a | b)                                                \
  ROW2(bxor_##SFX, T, T, a ^ b)

INT_ROWS(int32_t, uint32_t, wrap_i32, i32)
INT_ROWS(int64_t, uint64_t, wrap_i64, i64)

/* comparisons and logical ops (output bool) for every input type; bool inputs are normalized */
#define NZ(x) ((x) != 0)
#define CMP_ROWS(T, SFX, N)                                      \
  ROW2(eq_##SFX, T, uint8_t, N(a) == N(b))                       \
  ROW2(ne_##SFX, T, uint8_t, N(a) != N(b))                       \
  ROW2(lt_##SFX, T, uint8_t, N(a) < N(b))                        \
  ROW2(le_##SFX, T, uint8_t, N(a) <= N(b))                       \
  ROW2(gt_##SFX, T, uint8_t, N(a) > N(b))                        \
  ROW2(ge_##SFX, T, uint8_t, N(a) >= N(b))
#define LOGIC_ROWS(T, SFX)                                       \
  ROW2(land_##SFX, T, uint8_t, (a != 0) && (b != 0))             \
  ROW2(lor_##SFX, T, uint8_t, (a != 0) || (b != 0))              \
  ROW2(lxor_##SFX, T, uint8_t, (a != 0) != (b != 0))
#define SAME(x) (x)

CMP_ROWS(float, f32, SAME)
CMP_ROWS(int32_t, i32, SAME)
CMP_ROWS(int64_t, i64, SAME)
CMP_ROWS(uint8_t, b, NZ)
LOGIC_ROWS(float, f32)
LOGIC_ROWS(int32_t, i32)
LOGIC_ROWS(int64_t, i64)
LOGIC_ROWS(uint8_t, u8) /* bool, uint8 */
LOGIC_ROWS(int8_t, i8)
ROW2(mul_b, uint8_t, uint8_t, (a != 0) && (b != 0))
ROW2(band_b, uint8_t, uint8_t, (a != 0) & (b != 0))
ROW2(bor_b, uint8_t, uint8_t, (a != 0) | (b != 0))
ROW2(bxor_b, uint8_t, uint8_t, (a != 0) ^ (b != 0))

/* where: condition (bool) and two values of ES bytes; copies keep the bit patterns exact */
#define WHERE_ROW(NAME, ES)                                                                               \
  static int64_t row_##NAME(const char *const *in, const int64_t *s, char *out, int64_t n, const bin_args_t *P) { \
    const uint8_t *C = (const uint8_t *)(const void *)in[0];                                              \
    const char *A = in[1], *B = in[2];                                                                    \
    (void)P;                                                                                              \
    for (int64_t i = 0; i < n; i++) {                                                                     \
      const char *src = C[s[0] * i] ? A + s[1] * i * (ES) : B + s[2] * i * (ES);                          \
      memcpy(out + i * (ES), src, ES);                                                                    \
    }                                                                                                     \
    return -1;                                                                                            \
  }
WHERE_ROW(where_1, 1)
WHERE_ROW(where_2, 2)
WHERE_ROW(where_4, 4)
WHERE_ROW(where_8, 8)

/* The row function for (op, input dtype, rounding mode), or NULL. */
static row_fn pick_row(int op, int32_t dt, int64_t mode) {
  const int f = dt == OA_DTYPE_FLOAT32, i32 = dt == OA_DTYPE_INT32, i64 = dt == OA_DTYPE_INT64;
  const int b = dt == OA_DTYPE_BOOL, u8 = b || dt == OA_DTYPE_UINT8; /* nonzero bytes */
  if (dt == OA_DTYPE_COMPLEX64) {
    switch (op) {
      case B_ADD: return row_add_c64;
      case B_SUB: return row_sub_c64;
      case B_MUL: return row_mul_c64;
      case B_DIV: return mode == 0 ? row_div_c64 : (row_fn)0;
      default: return (row_fn)0;
    }
  }
#define BY3(F, I32, I64) (f ? (F) : i32 ? (I32) : i64 ? (I64) : (row_fn)0)
#define BY4(F, I32, I64, BL) (b ? (BL) : BY3(F, I32, I64))
  switch (op) {
    case B_ADD: return BY3(row_add_f32, row_add_i32, row_add_i64);
    case B_SUB: return BY3(row_sub_f32, row_sub_i32, row_sub_i64);
    case B_MUL: return BY4(row_mul_f32, row_mul_i32, row_mul_i64, row_mul_b);
    case B_DIV:
      if (mode == 1) return BY3(row_divt_f32, row_divt_i32, row_divt_i64);
      if (mode == 2) return BY3(row_divf_f32, row_divf_i32, row_divf_i64);
      return f ? row_div_f32 : (row_fn)0;
    case B_POW: return BY3(row_pow_f32, row_pow_i32, row_pow_i64);
    case B_MIN: return BY3(row_min_f32, row_min_i32, row_min_i64);
    case B_MAX: return BY3(row_max_f32, row_max_i32, row_max_i64);
    case B_REM: return BY3(row_rem_f32, row_rem_i32, row_rem_i64);
    case B_FMOD: return BY3(row_fmod_f32, row_fmod_i32, row_fmod_i64);
    case B_EQ: return BY4(row_eq_f32, row_eq_i32, row_eq_i64, row_eq_b);
    case B_NE: return BY4(row_ne_f32, row_ne_i32, row_ne_i64, row_ne_b);
    case B_LT: return BY4(row_lt_f32, row_lt_i32, row_lt_i64, row_lt_b);
    case B_LE: return BY4(row_le_f32, row_le_i32, row_le_i64, row_le_b);
    case B_GT: return BY4(row_gt_f32, row_gt_i32, row_gt_i64, row_gt_b);
    case B_GE: return BY4(row_ge_f32, row_ge_i32, row_ge_i64, row_ge_b);
    case B_LAND: return u8 ? row_land_u8 : dt == OA_DTYPE_INT8 ? row_land_i8 : BY3(row_land_f32, row_land_i32, row_land_i64);
    case B_LOR: return u8 ? row_lor_u8 : dt == OA_DTYPE_INT8 ? row_lor_i8 : BY3(row_lor_f32, row_lor_i32, row_lor_i64);
    case B_LXOR: return u8 ? row_lxor_u8 : dt == OA_DTYPE_INT8 ? row_lxor_i8 : BY3(row_lxor_f32, row_lxor_i32, row_lxor_i64);
    case B_BAND: return b ? row_band_b : i32 ? row_band_i32 : i64 ? row_band_i64 : (row_fn)0;
    case B_BOR: return b ? row_bor_b : i32 ? row_bor_i32 : i64 ? row_bor_i64 : (row_fn)0;
    case B_BXOR: return b ? row_bxor_b : i32 ? row_bxor_i32 : i64 ? row_bxor_i64 : (row_fn)0;
    case B_ATAN2: return f ? row_atan2_f32 : (row_fn)0;
    case B_COPYSIGN: return f ? row_copysign_f32 : (row_fn)0;
    case B_HYPOT: return f ? row_hypot_f32 : (row_fn)0;
    case B_NEXTAFTER: return f ? row_nextafter_f32 : (row_fn)0;
    case B_WHERE:
      switch (oa_dtype_size(dt)) {
        case 1: return row_where_1;
        case 2: return row_where_2;
        case 4: return row_where_4;
        case 8: return row_where_8;
        default: return (row_fn)0;
      }
    default: return (row_fn)0;
  }
#undef BY3
#undef BY4
}

/* ---- prepare ---------------------------------------------------------------------------------- */

static const char *const names2[] = {"input 0 (self)", "input 1 (other)"};
static const char *const names3[] = {"input 0 (condition)", "input 1 (self)", "input 2 (other)"};

static int is_bool_out(int op) { return op >= B_EQ && op <= B_LXOR; }

static oa_status_t bin_prepare(const oa_op_call_t *call, int op, uint64_t allowed, oa_op_plan_t *plan,
                               oa_diag_t *diag) {
  oa_status_t st;
  const uint32_t n_in = op == B_WHERE ? 3u : 2u;
  const char *const *names = op == B_WHERE ? names3 : names2;
  if ((st = oa_check_arity(call, n_in, n_in, 1, 0, 0, diag))) return st;
  for (uint32_t k = 0; k < n_in; k++)
    if ((st = oa_check_present(call, k, names[k], diag))) return st;
  const oa_tensor_t *out = call->outputs[0];
  const oa_tensor_t *self = call->inputs[n_in - 2], *other = call->inputs[n_in - 1];
  if (op == B_WHERE) {
    const oa_tensor_t *cond = call->inputs[0];
    if ((st = oa_check_dtype(call, cond, OA_DT_BOOL, names[0], diag))) return st;
  }
  if ((st = oa_check_dtype(call, self, allowed, names[n_in - 2], diag))) return st;
  if ((st = oa_check_same_dtype(call, other, self, names[n_in - 1], diag))) return st;
  if (is_bool_out(op)) {
    if (out->dtype != OA_DTYPE_BOOL)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): expected dtype bool, received %s",
                          out->name, oa_dtype_name(out->dtype));
  } else if ((st = oa_check_same_dtype(call, out, self, "output 0", diag))) {
    return st;
  }
  /* the output shape must be exactly the broadcast of the inputs */
  int32_t nd = 0;
  for (uint32_t k = 0; k < n_in; k++)
    if (call->inputs[k]->ndim > nd) nd = call->inputs[k]->ndim;
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < nd; d++) want[d] = 1;
  for (uint32_t k = 0; k < n_in; k++) {
    const oa_tensor_t *t = call->inputs[k];
    for (int32_t d = 0; d < t->ndim; d++) {
      int64_t sz = t->shape[d], *w = &want[nd - t->ndim + d];
      if (sz == *w || sz == 1) continue;
      if (*w == 1) {
        *w = sz;
        continue;
      }
      char a[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "%s ('%s'): shape %s does not broadcast with the other inputs (dim %d: %lld vs %lld)",
                          names[k], t->name, oa_shape_str(t, a, sizeof a), (int)d, (long long)sz, (long long)*w);
    }
  }
  if ((st = oa_check_shape(call, out, want, nd, "output 0", diag))) return st;

  int64_t mode = 0;
  if (op == B_DIV) {
    mode = call->n_ints > OA_ARG_DIV_ROUNDING_MODE ? call->ints[OA_ARG_DIV_ROUNDING_MODE] : 0;
    if (mode < 0 || mode > 2)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument rounding_mode = %lld: expected 0 (true), 1 (trunc) or 2 (floor)", (long long)mode);
    if (mode == 0 && self->dtype != OA_DTYPE_FLOAT32 && self->dtype != OA_DTYPE_COMPLEX64)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument rounding_mode = 0 (true division) needs float32 or complex64 inputs, received %s",
                          oa_dtype_name(self->dtype));
  }
  plan->params[P_MODE] = mode;
  if (op == B_ADD || op == B_SUB) {
    const double alpha = call->n_floats > OA_ARG_ADD_ALPHA ? call->floats[OA_ARG_ADD_ALPHA] : 1.0;
    if (self->dtype != OA_DTYPE_FLOAT32 && self->dtype != OA_DTYPE_COMPLEX64) {
      if (alpha != floor(alpha) || !(fabs(alpha) < 9223372036854775808.0))
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument alpha = %g: expected an integer for %s inputs",
                            alpha, oa_dtype_name(self->dtype));
      plan->params[P_ALPHA_I] = (int64_t)alpha;
    }
  }
  if (!pick_row(op, self->dtype, mode))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s ('%s'): dtype %s is not supported", names[n_in - 2], self->name,
                        oa_dtype_name(self->dtype));
  return OA_OK;
}

/* ---- run -------------------------------------------------------------------------------------- */

static oa_status_t bin_run(const oa_op_call_t *call, int op, const oa_op_plan_t *plan, oa_diag_t *diag) {
  const uint32_t n_in = op == B_WHERE ? 3u : 2u;
  const oa_tensor_t *out = call->outputs[0];
  const oa_tensor_t *self = call->inputs[n_in - 2];
  if (out->numel == 0) return OA_OK;
  bin_args_t P;
  P.ialpha = plan->params[P_ALPHA_I];
  P.falpha = (float)(call->n_floats > OA_ARG_ADD_ALPHA ? call->floats[OA_ARG_ADD_ALPHA] : 1.0);
  row_fn fn = pick_row(op, self->dtype, plan->params[P_MODE]);
  if (!fn) return oa_diag_fail(diag, OA_ERR_INTERNAL, "no row function (prepare was skipped)");

  /* broadcast strides, then drop size-1 dims and merge dims contiguous for every operand */
  int64_t st[3][OA_MAX_DIMS], cs[3][OA_MAX_DIMS], shape[OA_MAX_DIMS];
  size_t es[3];
  for (uint32_t k = 0; k < n_in; k++) {
    if (oa_broadcast_strides(call, call->inputs[k], out->shape, out->ndim, st[k], "input", diag))
      return oa_diag_fail(diag, OA_ERR_INTERNAL, "inputs do not broadcast (prepare was skipped)");
    es[k] = oa_dtype_size(call->inputs[k]->dtype);
  }
  int32_t nd = 0;
  for (int32_t d = 0; d < out->ndim; d++) {
    const int64_t sz = out->shape[d];
    if (sz == 1) continue;
    int merge = nd > 0;
    for (uint32_t k = 0; k < n_in && merge; k++) merge = cs[k][nd - 1] == st[k][d] * sz;
    if (merge) {
      shape[nd - 1] *= sz;
      for (uint32_t k = 0; k < n_in; k++) cs[k][nd - 1] = st[k][d];
    } else {
      shape[nd] = sz;
      for (uint32_t k = 0; k < n_in; k++) cs[k][nd] = st[k][d];
      nd++;
    }
  }
  if (nd == 0) { /* a single element */
    shape[0] = 1;
    for (uint32_t k = 0; k < n_in; k++) cs[k][0] = 0;
    nd = 1;
  }
  const int64_t inner = shape[nd - 1];
  const int64_t rows = out->numel / inner;
  int64_t s[3] = {0, 0, 0};
  for (uint32_t k = 0; k < n_in; k++) s[k] = cs[k][nd - 1] != 0;
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, shape, nd - 1, (int32_t)n_in, cs[0], cs[1], n_in > 2 ? cs[2] : NULL);
  const size_t out_es = oa_dtype_size(out->dtype);
  char *o = (char *)out->data;
  for (int64_t r = 0; r < rows; r++) {
    const char *p[3] = {NULL, NULL, NULL};
    for (uint32_t k = 0; k < n_in; k++) p[k] = (const char *)call->inputs[k]->data + it.off[k] * (int64_t)es[k];
    int64_t bad = fn(p, s, o + r * inner * (int64_t)out_es, inner, &P);
    if (bad >= 0) {
      /* integer division by zero: name the output element and the divisor's position */
      int64_t flat = r * inner + bad, idx[OA_MAX_DIMS], rem = flat;
      for (int32_t d = out->ndim - 1; d >= 0; d--) {
        idx[d] = out->shape[d] ? rem % out->shape[d] : 0;
        rem = out->shape[d] ? rem / out->shape[d] : 0;
      }
      char where[160];
      size_t len = oa_format(where, sizeof where, "[");
      for (int32_t d = 0; d < out->ndim && len + 1 < sizeof where; d++)
        len += oa_format(where + len, sizeof where - len, d ? ", %lld" : "%lld", (long long)idx[d]);
      if (len + 1 < sizeof where) oa_format(where + len, sizeof where - len, "]");
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "integer division by zero: input 1 (other) ('%s') is 0 for output element %lld (index %s)",
                          call->inputs[1]->name, (long long)flat, where);
    }
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}

#define BINARY_KERNEL(name, code, allowed)                                                                 \
  oa_status_t oa_ref_##name##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                      oa_diag_t *diag) {                                                   \
    (void)env;                                                                                             \
    return bin_prepare(call, code, allowed, plan, diag);                                                   \
  }                                                                                                        \
  oa_status_t oa_ref_##name##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,        \
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {                           \
    (void)scratch;                                                                                         \
    (void)env;                                                                                             \
    return bin_run(call, code, plan, diag);                                                                \
  }

BINARY_KERNEL(add, B_ADD, OA_DT_NUM | OA_DT_C64)
BINARY_KERNEL(sub, B_SUB, OA_DT_NUM | OA_DT_C64)
BINARY_KERNEL(mul, B_MUL, OA_DT_NUM | OA_DT_BOOL | OA_DT_C64)
BINARY_KERNEL(div, B_DIV, OA_DT_NUM | OA_DT_C64)
BINARY_KERNEL(pow, B_POW, OA_DT_NUM)
BINARY_KERNEL(minimum, B_MIN, OA_DT_NUM)
BINARY_KERNEL(maximum, B_MAX, OA_DT_NUM)
BINARY_KERNEL(remainder, B_REM, OA_DT_NUM)
BINARY_KERNEL(fmod, B_FMOD, OA_DT_NUM)
BINARY_KERNEL(eq, B_EQ, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(ne, B_NE, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(lt, B_LT, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(le, B_LE, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(gt, B_GT, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(ge, B_GE, OA_DT_NUM | OA_DT_BOOL)
BINARY_KERNEL(logical_and, B_LAND, OA_DT_ALL)
BINARY_KERNEL(logical_or, B_LOR, OA_DT_ALL)
BINARY_KERNEL(logical_xor, B_LXOR, OA_DT_ALL)
BINARY_KERNEL(bitwise_and, B_BAND, OA_DT_INT | OA_DT_BOOL)
BINARY_KERNEL(bitwise_or, B_BOR, OA_DT_INT | OA_DT_BOOL)
BINARY_KERNEL(bitwise_xor, B_BXOR, OA_DT_INT | OA_DT_BOOL)
BINARY_KERNEL(where, B_WHERE, OA_DT_ALL)
BINARY_KERNEL(atan2, B_ATAN2, OA_DT_F32)
BINARY_KERNEL(copysign, B_COPYSIGN, OA_DT_F32)
BINARY_KERNEL(hypot, B_HYPOT, OA_DT_F32)
BINARY_KERNEL(nextafter, B_NEXTAFTER, OA_DT_F32)
