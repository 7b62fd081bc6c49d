/* AVX2+FMA variants ("avx2") of the SIMD elementwise / softmax / norm / pooling / attention
 * kernels (fast/simd_impl.h). Built with -mavx2 -mfma on x86-64 builds only (CMakeLists.txt);
 * prepare checks env->features (avx2 and fma), so a baseline x86-64 binary still runs anywhere. */
#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define OA_SIMD_AVX2 1
#define OA_SIMD_FN(name) oa_simd_avx2_##name
#include "../fast/simd_impl.h"
#else
typedef int oa_simd_avx2_unused_t; /* not an AVX2 build of this file */
#endif
