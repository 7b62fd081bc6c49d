/* Reference kernels of the math family: float32 functions of one argument (inverse and hyperbolic
 * trigonometry, log2 / log10 / exp2, the error-function family, gamma-family and Bessel functions).
 *
 * Every element is computed in double and rounded to float once. Float32 PyTorch calls float
 * libm / SLEEF / its own float polynomials, which differ by an ulp or two between CPUs; the double
 * result rounded once is the float32 value nearest the true one almost everywhere, so it is the
 * answer that does not move with the machine (the tests compare with PyTorch in float64).
 *
 * The C library provides the elementary functions, erfc and lgamma. digamma, polygamma (through the
 * Hurwitz zeta function), erfinv / ndtri (Halley's iteration on erf / erfc), erfcx (asymptotic series
 * for large x) and the modified Bessel functions I0 / I1 (power series, asymptotic series for large
 * |x|) are written here, each with the special values PyTorch gives (see each function).
 *
 * Like the elementwise kernels, the output may be the input's own buffer: each element is read
 * before it is written and no other element is looked at. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

#define OA_PI 3.14159265358979323846
#define OA_SQRT2 1.41421356237309504880
#define OA_SQRTPI 1.77245385090551602730      /* sqrt(pi) */
#define OA_2_SQRTPI 1.12837916709551257390    /* 2 / sqrt(pi) */
#define OA_1_SQRT2PI 0.39894228040143267794   /* 1 / sqrt(2 pi) */

enum math_op {
  M_ACOS, M_ASIN, M_ATAN, M_TAN, M_SINH, M_COSH, M_ASINH, M_ACOSH, M_ATANH, M_LOG2, M_LOG10, M_EXP2,
  M_ERFC, M_ERFINV, M_ERFCX, M_NDTRI, M_LGAMMA, M_DIGAMMA, M_I0, M_I0E, M_I1, M_I1E, M_POLYGAMMA
};

/* ---- digamma and polygamma ------------------------------------------------------------------ */

/* psi(x) = Gamma'(x) / Gamma(x). As ATen: psi(+0) = -inf, psi(-0) = +inf, NaN at the negative
 * integers and -inf, +inf at +inf. Negative x by the reflection psi(x) = psi(1 - x) - pi / tan(pi x)
 * (tan of the fractional part, exact); positive x raised to >= 10 by psi(x) = psi(x + 1) - 1 / x,
 * then the asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k). */
static double digamma_d(double x) {
  if (x != x || x == INFINITY) return x;
  if (x == 0.0) return copysign(INFINITY, -x);
  if (x < 0.0) {
    if (x == floor(x)) return NAN;
    return digamma_d(1.0 - x) - OA_PI / tan(OA_PI * (x - trunc(x)));
  }
  double r = 0.0;
  while (x < 10.0) {
    r -= 1.0 / x;
    x += 1.0;
  }
  /* B_2k / 2k for k = 8 .. 1 */
  static const double c[] = {-0.44325980392156862745, 0.083333333333333333333, -0.021092796092796092796,
                             0.0075757575757575757576, -0.0041666666666666666667, 0.0039682539682539682540,
                             -0.0083333333333333333333, 0.083333333333333333333};
  const double z = 1.0 / (x * x);
  double s = 0.0;
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) s = s * z + c[k];
  return r + log(x) - 0.5 / x - s * z;
}

/* Hurwitz zeta(s, q) = sum_{k >= 0} (q + k)^-s for s >= 2: +inf at q = 0, -1, -2, ... (as ATen's);
 * the first terms summed directly until q + k >= max(10, s) (or the terms vanish), the rest by
 * Euler-Maclaurin with 12 Bernoulli terms (relative error below 1e-16 from there). */
