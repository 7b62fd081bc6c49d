/* Intel AMX int8 micro-kernel (opt/quant.h): tdpbssd multiplies a 16 x 64 tile of signed bytes (A,
 * 16 rows of W x 64 k) by a 16 x 64 tile of signed bytes (B, 16 groups of 4 k x 16 columns x 4 k:
 * exactly one 16-column slice of the driver's B panel [kp / 4][NR][4]) into a 16 x 16 int32 tile,
 * 16 x 16 x 64 products per instruction, summed exactly in int32 (no saturation; |w * x| <= 2^14,
 * K <= 65536: every sum < 2^31). Signed times signed: the activations are packed raw (no x ^ 0x80),
 * the driver's correction is the plain one, corr = -input_zp * sum W.
 *   GEMM: a 32 x 32 block, 2 A + 2 B + 4 C tiles (all 16 rows x 64 bytes: one configuration), K
 *         in steps of 64. A comes packed by the driver ([kpa / 64][32][64], zero past K and past
 *         the rows: akg = 64), or from W in place (gemm_rows, rows ldw apart: the driver's choice
 *         when K is a multiple of 64 and the rows of 32; a K tail or fewer rows go through a
 *         zero-padded 32 x 64 copy on the stack, nothing is read past a row of W). B panels are
 *         the driver's [kp / 4][32][4] with kp = K rounded up to 4: the last step's B tiles read
 *         up to 15 groups (1920 bytes) past the panel, the next panel's bytes or the driver's
 *         bslack; those rows meet zero A columns, so they add exactly 0.
 *   Tile state: per thread. tile_on loads the configuration (and zeroes the tiles) at the start
 *         of each GEMM task, tile_off releases the tiles at its end: threadpool workers, and
 *         other code of the process that uses AMX with its own configuration, are fine.
 * The packing of B (the VNNI file's packer, raw bytes), the GEMV (M <= 4), the requantization and
 * the rest are the AVX-512 instances (no VNNI instruction: this table also runs with VNNI
 * disabled; where VNNI is allowed, the driver gives calls that do not use the tile to the VNNI
 * table, opt/quant.c amx_or_vnni). Compiled with the AVX-512
 * flags, -mamx-tile -mamx-int8; only called when the CPU reports amx_tile + amx_int8 +
 * avx512_vnni, the OS granted the tile data state (features.c) and env->isas has
 * OA_CPU_ISA_AVX512 and OA_CPU_ISA_AMX (opt/quant.c). */
/* gcc defines __AMX_TILE__ / __AMX_INT8__, clang __AMXTILE__ / __AMXINT8__ */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_INT8__) || defined(__AMXINT8__))
#include <immintrin.h>
#include <string.h>

#include "kernels/opt/quant.h"

#define QA_MR 32
#define QA_NR 32
#define QA_KS 64 /* K per tile step (bytes of an A row) */

/* the palette-1 tile configuration (64 bytes) */
typedef struct qa_cfg {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} qa_cfg_t;

/* tiles 0-3 C, 4-5 A, 6-7 B, each 16 rows x 64 bytes. A static object: gcc dropped the stores
 * into a local one (ldtilecfg's 64-byte operand is not seen as read) and the tiles stayed off. */
