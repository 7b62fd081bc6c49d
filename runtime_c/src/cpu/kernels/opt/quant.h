/* The int8 micro-kernel table of the optimized conv2d_q8 / linear_q8 kernels (opt/quant.c: the
 * portable driver; arch/<isa>/quant.c: the micro-kernels). docs/quantization.md, "Optimized
 * kernels", has the design; in short:
 *
 *   Y[c][p] = sat_int32(corr[c] + sum_k W[c][k] * X[k][p]),  corr[c] = -input_zp * sum_k W[c][k]
 *
 * The GEMM sums raw int8 products (|w * x| <= 2^14, K <= 65536: every int32 sum is exact); padding
 * reads input_zp, so the correction is exact everywhere; the int64 sum corr + acc is then
 * finished with the rule of quant_rule.h (sat_int32, multiplier, the bias's addend badd[c]
 * = round_half_even(bias[c] * 2^shift) added to the product, round half to even, zero point, clamp). Integer arithmetic only: every ISA, tile and thread count gives the reference's bytes.
 *
 * Operands are packed by the driver into the layout of the ISA: K is padded with zeros to a
 * multiple of kg and split into groups of kg consecutive k; an A tile (MR rows of W, rows past
 * the matrix zero) is [kp / kg][MR][kg], a B panel (NR columns, columns past the matrix zero) is
 * [kp / kg][NR][kg], of int16 (wide) or int8 elements.
 *
 * x86 VNNI (vpdpbusd: unsigned bytes times signed bytes) takes the activations as unsigned bytes
 * x + 128 (x ^ 0x80; the table's `u8`): B panels hold x ^ 0x80 (padding past K
 * still 0), so every sum gains 128 * sum_k W[c][k], which the driver folds into the correction:
 * corr[c] = -(input_zp + 128) * sum_k W[c][k]. |w| * 255 <= 2^15, K <= 65536: still exact.
 *
 * x86 AMX (tdpbssd: signed bytes times signed bytes into 16 x 16 int32 tiles) takes the plain
 * layout with kg = 4 (16 columns of a B panel, 16 groups of 4 k, are one B tile), raw int8 (u8 0:
 * the plain correction). Its K step is 64: packed A tiles have their own K group, akg = 64
 * ([kpa / 64][MR][64], kpa = K rounded up to 64, zero past K: an A tile is 16 rows x 64 k), and
 * the last step's B tile reads up to 16 groups past the panel's end (the next panel, or `bslack`
 * bytes the driver adds after each column block): garbage there meets zero A columns, adds 0.
 * gemm_rows reads W in place (rows ldw apart). Its tile state is per thread: the driver brackets
 * each GEMM task with tile_on / tile_off (load the tile configuration, release the tiles). */
#ifndef OA_KERNELS_OPT_QUANT_H
#define OA_KERNELS_OPT_QUANT_H

#include <math.h>
#include <stdint.h>

#include "kernels/quant_rule.h"

/* K the kernels take: |sum of K products| <= K * 2^14 < 2^31 (raw), K * 255 * 128 < 2^31 (x - zp) */
#define OA_Q8_K_MAX ((int64_t)1 << 16)
#define OA_Q8_MR_MAX 32
#define OA_Q8_NR_MAX 64

/* c[i * ldc + j] = sum_k a[k][i] * b[k][j] over kp (a multiple of kg) for the whole MR x NR tile */
typedef void (*oa_q8_gemm_fn)(int64_t kp, const void *a, const void *b, int32_t *c, int64_t ldc);

/* The same reading W in place: rows w + i * ldw (i < mr; rows past mr are not read), k int8
 * each (B packed with K padded to kg) */
typedef void (*oa_q8_gemm_rows_fn)(int64_t k, const int8_t *w, int64_t ldw, int32_t mr, const void *b, int32_t *c,
                                   int64_t ldc);

/* y[j] = q8_requant(corr + acc[j], mult, shift, badd, zp, lo, hi) for j < n (one output row) */
typedef void (*oa_q8_requant_fn)(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift,
                                 int64_t badd, int32_t zp, int32_t lo, int32_t hi, int8_t *y);

/* y[j] = q8_requant(corr[j] + acc[j], mult[j], shift[j], badd[j], zp, lo, hi): per-channel values (the GEMV) */
typedef void (*oa_q8_requant_pc_fn)(const int32_t *acc, int64_t n, const int64_t *corr, const int32_t *mult,
                                    const int8_t *shift, const int64_t *badd, int32_t zp, int32_t lo, int32_t hi,
                                    int8_t *y);

