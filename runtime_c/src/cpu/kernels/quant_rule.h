/* The requantization rule's run-time half (docs/quantization.md), shared by the reference int8
 * kernels (ref/quant.c) and the optimized ones: every int8 kernel finishes an output with these,
 * so they all give the same bytes. Integer-only. */
#ifndef OA_KERNELS_QUANT_RULE_H
#define OA_KERNELS_QUANT_RULE_H

#include <stdint.h>

#define Q8_SHIFT_MAX 62
#define Q8_MULT_MAX (((int64_t)1 << 31) - 1)

/* round_half_even(p / 2^n) for |p| < 2^63, 0 <= n <= 62 (on the magnitude: symmetric in sign). */
static inline int64_t q8_round_shift(int64_t p, int32_t n) {
  if (n == 0) return p;
  uint64_t u = p < 0 ? (uint64_t)0 - (uint64_t)p : (uint64_t)p;
  uint64_t q = u >> n, rem = u & (((uint64_t)1 << n) - 1u), half = (uint64_t)1 << (n - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return p < 0 ? -(int64_t)q : (int64_t)q;
}

static inline int8_t q8_finish(int64_t r, int64_t zp, int64_t lo, int64_t hi) {
  /* r may be far outside int8 (|r| < 2^62): clamp before adding the zero point */
  if (r < lo - zp) return (int8_t)lo;
  if (r > hi - zp) return (int8_t)hi;
  return (int8_t)(r + zp);
}

/* conv2d_q8 / linear_q8 (format 1.3): the bias is added after the multiply, in steps of 2^-12
 * output steps (Q8_BIAS_BITS), so a float32 bias keeps its fraction of an output step:
 * p = sat_int32(acc) * mult + bias * 2^(shift - 12). The kernels accept shift in
 * [Q8_BIAS_BITS, 62] and |bias| < 2^(73 - shift) (q8_bias_ok), so |p| < 2^62 + 2^61 and the
 * rounding's p + 2^(shift - 1) stays below 2^63. */
#define Q8_BIAS_BITS 12
#define Q8_MAC_SHIFT_MIN Q8_BIAS_BITS

static inline int q8_bias_ok(int64_t bias, int32_t shift) {
  const int32_t room = 73 - shift; /* |bias| < 2^room */
  return room >= 32 || (bias < ((int64_t)1 << room) && bias > -((int64_t)1 << room));
}

/* The bias input of conv2d_q8 / linear_q8 is float32 in output steps, a multiple of 2^-12 (file
 * format 1.3: an older runtime, which takes an int32 bias in accumulator steps, refuses the dtype
 * instead of misreading the values). B = bias * 2^12 is the rule's integer: 1 and *out = B when
 * the value is one the rule takes (finite, a whole number of 1/4096 steps, |B| < 2^31 and
 * q8_bias_ok), else 0. */
static inline int q8_bias_value(float b, int32_t shift, int32_t *out) {
  if (!(b > -524288.0f && b < 524288.0f)) return 0; /* NaN, inf, |B| >= 2^31 */
  const float s = b * 4096.0f;                       /* exact: a power of two */
  const int32_t q = (int32_t)s;
  if ((float)q != s || !q8_bias_ok(q, shift)) return 0;
  *out = q;
  return 1;
}

/* B of a bias value already checked with q8_bias_value */
static inline int32_t q8_bias_int(float b) { return (int32_t)(b * 4096.0f); }

/* bias * 2^(shift - 12), the addend of the product (0 for shift < 12: only a zero bias is valid there,
 * e.g. the unused lanes of a channel block) */
static inline int64_t q8_bias_addend(int32_t bias, int32_t shift) {
  return shift >= Q8_BIAS_BITS ? (int64_t)((uint64_t)(int64_t)bias << (shift - Q8_BIAS_BITS)) : 0;
}

static inline int8_t q8_requant(int64_t acc, int64_t mult, int32_t shift, int32_t bias, int64_t zp, int64_t lo,
                                int64_t hi) {
  if (acc > INT32_MAX) acc = INT32_MAX;
  if (acc < INT32_MIN) acc = INT32_MIN;
  return q8_finish(q8_round_shift(acc * mult + q8_bias_addend(bias, shift), shift), zp, lo, hi);
}

#endif /* OA_KERNELS_QUANT_RULE_H */