static double hurwitz_zeta(double s, double q) {
  if (q <= 0.0 && q == floor(q)) return INFINITY; /* also q = -inf */
  double sum = 0.0, a = q;
  while (a < 10.0 || a < s) {
    const double t = pow(a, -s);
    sum += t;
    a += 1.0;
    if (a > 1.0 && fabs(t) <= 1e-17 * fabs(sum)) return sum; /* the tail is below t * a / (s - 1) */
  }
  /* B_2j / (2j)! for j = 1 .. 12 */
  static const double b[] = {0.083333333333333333333, -1.3888888888888888889e-03, 3.3068783068783068783e-05,
                             -8.2671957671957671958e-07, 2.0876756987868098979e-08, -5.2841901386874931848e-10,
                             1.3382536530684678833e-11, -3.3896802963225828668e-13, 8.5860620562778445642e-15,
                             -2.1748686985580618731e-16, 5.5090028283602295151e-18, -1.3954464685812523341e-19};
  const double as = pow(a, -s);
  sum += a * as / (s - 1.0) + 0.5 * as;
  double t = s * as / a; /* s (s+1) ... (s+2j-2) a^(-s-2j+1) */
  for (int j = 0; j < 12; j++) {
    const double term = b[j] * t;
    sum += term;
    if (fabs(term) <= 1e-17 * fabs(sum)) break;
    t *= (s + 2.0 * j + 1.0) * (s + 2.0 * j + 2.0) / (a * a);
  }
  return sum;
}

/* psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (ATen's formula: at the poles x = 0, -1, ...
 * +inf for odd n, -inf for even n); n! overflows double from n = 171 (then inf, or NaN where zeta
 * underflows to 0, as ATen). At +-inf the values PyTorch gives: n = 1 (ATen's own trigamma) 0 at +inf
 * and NaN at -inf, n >= 2 NaN at +inf and the pole's value at -inf. (At the negative integers
 * PyTorch's trigamma gives a large finite number, sin(pi x) not being 0 in floating point; this
 * kernel gives the pole's +inf.) */
static double polygamma_d(int64_t n, double x) {
  if (n == 0) return digamma_d(x);
  if (x != x) return x;
  if (x == INFINITY) return n == 1 ? 0.0 : NAN;
  if (x == -INFINITY && n == 1) return NAN;
  double fact = 1.0;
  for (int64_t i = 2; i <= n && fact != INFINITY; i++) fact *= (double)i;
  const double sign = (n & 1) ? 1.0 : -1.0;
  return sign * fact * hurwitz_zeta((double)n + 1.0, x);
}

/* ---- the error-function family ---------------------------------------------------------------- */

/* The x >= 0 with erf(x) = y and erfc(x) = q, for y = 1 - q in [0, 1): q >= 0.5 solves erf(x) = y
 * (y must be exact), q < 0.5 solves erfc(x) = q (q must be exact), so the small side never comes
 * from a cancellation. Start from Winitzki's closed-form approximation (relative error ~2e-3),
 * then Halley's iteration: with f'' = -2x f' for both erf and erfc, the step is u / (1 + x u),
 * u = f / f'. Cubic convergence: three steps reach double precision from the start. */
static double inverse_erf_core(double y, double q) {
  const int by_erf = q >= 0.5;
  const double L = by_erf ? log1p(-y * y) : log(q * (2.0 - q)); /* ln(1 - y^2) */
  const double a = 0.147, t = 2.0 / (OA_PI * a) + 0.5 * L;
  double x = sqrt(sqrt(t * t - L / a) - t);
  for (int it = 0; it < 10; it++) {
    const double d = OA_2_SQRTPI * exp(-x * x);
    const double u = by_erf ? (erf(x) - y) / d : (q - erfc(x)) / d;
    const double step = u / (1.0 + x * u);
    x -= step;
    if (!(fabs(step) > 1e-16 * x)) break; /* also ends on NaN */
  }
  return x;
}

/* erfinv(y): +-inf at +-1, NaN outside [-1, 1], -0 kept. */
static double erfinv_d(double y) {
  if (y != y || fabs(y) > 1.0) return NAN;
  if (fabs(y) == 1.0) return copysign(INFINITY, y);
  if (y == 0.0) return y;
  const double ay = fabs(y);
  return copysign(inverse_erf_core(ay, 1.0 - ay), y); /* 1 - ay is exact where it is used (ay >= 0.5) */
}

