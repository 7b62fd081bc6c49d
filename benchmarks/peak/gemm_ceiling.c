/* How close openaccel's fp32 GEMM gets to the FMA peak, one cache level at a time: the ISA's own
 * micro-kernel (the runtime's, linked from libopenaccel.a) with its operands in L1, then with B
 * streamed from L2, then the whole blocked GEMM of 1024^3 (the driver of opt/gemm.c: A and C in
 * memory). The steps show where the peak goes, and so how far any fp32 GEMM on this core can get:
 * a figure above the tile with B from L2 needs every operand in L1 (benchmarks/peak.py --gemm
 * builds this and prints the steps beside the FMA peak).
 *
 *   {"case": "tile_l1", "isa": "avx512", "tile": "12x32", "gflops": 230.2, "kc": 256}
 *
 * Cases (one JSON line each; best of repeated runs of about 20 ms, monotonic clock):
 *   tile_l1      one MR x NR tile, kc 256 (128 where that does not fit): A tile, B panels and C in L1
 *   tile_l2      the same A tile over every panel of a B block of half the L2 (kc as the driver's)
 *   gemm_linear  1024^3 through oa_gemm_run, B packed in panels beforehand (`linear` weights)
 *   gemm_matmul  1024^3 through oa_gemm_run, B packed from row-major on every run (`matmul`)
 * Usage: gemm_ceiling [SECONDS_PER_CASE] [ISA]  (default 0.25 s, the best ISA of this CPU) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/isa.h"
#include "kernels/opt/opt.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *falloc(int64_t n) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  if (!p) {
    fprintf(stderr, "gemm_ceiling: out of memory (%lld floats)\n", (long long)n);
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 7) % 13 - 6) * 0.01f; /* finite, not denormal */
  return p;
}

typedef void (*case_fn)(const void *ctx);

/* best seconds per call of fn over `seconds` (at least 3 timed rounds of about 20 ms) */
static double best_time(case_fn fn, const void *ctx, double seconds) {
  double t0 = now();
  fn(ctx);
  const double first = now() - t0, once = first > 1e-7 ? first : 1e-7;
  const long per_round = once > 0.02 ? 1 : (long)(0.02 / once) + 1;
  double best = 1e30;
  const double end = now() + seconds;
  for (int r = 0; r < 3 || now() < end; r++) {
    t0 = now();
    for (long i = 0; i < per_round; i++) fn(ctx);
    const double dt = (now() - t0) / (double)per_round;
    if (dt < best) best = dt;
    if (r > 1000) break;
  }
  return best;
}

typedef struct {
  const oa_opt_isa_t *isa;
  int64_t kc, panels; /* tile calls a run: one per NR-wide column group of B, step floats apart */
  int64_t step;
  const float *a, *b;
  float *c;
} tile_ctx_t;

/* the A tile over `panels` NR-wide groups of B ([panel][kc][pw] each, pw-wide halves kc*pw apart;
 * step 0: the same group every time) */
static void run_tiles(const void *p) {
  const tile_ctx_t *t = (const tile_ctx_t *)p;
  const oa_uk_epi_t epi = {NULL, NULL, 0, 0.0f, 0.0f};
  for (int64_t q = 0; q < t->panels; q++)
    t->isa->gemm(t->kc, t->a, t->kc + 16, t->b + q * t->step, t->kc * t->isa->pw, t->c, t->isa->nr, 1, t->isa->mr,
                 t->isa->nr, 0, &epi);
}

typedef struct {
  const oa_opt_isa_t *isa;
  oa_gemm_blocking_t blk;
  oa_gemm_args_t g;
  float *scratch;
} gemm_ctx_t;

static void run_gemm(const void *p) {
  const gemm_ctx_t *x = (const gemm_ctx_t *)p;
  oa_gemm_run(x->isa, &x->blk, &x->g, x->scratch, NULL);
}

static void report(const char *name, const oa_opt_isa_t *isa, double flops, double sec, int64_t kc) {
  printf("{\"case\": \"%s\", \"isa\": \"%s\", \"tile\": \"%dx%d\", \"gflops\": %.1f, \"kc\": %lld}\n", name,
         isa->name, isa->mr, isa->nr, flops / sec * 1e-9, (long long)kc);
  fflush(stdout);
}

