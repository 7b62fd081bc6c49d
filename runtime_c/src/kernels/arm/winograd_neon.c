/* NEON Winograd transforms (fast/winograd_tmpl.inc, 4 channels per vector), aarch64 and armv7
 * builds with NEON. */
#if defined(__ARM_NEON)
#define OA_SIMD_NEON 1
#include "../fast/fast.h"
#include "../fast/simd_vec.h"

#define WINO_NAME(x) oa_wino_neon_##x
#include "../fast/winograd_tmpl.inc"
#else
typedef int oa_wino_neon_unused_t; /* not a NEON build */
#endif
