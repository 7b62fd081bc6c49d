/* Reference unary elementwise kernels (activations, math functions, cast) and the creation ops
 * full / arange.
 *
 * Every unary op is a contiguous loop over numel elements; the output has the input's shape and
 * may be the input's own buffer (the memory planner makes ops with inplace=0 write in place), so
 * each loop reads element i before it writes element i and never looks at other elements.
 * Float32 math is done in float with the C library's float functions, as PyTorch's CPU kernels
 * do; formulas follow ATen's scalar kernels (see the comments at each op). */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* ---- integer helpers: wrap-around results without signed overflow ------------------------ */

static inline int32_t wrap_i32(uint32_t u) {
  return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - UINT32_C(0x80000000)) + INT32_MIN;
}
static inline int64_t wrap_i64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : (int64_t)(u - UINT64_C(0x8000000000000000)) + INT64_MIN;
}
static inline int16_t wrap_i16(int64_t v) {
  uint16_t u = (uint16_t)(uint64_t)v;
  return u <= (uint16_t)INT16_MAX ? (int16_t)u : (int16_t)((int32_t)u - 65536);
}
static inline int8_t wrap_i8(int64_t v) {
  uint8_t u = (uint8_t)(uint64_t)v;
  return u <= (uint8_t)INT8_MAX ? (int8_t)u : (int8_t)((int32_t)u - 256);
}

/* float -> int64 truncating toward zero, saturating, NaN -> 0 (C leaves out-of-range undefined) */
static inline int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
static inline int32_t sat_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}

/* PyTorch's clamp: NaN in the value or in a bound propagates. */
static inline float clampf_nan(float v, int has_lo, float lo, int has_hi, float hi) {
  if (has_lo) v = (v != v || lo != lo) ? NAN : (v < lo ? lo : v);
  if (has_hi) v = (v != v || hi != hi) ? NAN : (v > hi ? hi : v);
  return v;
}

static inline int64_t clamp_int(int64_t v, int has_lo, int64_t lo, int has_hi, int64_t hi) {
  if (has_lo && v < lo) v = lo;
  if (has_hi && v > hi) v = hi;
  return v;
}

/* a complex64 element: interleaved float32 (real, imaginary) */
typedef struct c64 {
  float re, im;
} c64_t;

static double farg(const oa_op_call_t *call, uint32_t i, double dflt) {
  return i < call->n_floats ? call->floats[i] : dflt;
}
static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
/* (farg / iarg take OA_ARG_* indices; an absent trailing argument reads as the default / 0) */

/* clamp and hardtanh share the bound code, which reads the floats by clamp's names */
_Static_assert(OA_ARG_HARDTANH_MIN_VAL == OA_ARG_CLAMP_MIN && OA_ARG_HARDTANH_MAX_VAL == OA_ARG_CLAMP_MAX,
               "hardtanh's min_val, max_val no longer sit where clamp's min, max do in opset.py");

/* ---- unary ops ---------------------------------------------------------------------------- */

enum unary_op {
  U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_SIGMOID, U_TANH, U_RELU, U_SILU, U_HARDSWISH,
  U_HARDSIGMOID, U_SIN, U_COS, U_ERF, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_RECIPROCAL, U_LOG1P,
  U_EXPM1, U_GELU, U_LEAKY_RELU, U_ELU, U_HARDTANH, U_CLAMP, U_LOGICAL_NOT, U_BITWISE_NOT
};

/* plan->params for clamp / hardtanh */
enum { P_HAS_LO, P_HAS_HI, P_LO, P_HI };

/* An integer clamp bound from a float argument: the tightest integer bound (ceil for a minimum,
 * floor for a maximum), saturated to the dtype's range. */
static int64_t int_bound(double v, int is_max, int32_t dtype) {
  double r = is_max ? floor(v) : ceil(v);
  double lo = dtype == OA_DTYPE_INT32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = dtype == OA_DTYPE_INT32 ? 2147483647.0 : 9223372036854774784.0;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return (int64_t)r;
}