/* ndtri(p) = sqrt(2) erfinv(2p - 1): -inf at 0, +inf at 1, NaN outside [0, 1]. For a float p, 2p,
 * 2(1 - p) and 2p - 1 (p >= 0.5) are exact in double. */
static double ndtri_d(double p) {
  if (p != p || p < 0.0 || p > 1.0) return NAN;
  if (p == 0.0) return -INFINITY;
  if (p == 1.0) return INFINITY;
  if (p < 0.5) return -OA_SQRT2 * inverse_erf_core(1.0 - 2.0 * p, 2.0 * p);
  return OA_SQRT2 * inverse_erf_core(2.0 * p - 1.0, 2.0 * (1.0 - p));
}

/* erfcx(x) = e^(x^2) erfc(x): for 0 <= x < 10 directly (x^2 of a float is exact in double, and erfc(10)
 * is far from underflow); for x >= 10 the asymptotic series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k
 * (its terms fall below 1e-17 long before they grow); x < 0 by erfcx(x) = 2 e^(x^2) - erfcx(-x). */
static double erfcx_d(double x) {
  if (x != x) return x;
  if (x < 0.0) return x < -27.0 ? INFINITY : 2.0 * exp(x * x) - erfcx_d(-x);
  if (x < 10.0) return exp(x * x) * erfc(x);
  if (x == INFINITY) return 0.0;
  const double z = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 40; k++) {
    term *= -(2.0 * k - 1.0) * z;
    sum += term;
    if (fabs(term) < 1e-17) break;
  }
  return sum / (x * OA_SQRTPI);
}

/* ---- modified Bessel functions I0, I1 ----------------------------------------------------------- */

/* e^-|x| I_nu(x) (scaled) or I_nu(x), nu 0 or 1. |x| <= 30: the power series
 * I_nu(x) = sum (x/2)^(2k+nu) / (k! (k+nu)!) (positive terms: no cancellation); beyond, the
 * asymptotic series e^|x| / sqrt(2 pi |x|) sum_k (-1)^k prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! (8|x|)^k),
 * whose terms fall below 1e-17 by k ~ 20 there. I1 is odd (the sign of x, +0 for -0 as ATen), I0 even. */
static double bessel_i(double x, int nu, int scaled) {
  if (x != x) return x;
  const double ax = fabs(x);
  double r;
  if (ax == INFINITY) {
    r = scaled ? 0.0 : NAN; /* as PyTorch (Cephes): I0(+-inf) and I1(+-inf) are NaN, the scaled ones +-0 */
  } else if (ax <= 30.0) {
    const double h = 0.5 * ax, h2 = h * h;
    double term = nu ? h : 1.0, sum = term;
    for (int k = 1; k < 200 && term > 1e-17 * sum; k++) {
      term *= h2 / ((double)k * (double)(k + nu));
      sum += term;
    }
    r = scaled ? sum * exp(-ax) : sum;
  } else {
    const double mu = 4.0 * nu * nu;
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 60; k++) {
      const double odd = 2.0 * k - 1.0;
      term *= -(mu - odd * odd) / (8.0 * k * ax);
      sum += term;
      if (fabs(term) < 1e-17 * fabs(sum)) break;
    }
    r = sum * OA_1_SQRT2PI / sqrt(ax);
    if (!scaled) r = ax > 750.0 ? INFINITY : r * exp(ax);
  }
  return (nu && x < 0.0) ? -r : r;
}

/* ---- kernels ---------------------------------------------------------------------------------- */

static oa_status_t math_prepare(const oa_op_call_t *call, int op, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  if (op == M_POLYGAMMA) {
    const int64_t n = call->n_ints > OA_ARG_POLYGAMMA_N ? call->ints[OA_ARG_POLYGAMMA_N] : 0;
    if (n < 0)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument n = %lld: expected n >= 0", (long long)n);
  }
  return OA_OK;
}

