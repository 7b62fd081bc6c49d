/* Vector float32 exp, sigmoid, tanh, erf, silu and gelu on the SIMD layer (simd/vec.h), accurate
 * to a few ulp (measured over dense sweeps against double-precision libm by
 * runtime_c/tests/kernels/simd_check.c; the op tests allow atol 1e-6 / rtol 2e-6 against PyTorch).
 *
 * The polynomial coefficients were fitted for openaccel (minimax on dense grids with mpmath
 * references, then rounded to float32); the method is the classic one:
 *   exp(x):  n = round(x / ln2), r = x - n ln2 (Cody-Waite, two constants), exp(r) = 1 + r +
 *            r^2 P(r) with P of degree 4 (relative error 3.3e-9 on |r| <= ln2 / 2), times 2^n
 *            built as two exponent-field factors so that results down to the subnormal range
 *            (x >= -103.97) and up to overflow (x > 88.72 gives inf) come out right.
 *   tanh(x): |x| < 0.625: x + x^3 Q(x^2) (degree 4 in x^2, relative error 4.4e-9);
 *            otherwise sign(x) (1 - e) / (1 + e), e = exp(-2|x|) (no cancellation there).
 *   exp of a non-positive argument (softmax, sigmoid, tanh, erfc, attention): vexp_neg, the same
 *            without the overflow / subnormal handling (results below 2^-126 are not exact).
 *   sigmoid: e = exp(-|x|), (x >= 0 ? 1 : e) / (1 + e) (never overflows).
 *   erf(z):  |z| <= 0.921875: z + z S(z^2) (degree 6 in z^2, relative error 4.1e-10);
 *            otherwise erfc(t) = exp(-t^2 + G(t - 2.5)) for t = |z| <= 4 with G of degree 9
 *            (absolute error 8.2e-9 in log erfc), the -t^2 + G sum in one fma; erf = 1 - erfc.
 *   gelu:    x/2 (1 + erf(z)) = x/2 erfc(-z), z = x / sqrt 2, with one erfc(|z|) = exp(-t^2 + H(t))
 *            on [0, 4.5] (H of degree 12, absolute error 8.8e-9) for both signs (no cancellation);
 *            the tanh form as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) computed in the
 *            same float operations as PyTorch's kernel, which equals x/2 (1 + tanh u). */
#ifndef OA_KERNELS_SIMD_MATH_H
#define OA_KERNELS_SIMD_MATH_H

#include "kernels/simd/vec.h"

static inline vf vexp(vf x) {
  /* NaN passes the clamps and the polynomial, and stays NaN through the scaling */
  x = vf_max_keep(x, vf_set1(-104.0f));
  x = vf_min_keep(x, vf_set1(89.0f));
  vf n = vf_round_small(vf_mul(x, vf_set1(1.44269504088896341f)));
  vf r = vf_fnma(n, vf_set1(0.693359375f), x);  /* ln2 = 0.693359375 - 2.12194440e-4 (+ ~1e-12) */
  r = vf_fnma(n, vf_set1(-2.12194440e-4f), r);
  vf p = vf_set1(1.38149760e-3f);
  p = vf_fma(p, r, vf_set1(8.36944859e-3f));
  p = vf_fma(p, r, vf_set1(4.16684300e-2f));
  p = vf_fma(p, r, vf_set1(1.66665137e-1f));
  p = vf_fma(p, r, vf_set1(4.99999940e-1f));
  p = vf_fma(p, vf_mul(r, r), r);
  p = vf_add(p, vf_set1(1.0f));
  /* n in [-150, 128]: 2^n = 2^h * 2^(n - h), both factors normal */
  vi ni = vf_to_int(n);
  vi h = vi_half(ni);
  return vf_mul(vf_mul(p, vf_pow2(h)), vf_pow2(vi_sub(ni, h)));
}

/* exp(x) for x <= 0 (or NaN): one scale factor 2^n, n in [-127, 0], where n = -127 (x below
 * about -87.68) builds +0 (exponent field 0): results under ~1e-38 flush to 0 (not subnormals),
 * and exp(-inf) = 0 exactly. For softmax, sigmoid, tanh, erfc and attention. */
static inline vf vexp_neg(vf x) {
  x = vf_max_keep(x, vf_set1(-88.0f));
  vf n = vf_round_small(vf_mul(x, vf_set1(1.44269504088896341f)));
  vf r = vf_fnma(n, vf_set1(0.693359375f), x);
  r = vf_fnma(n, vf_set1(-2.12194440e-4f), r);
  vf p = vf_set1(1.38149760e-3f);
  p = vf_fma(p, r, vf_set1(8.36944859e-3f));
  p = vf_fma(p, r, vf_set1(4.16684300e-2f));
  p = vf_fma(p, r, vf_set1(1.66665137e-1f));
  p = vf_fma(p, r, vf_set1(4.99999940e-1f));
  p = vf_fma(p, vf_mul(r, r), r);
  p = vf_add(p, vf_set1(1.0f));
  return vf_mul(p, vf_pow2(vf_to_int(n)));
}

static inline vf vsigmoid(vf x) {
  const vf one = vf_set1(1.0f);
  vf e = vexp_neg(vf_neg(vf_abs(x)));
  return vf_div(vf_select(vf_ge(x, vf_zero()), one, e), vf_add(one, e));
}

static inline vf vsilu(vf x) { return vf_mul(x, vsigmoid(x)); }