static oa_status_t unary_prepare(const oa_op_call_t *call, int op, uint64_t allowed, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, allowed, "input 0 (self)", diag))) return st;
  if (op == U_LOGICAL_NOT) {
    if (y->dtype != OA_DTYPE_BOOL)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): expected dtype bool, received %s", y->name,
                          oa_dtype_name(y->dtype));
  } else if (op == U_ABS && x->dtype == OA_DTYPE_COMPLEX64) {
    if (y->dtype != OA_DTYPE_FLOAT32)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "output 0 ('%s'): expected dtype float32 (the magnitude of complex64), received %s", y->name,
                          oa_dtype_name(y->dtype));
  } else if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) {
    return st;
  }
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  if (op == U_GELU) {
    int64_t approx = iarg(call, OA_ARG_GELU_APPROXIMATE);
    if (approx != 0 && approx != 1)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument approximate = %lld: expected 0 (erf) or 1 (tanh)", (long long)approx);
  }
  if (op == U_CLAMP || op == U_HARDTANH) {
    int64_t has_lo = op == U_HARDTANH ? 1 : iarg(call, OA_ARG_CLAMP_HAS_MIN);
    int64_t has_hi = op == U_HARDTANH ? 1 : iarg(call, OA_ARG_CLAMP_HAS_MAX);
    if (has_lo != 0 && has_lo != 1)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument has_min = %lld: expected 0 or 1", (long long)has_lo);
    if (has_hi != 0 && has_hi != 1)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument has_max = %lld: expected 0 or 1", (long long)has_hi);
    double lo = farg(call, OA_ARG_CLAMP_MIN, 0.0), hi = farg(call, OA_ARG_CLAMP_MAX, 0.0);
    plan->params[P_HAS_LO] = has_lo;
    plan->params[P_HAS_HI] = has_hi;
    if (x->dtype != OA_DTYPE_FLOAT32) {
      if ((has_lo && lo != lo) || (has_hi && hi != hi))
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s bound is NaN for an integer input (%s)",
                            has_lo && lo != lo ? "the minimum" : "the maximum", oa_dtype_name(x->dtype));
      plan->params[P_LO] = has_lo ? int_bound(lo, 0, x->dtype) : 0;
      plan->params[P_HI] = has_hi ? int_bound(hi, 1, x->dtype) : 0;
    }
  }
  return OA_OK;
}

/* out[i] = EXPR(v) with v = in[i], for element types TI -> TO */
#define LOOP(TI, TO, EXPR)                                   \
  do {                                                       \
    const TI *in_ = (const TI *)x->data;                     \
    TO *out_ = (TO *)y->data;                                \
    for (int64_t i = 0; i < n; i++) {                        \
      const TI v = in_[i];                                   \
      out_[i] = (EXPR);                                      \
    }                                                        \
  } while (0)

#define F32(EXPR) LOOP(float, float, EXPR)

/* The same expression for int32 and int64 (W = the wrap function of the type, U its unsigned type). */
#define INTS(EXPR32, EXPR64)                                            \
  do {                                                                  \
    if (x->dtype == OA_DTYPE_INT32) LOOP(int32_t, int32_t, EXPR32);     \
    else LOOP(int64_t, int64_t, EXPR64);                                \
  } while (0)

/* M_SQRT1_2, M_SQRT2 and M_2_SQRTPI are not ISO C */
#define OA_SQRT1_2 0.70710678118654752440
#define OA_SQRT2 1.41421356237309504880
#define OA_2_SQRTPI 1.12837916709551257390

static inline float gelu_erf(float v) { return v * 0.5f * (1.0f + erff(v * (float)OA_SQRT1_2)); }
static inline float gelu_tanh(float v) {
  /* ATen: kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715, computed in float */
  const float beta = (float)(OA_SQRT2 * OA_2_SQRTPI * 0.5), kappa = 0.044715f;
  float cube = v * v * v;
  float inner = beta * (v + kappa * cube);
  return 0.5f * v * (1.0f + tanhf(inner));
}
static inline float hardsigmoid_f(float v) {
  float t = v + 3.0f; /* min(max(x + 3, 0), 6) keeping NaN */
  t = t < 0.0f ? 0.0f : t;
  t = t > 6.0f ? 6.0f : t;
  return t / 6.0f;
}
static inline float hardswish_f(float v) {
  float t = v + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  t = t > 6.0f ? 6.0f : t;
  return v * t / 6.0f;
}

