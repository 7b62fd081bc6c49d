/* Optimized int8 kernels: conv2d_q8 and linear_q8 (their reference kernels: ref/quant.c).
 *
 * One portable driver on the per-ISA micro-kernels of opt/quant.h (arch/<isa>/quant.c):
 *   conv (any groups)  per image and group, Y[c][p] = W[c][K] * X[K][p] (p = output pixel,
 *                      K = C_in/groups * kH * kW): W read in place, rows widened into small A
 *                      tiles; X packed per column block (im2col through a k-offset table on the
 *                      input, zero-point-padded first when the conv pads), raw products, the
 *                      zero-point correction in the per-channel constant corr[c]
 *   depthwise          (groups == C_in == C_out) the ISA's row kernel (VNNI byte dot products along
 *                      the rows, NCHW in place: oa_q8_dwv_t), its channel-block kernel (16 channels a
 *                      vector, rows narrower than Q8_DWC_MAX_OW), its plane kernel (phase planes,
 *                      strides 1-2), the float depthwise kernel on an (x - input_zp) float plane,
 *                      or a direct kernel over output rows of an (x - input_zp) int16 plane
 *   linear, M <= 4     GEMV over the [N, K] weights in place, x - input_zp widened once
 *   linear, M > 4      the GEMM with A = W (rows = N outputs), B = X^T, C stored transposed
 * Every output is finished with the rule of quant_rule.h (or its vector equivalent, tested
 * bit-identical); integer sums are exact (K <= 65536, else the call is declined), so the bytes are
 * the reference kernel's for every ISA, tile and thread count. Threads take whole tasks (column
 * blocks x row blocks, or planes): outputs are split, never K. */
#include <string.h>

#include "threadpool.h"
#include "kernels/opt/plan.h"
#include "kernels/opt/quant.h"

enum { Q_ISA, Q_PATH, Q_THREADS, Q_DOT };
enum { P_GEMM = 1, P_DW, P_GEMV, P_LGEMM, P_DWF, P_DWP, P_DWC, P_DWV };

/* depthwise on channel blocks (P_DWC) for output rows narrower than this: measured on MobileNetV2's
 * layers (benchmarks/micro/quant_bench.py --mobilenet, AVX-512), faster than the plane kernel
 * (P_DWP) up to 56 outputs wide (7x7 by 2.2x, 28x28 by 20%, 112 -> 56 stride 2 by 22%, 56x56 by
 * 6%); at 112x112 even, and its buffer (64 bytes per padded input pixel) would be 830 KB */
#ifndef Q8_DWC_MAX_OW
#define Q8_DWC_MAX_OW 64
#endif

/* depthwise along the rows (P_DWV) for outputs at least this wide: its cost per plane (the padded
 * copy, the set-up) loses to the channel blocks (P_DWC, 16 planes at once) on small planes;
 * measured on MobileNetV2's layers (AVX-512 VNNI, one thread, oa_run --profile): 112x112 1.5x
 * faster, 112 -> 56 stride 2 1.9x, 56x56 1.4x, 56 -> 28 stride 2 1.5x, 28x28 5% faster; 28 -> 14
 * stride 2 3% slower, 14x14 2x slower */
#ifndef Q8_DWV_MIN_OW
#define Q8_DWV_MIN_OW 28
#endif

/* depthwise in float (P_DWF): kernels of at most this many taps have exact float sums
 * (taps * 255 * 128 < 2^24) */
#define Q8_DWF_TAPS_MAX 514

/* bytes of a B column block kept in L2 while every row tile passes over it */
#define Q8_B_BLOCK_BYTES ((int64_t)192 * 1024)
#define Q8_NC_MAX 512
#define Q8_GEMV_M_MAX 4
#define Q8_GEMV_NB 64

extern const oa_q8_isa_t oa_q8_portable_isa;
#if defined(OA_BUILT_AVX2)
extern const oa_q8_isa_t oa_q8_avx2_isa;
#endif
#if defined(OA_BUILT_AVX_VNNI)
extern const oa_q8_isa_t oa_q8_avx_vnni_isa;
#endif
#if defined(OA_BUILT_AVX512)
extern const oa_q8_isa_t oa_q8_avx512_isa;
#endif
#if defined(OA_BUILT_AVX512_VNNI)
extern const oa_q8_isa_t oa_q8_avx512_vnni_isa;
#endif
#if defined(OA_BUILT_AMX)
extern const oa_q8_isa_t oa_q8_avx512_amx_isa;
#endif
#if defined(OA_BUILT_NEON)
extern const oa_q8_isa_t oa_q8_neon_isa;
extern const oa_q8_isa_t *oa_q8_neon_sdot_isa(void);
extern const oa_q8_isa_t *oa_q8_neon_i8mm_isa(void);
#endif

const oa_q8_isa_t *oa_q8_isa(int32_t id, int32_t dot) {
  (void)dot;
  switch (id) {
    case OA_ISA_PORTABLE: return &oa_q8_portable_isa;
#if defined(OA_BUILT_AVX2)
    case OA_ISA_AVX2:
#if defined(OA_BUILT_AVX_VNNI)
      if (dot) return &oa_q8_avx_vnni_isa;
#endif
      return &oa_q8_avx2_isa;
#endif
#if defined(OA_BUILT_AVX512)
    case OA_ISA_AVX512:
#if defined(OA_BUILT_AMX)
      if (dot == 2) return &oa_q8_avx512_amx_isa;
#endif
#if defined(OA_BUILT_AVX512_VNNI)
      if (dot) return &oa_q8_avx512_vnni_isa;
#endif
      return &oa_q8_avx512_isa;
#endif
#if defined(OA_BUILT_NEON)
    case OA_ISA_NEON:
      if (dot == 2 && oa_q8_neon_i8mm_isa()) return oa_q8_neon_i8mm_isa();
      return dot && oa_q8_neon_sdot_isa() ? oa_q8_neon_sdot_isa() : &oa_q8_neon_isa;
#endif
    default: return NULL;
  }
}

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static int64_t up64(int64_t b) { return b < 0 ? -1 : (b + 63) / 64 * 64; }
static int64_t round_up(int64_t a, int64_t m) { return oa_cdiv(a, m) * m; }

/* ---- packing (opt/quant.h layouts) ---------------------------------------------------------- */

/* One packed panel of `nr` columns, [kp / KG][nr][KG] of T: value(q, j) = V(src[koff[q] + cb[j]])
 * (koff NULL: q, each column contiguous in k) for q < k, j < nc; zero past them. */
#define Q8_DEFINE_PACK(NAME, T, KG, V)                                                                          \
  static void NAME(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc, \
                   int32_t nr, T *dst) {                                                                        \
    if (nc < nr || kp > k) memset(dst, 0, (size_t)(kp * nr) * sizeof(T));                                       \
    if (!koff) {                                                                                                \
      for (int32_t j = 0; j < nc; j++) {                                                                        \
        const int8_t *s = src + cb[j];                                                                          \
        T *d = dst + j * KG;                                                                                    \
        for (int64_t q = 0; q < k; q++) d[(q / KG) * nr * KG + q % KG] = V(T, s[q]);                            \
      }                                                                                                         \
      return;                                                                                                   \
    }                                                                                                           \
    int contiguous = 1;                                                                                         \
    for (int32_t j = 1; j < nc; j++) contiguous &= cb[j] == cb[0] + j;                                          \
    for (int64_t q = 0; q < k; q++) {                                                                           \
      T *d = dst + (q / KG) * nr * KG + q % KG;                                                                 \
      if (contiguous) {                                                                                         \
        const int8_t *s = src + koff[q] + cb[0];                                                                \
        for (int32_t j = 0; j < nc; j++) d[j * KG] = V(T, s[j]);                                                \
      } else {                                                                                                  \
        const int8_t *s = src + koff[q];                                                                        \
        for (int32_t j = 0; j < nc; j++) d[j * KG] = V(T, s[cb[j]]);                                            \
      }                                                                                                         \
    }                                                                                                           \
  }
#define Q8_RAW(T, v) ((T)(v))
#define Q8_XOR(T, v) ((T)((uint8_t)(v) ^ 0x80u))
Q8_DEFINE_PACK(pack_w1, int16_t, 1, Q8_RAW)
Q8_DEFINE_PACK(pack_w2, int16_t, 2, Q8_RAW)
Q8_DEFINE_PACK(pack_b4, int8_t, 4, Q8_RAW)
Q8_DEFINE_PACK(pack_u4, uint8_t, 4, Q8_XOR)

/* A tiles of K steps of `kg` bytes (AMX: [kp / kg][nr][kg]): row j's step t is one run of W row
 * cb[j] (koff NULL), zero past k and past nc rows */
static void pack_a_steps(const int8_t *src, int64_t k, int64_t kp, int64_t kg, const int64_t *cb, int32_t nc,
                         int32_t nr, int8_t *dst) {
  for (int64_t q = 0; q < kp; q += kg) {
    int8_t *d = dst + q * nr;
    const int64_t n = oa_max64(0, oa_min64(kg, k - q));
    for (int32_t j = 0; j < nr; j++, d += kg) {
      if (j < nc && n) memcpy(d, src + cb[j] + q, (size_t)n);
      if (j >= nc || n < kg) memset(d + (j < nc ? n : 0), 0, (size_t)(kg - (j < nc ? n : 0)));
    }
  }
}

/* A tiles (`b` 0: W, raw) and B panels (`b` 1: the activations, x ^ 0x80 for u8 tables) */
static void pack(const oa_q8_isa_t *isa, int b, const int8_t *src, const int64_t *koff, int64_t k, int64_t kp,
                 const int64_t *cb, int32_t nc, int32_t nr, void *dst) {
  if (b && isa->pack) isa->pack(src, koff, k, kp, cb, nc, nr, dst);
  else if (!b && isa->pack_a) isa->pack_a(src, koff, k, kp, cb, nc, nr, dst);
  else if (!b && isa->akg) pack_a_steps(src, k, kp, isa->akg, cb, nc, nr, (int8_t *)dst);
  else if (isa->wide && isa->kg == 1) pack_w1(src, koff, k, kp, cb, nc, nr, (int16_t *)dst);
  else if (isa->wide) pack_w2(src, koff, k, kp, cb, nc, nr, (int16_t *)dst);
  else if (b && isa->u8) pack_u4(src, koff, k, kp, cb, nc, nr, (uint8_t *)dst);
  else pack_b4(src, koff, k, kp, cb, nc, nr, (int8_t *)dst);
}

