/* The requantization rule's run-time half (docs/quantization.md), shared by the reference int8
 * kernels (ref/quant.c) and the optimized ones: every int8 kernel finishes an output with these,
 * so they all give the same bytes. Integer-only. */
#ifndef OA_KERNELS_QUANT_RULE_H
#define OA_KERNELS_QUANT_RULE_H

#include <stdint.h>

#define Q8_SHIFT_MAX 62
#define Q8_MULT_MAX (((int64_t)1 << 31) - 1)

/* round_half_even(p / 2^n) for |p| < 2^62, 0 <= n <= 62 (on the magnitude: symmetric in sign). */
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

static inline int8_t q8_requant(int64_t acc, int64_t mult, int32_t shift, int64_t zp, int64_t lo, int64_t hi) {
  if (acc > INT32_MAX) acc = INT32_MAX;
  if (acc < INT32_MIN) acc = INT32_MIN;
  return q8_finish(q8_round_shift(acc * mult, shift), zp, lo, hi);
}

#endif /* OA_KERNELS_QUANT_RULE_H */