/* y[r * ldy + j] = q8_requant(corr[r] + acc[r * ldc + j], mult[pc ? r : 0], shift[pc ? r : 0], badd[r], zp,
 * lo, hi) for r < m, j < n: the m rows of a finished GEMM tile block at once (the per-row setup
 * hoisted); |acc| <= amax (a bound the kernel may use to skip range checks) */
typedef void (*oa_q8_requant_rows_fn)(const int32_t *acc, int64_t ldc, int32_t m, int64_t n, const int64_t *corr,
                                      const int32_t *mult, const int8_t *shift, const int64_t *badd, int32_t pc,
                                      int64_t amax, int32_t zp, int32_t lo, int32_t hi, int8_t *y, int64_t ldy);

/* The same from float sums that are exact integers (the float depthwise path) */
typedef void (*oa_q8_requant_f32_fn)(const float *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift,
                                     int64_t badd, int32_t zp, int32_t lo, int32_t hi, int8_t *y);
/* d[j] = (float)(x[j] - zp), j < n */
typedef void (*oa_q8_to_float_fn)(const int8_t *x, int64_t n, int32_t zp, float *d);

/* One depthwise plane, int8 in and out (an ISA's whole-plane kernel). The padded input (zero
 * points around it) is split into sh * sw phase planes of hq x wq floats, phase (a, b) holding
 * x - input_zp at padded (y sh + a, x sw + b); output (oy, ox) is then a sum over taps of
 * w[t] * phase(t)[oy * wq + ox + off(t)]: one contiguous run per tap over "grid" columns
 * oy * wq + ox (ox >= ow computed and dropped). Float sums of at most OA_Q8_DWP_TAPS_MAX taps
 * are exact integers. */
#define OA_Q8_DWP_TAPS_MAX 512
typedef struct oa_q8_dwp {
  const int8_t *x;  /* input plane h x w */
  int64_t h, w, ph, pw, sh, sw, oh, ow, hq, wq;
  int32_t zin, taps;
  const int64_t *poff; /* per tap: phase plane start + offset, in floats from `work` */
  const float *wf;     /* per tap weight */
  int64_t corr;
  int32_t mult, shift, zp, lo, hi;
  int64_t badd; /* the bias's addend (quant_rule.h) */
  int8_t *y;           /* oh x ow */
  float *work;         /* the phase planes (their padding zeroed by the caller once), then the grid */
  int64_t grid_off;    /* floats from work to the grid's oh * wq + 128 floats */
} oa_q8_dwp_t;
typedef void (*oa_q8_dwp_fn)(const oa_q8_dwp_t *p);

/* Depthwise on a block of up to 16 channels at once (small planes: rows shorter than a vector
 * waste most lanes of the per-plane kernels). The kernel copies the block's planes into a
 * pixel-major buffer of x - input_zp floats (one 16-lane vector per padded pixel, padding 0;
 * 16 x 16 byte transposes), sums w * x per output pixel on 16 channels (exact: integers below
 * 2^24), requantizes the vector with per-lane multipliers and transposes the bytes back. */
#define OA_Q8_DWC_LANES 16
typedef struct oa_q8_dwc {
  const int8_t *x;  /* the block's first input plane (h x w), the others follow */
  int64_t h, w, ph, pw, sh, sw, dh, dw, kh, kw, oh, ow;
  int32_t nch;      /* channels in the block, 1..16 */
  int32_t zin, zp, lo, hi;
  const int8_t *wt; /* [nch][kh * kw] */
  int64_t corr[OA_Q8_DWC_LANES];
  int32_t mult[OA_Q8_DWC_LANES], shift[OA_Q8_DWC_LANES]; /* lanes past nch: 0 */
  int64_t badd[OA_Q8_DWC_LANES];
  int8_t *y;        /* the block's first output plane (oh x ow), the others follow */
  float *work;      /* oa_q8_dwc_work: the pixel buffer, kh kw x 16 floats, oh ow x 16 bytes */
} oa_q8_dwc_t;
typedef void (*oa_q8_dwc_fn)(const oa_q8_dwc_t *p);
/* The pixel buffer holds bands of `br` output rows' input (`rows` padded rows) when the whole
 * padded plane would take more than OA_Q8_DWC_BAND_FLOATS (one band: the whole plane, hp rows). */