/* ---- geometry and plan ---------------------------------------------------------------------- */

typedef struct q8_geo {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, g, sh, sw, ph, pw, dh, dw;
  int64_t cin_g, cout_g, hp, wp; /* hp, wp: the zero-point-padded input plane */
  int64_t vw;                    /* P_DWF: the float depthwise kernel's vector width */
  int64_t rows, cols, k;         /* GEMM per (image, group): rows = C_out/groups, cols = pixels; linear: N, M */
  int64_t npix;                  /* conv: output pixels per plane (oh * ow) */
  /* grid columns (u8 tables with a packer, strides 1-2): the input is split into sh * sw phase
   * planes of hq x wq (phase (a, b) holds padded pixel (y sh + a, x sw + b)); GEMM column
   * c = oy * wq + ox reads phase-plane element c + (i dh / sh) wq + j dw / sw for tap (i, j): every
   * B row is a contiguous byte run, the columns ox >= ow are computed and dropped */
  int64_t grid, hq, wq, chan; /* chan: bytes of one channel's phase planes */
} q8_geo_t;

/* grid columns for this table and conv (q8_geo_t); narrower outputs would compute too many dropped
 * columns (7 wide: 2 of 9) and copy out too many short runs */
#ifndef Q8_GRID_MIN_OW
#define Q8_GRID_MIN_OW 12
#endif
/* grid columns for this table and conv (q8_geo_t) */
static void grid_geo(const oa_q8_isa_t *isa, int32_t path, q8_geo_t *q) {
  q->grid = 0;
  if (path != P_GEMM || !isa->pack || q->sh > 2 || q->sw > 2 || q->ow < Q8_GRID_MIN_OW) return;
  q->grid = 1;
  q->hq = oa_cdiv(q->hp, q->sh), q->wq = oa_cdiv(q->wp, q->sw);
  q->chan = q->sh * q->sw * q->hq * q->wq;
  q->cols = (q->oh - 1) * q->wq + q->ow;
}

static void conv_geo(const oa_op_call_t *call, q8_geo_t *q) {
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *y = call->outputs[0];
  q->n = x->shape[0], q->cin = x->shape[1], q->h = x->shape[2], q->w = x->shape[3];
  q->cout = w->shape[0], q->kh = w->shape[2], q->kw = w->shape[3], q->oh = y->shape[2], q->ow = y->shape[3];
  q->sh = iarg(call, OA_ARG_CONV2D_Q8_STRIDE_H), q->sw = iarg(call, OA_ARG_CONV2D_Q8_STRIDE_W);
  q->ph = iarg(call, OA_ARG_CONV2D_Q8_PAD_H), q->pw = iarg(call, OA_ARG_CONV2D_Q8_PAD_W);
  q->dh = iarg(call, OA_ARG_CONV2D_Q8_DILATION_H), q->dw = iarg(call, OA_ARG_CONV2D_Q8_DILATION_W);
  q->g = iarg(call, OA_ARG_CONV2D_Q8_GROUPS);
  q->cin_g = q->cin / q->g, q->cout_g = q->cout / q->g;
  q->hp = q->h + 2 * q->ph, q->wp = q->w + 2 * q->pw;
  q->rows = q->cout_g, q->cols = q->oh * q->ow, q->k = q->cin_g * q->kh * q->kw;
  q->npix = q->oh * q->ow;
}

static void linear_geo(const oa_op_call_t *call, q8_geo_t *q) {
  memset(q, 0, sizeof *q);
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1];
  q->rows = w->shape[0], q->k = w->shape[1];
  q->cols = q->k ? x->numel / q->k : 0;
  q->n = 1, q->g = 1, q->cout = q->rows;
}

/* The work split and the scratch of one call (prepare and run compute the same). */
typedef struct q8_layout {
  int64_t kp, kpa, nc, mc, n_cb, n_rb, tasks, slots; /* kpa: K of packed A tiles */
  int64_t off_corr, off_bias, off_koff, off_pad, off_a, off_slots, slot_bytes, total; /* bytes; -1: too big */
  int64_t a_tiles, a_tile_bytes; /* A packed once per run: g * ceil(rows / MR) tiles */
  int32_t a_in_task;              /* A packed by each task, tile by tile, into its slot (s_a) */
  int64_t off_bsh, b_block_bytes; /* rows split (n_rb > 1): each column block's B packed once, shared */
  int32_t a_in_place;             /* the ISA's gemm_rows reads W in place instead */
  int64_t s_b, s_a, s_acc, s_cb, s_out;                             /* offsets inside a slot */
  int64_t pad_h, pad_w, s_wf;                                       /* P_DWF: the float plane */
} q8_layout_t;

static void layout(const oa_q8_isa_t *isa, int32_t path, const q8_geo_t *q, int32_t pad, int32_t threads,
                   q8_layout_t *l) {
  memset(l, 0, sizeof *l);
  const int64_t eb = isa->wide ? 2 : 1, nr = isa->nr, mr = isa->mr;
  int64_t shared = 0, slot = 0;
  l->off_corr = 0;
  l->off_bias = up64(oa_cap_mul(q->cout, 8)); /* the bias's addend per channel, 0 without one (an array) */
  shared = oa_cap_add(l->off_bias, up64(oa_cap_mul(q->cout, 8)));
  if (path == P_GEMM || path == P_LGEMM) {
    l->kp = round_up(q->k, isa->kg);
    l->kpa = round_up(q->k, isa->akg ? isa->akg : isa->kg);
    /* column block: a B block of <= Q8_B_BLOCK_BYTES, whole panels */
    int64_t nc = Q8_B_BLOCK_BYTES / oa_max64(1, l->kp * eb) / nr * nr;
    nc = oa_max64(4 * nr, oa_min64(nc, Q8_NC_MAX)); /* >= 4 panels: an A tile is reused from L2 */
    nc = oa_min64(nc, round_up(q->cols, nr));
    l->nc = nc;
    l->n_cb = oa_cdiv(q->cols, nc);
    const int64_t outer = q->n * q->g * l->n_cb;
    /* too few column tasks for the threads: split the rows too */
    l->n_rb = 1;
    if (threads > 1 && outer < 2 * threads)
      l->n_rb = oa_max64(1, oa_min64(oa_cdiv(q->rows, mr), oa_cdiv(2 * threads, outer)));
    l->mc = round_up(oa_cdiv(q->rows, l->n_rb), mr);
    l->n_rb = oa_cdiv(q->rows, l->mc);
    l->tasks = outer * l->n_rb;
    l->off_koff = shared;
    shared = oa_cap_add(shared, up64(oa_cap_mul(path == P_GEMM ? q->k : 0, 8)));
    l->off_pad = shared;
    if (pad)
      shared = oa_cap_add(shared, up64(oa_cap_mul(q->n * q->cin, q->grid ? q->chan : oa_cap_mul(q->hp, q->wp))));
    /* W in place where the ISA's tile reads it so (gemm_rows). VNNI: 4 consecutive k of a row are
     * one broadcast, unless K is not a multiple of 4 and W is small (the stem conv: 3 x 7 x 7):
     * its packed tiles have no K tail. AMX (akg 64): when K is whole steps and the rows whole
     * 32-row blocks. The int16-pair tables (AVX2, AVX-512 without VNNI) have no in-place tile:
     * widening W with a vector packer (oa_q8_avx2_pack_a_w2) beat widening it in registers for
     * every column panel by 4-20% on MobileNetV2, ResNet-18 and GPT, even at 49 pixels. */
    if (isa->akg)
      l->a_in_place = isa->gemm_rows && q->k % isa->akg == 0 && q->rows % mr == 0;
    else
      l->a_in_place = isa->gemm_rows && (!isa->u8 || q->k % 4 == 0 || q->g * q->rows * q->k > ((int64_t)1 << 18));
    /* Otherwise W is packed once per run into shared scratch (the portable packers are slow enough
     * that packing per column block would show at small pixel counts), or, with a vector A packer
     * (pack_a: the int16-pair tables), tile by tile inside each task as it reaches them: one tile
     * of scratch instead of all of W widened (ResNet-18 on AVX2: 7.1 -> 2.4 MB in all), the tile
     * still in L1 when its panels run; W is then packed once per column block, 1/nc of the
     * products' work */
    l->a_in_task = !l->a_in_place && isa->pack_a != NULL;
    l->a_tiles = l->a_in_place || l->a_in_task ? 0 : q->g * oa_cdiv(q->rows, mr);
    l->a_tile_bytes = oa_cap_mul(oa_cap_mul(l->kpa, mr), eb);
    l->off_a = shared;
    shared = oa_cap_add(shared, up64(oa_cap_mul(l->a_tiles, l->a_tile_bytes)));
    /* a packed column block (+ the slack the AMX tile reads past it). With the rows split, the
     * tasks of one column block share one packed copy, packed by all threads first: each task
     * packing its own copy did the packing n_rb times (ResNet-18's layer4 convs, 49 pixels, 4
     * row blocks on 2 threads: no faster than one thread) */
    l->b_block_bytes = up64(oa_cap_add(oa_cap_mul(oa_cap_mul(l->kp, nc), eb), isa->bslack));
    l->off_bsh = shared;
    if (l->n_rb > 1) shared = oa_cap_add(shared, oa_cap_mul(outer, l->b_block_bytes));
    l->s_b = 0;
    slot = l->n_rb > 1 ? 0 : l->b_block_bytes;
    l->s_acc = slot; /* the MR x nc sums of a column block, requantized row by row */
    slot = oa_cap_add(slot, up64(oa_cap_mul(mr * 4, nc)));
    l->s_cb = slot;
    slot = oa_cap_add(slot, up64(nr * 8));
    l->s_out = slot; /* one requantized row (conv), the MR rows of a tile (linear: stored transposed; conv
                      * with requant_rows: grid columns with dropped ones) */
    slot = oa_cap_add(slot, up64(path == P_LGEMM || isa->requant_rows ? oa_cap_mul(mr, nc) : nc));
    l->s_a = slot;
    if (l->a_in_task) slot = oa_cap_add(slot, up64(l->a_tile_bytes));
  } else if (path == P_DWP) {
    /* per slot: the phase planes (+ slack: grid columns past the last row read up to 128 floats
     * on), the grid, the taps as floats; shared: the taps' offsets */
    l->tasks = q->n * q->cin;
    const int64_t hq = oa_cdiv(q->hp, q->sh), wq = oa_cdiv(q->wp, q->sw), taps = q->kh * q->kw;
    l->off_koff = shared;
    shared = oa_cap_add(shared, up64(oa_cap_mul(taps, 8)));
    l->pad_w = oa_cap_add(oa_cap_mul(oa_cap_mul(q->sh * q->sw, hq), wq), wq + 256); /* floats */
    l->s_acc = up64(oa_cap_mul(l->pad_w, 4));
    l->s_wf = oa_cap_add(l->s_acc, up64(oa_cap_mul(oa_cap_add(oa_cap_mul(q->oh, wq), 128), 4)));
    slot = oa_cap_add(l->s_wf, up64(oa_cap_mul(taps, 4)));
  } else if (path == P_DWV) { /* one plane per task: its padded bytes, a band's sums and bytes */
    l->tasks = q->n * q->cin;
    /* sizes checked before the kernel's own arithmetic (oa_q8_dwv_geo) */
    const int64_t rows = oa_cap_add(oa_cap_mul(q->oh - 1, q->sh), oa_cap_mul(q->kh - 1, q->dh));
    const int64_t big = oa_cap_mul(oa_cap_add(rows, 2 * q->sh), oa_cap_add(q->wp, 2));
    if (big < 0 || big > ((int64_t)1 << 40)) {
      slot = -1;
    } else {
      int64_t L, hq, ld, plane, band, cols;
      oa_q8_dwv_geo(q->oh, q->ow, q->sh, q->sw, q->kh, q->dh, q->wp, &L, &hq, &ld, &plane, &band, &cols);
      slot = up64(plane + cols);
    }
    l->off_koff = shared; /* the kernel rows' offsets */
    shared = oa_cap_add(shared, up64(oa_cap_mul(q->kh, 8)));
  } else if (path == P_DWC) { /* one block of OA_Q8_DWC_LANES channels per task (opt/quant.h) */
    l->tasks = q->n * oa_cdiv(q->cin, OA_Q8_DWC_LANES);
    slot = up64(oa_cap_mul(oa_q8_dwc_work(q->hp, q->wp, q->kh, q->kw, q->dh, q->sh, q->oh, q->npix), 4));
  } else if (path == P_DWF) {
    /* the float plane (x - zp, zero padding) as the float depthwise kernel wants it (opt/conv.c's
     * dw_pad_dims: every vector of a row reads inside it), its float output, converted in place
     * to the int32 sums, and the taps as floats */
    l->tasks = q->n * q->cin;
    const int64_t vw = oa_max64(1, q->vw), nvec = oa_cdiv(q->ow, vw);
    l->pad_w = (nvec * vw - 1) * q->sw + (q->kw - 1) * q->dw + 2;
    l->pad_h = (q->oh - 1) * q->sh + (q->kh - 1) * q->dh + 1;
    l->s_acc = up64(oa_cap_mul(oa_cap_mul(l->pad_h, l->pad_w), 4));
    l->s_wf = oa_cap_add(l->s_acc, up64(oa_cap_mul(oa_cap_mul(q->oh, q->ow), 4)));
    slot = oa_cap_add(l->s_wf, up64(oa_cap_mul(q->kh * q->kw, 4)));
  } else if (path == P_DW) {
    l->tasks = q->n * q->cin;
    /* the plane (+ slack: the stride-2 vector rows read one element past the last one they use) */
    l->s_acc = up64(oa_cap_add(oa_cap_mul(oa_cap_mul(q->hp, q->wp), 2), 64));
    slot = oa_cap_add(l->s_acc, up64(oa_cap_mul(q->ow, 4)));
  } else { /* P_GEMV: x - zp as int16 shared; per slot an [M][NB] accumulator block */
    l->tasks = oa_cdiv(q->rows, Q8_GEMV_NB);
    l->off_koff = shared;
    shared = oa_cap_add(shared, up64(oa_cap_mul(oa_cap_mul(q->cols, q->k), 2)));
    slot = up64(q->cols * Q8_GEMV_NB * 4);
  }
  l->slots = oa_max64(1, oa_min64(threads, l->tasks));
  l->off_slots = shared;
  l->slot_bytes = slot;
  l->total = oa_cap_add(shared, oa_cap_mul(slot, l->slots));
}