static oa_status_t unary_run(const oa_op_call_t *call, int op, const oa_op_plan_t *plan) {
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const int64_t n = x->numel;
  const int f32 = x->dtype == OA_DTYPE_FLOAT32;
  switch (op) {
    case U_NEG:
      if (f32) F32(-v);
      else INTS(wrap_i32(0u - (uint32_t)v), wrap_i64(0u - (uint64_t)v));
      break;
    case U_ABS: /* |INT_MIN| wraps to INT_MIN, as in PyTorch; |complex64| = hypot of the parts, in double */
      if (x->dtype == OA_DTYPE_COMPLEX64) LOOP(c64_t, float, (float)hypot((double)v.re, (double)v.im));
      else if (f32) F32(fabsf(v));
      else INTS(v < 0 ? wrap_i32(0u - (uint32_t)v) : v, v < 0 ? wrap_i64(0u - (uint64_t)v) : v);
      break;
    case U_SIGN:
      if (f32) F32((float)((0.0f < v) - (v < 0.0f))); /* sign(NaN) = 0 as in PyTorch */
      else INTS((int32_t)((0 < v) - (v < 0)), (int64_t)((0 < v) - (v < 0)));
      break;
    case U_RELU: /* clamp_min(x, 0): NaN propagates */
      if (f32) F32(v < 0.0f ? 0.0f : v);
      else INTS(v < 0 ? 0 : v, v < 0 ? 0 : v);
      break;
    case U_EXP: F32(expf(v)); break;
    case U_LOG: F32(logf(v)); break;
    case U_SQRT: F32(sqrtf(v)); break;
    case U_RSQRT: F32(1.0f / sqrtf(v)); break;
    case U_SIGMOID: F32(1.0f / (1.0f + expf(-v))); break;
    case U_TANH: F32(tanhf(v)); break;
    case U_SILU: F32(v / (1.0f + expf(-v))); break;
    case U_HARDSWISH: F32(hardswish_f(v)); break;
    case U_HARDSIGMOID: F32(hardsigmoid_f(v)); break;
    case U_SIN: F32(sinf(v)); break;
    case U_COS: F32(cosf(v)); break;
    case U_ERF: F32(erff(v)); break;
    case U_FLOOR: F32(floorf(v)); break;
    case U_CEIL: F32(ceilf(v)); break;
    case U_ROUND: F32(nearbyintf(v)); break; /* half to even in the default rounding mode */
    case U_RECIPROCAL: F32(1.0f / v); break;
    case U_LOG1P: F32(log1pf(v)); break;
    case U_EXPM1: F32(expm1f(v)); break;
    case U_GELU:
      if (iarg(call, OA_ARG_GELU_APPROXIMATE) == 1) F32(gelu_tanh(v));
      else F32(gelu_erf(v));
      break;
    case U_LEAKY_RELU: {
      const float slope = (float)farg(call, OA_ARG_LEAKY_RELU_NEGATIVE_SLOPE, 0.0);
      F32(v > 0.0f ? v : v * slope);
      break;
    }
    case U_ELU: {
      /* ATen: x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale, in float */
      const float alpha = (float)farg(call, OA_ARG_ELU_ALPHA, 0.0), scale = (float)farg(call, OA_ARG_ELU_SCALE, 0.0);
      const float in_scale = (float)farg(call, OA_ARG_ELU_INPUT_SCALE, 0.0), negcoef = alpha * scale;
      F32(v <= 0.0f ? expm1f(v * in_scale) * negcoef : v * scale);
      break;
    }
    case U_HARDTANH:
    case U_CLAMP: {
      const int has_lo = (int)plan->params[P_HAS_LO], has_hi = (int)plan->params[P_HAS_HI];
      if (f32) {
        const float lo = (float)farg(call, OA_ARG_CLAMP_MIN, 0.0), hi = (float)farg(call, OA_ARG_CLAMP_MAX, 0.0);
        F32(clampf_nan(v, has_lo, lo, has_hi, hi));
      } else {
        /* bounds were saturated to the dtype's range in prepare, so int32 results fit */
        const int64_t lo = plan->params[P_LO], hi = plan->params[P_HI];
        INTS((int32_t)clamp_int(v, has_lo, lo, has_hi, hi), clamp_int(v, has_lo, lo, has_hi, hi));
      }
      break;
    }
    case U_LOGICAL_NOT:
      switch (x->dtype) {
        case OA_DTYPE_FLOAT32: LOOP(float, uint8_t, (uint8_t)(v == 0.0f)); break;
        case OA_DTYPE_INT32: LOOP(int32_t, uint8_t, (uint8_t)(v == 0)); break;
        case OA_DTYPE_INT64: LOOP(int64_t, uint8_t, (uint8_t)(v == 0)); break;
        default: LOOP(uint8_t, uint8_t, (uint8_t)(v == 0)); break; /* bool, uint8, int8 */
      }
      break;
    case U_BITWISE_NOT:
      if (x->dtype == OA_DTYPE_BOOL) LOOP(uint8_t, uint8_t, (uint8_t)(v == 0));
      else INTS(~v, ~v);
      break;
    default: break;
  }
  return OA_OK;
}