#define OA_Q8_DWC_BAND_FLOATS ((int64_t)16384)
static inline void oa_q8_dwc_band(int64_t hp, int64_t wp, int64_t kh, int64_t dh, int64_t sh, int64_t oh,
                                  int64_t *br, int64_t *rows) {
  const int64_t khd = (kh - 1) * dh + 1, cap = OA_Q8_DWC_BAND_FLOATS / (wp * OA_Q8_DWC_LANES);
  const int64_t b = cap > khd ? (cap - khd) / sh + 1 : 1;
  if (hp <= cap || b >= oh) {
    *br = oh, *rows = hp;
  } else {
    *br = b, *rows = (b - 1) * sh + khd;
  }
}
/* floats of work the kernel needs */
static inline int64_t oa_q8_dwc_work(int64_t hp, int64_t wp, int64_t kh, int64_t kw, int64_t dh, int64_t sh,
                                     int64_t oh, int64_t npix) {
  int64_t br, rows;
  oa_q8_dwc_band(hp, wp, kh, dh, sh, oh, &br, &rows);
  return (rows * wp + kh * kw) * OA_Q8_DWC_LANES + (npix * OA_Q8_DWC_LANES + 3) / 4;
}

/* Depthwise on one plane with byte dot products along the rows (x86 VNNI: vpdpbusd), NCHW as it
 * is, no transposes. The kernel copies the plane into `work` as unsigned bytes x ^ 0x80 = x + 128
 * (padding: input_zp ^ 0x80, so padded taps add exactly what the correction takes away: the
 * driver's corr = -(input_zp + 128) * sum w), in sh row-phase planes that make the plane one
 * long row of "grid columns" oy L + ox (q8_vnni_dwv). Outputs are summed 16 per zmm, 4 per 128-bit
 * lane: one unaligned 64-byte load per kernel row and lane group, one in-lane byte shuffle
 * (vpshufb) that forms per output the 4-byte group (x[sw o + t dw], t = 4 g .. 4 g + 3) of tap
 * group g, one vpdpbusd against the broadcast weights of that group; a lane holds the bytes of
 * its 4 outputs when 3 sw + (kw - 1) dw <= 15 (oa_q8_dwv_fits). The sums are requantized in
 * registers, a band of rows (OA_Q8_DWV_ACC grid columns at most) at a time into `work`'s bytes,
 * then the rows' first ow bytes copied to y. */
typedef struct oa_q8_dwv {
  const int8_t *x; /* input plane h x w */
  int64_t h, w, ph, pw, sh, sw, dh, dw, kh, kw, oh, ow;
  int32_t zin;
  const int8_t *wt; /* kh * kw */
  int64_t corr;
  int32_t mult, shift, zp, lo, hi;
  int64_t badd; /* the bias's addend (quant_rule.h) */
  int8_t *y;        /* oh x ow */
  uint8_t *work;    /* plane + cols bytes (oa_q8_dwv_geo) */
  /* the geometry, the same for every plane of a call (oa_q8_dwv_geo), and per kernel row i its
   * bytes koff[i] = ((i dh % sh) hq + i dh / sh) ld from work: computed once by the driver */
  int64_t L, hq, ld, plane, band, cols;
  const int64_t *koff;
} oa_q8_dwv_t;
typedef void (*oa_q8_dwv_fn)(const oa_q8_dwv_t *p);
#define OA_Q8_DWV_ACC ((int64_t)2048)
#define OA_Q8_DWV_GROUPS_MAX 32 /* kh * ceil(kw / 4) */
static inline int oa_q8_dwv_fits(int64_t kh, int64_t kw, int64_t sw, int64_t dw) {
  return (sw == 1 || sw == 2) && kw >= 1 && dw >= 1 && 3 * sw + (kw - 1) * dw <= 15 &&
         kh * ((kw + 3) / 4) <= OA_Q8_DWV_GROUPS_MAX;
}
/* The kernel's geometry (q8_vnni_dwv): grid rows of L columns, sh row-phase planes of hq rows of
 * ld bytes, `plane` bytes for them (+ 256: the last vectors read up to 200 past them), output rows
 * per band (at most OA_Q8_DWV_ACC columns, at least one row) and a band's computed columns `cols`
 * (a multiple of 64); work = plane + cols (a band's bytes in column order). Sizes fit: the
 * driver's layout bounds them first (opt/quant.c). */
