/* NEON Winograd transforms (opt/winograd_transform.inc, 4 channels per vector), aarch64 and armv7
 * builds with NEON. */
#if defined(__ARM_NEON)
#define OA_SIMD_NEON 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define WINO_NAME(x) oa_wino_neon_##x
#include "kernels/opt/winograd_transform.inc"
#else
typedef int oa_wino_neon_unused_t; /* not a NEON build */
#endif