#define UNARY_KERNEL(name, code, allowed)                                                                  \
  oa_status_t oa_ref_##name##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                      oa_diag_t *diag) {                                                   \
    (void)env;                                                                                             \
    return unary_prepare(call, code, allowed, plan, diag);                                                 \
  }                                                                                                        \
  oa_status_t oa_ref_##name##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,        \
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {                           \
    (void)scratch;                                                                                         \
    (void)env;                                                                                             \
    (void)diag;                                                                                            \
    return unary_run(call, code, plan);                                                                    \
  }

UNARY_KERNEL(neg, U_NEG, OA_DT_NUM)
UNARY_KERNEL(abs, U_ABS, OA_DT_NUM | OA_DT_C64)
UNARY_KERNEL(exp, U_EXP, OA_DT_F32)
UNARY_KERNEL(log, U_LOG, OA_DT_F32)
UNARY_KERNEL(sqrt, U_SQRT, OA_DT_F32)
UNARY_KERNEL(rsqrt, U_RSQRT, OA_DT_F32)
UNARY_KERNEL(sigmoid, U_SIGMOID, OA_DT_F32)
UNARY_KERNEL(tanh, U_TANH, OA_DT_F32)
UNARY_KERNEL(relu, U_RELU, OA_DT_NUM)
UNARY_KERNEL(silu, U_SILU, OA_DT_F32)
UNARY_KERNEL(hardswish, U_HARDSWISH, OA_DT_F32)
UNARY_KERNEL(hardsigmoid, U_HARDSIGMOID, OA_DT_F32)
UNARY_KERNEL(sin, U_SIN, OA_DT_F32)
UNARY_KERNEL(cos, U_COS, OA_DT_F32)
UNARY_KERNEL(erf, U_ERF, OA_DT_F32)
UNARY_KERNEL(floor, U_FLOOR, OA_DT_F32)
UNARY_KERNEL(ceil, U_CEIL, OA_DT_F32)
UNARY_KERNEL(round, U_ROUND, OA_DT_F32)
UNARY_KERNEL(sign, U_SIGN, OA_DT_NUM)
UNARY_KERNEL(reciprocal, U_RECIPROCAL, OA_DT_F32)
UNARY_KERNEL(log1p, U_LOG1P, OA_DT_F32)
UNARY_KERNEL(expm1, U_EXPM1, OA_DT_F32)
UNARY_KERNEL(gelu, U_GELU, OA_DT_F32)
UNARY_KERNEL(leaky_relu, U_LEAKY_RELU, OA_DT_F32)
UNARY_KERNEL(elu, U_ELU, OA_DT_F32)
UNARY_KERNEL(hardtanh, U_HARDTANH, OA_DT_NUM)
UNARY_KERNEL(clamp, U_CLAMP, OA_DT_NUM)
UNARY_KERNEL(logical_not, U_LOGICAL_NOT, OA_DT_ALL)
UNARY_KERNEL(bitwise_not, U_BITWISE_NOT, OA_DT_INT | OA_DT_BOOL)