/* ---- run context ---------------------------------------------------------------------------- */

typedef struct q8_ctx {
  const oa_q8_isa_t *isa;
  int32_t path;
  q8_geo_t q;
  q8_layout_t l;
  const int8_t *src; /* conv: the input (padded or not); linear: x */
  int64_t plane;     /* conv: elements of one input plane of src */
  const int8_t *w;
  int64_t *corr; /* per output channel; with `lazy`, filled by each GEMM task for its own rows */
  const int64_t *koff;
  int64_t lazy;  /* 0, or the correction's zero point (zin, + 128 on u8 tables): the GEMM tasks compute
                  * corr for their rows (corrections_lazy) */
  uint8_t *apack;
  uint8_t *bsh; /* the shared packed column blocks (rows split) */
  const void *xg;     /* the GEMV's x: int16 x - zp, or uint8 x ^ 0x80 (gemv_u8) */
  oa_q8_gemv_fn gemv; /* the GEMV of this call */
  const int64_t *badd; /* the bias's addend per output channel (quant_rule.h) */
  const int32_t *mult;
  const int8_t *shift; /* int8 in the file (format 1.2) */
  int32_t mone, zin, zout, lo, hi;
  int8_t *y;
  uint8_t *slots;
  oa_dw_fn fdw; /* P_DWF: the ISA's float depthwise plane */
  int64_t dwv[6]; /* P_DWV: L, hq, ld, plane, band, cols (oa_q8_dwv_geo) */
} q8_ctx_t;

static inline void finish_row(const q8_ctx_t *x, const int32_t *acc, int64_t n, int64_t c, int8_t *y) {
  const int64_t mc = x->mone ? 0 : c;
  x->isa->requant(acc, n, x->corr[c], x->mult[mc], x->shift[mc], x->badd[c], x->zout, x->lo, x->hi, y);
}

/* Panel j (columns j .. j + NR of j1) of image b, group g, packed into dst; cb: NR words */
static void pack_panel(const q8_ctx_t *x, int64_t b, int64_t g, int64_t j, int64_t j1, int64_t *cb, void *dst) {
  const q8_geo_t *q = &x->q;
  const int32_t nr = x->isa->nr, nc = (int32_t)oa_min64(nr, j1 - j);
  for (int32_t c = 0; c < nc; c++) {
    const int64_t p = j + c;
    if (x->path != P_GEMM) cb[c] = p * q->k;
    else if (q->grid) cb[c] = p;
    else cb[c] = (p / q->ow) * q->sh * q->wp + (p % q->ow) * q->sw;
  }
  const int8_t *src = x->path == P_GEMM ? x->src + (b * q->cin + g * q->cin_g) * x->plane : x->src;
  pack(x->isa, 1, src, x->path == P_GEMM ? x->koff : NULL, q->k, x->l.kp, cb, nc, nr, dst);
}

/* The shared column blocks (rows split, q8_layout_t.off_bsh): task t packs panel t % ppb of block
 * t / ppb (block o: image and group o / n_cb, column block o % n_cb) */
static void pack_b_fn(void *ctx, int64_t t0, int64_t t1) {
  const q8_ctx_t *x = (const q8_ctx_t *)ctx;
  const q8_layout_t *l = &x->l;
  const int64_t nr = x->isa->nr, ppb = oa_cdiv(l->nc, nr), eb = x->isa->wide ? 2 : 1;
  int64_t cb[OA_Q8_NR_MAX];
  for (int64_t t = t0; t < t1; t++) {
    const int64_t o = t / ppb, bg = o / l->n_cb, cbk = o % l->n_cb;
    const int64_t j0 = cbk * l->nc, j1 = oa_min64(j0 + l->nc, x->q.cols), j = j0 + (t % ppb) * nr;
    if (j >= j1) continue;
    pack_panel(x, bg / x->q.g, bg % x->q.g, j, j1, cb, x->bsh + o * l->b_block_bytes + (t % ppb) * l->kp * nr * eb);
  }
}

/* One GEMM task: column block cb x row block rb of image b, group g. The block's panels are
 * packed first (or, with the rows split, were packed once for all row blocks: pack_b_fn); then per tile of MR rows the micro-kernel fills the MR x nc sums panel by panel
 * and each row is requantized at once (grid columns: into `out`, then the runs of real pixels). */