static inline void oa_q8_dwv_geo(int64_t oh, int64_t ow, int64_t sh, int64_t sw, int64_t kh, int64_t dh,
                                 int64_t wp, int64_t *L, int64_t *hq, int64_t *ld, int64_t *plane, int64_t *band,
                                 int64_t *cols) {
  const int64_t rows = (oh - 1) * sh + (kh - 1) * dh + 1;
  *L = (wp + sw - 1) / sw;
  *hq = (rows + sh - 1) / sh;
  *ld = sw * *L;
  *plane = (sh * *hq * *ld + 256 + 63) / 64 * 64;
  const int64_t b = OA_Q8_DWV_ACC / *L;
  *band = b < 1 ? 1 : b > oh ? oh : b;
  *cols = ((*band - 1) * *L + ow + 63) / 64 * 64;
}

/* Depthwise: acc[o] = sum_{i<kh, j<kw} w[i * kw + j] * rows[i * dh * ld + o * sw + j * dw], o < n,
 * over a plane of (x - input_zp) values (padding 0) whose rows are ld elements apart. */
typedef void (*oa_q8_dw_fn)(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                            int64_t dh, int64_t dw, int64_t n, int32_t *acc);

/* GEMV for a few rows: acc[i * n + j] = sum_k w[j * k + q] * x[i * k + q], x = (input - input_zp)
 * as int16 (|product| <= 255 * 128), W [n][k] int8 in place (every table, VNNI ones too: x ^ 0x80
 * would need sum_k W per run, a second pass over W when M is 1). */
typedef void (*oa_q8_gemv_fn)(int64_t m, int64_t n, int64_t k, const void *x, const int8_t *w, int32_t *acc);

/* Pack one B panel (the driver's layout above, u8 tables: x ^ 0x80, padding 0): value(q, j) =
 * src[koff[q] + cb[j]] (koff NULL: src[cb[j] + q]) for q < k, j < nc; zero past them. */
typedef void (*oa_q8_pack_fn)(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                              int32_t nc, int32_t nr, void *dst);

/* sums[c] = sum_k w[c * k + q] for c < rows */
typedef void (*oa_q8_wsum_fn)(int64_t rows, int64_t k, const int8_t *w, int64_t *sums);

/* add_q8 on same-shape operands: y[i] = the rule of docs/quantization.md ("add_q8") */
typedef struct oa_q8_add {
  int32_t za, zb, ma, mb, shift, zo, lo, hi; /* input zero points, multipliers, shift, output */
} oa_q8_add_t;
typedef void (*oa_q8_add_fn)(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y);

/* quantize: y[i] = clamp(round_half_even(x[i] * inv) + zp, lo, hi) in float32, NaN -> zp, exactly
 * as the reference kernel (the rounded value clamped to +-1e9 first); y int8, or uint8 (lo >= 0:
 * the low byte of the value either way) */
typedef void (*oa_q8_quantize_fn)(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y);
/* dequantize: y[i] = (float)(x[i] - zp) * scale, x int8 (u8 0) or uint8 (u8 1) */
typedef void (*oa_q8_dequantize_fn)(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y);