/* ---- cast --------------------------------------------------------------------------------- */
/* Integer (and bool) sources are read as int64, float sources as double; then:
 *   -> float32/float64: C conversion (round to nearest);
 *   -> integer from integer: wrap-around (two's complement truncation), as PyTorch;
 *   -> int32/int64 from float: truncate toward zero, saturating, NaN -> 0 (PyTorch: undefined);
 *   -> uint8/int8/int16 from float: truncate to int64 (saturating) then wrap, which is PyTorch's
 *      documented rule for uint8 (static_cast<uint8_t>(static_cast<int64_t>(x)));
 *   -> bool: x != 0 (NaN -> true). */

#define OA_DT_CAST (OA_DT_ALL | OA_DT_C64 | OA_DTYPE_BIT(OA_DTYPE_FLOAT64) | OA_DTYPE_BIT(OA_DTYPE_INT16))

static inline float to_f32_i(int64_t v) { return (float)v; }
static inline float to_f32_f(double v) { return (float)v; }
static inline double to_f64_i(int64_t v) { return (double)v; }
static inline double to_f64_f(double v) { return v; }
static inline int64_t to_i64_i(int64_t v) { return v; }
static inline int64_t to_i64_f(double v) { return sat_i64(v); }
static inline int32_t to_i32_i(int64_t v) { return wrap_i32((uint32_t)(uint64_t)v); }
static inline int32_t to_i32_f(double v) { return sat_i32(v); }
static inline int16_t to_i16_i(int64_t v) { return wrap_i16(v); }
static inline int16_t to_i16_f(double v) { return wrap_i16(sat_i64(v)); }
static inline int8_t to_i8_i(int64_t v) { return wrap_i8(v); }
static inline int8_t to_i8_f(double v) { return wrap_i8(sat_i64(v)); }
static inline uint8_t to_u8_i(int64_t v) { return (uint8_t)(uint64_t)v; }
static inline uint8_t to_u8_f(double v) { return (uint8_t)(uint64_t)sat_i64(v); }
static inline uint8_t to_b_i(int64_t v) { return (uint8_t)(v != 0); }
static inline uint8_t to_b_f(double v) { return (uint8_t)(v != 0.0); }
static inline c64_t to_c64_i(int64_t v) { return (c64_t){(float)v, 0.0f}; }
static inline c64_t to_c64_f(double v) { return (c64_t){(float)v, 0.0f}; }

#define LD_I(v) ((int64_t)(v))
#define LD_B(v) ((int64_t)((v) != 0))
#define LD_F(v) ((double)(v))
#define LD_C(v) ((double)(v).re) /* complex64 -> real: the real part, as PyTorch (which warns) */

#define CAST_LOOP(TS, TD, CONV, LD)                                   \
  do {                                                                \
    const TS *s_ = (const TS *)src->data;                             \
    TD *d_ = (TD *)dst->data;                                         \
    for (int64_t i = 0; i < n; i++) d_[i] = CONV(LD(s_[i]));          \
  } while (0)