static void gemm_task(const q8_ctx_t *x, int64_t t, uint8_t *slot) {
  const oa_q8_isa_t *isa = x->isa;
  const q8_geo_t *q = &x->q;
  const q8_layout_t *l = &x->l;
  const int32_t mr = isa->mr, nr = isa->nr;
  const int64_t eb = isa->wide ? 2 : 1, ldc = l->nc;
  const int64_t rb = t % l->n_rb, cbk = (t / l->n_rb) % l->n_cb, bg = t / (l->n_rb * l->n_cb);
  const int64_t b = bg / q->g, g = bg % q->g;
  const int64_t r0 = rb * l->mc, r1 = oa_min64(r0 + l->mc, q->rows);
  const int64_t j0 = cbk * l->nc, j1 = oa_min64(j0 + l->nc, q->cols), ncols = j1 - j0;
  int32_t *acc = (int32_t *)(void *)(slot + l->s_acc);
  int64_t *cb = (int64_t *)(void *)(slot + l->s_cb);
  int8_t *out = (int8_t *)(slot + l->s_out);
  /* the column block: shared (packed by pack_b_fn) when the rows are split, else packed here */
  const uint8_t *bblk;
  if (l->n_rb > 1) {
    bblk = x->bsh + (t / l->n_rb) * l->b_block_bytes;
  } else {
    uint8_t *own = slot + l->s_b;
    for (int64_t j = j0; j < j1; j += nr) pack_panel(x, b, g, j, j1, cb, own + ((j - j0) / nr) * l->kp * nr * eb);
    bblk = own;
  }
  /* grid columns: the block's runs of real pixels (at most Q8_NC_MAX / Q8_GRID_MIN_OW + 2) */
  int64_t run_src[Q8_NC_MAX / Q8_GRID_MIN_OW + 2], run_dst[Q8_NC_MAX / Q8_GRID_MIN_OW + 2];
  int64_t run_len[Q8_NC_MAX / Q8_GRID_MIN_OW + 2];
  int32_t nrun = 0;
  if (x->path == P_GEMM && q->grid && q->wq != q->ow) {
    int64_t oy = j0 / q->wq, ox = j0 % q->wq;
    for (int64_t p = j0; p < j1;) {
      if (ox >= q->ow) {
        p += q->wq - ox, oy++, ox = 0;
        continue;
      }
      const int64_t len = oa_min64(q->ow - ox, j1 - p);
      run_src[nrun] = p - j0, run_dst[nrun] = oy * q->ow + ox, run_len[nrun++] = len;
      p += len, ox += len;
    }
  }
  if (isa->tile_on) isa->tile_on(); /* AMX: this thread's tile configuration */
  int64_t rowoff[OA_Q8_MR_MAX]; /* a_in_task: W rows of a tile, K bytes apart */
  for (int32_t r = 0; r < mr; r++) rowoff[r] = r * q->k;
  for (int64_t i = r0; i < r1; i += mr) {
    const int32_t m = (int32_t)oa_min64(mr, r1 - i);
    const int64_t c0 = g * q->cout_g + i;
    if (x->lazy) { /* this tile's weight rows, read again right away by the products (in L1 / L2) */
      isa->wsum(m, q->k, x->w + c0 * q->k, x->corr + c0);
      for (int32_t r = 0; r < m; r++) x->corr[c0 + r] *= -x->lazy;
    }
    const uint8_t *atile = NULL;
    if (l->a_in_task) {
      pack(isa, 0, x->w + c0 * q->k, NULL, q->k, l->kpa, rowoff, m, mr, slot + l->s_a);
      atile = slot + l->s_a;
    } else if (!l->a_in_place) {
      atile = x->apack + (g * oa_cdiv(q->rows, mr) + i / mr) * l->a_tile_bytes;
    }
    for (int64_t j = j0; j < j1; j += nr) {
      const uint8_t *panel = bblk + ((j - j0) / nr) * l->kp * nr * eb;
      if (l->a_in_place)
        isa->gemm_rows(q->k, x->w + c0 * q->k, q->k, m, panel, acc + (j - j0), ldc);
      else
        isa->gemm(l->kp, atile, panel, acc + (j - j0), ldc);
    }
    const int dropped = x->path == P_GEMM && q->grid && q->wq != q->ow;
    if (isa->requant_rows) { /* the tile block's m rows in one call, while they are in L1 */
      const int64_t mc0 = x->mone ? 0 : c0;
      if (x->path == P_GEMM && !dropped) {
        isa->requant_rows(acc, ldc, m, ncols, x->corr + c0, x->mult + mc0, x->shift + mc0, x->badd + c0, !x->mone,
                          q->k * 255 * 128, x->zout, x->lo, x->hi, x->y + (b * q->cout + c0) * q->npix + j0, q->npix);
      } else {
        isa->requant_rows(acc, ldc, m, ncols, x->corr + c0, x->mult + mc0, x->shift + mc0, x->badd + c0, !x->mone,
                          q->k * 255 * 128, x->zout, x->lo, x->hi, out, ldc);
        for (int32_t r = 0; dropped && r < m; r++) {
          int8_t *yc = x->y + (b * q->cout + c0 + r) * q->npix;
          for (int32_t u = 0; u < nrun; u++) memcpy(yc + run_dst[u], out + r * ldc + run_src[u], (size_t)run_len[u]);
        }
      }
    }
    for (int32_t r = 0; !isa->requant_rows && r < m; r++) {
      const int64_t c = c0 + r;
      int8_t *yc = x->y + (b * q->cout + c) * q->npix;
      if (x->path == P_GEMM && (!q->grid || q->wq == q->ow)) { /* grid columns without dropped ones: pixels */
        finish_row(x, acc + r * ldc, ncols, c, yc + j0);
      } else if (x->path == P_GEMM) { /* grid columns: the runs ox < ow of each grid row */
        finish_row(x, acc + r * ldc, ncols, c, out);
        for (int32_t u = 0; u < nrun; u++) memcpy(yc + run_dst[u], out + run_src[u], (size_t)run_len[u]);
      } else { /* linear: C[n][m] stored as y[m][n], below */
        finish_row(x, acc + r * ldc, ncols, c, out + r * ldc);
      }
    }
    if (x->path == P_LGEMM) /* m consecutive bytes per y row (one byte per row and column: 4x slower
                               where the row length is a multiple of 1024, L1 set conflicts) */
      for (int64_t u = 0; u < ncols; u++) {
        int8_t *yu = x->y + (j0 + u) * q->rows + c0;
        for (int32_t r = 0; r < m; r++) yu[r] = out[r * ldc + u];
      }
  }
  if (isa->tile_off) isa->tile_off();
}

/* One depthwise plane: image b, channel c. */
static void dw_task(const q8_ctx_t *x, int64_t t, uint8_t *slot) {
  const q8_geo_t *q = &x->q;
  const int64_t c = t % q->cin;
  int16_t *pl = (int16_t *)slot;
  int32_t *acc = (int32_t *)(slot + x->l.s_acc);
  const int8_t *xp = x->src + t * q->h * q->w;
  if (q->ph || q->pw) memset(pl, 0, (size_t)(q->hp * q->wp) * sizeof(int16_t));
  for (int64_t i = 0; i < q->h; i++) {
    int16_t *d = pl + (i + q->ph) * q->wp + q->pw;
    const int8_t *s = xp + i * q->w;
    for (int64_t j = 0; j < q->w; j++) d[j] = (int16_t)(s[j] - x->zin);
  }
  const int8_t *w = x->w + c * q->kh * q->kw;
  int8_t *y = x->y + t * q->oh * q->ow;
  for (int64_t o = 0; o < q->oh; o++) {
    x->isa->dw(pl + o * q->sh * q->wp, q->wp, w, q->kh, q->kw, q->sw, q->dh, q->dw, q->ow, acc);
    finish_row(x, acc, q->ow, c, y + o * q->ow);
  }
}

/* One depthwise plane in float (P_DWF): the float depthwise kernel of the ISA (opt.h) sums
 * integers below 2^24 in magnitude (|w * (x - zp)| <= 128 * 255, at most Q8_DWF_TAPS_MAX taps):
 * every float sum is exact, in any order, fused or not, so its output converts to the exact int32
 * sums; then the plane is requantized in one call. `fresh`: the slot's first plane (the padding
 * is zeroed once, the interior rewritten per plane). */
static void dwf_task(const q8_ctx_t *x, int64_t t, uint8_t *slot, int fresh) {
  const q8_geo_t *q = &x->q;
  const q8_layout_t *l = &x->l;
  const int64_t c = t % q->cin, taps = q->kh * q->kw, n = q->oh * q->ow;
  float *pad = (float *)(void *)slot, *wf = (float *)(void *)(slot + l->s_wf);
  float *out = (float *)(void *)(slot + l->s_acc);
  const int8_t *xp = x->src + t * q->h * q->w;
  if (fresh) memset(pad, 0, (size_t)(l->pad_h * l->pad_w) * sizeof(float));
  const int64_t r1 = oa_min64(q->ph + q->h, l->pad_h), c0 = oa_min64(q->pw, l->pad_w);
  const int64_t cn = oa_min64(q->pw + q->w, l->pad_w) - c0;
  const float zin = (float)x->zin;
  for (int64_t r = q->ph; r < r1; r++) {
    float *d = pad + r * l->pad_w + c0;
    const int8_t *s = xp + (r - q->ph) * q->w;
    if (x->isa->to_float) {
      x->isa->to_float(s, cn, x->zin, d);
    } else {
      for (int64_t j = 0; j < cn; j++) d[j] = (float)s[j] - zin;
    }
  }
  for (int64_t k = 0; k < taps; k++) wf[k] = (float)x->w[c * taps + k];
  oa_dw_plane_t p;
  memset(&p, 0, sizeof p);
  p.pad = pad, p.pad_w = l->pad_w, p.w = wf;
  p.kh = q->kh, p.kw = q->kw, p.sh = q->sh, p.sw = q->sw, p.dh = q->dh, p.dw = q->dw;
  p.oh = q->oh, p.ow = q->ow, p.out = out;
  x->fdw(&p);
  const int64_t mc = x->mone ? 0 : c, corr = x->corr[c];
  if (x->isa->requant_f32) {
    x->isa->requant_f32(out, n, corr, x->mult[mc], x->shift[mc], x->badd[c], x->zout, x->lo, x->hi, x->y + t * n);
    return;
  }
  int32_t *acc = (int32_t *)(void *)out; /* in place: each float read before its int32 is written */
  for (int64_t i = 0; i < n; i++) acc[i] = (int32_t)out[i];
  finish_row(x, acc, n, c, x->y + t * n);
}

