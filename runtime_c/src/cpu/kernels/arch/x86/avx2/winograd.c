/* AVX2+FMA Winograd transforms (opt/winograd_transform.inc, 8 channels per vector). Compiled with
 * -mavx2 -mfma; only called after the CPU reported avx2 and fma. */
#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define OA_SIMD_AVX2 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define WINO_NAME(x) oa_wino_avx2_##x
#include "kernels/opt/winograd_transform.inc"
#else
typedef int oa_wino_avx2_unused_t; /* not an AVX2 build of this file */
#endif