/* 1024^3 through the driver: B pre-packed in pw-wide panels (direct, bblock = pw) or packed from
 * row-major B on every run */
static void gemm_case(const oa_opt_isa_t *isa, int prepacked, double seconds) {
  const int64_t n = 1024, pw = isa->pw;
  gemm_ctx_t x;
  memset(&x, 0, sizeof x);
  x.isa = isa;
  float *a = falloc(n * n), *b = falloc(n * n), *c = falloc(n * n);
  int64_t *boff = NULL;
  oa_pack_dense_t dense = {b, n};
  oa_gemm_plan(isa, n, n, n, n, prepacked, 1, &x.blk);
  x.g.m = x.g.n = x.g.k = n;
  x.g.a = a;
  x.g.lda = n;
  x.g.c = c;
  x.g.rs_c = n;
  x.g.cs_c = 1;
  if (prepacked) {
    boff = malloc((size_t)n * sizeof *boff);
    if (!boff) exit(1);
    for (int64_t p = 0; p < n; p++) boff[p] = p * pw;
    x.g.b = b; /* any values: the layout is [n / pw][k][pw] */
    x.g.boff = boff;
    x.g.bblock = pw;
  } else {
    x.g.pack = oa_pack_rowmajor;
    x.g.pack_ctx = &dense;
  }
  x.scratch = falloc(x.blk.scratch_floats > 0 ? x.blk.scratch_floats : 1);
  report(prepacked ? "gemm_linear" : "gemm_matmul", isa, 2.0 * (double)(n * n * n),
         best_time(run_gemm, &x, seconds), x.blk.kc);
  free(x.scratch);
  free(boff);
  free(a);
  free(b);
  free(c);
}

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0.25;
  oa_cpu_features_t f;
  oa_cpu_detect(&f);
  const uint32_t usable = oa_isa_built() & oa_isa_detected(&f);
  const int32_t order[] = OA_ISA_PRIORITY;
  int32_t id = -1;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    const char *name = oa_isa_name(order[i]);
    if (argc > 2 ? strcmp(argv[2], name) == 0 : (usable & OA_ISA_BIT(order[i])) != 0) {
      id = order[i];
      break;
    }
  }
  if (id < 0 || !(usable & OA_ISA_BIT(id)) || !oa_opt_isa(id)) {
    fprintf(stderr, "gemm_ceiling: ISA %s is not in this build or not on this CPU\n", argc > 2 ? argv[2] : "(best)");
    return 2;
  }
  const oa_opt_isa_t *isa = oa_opt_isa(id);
  const int64_t mr = isa->mr, nr = isa->nr;

  /* the tile alone: A (mr x kc, rows kc + 16 apart), one NR-wide group of B and C in L1 (kc 256
   * where A and B fit in L1, else 128), 64 calls a run (the driver calls tiles back to back) */
  const int64_t l1 = f.l1d_bytes > 0 ? f.l1d_bytes : 32 * 1024;
  tile_ctx_t t = {isa, (mr + nr) * 256 * (int64_t)sizeof(float) <= l1 ? 256 : 128, 64, 0, NULL, NULL, NULL};
  float *a = falloc(mr * (512 + 16)), *c = falloc(mr * nr);
  float *b1 = falloc(t.kc * nr);
  t.a = a;
  t.b = b1;
  t.c = c;
  report("tile_l1", isa, 2.0 * (double)(mr * nr * t.kc * t.panels), best_time(run_tiles, &t, seconds), t.kc);

  /* B streamed from L2: a block of half the L2 (1 MB when unknown), the driver's K block */
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, 1024, 1024, 1024, 1024 + 16, 1, 1, &blk);
  const int64_t l2 = f.l2_bytes > 0 ? f.l2_bytes : 2 * 1024 * 1024;
  t.kc = blk.kc;
  t.panels = l2 / 2 / (int64_t)sizeof(float) / (t.kc * nr);
  if (t.panels < 2) t.panels = 2;
  t.step = t.kc * nr;
  float *b2 = falloc(t.panels * t.kc * nr);
  t.b = b2;
  report("tile_l2", isa, 2.0 * (double)(mr * nr * t.kc * t.panels), best_time(run_tiles, &t, seconds), t.kc);
  free(b1);
  free(b2);
  free(a);
  free(c);

  gemm_case(isa, 1, seconds);
  gemm_case(isa, 0, seconds);
  return 0;
}