/* One depthwise plane through the ISA's plane kernel (P_DWP, oa_q8_dwp_t). */
static void dwp_task(const q8_ctx_t *x, int64_t t, uint8_t *slot, int fresh) {
  const q8_geo_t *q = &x->q;
  const q8_layout_t *l = &x->l;
  const int64_t c = t % q->cin, taps = q->kh * q->kw, mc = x->mone ? 0 : c;
  float *work = (float *)(void *)slot, *wf = (float *)(void *)(slot + l->s_wf);
  if (fresh) memset(work, 0, (size_t)l->pad_w * sizeof(float));
  for (int64_t k = 0; k < taps; k++) wf[k] = (float)x->w[c * taps + k];
  oa_q8_dwp_t p;
  p.x = x->src + t * q->h * q->w;
  p.h = q->h, p.w = q->w, p.ph = q->ph, p.pw = q->pw, p.sh = q->sh, p.sw = q->sw, p.oh = q->oh, p.ow = q->ow;
  p.hq = oa_cdiv(q->hp, q->sh), p.wq = oa_cdiv(q->wp, q->sw);
  p.zin = x->zin, p.taps = (int32_t)taps, p.poff = x->koff, p.wf = wf;
  p.corr = x->corr[c], p.mult = x->mult[mc], p.shift = x->shift[mc], p.badd = x->badd[c];
  p.zp = x->zout, p.lo = x->lo, p.hi = x->hi;
  p.y = x->y + t * q->oh * q->ow;
  p.work = work, p.grid_off = l->s_acc / 4;
  x->isa->dwp(&p);
}

/* One plane through the ISA's row kernel (P_DWV, oa_q8_dwv_t) */
static void dwv_task(const q8_ctx_t *x, int64_t t, uint8_t *slot) {
  const q8_geo_t *q = &x->q;
  const int64_t c = t % q->cin, mc = x->mone ? 0 : c;
  oa_q8_dwv_t p;
  p.x = x->src + t * q->h * q->w;
  p.h = q->h, p.w = q->w, p.ph = q->ph, p.pw = q->pw, p.sh = q->sh, p.sw = q->sw, p.dh = q->dh, p.dw = q->dw;
  p.kh = q->kh, p.kw = q->kw, p.oh = q->oh, p.ow = q->ow;
  p.zin = x->zin, p.wt = x->w + c * q->kh * q->kw;
  p.corr = x->corr[c], p.mult = x->mult[mc], p.shift = x->shift[mc], p.badd = x->badd[c];
  p.zp = x->zout, p.lo = x->lo, p.hi = x->hi;
  p.y = x->y + t * q->npix;
  p.work = slot;
  p.L = x->dwv[0], p.hq = x->dwv[1], p.ld = x->dwv[2], p.plane = x->dwv[3], p.band = x->dwv[4], p.cols = x->dwv[5];
  p.koff = x->koff;
  x->isa->dwv(&p);
}

/* One block of up to OA_Q8_DWC_LANES channels of image b (P_DWC, oa_q8_dwc_t) */
static void dwc_task(const q8_ctx_t *x, int64_t t, uint8_t *slot) {
  const q8_geo_t *q = &x->q;
  const int64_t nblk = oa_cdiv(q->cin, OA_Q8_DWC_LANES), b = t / nblk, c0 = (t % nblk) * OA_Q8_DWC_LANES;
  oa_q8_dwc_t p;
  memset(&p, 0, sizeof p);
  p.nch = (int32_t)oa_min64(OA_Q8_DWC_LANES, q->cin - c0);
  p.x = x->src + (b * q->cin + c0) * q->h * q->w;
  p.h = q->h, p.w = q->w, p.ph = q->ph, p.pw = q->pw, p.sh = q->sh, p.sw = q->sw, p.dh = q->dh, p.dw = q->dw;
  p.kh = q->kh, p.kw = q->kw, p.oh = q->oh, p.ow = q->ow;
  p.zin = x->zin, p.zp = x->zout, p.lo = x->lo, p.hi = x->hi;
  p.wt = x->w + c0 * q->kh * q->kw;
  for (int32_t c = 0; c < p.nch; c++) {
    const int64_t mc = x->mone ? 0 : c0 + c;
    p.corr[c] = x->corr[c0 + c], p.mult[c] = x->mult[mc], p.shift[c] = x->shift[mc], p.badd[c] = x->badd[c0 + c];
  }
  p.y = x->y + (b * q->cout + c0) * q->npix;
  p.work = (float *)(void *)slot;
  x->isa->dwc(&p);
}

/* One block of Q8_GEMV_NB outputs of every row. */
static void gemv_task(const q8_ctx_t *x, int64_t t, uint8_t *slot) {
  const q8_geo_t *q = &x->q;
  const int64_t n0 = t * Q8_GEMV_NB, nb = oa_min64(Q8_GEMV_NB, q->rows - n0);
  int32_t *acc = (int32_t *)slot;
  x->gemv(q->cols, nb, q->k, x->xg, x->w + n0 * q->k, acc);
  if (x->isa->requant_pc && !x->mone) { /* per-channel multipliers and shifts: one vector per 8 outputs */
    for (int64_t i = 0; i < q->cols; i++)
      x->isa->requant_pc(acc + i * nb, nb, x->corr + n0, x->mult + n0, x->shift + n0, x->badd + n0, x->zout, x->lo,
                         x->hi, x->y + i * q->rows + n0);
    return;
  }
  for (int64_t i = 0; i < q->cols; i++)
    for (int64_t j = 0; j < nb; j++) {
      const int64_t c = n0 + j, mc = x->mone ? 0 : c;
      x->y[i * q->rows + c] = q8_requant(x->corr[c] + acc[i * nb + j], x->mult[mc], x->shift[mc], x->badd[c],
                                         x->zout, x->lo, x->hi);
    }
}

static void slots_fn(void *ctx, int64_t s0, int64_t s1);

/* A tiles t0 .. t1 (tile t: group t / tiles per group, rows from (t % tiles per group) * MR) */
static void pack_a_fn(void *ctx, int64_t t0, int64_t t1) {
  const q8_ctx_t *x = (const q8_ctx_t *)ctx;
  const q8_geo_t *q = &x->q;
  const int32_t mr = x->isa->mr;
  const int64_t per = oa_cdiv(q->rows, mr);
  int64_t cb[OA_Q8_MR_MAX];
  for (int32_t r = 0; r < mr; r++) cb[r] = r * q->k;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t g = t / per, i = (t % per) * mr;
    const int32_t m = (int32_t)oa_min64(mr, q->rows - i);
    pack(x->isa, 0, x->w + (g * q->rows + i) * q->k, NULL, q->k, x->l.kpa, cb, m, mr, x->apack + t * x->l.a_tile_bytes);
  }
}

static void run_tasks(q8_ctx_t *x, struct oa_threadpool *pool, uint8_t *scratch) {
  if ((x->path == P_GEMM || x->path == P_LGEMM) && x->l.a_tiles) {
    x->apack = scratch + x->l.off_a;
    oa_parallel_for(pool, x->l.a_tiles, 4, pack_a_fn, x);
  }
  if ((x->path == P_GEMM || x->path == P_LGEMM) && x->l.n_rb > 1) {
    x->bsh = scratch + x->l.off_bsh;
    oa_parallel_for(pool, x->l.tasks / x->l.n_rb * oa_cdiv(x->l.nc, x->isa->nr), 1, pack_b_fn, x);
  }
  oa_parallel_for(pool, x->l.slots, 1, slots_fn, x);
}

static void slots_fn(void *ctx, int64_t s0, int64_t s1) {
  const q8_ctx_t *x = (const q8_ctx_t *)ctx;
  for (int64_t s = s0; s < s1; s++) {
    uint8_t *slot = x->slots + s * x->l.slot_bytes;
    for (int64_t t = s; t < x->l.tasks; t += x->l.slots) {
      if (x->path == P_DWP) dwp_task(x, t, slot, t == s);
      else if (x->path == P_DWC) dwc_task(x, t, slot);
      else if (x->path == P_DWV) dwv_task(x, t, slot);
      else if (x->path == P_DWF) dwf_task(x, t, slot, t == s);
      else if (x->path == P_DW) dw_task(x, t, slot);
      else if (x->path == P_GEMV) gemv_task(x, t, slot);
      else gemm_task(x, t, slot);
    }
  }
}

/* badd[c] = the addend round_half_even(bias[c] * 2^shift[c]) of output channel c (added after the
 * multiply by the requantization, quant_rule.h), or 0 without a bias; the values were checked at
 * the call's start (oa_check_q8_requant_values) */
static void bias_addends(int64_t rows, const float *bias, const int8_t *shift, int32_t mone, int64_t *badd) {
  if (!bias) {
    memset(badd, 0, (size_t)rows * sizeof *badd);
    return;
  }
  /* q8_bias_addend without its range check (done): per output channel per call, so kept lean */
  for (int64_t c = 0; c < rows; c++) {
    const uint64_t pb = (uint64_t)(1023 + shift[mone ? 0 : c]) << 52;
    double p2;
    memcpy(&p2, &pb, sizeof p2);
    const double t = (double)bias[c] * p2, magic = 6755399441055744.0; /* exact; 1.5 * 2^52 */
    badd[c] = (int64_t)(t > -2251799813685248.0 && t < 2251799813685248.0 ? (t + magic) - magic : t); /* 2^51 */
  }
}

/* corr[c] = -zin * sum_k w[c][k] (zin 0: none); u8 tables feed x + 128 to the GEMM and the GEMV:
 * zin + 128 (`shifted`). */
static void corrections(const oa_q8_isa_t *isa, int64_t rows, int64_t k, const int8_t *w, int64_t zin, int shifted,
                        int64_t *corr) {
  if (shifted && isa->u8) zin += 128;
  if (zin && isa->wsum) {
    isa->wsum(rows, k, w, corr);
  } else {
    for (int64_t c = 0; c < rows; c++) {
      int64_t s = 0;
      if (zin) {
        const int8_t *wr = w + c * k;
        for (int64_t q = 0; q < k; q++) s += wr[q];
      }
      corr[c] = s;
    }
  }
  for (int64_t c = 0; c < rows; c++) corr[c] = -zin * corr[c];
}

/* The GEMM's correction left to its tasks (q8_ctx_t.lazy): when every weight row belongs to one
 * task (one image, one column block), each task sums its own rows just before its products read
 * them, instead of one pass over all the weights on the calling thread first (layer4 of ResNet-18:
 * 2.4 MB of weights per conv, read twice from beyond L2, and the pass ran on one thread). Returns
 * the correction's zero point, or 0 when the corrections are complete already. */