static inline vf vtanh(vf x) {
  const vf one = vf_set1(1.0f);
  vf ax = vf_abs(x);
  vf e = vexp_neg(vf_neg(vf_add(ax, ax))); /* tanh|x| = (1 - e) / (1 + e), e = exp(-2|x|) */
  vf big = vf_div(vf_sub(one, e), vf_add(one, e));
  big = vf_or(big, vf_signbit(x));
  vf x2 = vf_mul(x, x);
  vf q = vf_set1(-5.70498873e-3f);
  q = vf_fma(q, x2, vf_set1(2.06390880e-2f));
  q = vf_fma(q, x2, vf_set1(-5.37397154e-2f));
  q = vf_fma(q, x2, vf_set1(1.33314416e-1f));
  q = vf_fma(q, x2, vf_set1(-3.33332807e-1f));
  vf small = vf_fma(vf_mul(x2, x), q, x);
  return vf_select(vf_lt(ax, vf_set1(0.625f)), small, big);
}

/* erf(z) for |z| <= 0.921875 */
static inline vf verf_small(vf z) {
  vf z2 = vf_mul(z, z);
  vf s = vf_set1(8.37009793e-5f);
  s = vf_fma(s, z2, vf_set1(-8.14270345e-4f));
  s = vf_fma(s, z2, vf_set1(5.20103239e-3f));
  s = vf_fma(s, z2, vf_set1(-2.68593989e-2f));
  s = vf_fma(s, z2, vf_set1(1.12836957e-1f));
  s = vf_fma(s, z2, vf_set1(-3.76126349e-1f));
  s = vf_fma(s, z2, vf_set1(1.28379166e-1f));
  return vf_fma(z, s, z);
}

/* erfc(t) for t >= 0.921875 (t is clamped to [0.921875, 4]: erfc(4) = 1.5e-8) */
static inline vf verfc_big(vf t) {
  t = vf_max_keep(t, vf_set1(0.921875f));
  t = vf_min_keep(t, vf_set1(4.0f));
  vf u = vf_sub(t, vf_set1(2.5f));
  vf g = vf_set1(-2.73176450e-8f);
  g = vf_fma(g, u, vf_set1(1.60449042e-6f));
  g = vf_fma(g, u, vf_set1(-1.31647357e-5f));
  g = vf_fma(g, u, vf_set1(7.74338405e-5f));
  g = vf_fma(g, u, vf_set1(-4.20400846e-4f));
  g = vf_fma(g, u, vf_set1(2.16511078e-3f));
  g = vf_fma(g, u, vf_set1(-1.08583486e-2f));
  g = vf_fma(g, u, vf_set1(5.61063774e-2f));
  g = vf_fma(g, u, vf_set1(-3.52680713e-1f));
  g = vf_fma(g, u, vf_set1(-1.55681527f));
  return vexp_neg(vf_fnma(t, t, g)); /* g - t^2 <= 0 */
}

static inline vf verf(vf z) {
  vf t = vf_abs(z);
  vf big = vf_or(vf_sub(vf_set1(1.0f), verfc_big(t)), vf_signbit(z));
  return vf_select(vf_le(t, vf_set1(0.921875f)), verf_small(z), big);
}

/* gelu(x) = x/2 (1 + erf(z)) = x/2 erfc(-z), z = x * (float)(1/sqrt 2) rounded as PyTorch does.
 * erfc(t) for t = |z| in [0, 4.5] is exp(-t^2 + H(t - 2.25)) with H of degree 12 (absolute error
 * 8.8e-9 in log erfc); 1 + erf = 2 - erfc(t) for z > 0, erfc(t) for z < 0 (no cancellation), and
 * 0 beyond t = 4.5 (erfc(4.5) = 2e-10). */
static inline vf vgelu_erf(vf x) {
  vf z = vf_mul(x, vf_set1(0.707106781186547524f));
  vf t = vf_abs(z);
  vf u = vf_sub(vf_min_keep(t, vf_set1(4.5f)), vf_set1(2.25f));
  vf h = vf_set1(-8.98354013e-9f);
  h = vf_fma(h, u, vf_set1(4.96974231e-8f));
  h = vf_fma(h, u, vf_set1(-5.96706400e-8f));
  h = vf_fma(h, u, vf_set1(-2.03739461e-7f));
  h = vf_fma(h, u, vf_set1(2.06174991e-6f));
  h = vf_fma(h, u, vf_set1(-1.62358083e-5f));
  h = vf_fma(h, u, vf_set1(1.02588805e-4f));
  h = vf_fma(h, u, vf_set1(-5.55348350e-4f));
  h = vf_fma(h, u, vf_set1(2.77139409e-3f));
  h = vf_fma(h, u, vf_set1(-1.33122457e-2f));
  h = vf_fma(h, u, vf_set1(6.51324093e-2f));
  h = vf_fma(h, u, vf_set1(-3.82913858e-1f));
  h = vf_fma(h, u, vf_set1(-1.46495986f));
  vf c = vexp_neg(vf_fnma(t, t, h));
  c = vf_select(vf_gt(t, vf_set1(4.5f)), vf_zero(), c);
  vf onep = vf_select(vf_gt(z, vf_zero()), vf_sub(vf_set1(2.0f), c), c);
  return vf_mul(vf_mul(x, vf_set1(0.5f)), onep);
}

/* gelu, tanh form: inner = beta * (x + kappa * x^3) as in ATen, then x * sigmoid(2 inner) */
static inline vf vgelu_tanh(vf x) {
  vf cube = vf_mul(vf_mul(x, x), x);
  vf inner = vf_mul(vf_set1(0.797884560802865356f), vf_add(x, vf_mul(vf_set1(0.044715f), cube)));
  return vf_mul(x, vsigmoid(vf_add(inner, inner)));
}

#endif /* OA_KERNELS_SIMD_MATH_H */
