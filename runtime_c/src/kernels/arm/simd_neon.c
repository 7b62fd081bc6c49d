/* NEON variants ("neon") of the SIMD elementwise / softmax / norm / pooling / attention kernels
 * (fast/simd_impl.h), for aarch64 and for armv7 builds with NEON (-mfpu=neon*); prepare checks
 * env->features (neon). */
#if defined(__ARM_NEON)
#define OA_SIMD_NEON 1
#define OA_SIMD_FN(name) oa_simd_neon_##name
#include "../fast/simd_impl.h"
#else
typedef int oa_simd_neon_unused_t; /* not a NEON build */
#endif
