/* NEON variants ("neon") of the SIMD-family kernels: opt/simd_kernels.inc on the 4-lane backend
 * of simd/vec.h, for aarch64 and for armv7 builds with NEON (-mfpu=neon*). */
#if defined(__ARM_NEON)
#define OA_SIMD_NEON 1
#define OA_SIMD_FN(name) oa_simd_neon_##name
#include "kernels/opt/simd_kernels.inc"
#else
typedef int oa_simd_neon_unused_t; /* not a NEON build */
#endif