static int64_t corrections_lazy(const oa_q8_isa_t *isa, const q8_geo_t *q, const q8_layout_t *l, const int8_t *w,
                                int64_t zin, int64_t *corr) {
  const int64_t zs = zin + (isa->u8 ? 128 : 0);
  if (zs && isa->wsum && q->n * l->n_cb == 1) {
    corrections(isa, q->rows * q->g, q->k, w, 0, 0, corr); /* zeros: the tasks add theirs */
    return zs;
  }
  corrections(isa, q->rows * q->g, q->k, w, zin, 1, corr);
  return 0;
}

static oa_status_t finish_plan(oa_op_plan_t *plan, const oa_q8_isa_t *isa, int32_t path, const q8_geo_t *q,
                               int32_t pad) {
  q8_layout_t l;
  layout(isa, path, q, pad, (int32_t)plan->params[Q_THREADS], &l);
  if (l.total < 0) return OA_ERR_UNSUPPORTED;
  plan->params[Q_PATH] = path;
  return oa_opt_set_scratch(plan, oa_cdiv(l.total, 4));
}

static oa_status_t begin(oa_op_plan_t *plan, const oa_kernel_env_t *env, int32_t id, const oa_q8_isa_t **isa) {
  const oa_cpu_features_t *f = env ? env->features : NULL;
  const int32_t vnni = f && (env->isas & OA_CPU_ISA_VNNI) != 0;
  int32_t dot = 0;
  if (id == OA_ISA_NEON) dot = f && f->dotprod;
  else if (id == OA_ISA_AVX512) dot = vnni && f->avx512_vnni;
  /* AMX (features.c: amx_* only with the OS permission) before VNNI where both are allowed */
#if defined(OA_BUILT_AMX)
  if (id == OA_ISA_AVX512 && f && (env->isas & OA_CPU_ISA_AMX) && f->amx_tile && f->amx_int8 && f->avx512_vnni)
    dot = 2;
#endif
  else if (id == OA_ISA_AVX2) dot = vnni && f->avx_vnni;
#if defined(OA_BUILT_NEON)
  if (id == OA_ISA_NEON && f && f->i8mm && oa_q8_neon_i8mm_isa()) dot = 2; /* smmla before sdot */
#endif
  *isa = oa_q8_isa(id, dot);
  if (!*isa) return OA_ERR_UNSUPPORTED;
  memset(plan->params, 0, sizeof plan->params);
  plan->scratch_bytes = 0;
  plan->params[Q_ISA] = id;
  plan->params[Q_DOT] = dot;
  plan->params[Q_THREADS] = env ? oa_opt_threads(env->pool) : 1;
  return OA_OK;
}

/* The AMX table's calls that do not run its tile, or run it on K < Q8_AMX_K_MIN (one K step
 * mostly of zeros: the tile's loads and stores cost more than the VNNI tile's whole work, measured
 * on MobileNetV2's 1x1 convs of K 16-32), take the VNNI table instead when it is allowed too (the
 * same kernels elsewhere: depthwise, GEMV). Forced alone (disable VNNI), AMX runs every call. */
#ifndef Q8_AMX_K_MIN
#define Q8_AMX_K_MIN 64
#endif
static void amx_or_vnni(oa_op_plan_t *plan, const oa_kernel_env_t *env, int32_t path, int64_t k,
                        const oa_q8_isa_t **isa) {
  if (plan->params[Q_DOT] != 2 || ((path == P_GEMM || path == P_LGEMM) && k >= Q8_AMX_K_MIN)) return;
  if (!(env->isas & OA_CPU_ISA_VNNI) || !env->features->avx512_vnni) return;
  plan->params[Q_DOT] = 1;
  *isa = oa_q8_isa((int32_t)plan->params[Q_ISA], 1);
}

/* ---- conv2d_q8 ------------------------------------------------------------------------------ */

/* the GEMM reads a copy of the input: padded with input_zp, or split into phase planes */
static int32_t conv_copies_input(const q8_geo_t *q) {
  return q->ph || q->pw || (q->grid && (q->sh > 1 || q->sw > 1));
}

/* d[x] = s[2 x], x < n (the compiler vectorizes it: no aliasing) */
static void even_bytes(int8_t *restrict d, const int8_t *restrict s, int64_t n) {
  for (int64_t x = 0; x < n; x++) d[x] = s[2 * x];
}

/* The GEMM's copy of the input, planes [c0, c1) of n * cin: input_zp outside the input (a padded
 * copy, every byte written once), or the phase planes of grid columns (q8_geo_t; only the phases
 * some tap reads are written: a 1x1 stride-2 conv reads one of four). Split over planes between
 * the threads (it ran on the calling thread alone: ResNet-18 int8 on 2 threads 3.60-3.80 -> 3.48
 * ms). */
typedef struct q8_in_copy {
  const q8_geo_t *q;
  const int8_t *in;
  int8_t zin;
  int8_t *p;
} q8_in_copy_t;

static void fill8(int8_t *d, int8_t v, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = v;
}

static void padded_planes(void *ctx, int64_t c0, int64_t c1) {
  const q8_in_copy_t *a = (const q8_in_copy_t *)ctx;
  const q8_geo_t *q = a->q;
  for (int64_t c = c0; c < c1; c++) {
    int8_t *pl = a->p + c * q->hp * q->wp;
    const int8_t *xc = a->in + c * q->h * q->w;
    fill8(pl, a->zin, q->ph * q->wp);
    for (int64_t i = 0; i < q->h; i++) {
      int8_t *d = pl + (i + q->ph) * q->wp;
      fill8(d, a->zin, q->pw);
      memcpy(d + q->pw, xc + i * q->w, (size_t)q->w);
      fill8(d + q->pw + q->w, a->zin, q->pw);
    }
    fill8(pl + (q->ph + q->h) * q->wp, a->zin, q->ph * q->wp);
  }
}

static void phase_planes(void *ctx, int64_t c0, int64_t c1) {
  const q8_in_copy_t *pc = (const q8_in_copy_t *)ctx;
  const q8_geo_t *q = pc->q;
  int used[2][2] = {{0, 0}, {0, 0}};
  for (int64_t i = 0; i < q->kh; i++)
    for (int64_t j = 0; j < q->kw; j++) used[i * q->dh % q->sh][j * q->dw % q->sw] = 1;
  const int64_t hw = q->hq * q->wq;
  for (int64_t c = c0; c < c1; c++) {
    const int8_t *xc = pc->in + c * q->h * q->w;
    for (int64_t a = 0; a < q->sh; a++)
      for (int64_t bb = 0; bb < q->sw; bb++) {
        if (!used[a][bb]) continue;
        int8_t *pl = pc->p + c * q->chan + (a * q->sw + bb) * hw;
        memset(pl, pc->zin, (size_t)hw);
        for (int64_t y = 0; y < q->hq; y++) {
          const int64_t r = y * q->sh + a - q->ph; /* input row */
          if (r < 0 || r >= q->h) continue;
          const int8_t *xr = xc + r * q->w;
          int8_t *d = pl + y * q->wq;
          /* columns x with 0 <= x sw + bb - pw < w */
          const int64_t x0 = oa_max64(0, oa_cdiv(q->pw - bb, q->sw));
          const int64_t x1 = oa_min64(q->wq, oa_cdiv(q->w + q->pw - bb, q->sw));
          if (q->sw == 1) {
            if (x1 > x0) memcpy(d + x0, xr + x0 - q->pw + bb, (size_t)(x1 - x0));
          } else if (x1 > x0) {
            even_bytes(d + x0, xr + x0 * 2 + bb - q->pw, x1 - x0);
          }
        }
      }
  }
}

static oa_status_t oa_opt_conv2d_q8_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                                oa_op_plan_t *plan, int32_t id) {
  const oa_q8_isa_t *isa;
  oa_status_t st;
  if ((st = begin(plan, env, id, &isa))) return st;
  q8_geo_t q;
  conv_geo(call, &q);
  if (q.k > OA_Q8_K_MAX || q.n * q.cout * q.cols == 0) return OA_ERR_UNSUPPORTED;
  if (q.g == q.cin && q.g == q.cout) {
    amx_or_vnni(plan, env, P_DW, 0, &isa);
    const oa_opt_isa_t *f = oa_opt_isa(id);
    q.vw = f ? f->vw : 0;
    if (isa->dwv && isa->u8 && q.ow >= Q8_DWV_MIN_OW && oa_q8_dwv_fits(q.kh, q.kw, q.sw, q.dw))
      return finish_plan(plan, isa, P_DWV, &q, 0);
    if (isa->dwc && q.ow < Q8_DWC_MAX_OW && q.kh * q.kw <= OA_Q8_DWP_TAPS_MAX)
      return finish_plan(plan, isa, P_DWC, &q, 0);
    if (isa->dwp && q.sh <= 2 && q.sw <= 2 && q.kh * q.kw <= OA_Q8_DWP_TAPS_MAX)
      return finish_plan(plan, isa, P_DWP, &q, 0);
    return finish_plan(plan, isa, f && f->dw && q.kh * q.kw <= Q8_DWF_TAPS_MAX ? P_DWF : P_DW, &q, 0);
  }
  amx_or_vnni(plan, env, P_GEMM, q.k, &isa);
  grid_geo(isa, P_GEMM, &q);
  return finish_plan(plan, isa, P_GEMM, &q, conv_copies_input(&q));
}