typedef struct oa_q8_isa {
  const char *name;
  int32_t mr, nr;  /* tile */
  int32_t kg;      /* K group of the packed operands */
  int32_t wide;    /* packed elements: int16 (1) or int8 (0) */
  oa_q8_gemm_fn gemm;
  oa_q8_gemm_rows_fn gemm_rows; /* or NULL: A is packed for `gemm` (once per run, or per task with pack_a) */
  oa_q8_requant_fn requant;
  oa_q8_requant_pc_fn requant_pc;  /* or NULL */
  oa_q8_requant_f32_fn requant_f32; /* or NULL: float sums (exact integers below 2^24) */
  oa_q8_to_float_fn to_float;       /* or NULL */
  oa_q8_dwp_fn dwp;                 /* or NULL: a depthwise plane (strides 1-2) */
  oa_q8_dw_fn dw;
  oa_q8_gemv_fn gemv;
  oa_q8_gemv_fn gemv_u8; /* or NULL: x as uint8 x ^ 0x80, used when input_zp is -128 (= x - zp) */
  int32_t u8;           /* B is x ^ 0x80 (VNNI), the GEMM's correction counts 128 more */
  oa_q8_pack_fn pack;   /* or NULL: the driver's portable packing */
  oa_q8_pack_fn pack_a; /* or NULL: the driver's portable packing of A tiles (koff NULL, cb[j] = j K) */
  oa_q8_wsum_fn wsum;   /* or NULL: the driver's loop */
  const char *variant;  /* the plan's kernel name when it differs from the ISA's (VNNI), or NULL */
  oa_q8_add_fn add;     /* the elementwise int8 ops (or NULL: the reference kernels run) */
  oa_q8_quantize_fn quantize;
  oa_q8_dequantize_fn dequantize;
  int32_t akg;              /* K group of packed A tiles (0: kg) */
  int32_t bslack;           /* bytes the micro-kernel may read past a column block's B panels */
  void (*tile_on)(void);    /* or NULL: before a thread's GEMM micro-kernel calls of one task (AMX) */
  void (*tile_off)(void);   /* or NULL: after them */
  oa_q8_dwc_fn dwc; /* or NULL: depthwise on channel blocks (small planes) */
  oa_q8_requant_rows_fn requant_rows; /* or NULL: the GEMM's rows one `requant` call each */
  oa_q8_dwv_fn dwv; /* or NULL: depthwise along the rows with byte dot products (oa_q8_dwv_t) */
} oa_q8_isa_t;

/* The table of ISA `id` (isa.h), NULL when this build does not have it; `dot`: use the ISA's int8
 * dot-product extension where built: NEON sdot (the CPU has dotprod), AVX-512 VNNI (avx512_vnni),
 * AVX2 with AVX-VNNI (avx_vnni); the caller checks the CPU and OA_CPU_ISA_VNNI. `dot` 2 on
 * AVX-512: the AMX tiles (the caller checks the CPU, the OS permission and OA_CPU_ISA_AMX). */
const oa_q8_isa_t *oa_q8_isa(int32_t id, int32_t dot);

/* Portable instances (arch/portable/quant.c), also the other ISAs' fall-backs. */
void oa_q8_portable_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                            int32_t zp, int32_t lo, int32_t hi, int8_t *y);
void oa_q8_portable_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                       int64_t dh, int64_t dw, int64_t n, int32_t *acc);
void oa_q8_portable_gemv(int64_t m, int64_t n, int64_t k, const void *x, const int8_t *w, int32_t *acc);
void oa_q8_portable_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y);
void oa_q8_portable_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y);
void oa_q8_portable_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y);

/* x86 instances the VNNI tables share with the plain ones (arch/x86/avx2/quant.c,
 * arch/x86/avx512/quant.c; AVX-512 instances only run where env->isas has OA_CPU_ISA_AVX512). */
void oa_q8_avx2_wsum(int64_t rows, int64_t k, const int8_t *w, int64_t *sums);
void oa_q8_avx2_gemv(int64_t m, int64_t n, int64_t k, const void *x, const int8_t *w, int32_t *acc);
void oa_q8_avx512_gemv(int64_t m, int64_t n, int64_t k, const void *x, const int8_t *w, int32_t *acc);
void oa_q8_avx2_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd, int32_t zp,
                        int32_t lo, int32_t hi, int8_t *y);
/* int16-pair packers of B panels and A tiles (kg 2, wide: the AVX2 and AVX-512 tables; AVX2
 * code, run where the CPU has AVX2) */
void oa_q8_avx2_pack_w2(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc,
                        int32_t nr, void *dst);
void oa_q8_avx2_pack_a_w2(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                          int32_t nc, int32_t nr, void *dst);
void oa_q8_avx2_requant_rows(const int32_t *acc, int64_t ldc, int32_t m, int64_t n, const int64_t *corr,
                             const int32_t *mult, const int8_t *shift, const int64_t *badd, int32_t pc, int64_t amax,
                             int32_t zp, int32_t lo, int32_t hi, int8_t *y, int64_t ldy);
void oa_q8_avx2_requant_f32(const float *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                            int32_t zp, int32_t lo, int32_t hi, int8_t *y);
void oa_q8_avx2_to_float(const int8_t *x, int64_t n, int32_t zp, float *d);
void oa_q8_avx2_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                   int64_t dh, int64_t dw, int64_t n, int32_t *acc);
void oa_q8_avx512_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd, int32_t zp,
                          int32_t lo, int32_t hi, int8_t *y);
