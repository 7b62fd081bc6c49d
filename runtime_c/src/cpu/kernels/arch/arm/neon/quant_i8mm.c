/* The aarch64 i8mm int8 tile (opt/quant.h): SMMLA (vmmlaq_s32) multiplies a 2 x 8 block of int8
 * rows by an 8 x 2 block of int8 columns into a 2 x 2 block of int32 sums, 16 products per lane
 * pair per instruction (twice sdot's). The driver's layout with kg 8 is exactly its operands: a K
 * group of an A tile is [MR][8] (rows 2i and 2i + 1 are one 16-byte register), of a B panel
 * [NR][8] (columns 2j and 2j + 1 one register). 8 x 8 outputs per tile: 16 accumulators of 2 x 2,
 * 4 A and 4 B registers per K group. Signed x signed raw int8 (u8 0: the plain correction),
 * products exact (|w * x| <= 2^14, K <= 65536).
 *
 * The only file built with -march=armv8.2-a+i8mm (runtime_c/CMakeLists.txt, aarch64 builds whose
 * compiler takes it); the table (neon/quant.c) is chosen only when the CPU reports i8mm
 * (HWCAP2_I8MM, features.c), so the binary still runs on CPUs without it. */
#include <string.h>

#include "kernels/opt/quant.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_MATMUL_INT8)
#include <arm_neon.h>

#define KG 8

/* A [kp/8][8][8], B [kp/8][8][8] int8 (raw values); c[i * ldc + j] = sum_k A(i, k) B(j, k) */
void oa_q8_i8mm_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int8_t *a = (const int8_t *)a_, *b = (const int8_t *)b_;
  int32x4_t acc[4][4];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = vdupq_n_s32(0);
  for (int64_t q = 0; q < kp; q += KG, a += 64, b += 64) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16), a2 = vld1q_s8(a + 32), a3 = vld1q_s8(a + 48);
    const int8x16_t b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16), b2 = vld1q_s8(b + 32), b3 = vld1q_s8(b + 48);
#define ROW(i, av)                                  \
  acc[i][0] = vmmlaq_s32(acc[i][0], av, b0);        \
  acc[i][1] = vmmlaq_s32(acc[i][1], av, b1);        \
  acc[i][2] = vmmlaq_s32(acc[i][2], av, b2);        \
  acc[i][3] = vmmlaq_s32(acc[i][3], av, b3);
    ROW(0, a0) ROW(1, a1) ROW(2, a2) ROW(3, a3)
#undef ROW
  }
  /* acc[i][j] = {c(2i, 2j), c(2i, 2j + 1), c(2i + 1, 2j), c(2i + 1, 2j + 1)} */
  for (int i = 0; i < 4; i++) {
    int32_t *r0 = c + 2 * i * ldc, *r1 = r0 + ldc;
    vst1q_s32(r0, vcombine_s32(vget_low_s32(acc[i][0]), vget_low_s32(acc[i][1])));
    vst1q_s32(r0 + 4, vcombine_s32(vget_low_s32(acc[i][2]), vget_low_s32(acc[i][3])));
    vst1q_s32(r1, vcombine_s32(vget_high_s32(acc[i][0]), vget_high_s32(acc[i][1])));
    vst1q_s32(r1 + 4, vcombine_s32(vget_high_s32(acc[i][2]), vget_high_s32(acc[i][3])));
  }
}

/* One B panel [kp/8][nr][8] of raw int8 (opt/quant.h, oa_q8_pack_fn): value(q, j) =
 * src[koff[q] + cb[j]] (koff NULL: src[cb[j] + q]), zero past k and nc */
void oa_q8_i8mm_pack(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc,
                     int32_t nr, void *dst_) {
  int8_t *dst = (int8_t *)dst_;
  if (nc < nr || kp > k) memset(dst, 0, (size_t)(kp * nr));
  if (!koff) {
    for (int32_t j = 0; j < nc; j++) {
      const int8_t *s = src + cb[j];
      int8_t *d = dst + j * KG;
      int64_t q = 0;
      for (; q + KG <= k; q += KG) memcpy(d + q * nr, s + q, KG);
      for (; q < k; q++) d[(q / KG) * nr * KG + q % KG] = s[q];
    }
    return;
  }
  int contiguous = 1;
  for (int32_t j = 1; j < nc; j++) contiguous &= cb[j] == cb[0] + j;
  for (int64_t q = 0; q < k; q++) {
    int8_t *d = dst + (q / KG) * nr * KG + q % KG;
    if (contiguous) {
      const int8_t *s = src + koff[q] + cb[0];
      for (int32_t j = 0; j < nc; j++) d[j * KG] = s[j];
    } else {
      const int8_t *s = src + koff[q];
      for (int32_t j = 0; j < nc; j++) d[j * KG] = s[cb[j]];
    }
  }
}
#endif
