/* AVX2+FMA variants ("avx2") of the SIMD-family kernels: opt/simd_kernels.inc on the 8-lane
 * backend of simd/vec.h. Built with -mavx2 -mfma on x86-64 builds only (CMakeLists.txt); only
 * reached when env->isas has OA_CPU_ISA_AVX2, so a baseline x86-64 binary still runs anywhere. */
#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define OA_SIMD_AVX2 1
#define OA_SIMD_FN(name) oa_simd_avx2_##name
#include "kernels/opt/simd_kernels.inc"
#else
typedef int oa_simd_avx2_unused_t; /* not an AVX2 build of this file */
#endif