/* K: i (integer source) or f (float source) */
#define CAST_FROM(TS, K, LD)                                                      \
  switch (dst->dtype) {                                                           \
    case OA_DTYPE_FLOAT32: CAST_LOOP(TS, float, to_f32_##K, LD); break;            \
    case OA_DTYPE_FLOAT64: CAST_LOOP(TS, double, to_f64_##K, LD); break;           \
    case OA_DTYPE_COMPLEX64: CAST_LOOP(TS, c64_t, to_c64_##K, LD); break;          \
    case OA_DTYPE_INT64: CAST_LOOP(TS, int64_t, to_i64_##K, LD); break;            \
    case OA_DTYPE_INT32: CAST_LOOP(TS, int32_t, to_i32_##K, LD); break;            \
    case OA_DTYPE_INT16: CAST_LOOP(TS, int16_t, to_i16_##K, LD); break;            \
    case OA_DTYPE_INT8: CAST_LOOP(TS, int8_t, to_i8_##K, LD); break;               \
    case OA_DTYPE_UINT8: CAST_LOOP(TS, uint8_t, to_u8_##K, LD); break;             \
    case OA_DTYPE_BOOL: CAST_LOOP(TS, uint8_t, to_b_##K, LD); break;               \
    default: break;                                                               \
  }

oa_status_t oa_ref_cast_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_CAST, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_CAST, "output 0", diag))) return st;
  return oa_check_same_shape(call, y, x, "output 0", diag);
}

oa_status_t oa_ref_cast_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *src = call->inputs[0], *dst = call->outputs[0];
  const int64_t n = src->numel;
  if (src->dtype == dst->dtype) { /* not emitted by the exporter, but valid */
    if (src->data != dst->data && src->nbytes) memmove(dst->data, src->data, src->nbytes);
    return OA_OK;
  }
  if (src->dtype == OA_DTYPE_COMPLEX64 && dst->dtype == OA_DTYPE_BOOL) { /* either part nonzero */
    const c64_t *s_ = (const c64_t *)src->data;
    uint8_t *d_ = (uint8_t *)dst->data;
    for (int64_t i = 0; i < n; i++) d_[i] = (uint8_t)(s_[i].re != 0.0f || s_[i].im != 0.0f);
    return OA_OK;
  }
  switch (src->dtype) {
    case OA_DTYPE_COMPLEX64: CAST_FROM(c64_t, f, LD_C) break;
    case OA_DTYPE_FLOAT32: CAST_FROM(float, f, LD_F) break;
    case OA_DTYPE_FLOAT64: CAST_FROM(double, f, LD_F) break;
    case OA_DTYPE_INT64: CAST_FROM(int64_t, i, LD_I) break;
    case OA_DTYPE_INT32: CAST_FROM(int32_t, i, LD_I) break;
    case OA_DTYPE_INT16: CAST_FROM(int16_t, i, LD_I) break;
    case OA_DTYPE_INT8: CAST_FROM(int8_t, i, LD_I) break;
    case OA_DTYPE_UINT8: CAST_FROM(uint8_t, i, LD_I) break;
    case OA_DTYPE_BOOL: CAST_FROM(uint8_t, i, LD_B) break;
    default: break;
  }
  return OA_OK;
}

/* ---- creation: full, arange ----------------------------------------------------------------- */

/* The integer range of an integer dtype (as doubles); int64's top is the largest double below 2^63. */
static void int_range(int32_t dtype, double *lo, double *hi) {
  switch (dtype) {
    case OA_DTYPE_UINT8: *lo = 0.0; *hi = 255.0; break;
    case OA_DTYPE_INT8: *lo = -128.0; *hi = 127.0; break;
    case OA_DTYPE_INT16: *lo = -32768.0; *hi = 32767.0; break;
    case OA_DTYPE_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    default: *lo = -9223372036854775808.0; *hi = 9223372036854774784.0; break;
  }
}

static int is_int_dtype(int32_t dt) {
  return dt == OA_DTYPE_UINT8 || dt == OA_DTYPE_INT8 || dt == OA_DTYPE_INT16 || dt == OA_DTYPE_INT32 ||
         dt == OA_DTYPE_INT64;
}

oa_status_t oa_ref_full_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 0, 0, 1, 0, 0, diag))) return st;
  const oa_tensor_t *y = call->outputs[0];
  if ((st = oa_check_dtype(call, y, OA_DT_ALL, "output 0", diag))) return st;
  double v = farg(call, OA_ARG_FULL_VALUE, 0.0), lo, hi;
  if (is_int_dtype(y->dtype)) {
    int_range(y->dtype, &lo, &hi);
    if (v != v || v != floor(v) || v < lo || v > hi)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument value = %g is not an integer in the range of output 0 ('%s', %s)", v, y->name,
                          oa_dtype_name(y->dtype));
  }
  return OA_OK;
}

