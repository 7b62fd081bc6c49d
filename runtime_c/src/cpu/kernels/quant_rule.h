/* The requantization rule's run-time half (docs/quantization.md), shared by the reference int8
 * kernels (ref/quant.c) and the optimized ones: every int8 kernel finishes an output with these,
 * so they all give the same bytes. Integer-only. */
#ifndef OA_KERNELS_QUANT_RULE_H
#define OA_KERNELS_QUANT_RULE_H

#include <stdint.h>
#include <string.h>

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

/* conv2d_q8 / linear_q8 (format 1.4): the bias is float32 in output steps, added after the multiply
 * as the integer addend A = round_half_even(bias * 2^shift) ("badd"), so a float32 bias keeps all
 * of its 24 bits: p = sat_int32(acc) * mult + A. (Format 1.3 wrote biases on a grid of 2^-12
 * output steps, which this reads as it did; 1.2's int32 bias in accumulator steps is refused.)
 * The kernels accept shift in [Q8_MAC_SHIFT_MIN, 62] (the exporter writes [12, 50]) and
 * |A| < 2^61 (q8_bias_addend), so |p| < 2^62 + 2^61 and the rounding's p + 2^(shift - 1) stays
 * below 2^63. */
#define Q8_MAC_SHIFT_MIN 12
#define Q8_BADD_BITS 61

/* |b| < 2^(61 - shift) as a float compare (false for NaN): exactly when the addend below is below
 * 2^61 (near 2^61, b * 2^shift is a whole number already). 2^(61 - shift), shift in [0, 62], is a
 * normal float32, built from its bits. */
static inline int q8_bias_ok(float b, int32_t shift) {
  if (shift < 0 || shift > Q8_SHIFT_MAX) return 0;
  const uint32_t lb = (uint32_t)(127 + Q8_BADD_BITS - shift) << 23;
  float lim;
  memcpy(&lim, &lb, sizeof lim);
  return b > -lim && b < lim;
}

/* A = round_half_even(b * 2^shift) for a bias value b (float32, output steps): 1 and *out = A when
 * q8_bias_ok, else 0. Exact: b * 2^shift is a float32 significand times a power of two (a double,
 * no rounding); below 2^51 adding and subtracting 1.5 * 2^52 rounds it to an integer, half to
 * even (the sum stays in [2^52, 2^53), spacing 1; the default rounding mode, which the kernels
 * assume everywhere), from 2^51 on it is whole (24 significant bits). Runs per output channel per
 * call: no division, no libm. */
static inline int q8_bias_addend(float b, int32_t shift, int64_t *out) {
  if (!q8_bias_ok(b, shift)) return 0;
  const uint64_t pb = (uint64_t)(1023 + shift) << 52;
  double p2;
  memcpy(&p2, &pb, sizeof p2);
  const double t = (double)b * p2, magic = 6755399441055744.0; /* 1.5 * 2^52 */
  const double r = (t > -2251799813685248.0 && t < 2251799813685248.0) ? (t + magic) - magic : t; /* 2^51 */
  *out = (int64_t)r;
  return 1;
}

/* the rule for one output: badd is the bias's addend (q8_bias_addend), 0 without a bias */
static inline int8_t q8_requant(int64_t acc, int64_t mult, int32_t shift, int64_t badd, int64_t zp, int64_t lo,
                                int64_t hi) {
  if (acc > INT32_MAX) acc = INT32_MAX;
  if (acc < INT32_MIN) acc = INT32_MIN;
  return q8_finish(q8_round_shift(acc * mult + badd, shift), zp, lo, hi);
}

#endif /* OA_KERNELS_QUANT_RULE_H */