oa_status_t oa_opt_conv2d_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  q8_ctx_t x;
  memset(&x, 0, sizeof x);
  x.isa = oa_q8_isa((int32_t)plan->params[Q_ISA], (int32_t)plan->params[Q_DOT]);
  x.path = (int32_t)plan->params[Q_PATH];
  conv_geo(call, &x.q);
  if (x.path == P_DWF) {
    const oa_opt_isa_t *f = oa_opt_isa((int32_t)plan->params[Q_ISA]);
    x.q.vw = f->vw;
    x.fdw = f->dw;
  }
  grid_geo(x.isa, x.path, &x.q);
  const q8_geo_t *q = &x.q;
  const int32_t pad = x.path == P_GEMM && conv_copies_input(q);
  layout(x.isa, x.path, q, pad, (int32_t)plan->params[Q_THREADS], &x.l);
  uint8_t *s = (uint8_t *)scratch;
  const oa_tensor_t *tb = call->inputs[2];
  x.w = (const int8_t *)call->inputs[1]->data;
  const float *fbias = tb ? (const float *)tb->data : NULL;
  x.mult = (const int32_t *)call->inputs[3]->data, x.shift = (const int8_t *)call->inputs[4]->data;
  x.mone = call->inputs[3]->shape[0] == 1;
  x.zin = (int32_t)iarg(call, OA_ARG_CONV2D_Q8_INPUT_ZP), x.zout = (int32_t)iarg(call, OA_ARG_CONV2D_Q8_OUTPUT_ZP);
  x.lo = (int32_t)iarg(call, OA_ARG_CONV2D_Q8_ACT_MIN), x.hi = (int32_t)iarg(call, OA_ARG_CONV2D_Q8_ACT_MAX);
  x.y = (int8_t *)call->outputs[0]->data;
  x.slots = s + x.l.off_slots;
  int64_t *corr = (int64_t *)(s + x.l.off_corr);
  int64_t *badd = (int64_t *)(void *)(s + x.l.off_bias);
  bias_addends(q->cout, fbias, x.shift, x.mone, badd);
  const int8_t *in = (const int8_t *)call->inputs[0]->data;
  if (x.path == P_DWV) { /* x ^ 0x80 = x + 128, padding input_zp ^ 0x80 (oa_q8_dwv_t) */
    corrections(x.isa, q->cout, q->kh * q->kw, x.w, x.zin, 1, corr);
    x.src = in;
    int64_t *d = x.dwv, *koff = (int64_t *)(s + x.l.off_koff);
    oa_q8_dwv_geo(q->oh, q->ow, q->sh, q->sw, q->kh, q->dh, q->wp, &d[0], &d[1], &d[2], &d[3], &d[4], &d[5]);
    for (int64_t i = 0; i < q->kh; i++) koff[i] = ((i * q->dh % q->sh) * d[1] + i * q->dh / q->sh) * d[2];
    x.koff = koff;
  } else if (x.path == P_DW || x.path == P_DWF || x.path == P_DWP || x.path == P_DWC) {
    corrections(x.isa, q->cout, q->kh * q->kw, x.w, 0, 0, corr); /* the plane holds x - zp */
    x.src = in;
    if (x.path == P_DWP) { /* tap (i, j): phase plane (i dh % sh, j dw % sw), shifted (i dh / sh, j dw / sw) */
      int64_t *poff = (int64_t *)(s + x.l.off_koff);
      const int64_t hq = oa_cdiv(q->hp, q->sh), wq = oa_cdiv(q->wp, q->sw);
      for (int64_t i = 0, t = 0; i < q->kh; i++)
        for (int64_t j = 0; j < q->kw; j++, t++)
          poff[t] = ((i * q->dh % q->sh) * q->sw + j * q->dw % q->sw) * hq * wq + (i * q->dh / q->sh) * wq +
                    j * q->dw / q->sw;
      x.koff = poff;
    }
  } else {
    x.lazy = corrections_lazy(x.isa, q, &x.l, x.w, x.zin, corr);
    int64_t *koff = (int64_t *)(s + x.l.off_koff);
    x.plane = q->hp * q->wp; /* hp, wp: h, w without padding */
    x.src = in;
    if (pad) { /* phase planes, or a copy padded with input_zp: padding adds nothing after the correction */
      q8_in_copy_t cp = {q, in, (int8_t)x.zin, (int8_t *)(s + x.l.off_pad)};
      const int64_t plane = q->grid ? q->chan : q->hp * q->wp;
      oa_parallel_for(env ? env->pool : NULL, q->n * q->cin, oa_max64(1, 16384 / oa_max64(plane, 1)),
                      q->grid ? phase_planes : padded_planes, &cp);
      x.src = cp.p;
      if (q->grid) x.plane = q->chan;
    }
    for (int64_t ic = 0, k = 0; ic < q->cin_g; ic++)
      for (int64_t i = 0; i < q->kh; i++)
        for (int64_t j = 0; j < q->kw; j++) {
          if (q->grid) /* phase plane (i dh % sh, j dw % sw), shifted by (i dh / sh, j dw / sw) */
            koff[k++] = ic * x.plane + ((i * q->dh % q->sh) * q->sw + j * q->dw % q->sw) * q->hq * q->wq +
                        (i * q->dh / q->sh) * q->wq + j * q->dw / q->sw;
          else
            koff[k++] = ic * x.plane + i * q->dh * q->wp + j * q->dw;
        }
    x.koff = koff;
  }
  x.corr = corr;
  x.badd = badd;
  run_tasks(&x, env ? env->pool : NULL, s);
  return OA_OK;
}

/* ---- linear_q8 ------------------------------------------------------------------------------ */

static oa_status_t oa_opt_linear_q8_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                                oa_op_plan_t *plan, int32_t id) {
  const oa_q8_isa_t *isa;
  oa_status_t st;
  if ((st = begin(plan, env, id, &isa))) return st;
  q8_geo_t q;
  linear_geo(call, &q);
  if (q.k > OA_Q8_K_MAX || q.k == 0 || q.rows == 0 || q.cols == 0) return OA_ERR_UNSUPPORTED;
  const int32_t path = q.cols <= Q8_GEMV_M_MAX ? P_GEMV : P_LGEMM;
  amx_or_vnni(plan, env, path, q.k, &isa);
  return finish_plan(plan, isa, path, &q, 0);
}

oa_status_t oa_opt_linear_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_q8_requant_values(call, diag))) return st;
  q8_ctx_t x;
  memset(&x, 0, sizeof x);
  x.isa = oa_q8_isa((int32_t)plan->params[Q_ISA], (int32_t)plan->params[Q_DOT]);
  x.path = (int32_t)plan->params[Q_PATH];
  linear_geo(call, &x.q);
  const q8_geo_t *q = &x.q;
  layout(x.isa, x.path, q, 0, (int32_t)plan->params[Q_THREADS], &x.l);
  uint8_t *s = (uint8_t *)scratch;
  const oa_tensor_t *tb = call->inputs[2];
  x.w = (const int8_t *)call->inputs[1]->data;
  const float *fbias = tb ? (const float *)tb->data : NULL;
  x.mult = (const int32_t *)call->inputs[3]->data, x.shift = (const int8_t *)call->inputs[4]->data;
  x.mone = call->inputs[3]->shape[0] == 1;
  x.zin = (int32_t)iarg(call, OA_ARG_LINEAR_Q8_INPUT_ZP), x.zout = (int32_t)iarg(call, OA_ARG_LINEAR_Q8_OUTPUT_ZP);
  x.lo = (int32_t)iarg(call, OA_ARG_LINEAR_Q8_ACT_MIN), x.hi = (int32_t)iarg(call, OA_ARG_LINEAR_Q8_ACT_MAX);
  x.y = (int8_t *)call->outputs[0]->data;
  x.slots = s + x.l.off_slots;
  x.src = (const int8_t *)call->inputs[0]->data;
  int64_t *corr = (int64_t *)(s + x.l.off_corr);
  int64_t *badd = (int64_t *)(void *)(s + x.l.off_bias);
  bias_addends(q->rows, fbias, x.shift, x.mone, badd);
  if (x.path == P_GEMV && x.isa->gemv_u8 && x.zin == -128) { /* x ^ 0x80 = x - zp: no correction */
    corrections(x.isa, q->rows, q->k, x.w, 0, 0, corr);
    uint8_t *xu = (uint8_t *)(s + x.l.off_koff);
    for (int64_t i = 0; i < q->cols * q->k; i++) xu[i] = (uint8_t)((uint8_t)x.src[i] ^ 0x80u);
    x.xg = xu;
    x.gemv = x.isa->gemv_u8;
  } else if (x.path == P_GEMV) {
    corrections(x.isa, q->rows, q->k, x.w, 0, 0, corr); /* x16 holds x - zp */
    int16_t *x16 = (int16_t *)(s + x.l.off_koff);
    for (int64_t i = 0; i < q->cols * q->k; i++) x16[i] = (int16_t)(x.src[i] - x.zin);
    x.xg = x16;
    x.gemv = x.isa->gemv;
  } else {
    x.lazy = corrections_lazy(x.isa, q, &x.l, x.w, x.zin, corr);
  }
  x.corr = corr;
  x.badd = badd;
  run_tasks(&x, env ? env->pool : NULL, s);
  return OA_OK;
}

/* OA_OPT_SHARED (isa.h), except that a plan on a table with a name of its own (the VNNI tiles inside
 * the avx512 / avx2 variants, the i8mm one inside neon) is named after it ("avx512_vnni", "avx_vnni",
 * "neon_i8mm"), so tools and tests see
 * which tile ran. */
