/* One core's fp32 FMA peak for each vector ISA this CPU has: the roofline the benchmark harness
 * puts beside openaccel's GFLOP/s (benchmarks/peak.py builds this with the host compiler and runs it
 * pinned to one thread). Each ISA runs a loop of independent FMA chains (more chains than
 * FMA latency x FMA ports, so the FMA units, not the dependency chains, are the limit) on values that
 * stay finite; FLOPs = 2 per lane per FMA. One JSON line per ISA, names as hostinfo.kernel_isa
 * gives them ("portable C" is scalar FMA):
 *   {"isa": "avx2+fma", "gflops": 90.8, "lanes": 8, "chains": 12, "seconds": 0.25}
 * Usage: fma_peak [SECONDS_PER_ISA]  (default 0.25) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OA_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile float g_sink;

/* the chains must live in registers: unroll the loop over them completely */
#if defined(__clang__)
#define OA_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define OA_UNROLL _Pragma("GCC unroll 32")
#else
#define OA_UNROLL
#endif

/* x = x * a + b with a just below 1 and b tiny: values converge and never overflow or denormalize */
#define CHAINS_SCALAR 8
#if defined(OA_X86)
__attribute__((target("fma")))
#endif
static void scalar_block(long iters) {
  float x[CHAINS_SCALAR];
  const float a = 0.9999f, b = 1e-4f;
  for (int c = 0; c < CHAINS_SCALAR; c++) x[c] = 1.0f + 0.01f * (float)c;
  for (long i = 0; i < iters; i++) {
    OA_UNROLL
    for (int c = 0; c < CHAINS_SCALAR; c++) x[c] = __builtin_fmaf(x[c], a, b);
  }
  float s = 0;
  for (int c = 0; c < CHAINS_SCALAR; c++) s += x[c];
  g_sink = s;
}

#if defined(OA_X86)
#define CHAINS_AVX2 12
__attribute__((target("avx2,fma"))) static void avx2_block(long iters) {
  __m256 x[CHAINS_AVX2];
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int c = 0; c < CHAINS_AVX2; c++) x[c] = _mm256_set1_ps(1.0f + 0.01f * (float)c);
  for (long i = 0; i < iters; i++) {
    OA_UNROLL
    for (int c = 0; c < CHAINS_AVX2; c++) x[c] = _mm256_fmadd_ps(x[c], a, b);
  }
  __m256 s = x[0];
  for (int c = 1; c < CHAINS_AVX2; c++) s = _mm256_add_ps(s, x[c]);
  float out[8];
  _mm256_storeu_ps(out, s);
  g_sink = out[0];
}

#define CHAINS_AVX512 24
__attribute__((target("avx512f"))) static void avx512_block(long iters) {
  __m512 x[CHAINS_AVX512];
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  for (int c = 0; c < CHAINS_AVX512; c++) x[c] = _mm512_set1_ps(1.0f + 0.01f * (float)c);
  for (long i = 0; i < iters; i++) {
    OA_UNROLL
    for (int c = 0; c < CHAINS_AVX512; c++) x[c] = _mm512_fmadd_ps(x[c], a, b);
  }
  __m512 s = x[0];
  for (int c = 1; c < CHAINS_AVX512; c++) s = _mm512_add_ps(s, x[c]);
  g_sink = _mm512_reduce_add_ps(s);
}
#endif

#if defined(__aarch64__)
#define CHAINS_NEON 16
static void neon_block(long iters) {
  float32x4_t x[CHAINS_NEON];
  const float32x4_t a = vdupq_n_f32(0.9999f), b = vdupq_n_f32(1e-4f);
  for (int c = 0; c < CHAINS_NEON; c++) x[c] = vdupq_n_f32(1.0f + 0.01f * (float)c);
  for (long i = 0; i < iters; i++) {
    OA_UNROLL
    for (int c = 0; c < CHAINS_NEON; c++) x[c] = vfmaq_f32(b, x[c], a);
  }
  float32x4_t s = x[0];
  for (int c = 1; c < CHAINS_NEON; c++) s = vaddq_f32(s, x[c]);
  g_sink = vaddvq_f32(s);
}
#endif

/* Time `block` for about `seconds`: grow the iteration count until one call takes 1/8 of it, then
 * keep the best of several calls (the machine is shared; the best is the closest to the peak). */
static void measure(const char *isa, void (*block)(long), int lanes, int chains, double seconds) {
  long iters = 1000;
  double t = 0;
  for (;;) {
    double t0 = now();
    block(iters);
    t = now() - t0;
    if (t > seconds / 8 || iters > (1L << 40)) break;
    iters *= 2;
  }
  double best = t, end = now() + seconds;
  while (now() < end) {
    double t0 = now();
    block(iters);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  double flops = 2.0 * lanes * chains * (double)iters;
  printf("{\"isa\": \"%s\", \"gflops\": %.2f, \"lanes\": %d, \"chains\": %d, \"seconds\": %.3f}\n", isa,
         flops / best / 1e9, lanes, chains, seconds);
  fflush(stdout);
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.25;
  if (!(seconds > 0)) seconds = 0.25;
#if defined(OA_X86)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("fma")) measure("portable C", scalar_block, 1, CHAINS_SCALAR, seconds);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    measure("avx2+fma", avx2_block, 8, CHAINS_AVX2, seconds);
  if (__builtin_cpu_supports("avx512f")) measure("avx512", avx512_block, 16, CHAINS_AVX512, seconds);
#else
  measure("portable C", scalar_block, 1, CHAINS_SCALAR, seconds);
#endif
#if defined(__aarch64__)
  measure("neon", neon_block, 4, CHAINS_NEON, seconds);
#endif
  return 0;
}
