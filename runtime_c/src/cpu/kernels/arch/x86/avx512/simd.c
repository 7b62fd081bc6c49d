/* AVX-512 variants ("avx512") of the SIMD-family kernels: opt/simd_kernels.inc on the 16-lane
 * backend of simd/vec.h. Built with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma on x86-64
 * builds only (CMakeLists.txt); only reached when env->isas has OA_CPU_ISA_AVX512 (the CPU
 * reported avx512f/bw/dq/vl and fma), so a baseline x86-64 binary still runs anywhere. */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#define OA_SIMD_AVX512 1
#define OA_SIMD_FN(name) oa_simd_avx512_##name
#include "kernels/opt/simd_kernels.inc"
#else
typedef int oa_simd_avx512_unused_t; /* not an AVX-512 build of this file */
#endif