oa_status_t oa_ref_full_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *y = call->outputs[0];
  const double v = farg(call, OA_ARG_FULL_VALUE, 0.0);
  const int64_t n = y->numel;
  switch (y->dtype) {
    case OA_DTYPE_FLOAT32: {
      float *o = (float *)y->data;
      const float f = (float)v;
      for (int64_t i = 0; i < n; i++) o[i] = f;
      break;
    }
    case OA_DTYPE_INT32: {
      int32_t *o = (int32_t *)y->data;
      const int32_t k = (int32_t)v;
      for (int64_t i = 0; i < n; i++) o[i] = k;
      break;
    }
    case OA_DTYPE_INT64: {
      int64_t *o = (int64_t *)y->data;
      const int64_t k = (int64_t)v;
      for (int64_t i = 0; i < n; i++) o[i] = k;
      break;
    }
    case OA_DTYPE_BOOL:
      if (n) memset(y->data, v != 0.0, (size_t)n);
      break;
    case OA_DTYPE_UINT8:
      if (n) memset(y->data, (int)(uint8_t)v, (size_t)n);
      break;
    case OA_DTYPE_INT8:
      if (n) memset(y->data, (int)(uint8_t)(int8_t)v, (size_t)n);
      break;
    default: break;
  }
  return OA_OK;
}

oa_status_t oa_ref_arange_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 0, 0, 1, 0, 0, diag))) return st;
  const oa_tensor_t *y = call->outputs[0];
  if ((st = oa_check_dtype(call, y, OA_DT_NUM, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, y, 1, 1, "output 0", diag))) return st;
  const double start = farg(call, OA_ARG_ARANGE_START, 0.0), step = farg(call, OA_ARG_ARANGE_STEP, 0.0);
  if (y->dtype != OA_DTYPE_FLOAT32) {
    /* integers: exact int64 arithmetic; every value must fit the dtype (int64: within 2^53,
     * where doubles are exact) */
    const double lim = y->dtype == OA_DTYPE_INT32 ? 2147483647.0 : 9007199254740992.0;
    const double last = start + step * (double)(y->shape[0] > 0 ? y->shape[0] - 1 : 0);
    if (start != floor(start) || step != floor(step) || fabs(start) > lim || fabs(step) > lim ||
        !(fabs(last) <= lim))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "arguments start = %g, step = %g: expected integers with every value in range of "
                          "output 0 ('%s', %s, %lld elements)",
                          start, step, y->name, oa_dtype_name(y->dtype), (long long)y->shape[0]);
  }
  return OA_OK;
}

oa_status_t oa_ref_arange_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *y = call->outputs[0];
  const double start = farg(call, OA_ARG_ARANGE_START, 0.0), step = farg(call, OA_ARG_ARANGE_STEP, 0.0);
  const int64_t n = y->numel;
  switch (y->dtype) {
    case OA_DTYPE_FLOAT32: {
      /* ATen computes start + step * i in the accumulate type (double on CPU) */
      float *o = (float *)y->data;
      for (int64_t i = 0; i < n; i++) o[i] = (float)(start + step * (double)i);
      break;
    }
    case OA_DTYPE_INT32: {
      int32_t *o = (int32_t *)y->data;
      const int64_t s0 = (int64_t)start, st = (int64_t)step;
      for (int64_t i = 0; i < n; i++) o[i] = (int32_t)(s0 + st * i);
      break;
    }
    case OA_DTYPE_INT64: {
      int64_t *o = (int64_t *)y->data;
      const int64_t s0 = (int64_t)start, st = (int64_t)step;
      for (int64_t i = 0; i < n; i++) o[i] = s0 + st * i;
      break;
    }
    default: break;
  }
  return OA_OK;
}