void oa_q8_avx512_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                     int64_t dh, int64_t dw, int64_t n, int32_t *acc);
void oa_q8_avx512_requant_rows(const int32_t *acc, int64_t ldc, int32_t m, int64_t n, const int64_t *corr,
                               const int32_t *mult, const int8_t *shift, const int64_t *badd, int32_t pc, int64_t amax,
                               int32_t zp,
                               int32_t lo, int32_t hi, int8_t *y, int64_t ldy);
void oa_q8_avx512_requant_f32(const float *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                              int32_t zp,
                              int32_t lo, int32_t hi, int8_t *y);
void oa_q8_avx512_to_float(const int8_t *x, int64_t n, int32_t zp, float *d);
void oa_q8_avx512_wsum(int64_t rows, int64_t k, const int8_t *w, int64_t *sums);
void oa_q8_avx512_requant_pc(const int32_t *acc, int64_t n, const int64_t *corr, const int32_t *mult,
                             const int8_t *shift, const int64_t *badd, int32_t zp, int32_t lo, int32_t hi, int8_t *y);
void oa_q8_avx512_dwp(const oa_q8_dwp_t *p);
void oa_q8_avx512_dwc(const oa_q8_dwc_t *p);
void oa_q8_avx2_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y);
void oa_q8_avx2_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y);
void oa_q8_avx2_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y);
void oa_q8_avx512_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y);
void oa_q8_avx512_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y);
void oa_q8_avx512_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y);
/* the AVX512-VNNI file's B packer without the x ^ 0x80 (raw int8, the AMX table's; no VNNI
 * instruction in it) and its uint8 GEMV */
void oa_q8_avx512_pack_raw(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                           int32_t nc, int32_t nr, void *dst);
void oa_q8_avx512_vnni_gemv(int64_t m, int64_t n, int64_t k, const void *x, const int8_t *w, int32_t *acc);

/* The elementwise rules in plain C (the portable instances, the SIMD ones' tails). */
static inline int8_t oa_q8_add1(int8_t a, int8_t b, const oa_q8_add_t *p) {
  const int64_t pa = ((int64_t)a - p->za) * p->ma, pb = ((int64_t)b - p->zb) * p->mb;
  return q8_finish(q8_round_shift(pa + pb, p->shift), p->zo, p->lo, p->hi);
}
static inline float oa_q8_quantize1(float x, float inv, float zp, float lo, float hi) {
  const float v = x * inv;
  float q;
  if (v != v) {
    q = zp;
  } else {
    float r = nearbyintf(v);
    if (r > 1e9f) r = 1e9f;
    if (r < -1e9f) r = -1e9f;
    q = r + zp;
  }
  return q < lo ? lo : (q > hi ? hi : q);
}

/* The depthwise row in plain C, for each ISA file to compile with its own flags: blocks of 16
 * outputs whose sums stay in registers over all taps (the compiler vectorises the block). */
#define OA_Q8_DW_BLOCK 16
static inline void oa_q8_dw_generic(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw,
                                    int64_t sw, int64_t dh, int64_t dw, int64_t n, int32_t *acc) {
  int64_t o = 0;
  for (; o + OA_Q8_DW_BLOCK <= n; o += OA_Q8_DW_BLOCK) {
    int32_t a[OA_Q8_DW_BLOCK] = {0};
    for (int64_t i = 0; i < kh; i++) {
      for (int64_t j = 0; j < kw; j++) {
        const int32_t wv = w[i * kw + j];
        const int16_t *r = rows + i * dh * ld + j * dw + o * sw;
        if (sw == 1) {
          for (int u = 0; u < OA_Q8_DW_BLOCK; u++) a[u] += wv * (int32_t)r[u];
        } else {
          for (int u = 0; u < OA_Q8_DW_BLOCK; u++) a[u] += wv * (int32_t)r[u * sw];
        }
      }
    }
    for (int u = 0; u < OA_Q8_DW_BLOCK; u++) acc[o + u] = a[u];
  }
  for (; o < n; o++) {
    int32_t a = 0;
    for (int64_t i = 0; i < kh; i++)
      for (int64_t j = 0; j < kw; j++) a += (int32_t)w[i * kw + j] * rows[i * dh * ld + j * dw + o * sw];
    acc[o] = a;
  }
}

#endif /* OA_KERNELS_OPT_QUANT_H */
