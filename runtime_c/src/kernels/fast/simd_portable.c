/* Portable C11 variants ("fast") of the SIMD kernels (simd_impl.h with one-lane vectors), for
 * every target: the same algorithms as the AVX2 / NEON variants where the reference kernel is
 * needlessly slow (see fast/simd.def for the ops listed). */
#define OA_SIMD_FN(name) oa_simd_fast_##name
#include "simd_impl.h"
