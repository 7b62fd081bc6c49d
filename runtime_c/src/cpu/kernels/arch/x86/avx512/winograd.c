/* AVX-512 Winograd transforms (opt/winograd_transform.inc, 16 channels per vector). Compiled with
 * -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma; only called after the CPU reported them. */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#define OA_SIMD_AVX512 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define WINO_NAME(x) oa_wino_avx512_##x
#include "kernels/opt/winograd_transform.inc"
#else
typedef int oa_wino_avx512_unused_t; /* not an AVX-512 build of this file */
#endif
