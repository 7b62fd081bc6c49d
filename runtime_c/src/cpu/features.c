/* CPU feature detection: cpuid + XCR0 on x86-64, getauxval(AT_HWCAP) on Arm and RISC-V Linux;
 * static facts elsewhere. Detected once when a CPU device is created and passed down to kernels.
 * No instruction of an optional extension runs unless the CPU (and OS) said it has it. */
#if defined(__linux__) && defined(__x86_64__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* syscall() */
#endif
#include <string.h>

#include "openaccel/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__) || defined(__riscv))
#include <sys/auxv.h>
#endif
#if defined(__unix__)
#include <unistd.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

const char *oa_cpu_arch_name(oa_cpu_arch_t arch) {
  switch (arch) {
    case OA_CPU_ARCH_X86_64: return "x86_64";
    case OA_CPU_ARCH_AARCH64: return "aarch64";
    case OA_CPU_ARCH_ARM: return "arm";
    case OA_CPU_ARCH_RISCV64: return "riscv64";
    case OA_CPU_ARCH_OTHER: break;
  }
  return "other";
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Linux hands out the AMX tile data state (XTILEDATA, xfeature 18) per process on request:
 * ARCH_REQ_XCOMP_PERM (0x1023), asked once per process (the answer kept in an atomic: 1 granted,
 * 2 refused). The request is idempotent and the kernel serialises it, so two threads creating
 * devices at once may both ask and store the same answer; a refusal (old kernel, seccomp) leaves
 * AMX off. */
static int amx_permitted(void) {
#if defined(__linux__)
  static int answer; /* 0: not asked yet */
  int a = __atomic_load_n(&answer, __ATOMIC_ACQUIRE);
  if (!a) {
    a = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : 2;
    __atomic_store_n(&answer, a, __ATOMIC_RELEASE);
  }
  return a == 1;
#else
  return 0; /* other OSes: no AMX kernels */
#endif
}

static void detect_x86(oa_cpu_features_t *f) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  f->sse4_1 = (c >> 19) & 1;
  f->fma = (c >> 12) & 1;
  f->f16c = (c >> 29) & 1;
  int osxsave = (c >> 27) & 1;
  int avx_hw = (c >> 28) & 1;
  int ymm_ok = 0, zmm_ok = 0, tile_ok = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm_ok = (lo & 0x6) == 0x6;          /* XCR0: SSE + AVX state */
    zmm_ok = (lo & 0xe6) == 0xe6;        /* + opmask, ZMM0-15 upper halves, ZMM16-31 (bits 5-7) */
    tile_ok = (lo & 0x60000) == 0x60000; /* XTILECFG + XTILEDATA (bits 17-18) */
  }
  f->avx = avx_hw && ymm_ok;
  if (!f->avx) f->fma = f->f16c = 0;
  if (__get_cpuid_max(0, NULL) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    unsigned max_sub = a;
    f->avx2 = f->avx && ((b >> 5) & 1);
    f->avx512f = zmm_ok && ((b >> 16) & 1);
    if (f->avx512f) {
      f->avx512dq = (b >> 17) & 1;
      f->avx512bw = (b >> 30) & 1;
      f->avx512vl = (b >> 31) & 1;
      f->avx512_vnni = (c >> 11) & 1;
    }
    if (tile_ok) {
      f->amx_bf16 = (d >> 22) & 1;
      f->amx_tile = (d >> 24) & 1;
      f->amx_int8 = (d >> 25) & 1;
      if (!f->amx_tile || !amx_permitted()) f->amx_tile = f->amx_bf16 = f->amx_int8 = 0;
    }
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f->avx_vnni = f->avx2 && ((a >> 4) & 1);
    }
  }
  /* cache sizes from the AMD/Intel deterministic cache leaves */
  unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
  if (max_ext >= 0x80000006u) {
    __cpuid(0x80000005u, a, b, c, d);
    if (c >> 24) f->l1d_bytes = (int64_t)(c >> 24) * 1024;
    __cpuid(0x80000006u, a, b, c, d);
    if (c >> 16) f->l2_bytes = (int64_t)(c >> 16) * 1024;
    if (d >> 18) f->l3_bytes = (int64_t)(d >> 18) * 512 * 1024;
  }
  if (!f->l2_bytes && __get_cpuid_max(0, NULL) >= 4) {
    for (unsigned i = 0; i < 8; i++) {
      __cpuid_count(4, i, a, b, c, d);
      unsigned type = a & 0x1f, level = (a >> 5) & 7;
      if (!type) break;
      int64_t size = (int64_t)(((b >> 22) & 0x3ff) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * (c + 1);
      if (level == 1 && type != 2) f->l1d_bytes = size;
      if (level == 2) f->l2_bytes = size;
      if (level == 3) f->l3_bytes = size;
    }
  }
}
#endif

void oa_cpu_detect(oa_cpu_features_t *out_features) {
  oa_cpu_features_t f;
  memset(&f, 0, sizeof f);
  f.cores = 1;
#if defined(__x86_64__)
  f.arch = OA_CPU_ARCH_X86_64;
#if defined(__GNUC__)
  detect_x86(&f);
#endif
#elif defined(__aarch64__)
  f.arch = OA_CPU_ARCH_AARCH64;
  f.neon = 1; /* Advanced SIMD is mandatory in armv8-a */
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP);
  f.fp16 = (hw & (1ul << 10)) != 0 && (hw & (1ul << 9)) != 0; /* HWCAP_FPHP | HWCAP_ASIMDHP */
  f.dotprod = (hw & (1ul << 20)) != 0;                        /* HWCAP_ASIMDDP */
  f.i8mm = (getauxval(AT_HWCAP2) & (1ul << 13)) != 0;         /* HWCAP2_I8MM */
#endif
#elif defined(__arm__)
  f.arch = OA_CPU_ARCH_ARM;
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP);
  f.neon = (hw & (1ul << 12)) != 0; /* HWCAP_NEON */
#endif
#elif defined(__riscv) && __riscv_xlen == 64
  f.arch = OA_CPU_ARCH_RISCV64;
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP);
  f.rvv = (hw & (1ul << ('V' - 'A'))) != 0; /* COMPAT_HWCAP_ISA_V */
#endif
#if defined(__riscv_vector)
  /* vlenb (vector register bytes) is a V CSR: read it only on a CPU that has V, and only in a
   * build compiled with V, so baseline (rv64gc) binaries contain no V instruction at all */
  if (f.rvv) {
    unsigned long vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
    f.rvv_vlen = (int32_t)(vlenb * 8);
  }
#endif
#else
  f.arch = OA_CPU_ARCH_OTHER;
#endif
#if defined(__unix__) && defined(_SC_NPROCESSORS_ONLN)
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) f.cores = (int32_t)n;
#endif
#if defined(__unix__) && defined(_SC_LEVEL1_DCACHE_SIZE)
  if (!f.l1d_bytes) { long v = sysconf(_SC_LEVEL1_DCACHE_SIZE); if (v > 0) f.l1d_bytes = v; }
  if (!f.l2_bytes) { long v = sysconf(_SC_LEVEL2_CACHE_SIZE); if (v > 0) f.l2_bytes = v; }
  if (!f.l3_bytes) { long v = sysconf(_SC_LEVEL3_CACHE_SIZE); if (v > 0) f.l3_bytes = v; }
#endif
  *out_features = f;
}