/* out[i] = (float)EXPR(v), v = (double)in[i] */
#define MAP(EXPR)                                    \
  do {                                               \
    for (int64_t i = 0; i < n; i++) {                \
      const double v = (double)in[i];                \
      out[i] = (float)(EXPR);                        \
    }                                                \
  } while (0)

static oa_status_t math_run(const oa_op_call_t *call, int op) {
  const float *in = (const float *)call->inputs[0]->data;
  float *out = (float *)call->outputs[0]->data;
  const int64_t n = call->inputs[0]->numel;
  switch (op) {
    case M_ACOS: MAP(acos(v)); break;
    case M_ASIN: MAP(asin(v)); break;
    case M_ATAN: MAP(atan(v)); break;
    case M_TAN: MAP(tan(v)); break;
    case M_SINH: MAP(sinh(v)); break;
    case M_COSH: MAP(cosh(v)); break;
    case M_ASINH: MAP(asinh(v)); break;
    case M_ACOSH: MAP(acosh(v)); break;
    case M_ATANH: MAP(atanh(v)); break;
    case M_LOG2: MAP(log2(v)); break;
    case M_LOG10: MAP(log10(v)); break;
    case M_EXP2: MAP(exp2(v)); break;
    case M_ERFC: MAP(erfc(v)); break;
    case M_ERFINV: MAP(erfinv_d(v)); break;
    case M_ERFCX: MAP(erfcx_d(v)); break;
    case M_NDTRI: MAP(ndtri_d(v)); break;
    case M_LGAMMA: MAP(lgamma(v)); break;
    case M_DIGAMMA: MAP(digamma_d(v)); break;
    case M_I0: MAP(bessel_i(v, 0, 0)); break;
    case M_I0E: MAP(bessel_i(v, 0, 1)); break;
    case M_I1: MAP(bessel_i(v, 1, 0)); break;
    case M_I1E: MAP(bessel_i(v, 1, 1)); break;
    case M_POLYGAMMA: {
      const int64_t k = call->n_ints > OA_ARG_POLYGAMMA_N ? call->ints[OA_ARG_POLYGAMMA_N] : 0;
      MAP(polygamma_d(k, v));
      break;
    }
    default: break;
  }
  return OA_OK;
}

#define MATH_KERNEL(name, code)                                                                            \
  oa_status_t oa_ref_##name##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                      oa_diag_t *diag) {                                                   \
    (void)env;                                                                                             \
    (void)plan;                                                                                            \
    return math_prepare(call, code, diag);                                                                 \
  }                                                                                                        \
  oa_status_t oa_ref_##name##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,        \
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {                           \
    (void)plan;                                                                                            \
    (void)scratch;                                                                                         \
    (void)env;                                                                                             \
    (void)diag;                                                                                            \
    return math_run(call, code);                                                                           \
  }

MATH_KERNEL(acos, M_ACOS)
MATH_KERNEL(asin, M_ASIN)
MATH_KERNEL(atan, M_ATAN)
MATH_KERNEL(tan, M_TAN)
MATH_KERNEL(sinh, M_SINH)
MATH_KERNEL(cosh, M_COSH)
MATH_KERNEL(asinh, M_ASINH)
MATH_KERNEL(acosh, M_ACOSH)
MATH_KERNEL(atanh, M_ATANH)
MATH_KERNEL(log2, M_LOG2)
MATH_KERNEL(log10, M_LOG10)
MATH_KERNEL(exp2, M_EXP2)
MATH_KERNEL(erfc, M_ERFC)
MATH_KERNEL(erfinv, M_ERFINV)
MATH_KERNEL(erfcx, M_ERFCX)
MATH_KERNEL(ndtri, M_NDTRI)
MATH_KERNEL(lgamma, M_LGAMMA)
MATH_KERNEL(digamma, M_DIGAMMA)
MATH_KERNEL(i0, M_I0)
MATH_KERNEL(i0e, M_I0E)
MATH_KERNEL(i1, M_I1)
MATH_KERNEL(i1e, M_I1E)
MATH_KERNEL(polygamma, M_POLYGAMMA)