static const qa_cfg_t qa_cfg = {.palette = 1,
                                .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

static void qa_tile_on(void) { _tile_loadconfig(&qa_cfg); }

static void qa_tile_off(void) { _tile_release(); }

/* one K step: A tiles 4 (rows 0-15), 5 (rows 16-31) from a (rows lda apart); B tiles 6 (columns
 * 0-15), 7 (16-31) from the panel's 16 groups at b (groups 4 * QA_NR bytes apart) */
#define QA_STEP(a, lda, b)                                     \
  do {                                                         \
    _tile_loadd(4, (a), (lda));                                \
    _tile_loadd(6, (b), 4 * QA_NR);                            \
    _tile_loadd(7, (b) + 64, 4 * QA_NR);                       \
    _tile_dpbssd(0, 4, 6);                                     \
    _tile_dpbssd(1, 4, 7);                                     \
    _tile_loadd(5, (a) + 16 * (int64_t)(lda), (lda));          \
    _tile_dpbssd(2, 5, 6);                                     \
    _tile_dpbssd(3, 5, 7);                                     \
  } while (0)

/* A packed [kpa / 64][32][64], B one panel [kp / 4][32][4]; C as below */
static void qa_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int8_t *a = (const int8_t *)a_, *b = (const int8_t *)b_;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t q = 0; q < kp; q += QA_KS) QA_STEP(a + q * QA_MR, QA_KS, b + q * QA_NR);
  const int64_t ldb = ldc * 4;
  _tile_stored(0, c, ldb);
  _tile_stored(1, c + 16, ldb);
  _tile_stored(2, c + 16 * ldc, ldb);
  _tile_stored(3, c + 16 * ldc + 16, ldb);
}

/* W rows w + i * ldw (i < mr <= 32; k int8 each), B one panel [kp / 4][32][4]; C[i][j] (i < 32, rows past mr written but unused) at c + i * ldc + j */
static void qa_gemm_rows(int64_t k, const int8_t *w, int64_t ldw, int32_t mr, const void *b_, int32_t *c,
                         int64_t ldc) {
  const int8_t *b = (const int8_t *)b_;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  /* K steps read in place: the whole 32 x 64 block inside W (a stride the tile load takes) */
  const int64_t kin = mr == QA_MR && ldw <= 0x7fffffff ? k / QA_KS * QA_KS : 0;
  int64_t q = 0;
  for (; q < kin; q += QA_KS) QA_STEP(w + q, ldw, b + q * QA_NR);
  if (q < k) { /* the rest through a zero-padded copy */
    _Alignas(64) int8_t a[QA_MR * QA_KS];
    memset(a, 0, sizeof a);
    for (; q < k; q += QA_KS) {
      const int64_t n = k - q < QA_KS ? k - q : QA_KS;
      for (int32_t i = 0; i < mr; i++) {
        memcpy(a + i * QA_KS, w + i * ldw + q, (size_t)n);
        if (n < QA_KS) memset(a + i * QA_KS + n, 0, (size_t)(QA_KS - n));
      }
      QA_STEP(a, QA_KS, b + q * QA_NR);
    }
  }
  const int64_t ldb = ldc * 4;
  _tile_stored(0, c, ldb);
  _tile_stored(1, c + 16, ldb);
  _tile_stored(2, c + 16 * ldc, ldb);
  _tile_stored(3, c + 16 * ldc + 16, ldb);
}

const oa_q8_isa_t oa_q8_avx512_amx_isa = {.name = "avx512_amx", .mr = QA_MR, .nr = QA_NR, .kg = 4, .wide = 0,
                                          .gemm = qa_gemm, .gemm_rows = qa_gemm_rows,
                                          .requant = oa_q8_avx512_requant,
                                          .requant_pc = oa_q8_avx512_requant_pc,
                                          .requant_rows = oa_q8_avx512_requant_rows,
                                          .requant_f32 = oa_q8_avx512_requant_f32,
                                          .to_float = oa_q8_avx512_to_float, .dwp = oa_q8_avx512_dwp,
                                          .dwc = oa_q8_avx512_dwc,
                                          .dw = oa_q8_avx512_dw,
                                          .gemv = oa_q8_avx512_gemv, .gemv_u8 = NULL, .u8 = 0,
                                          .pack = oa_q8_avx512_pack_raw,
                                          .wsum = oa_q8_avx512_wsum, .variant = "avx512_amx",
                                          .add = oa_q8_avx512_add, .quantize = oa_q8_avx512_quantize,
                                          .dequantize = oa_q8_avx512_dequantize, .akg = QA_KS, .bslack = 2048,
                                          .tile_on = qa_tile_on, .tile_off = qa_tile_off};
#else
typedef int oa_q8_avx512_amx_unused_t; /* not an AMX build of this file */
#endif