#define Q8_OPT(op)                                                                                              \
  oa_status_t oa_opt_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,  \
                                    oa_diag_t *diag);                                                          \
  static const oa_kernel_t op##_variants[OA_ISA_COUNT] = {                                                     \
      {#op, "portable", OA_DT_I8, oa_opt_##op##_prepare, oa_opt_##op##_run},                                   \
      {#op, "avx2", OA_DT_I8, oa_opt_##op##_prepare, OA_IF_AVX2(oa_opt_##op##_run)},                           \
      {#op, "neon", OA_DT_I8, oa_opt_##op##_prepare, OA_IF_NEON(oa_opt_##op##_run)},                           \
      {#op, "avx512", OA_DT_I8, oa_opt_##op##_prepare, OA_IF_AVX512(oa_opt_##op##_run)},                       \
      {#op, "rvv", OA_DT_I8, oa_opt_##op##_prepare, OA_IF_RVV(oa_opt_##op##_run)},                             \
  };                                                                                                           \
  static const oa_kernel_t op##_named[] = {                                                                    \
      {#op, "avx512_vnni", OA_DT_I8, oa_opt_##op##_prepare, oa_opt_##op##_run},                                \
      {#op, "avx_vnni", OA_DT_I8, oa_opt_##op##_prepare, oa_opt_##op##_run},                                   \
      {#op, "avx512_amx", OA_DT_I8, oa_opt_##op##_prepare, oa_opt_##op##_run},                                 \
      {#op, "neon_i8mm", OA_DT_I8, oa_opt_##op##_prepare, oa_opt_##op##_run},                                  \
  };                                                                                                           \
  oa_status_t oa_opt_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,  \
                                    oa_diag_t *diag) {                                                         \
    (void)diag;                                                                                                \
    const oa_status_t st = oa_isa_pick(op##_variants, oa_opt_##op##_prepare_isa, call, env, plan);            \
    if (st == OA_OK) plan->kernel = named(plan, op##_named, sizeof op##_named / sizeof op##_named[0]);         \
    return st;                                                                                                 \
  }

static const void *named(const oa_op_plan_t *plan, const oa_kernel_t *kernels, size_t n) {
  const oa_q8_isa_t *isa = oa_q8_isa((int32_t)plan->params[Q_ISA], (int32_t)plan->params[Q_DOT]);
  for (size_t i = 0; isa && isa->variant && i < n; i++)
    if (!strcmp(kernels[i].variant, isa->variant)) return &kernels[i];
  return plan->kernel;
}

Q8_OPT(conv2d_q8)
Q8_OPT(linear_q8)

/* ---- add_q8, quantize, dequantize -------------------------------------------------------------
 * Elementwise, on the table's vector instances (the same rule, bit for bit: the reference kernel's
 * integer rule for add_q8, its float32 operations in its order for quantize / dequantize). add_q8
 * takes same-shape operands only (both inputs as many elements as the output: no broadcast),
 * others run the reference kernel. Threads take blocks of Q8_EW_BLOCK elements. */

#define Q8_EW_BLOCK ((int64_t)32768)

typedef struct q8_ew {
  const oa_q8_isa_t *isa;
  int32_t op; /* 0 add_q8, 1 quantize, 2 dequantize */
  const void *a, *b;
  void *y;
  int64_t n;
  oa_q8_add_t add;
  float inv, zp, lo, hi, scale;
  int32_t izp, u8;
} q8_ew_t;

static void ew_fn(void *ctx, int64_t t0, int64_t t1) {
  const q8_ew_t *e = (const q8_ew_t *)ctx;
  const int64_t i0 = t0 * Q8_EW_BLOCK, i1 = oa_min64(t1 * Q8_EW_BLOCK, e->n), n = i1 - i0;
  if (n <= 0) return;
  if (e->op == 0)
    e->isa->add((const int8_t *)e->a + i0, (const int8_t *)e->b + i0, n, &e->add, (int8_t *)e->y + i0);
  else if (e->op == 1)
    e->isa->quantize((const float *)e->a + i0, n, e->inv, e->zp, e->lo, e->hi, (uint8_t *)e->y + i0);
  else
    e->isa->dequantize((const uint8_t *)e->a + i0, n, e->u8, e->izp, e->scale, (float *)e->y + i0);
}

static void ew_run(q8_ew_t *e, const oa_kernel_env_t *env) {
  oa_parallel_for(env ? env->pool : NULL, oa_cdiv(e->n, Q8_EW_BLOCK), 1, ew_fn, e);
}

static oa_status_t ew_begin(oa_op_plan_t *plan, int32_t id, int32_t op) {
  const oa_q8_isa_t *isa = oa_q8_isa(id, 0);
  if (!isa || (op == 0 && !isa->add) || (op == 1 && !isa->quantize) || (op == 2 && !isa->dequantize))
    return OA_ERR_UNSUPPORTED;
  memset(plan->params, 0, sizeof plan->params);
  plan->scratch_bytes = 0;
  plan->params[Q_ISA] = id;
  return OA_OK;
}

static oa_status_t oa_opt_add_q8_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                             oa_op_plan_t *plan, int32_t id) {
  (void)env;
  const int64_t n = call->outputs[0]->numel;
  if (call->inputs[0]->numel != n || call->inputs[1]->numel != n) return OA_ERR_UNSUPPORTED;
  return ew_begin(plan, id, 0);
}

oa_status_t oa_opt_add_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  q8_ew_t e;
  memset(&e, 0, sizeof e);
  e.isa = oa_q8_isa((int32_t)plan->params[Q_ISA], 0);
  e.a = call->inputs[0]->data, e.b = call->inputs[1]->data, e.y = call->outputs[0]->data;
  e.n = call->outputs[0]->numel;
  e.add.za = (int32_t)iarg(call, OA_ARG_ADD_Q8_SELF_ZP), e.add.zb = (int32_t)iarg(call, OA_ARG_ADD_Q8_OTHER_ZP);
  e.add.ma = (int32_t)iarg(call, OA_ARG_ADD_Q8_SELF_MULTIPLIER);
  e.add.mb = (int32_t)iarg(call, OA_ARG_ADD_Q8_OTHER_MULTIPLIER);
  e.add.shift = (int32_t)iarg(call, OA_ARG_ADD_Q8_SHIFT), e.add.zo = (int32_t)iarg(call, OA_ARG_ADD_Q8_OUTPUT_ZP);
  e.add.lo = (int32_t)iarg(call, OA_ARG_ADD_Q8_ACT_MIN), e.add.hi = (int32_t)iarg(call, OA_ARG_ADD_Q8_ACT_MAX);
  ew_run(&e, env);
  return OA_OK;
}

static oa_status_t oa_opt_quantize_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, int32_t id) {
  (void)call;
  (void)env;
  return ew_begin(plan, id, 1);
}

oa_status_t oa_opt_quantize_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  q8_ew_t e;
  memset(&e, 0, sizeof e);
  e.isa = oa_q8_isa((int32_t)plan->params[Q_ISA], 0);
  e.op = 1;
  e.a = call->inputs[0]->data, e.y = call->outputs[0]->data, e.n = call->outputs[0]->numel;
  e.inv = (float)(1.0 / call->floats[OA_ARG_QUANTIZE_SCALE]); /* as the reference kernel */
  e.zp = (float)iarg(call, OA_ARG_QUANTIZE_ZERO_POINT);
  e.lo = (float)iarg(call, OA_ARG_QUANTIZE_QMIN), e.hi = (float)iarg(call, OA_ARG_QUANTIZE_QMAX);
  ew_run(&e, env);
  return OA_OK;
}

static oa_status_t oa_opt_dequantize_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                                 oa_op_plan_t *plan, int32_t id) {
  (void)call;
  (void)env;
  return ew_begin(plan, id, 2);
}

oa_status_t oa_opt_dequantize_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  q8_ew_t e;
  memset(&e, 0, sizeof e);
  e.isa = oa_q8_isa((int32_t)plan->params[Q_ISA], 0);
  e.op = 2;
  e.a = call->inputs[0]->data, e.y = call->outputs[0]->data, e.n = call->outputs[0]->numel;
  e.u8 = call->inputs[0]->dtype == OA_DTYPE_UINT8;
  e.izp = (int32_t)iarg(call, OA_ARG_DEQUANTIZE_ZERO_POINT);
  e.scale = (float)call->floats[OA_ARG_DEQUANTIZE_SCALE];
  ew_run(&e, env);
  return OA_OK;
}

/* ---- mean_q8 ---------------------------------------------------------------------------------
 * Over trailing dims only (a global average pool: each output the sum of one contiguous run of
 * `count` bytes), others run the reference kernel. The sum is exact in int32 (|x - zp| <= 255,
 * count <= 2^23: the reference kernel's prepare refused more), then the reference's rounding. */
enum { MQ_COUNT, MQ_OUT };

static oa_status_t oa_opt_mean_q8_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, int32_t id) {
  (void)env;
  (void)id;
  const oa_tensor_t *x = call->inputs[0];
  if (x->ndim == 0 || x->numel == 0 || call->n_ints < OA_ARG_MEAN_Q8_DIMS) return OA_ERR_UNSUPPORTED;
  uint32_t mask = 0;
  for (uint32_t i = OA_ARG_MEAN_Q8_DIMS; i < call->n_ints; i++) mask |= 1u << call->ints[i];
  if (call->n_ints == OA_ARG_MEAN_Q8_DIMS) mask = (1u << x->ndim) - 1u;
  int64_t count = 1;
  int32_t d = x->ndim - 1;
  for (; d >= 0 && (mask & (1u << d)); d--) count *= x->shape[d];
  if (mask >> (d + 1) << (d + 1) != mask) return OA_ERR_UNSUPPORTED; /* not trailing dims only */
  memset(plan->params, 0, sizeof plan->params);
  plan->scratch_bytes = 0;
  plan->params[MQ_COUNT] = count;
  plan->params[MQ_OUT] = x->numel / count;
  return OA_OK;
}

/* sum of n bytes (exact in int32 for n <= 2^23; the compiler vectorizes it) */
static int32_t sum_bytes(const int8_t *restrict x, int64_t n) {
  int32_t s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

oa_status_t oa_opt_mean_q8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t count = plan->params[MQ_COUNT], nout = plan->params[MQ_OUT];
  const int64_t zin = iarg(call, OA_ARG_MEAN_Q8_INPUT_ZP), zout = iarg(call, OA_ARG_MEAN_Q8_OUTPUT_ZP);
  const int64_t m = iarg(call, OA_ARG_MEAN_Q8_MULTIPLIER);
  const int32_t sh = (int32_t)iarg(call, OA_ARG_MEAN_Q8_SHIFT);
  const int64_t lo = iarg(call, OA_ARG_MEAN_Q8_ACT_MIN), hi = iarg(call, OA_ARG_MEAN_Q8_ACT_MAX);
  const int8_t *xp = (const int8_t *)call->inputs[0]->data;
  int8_t *yp = (int8_t *)call->outputs[0]->data;
  for (int64_t o = 0; o < nout; o++) {
    const int64_t sum = (int64_t)sum_bytes(xp + o * count, count) - zin * count;
    yp[o] = q8_finish(q8_round_shift(sum * m, sh), zout, lo, hi);
  }
  return OA_OK;
}

OA_OPT_SHARED(add_q8, OA_DT_I8)
OA_OPT_SHARED(mean_q8, OA_DT_I8)
OA_OPT_SHARED(quantize, OA_DT_F32)
OA_OPT_SHARED(dequantize, OA_DT_I8 | OA_DT_U8)
