/* RVV variants ("rvv") of the SIMD-family kernels: opt/simd_kernels.inc on the 8-lane RVV backend
 * of simd/vec.h (LMUL 2 at a fixed vl of 8: the same lanes, order and results at every VLEN),
 * for rv64gcv builds (OA_HAVE_RVV, clang). */
#if defined(__riscv_vector) && defined(OA_HAVE_RVV)
#define OA_SIMD_RVV 1
#define OA_SIMD_FN(name) oa_simd_rvv_##name
#include "kernels/opt/simd_kernels.inc"
#else
typedef int oa_simd_rvv_unused_t; /* not an RVV build */
#endif
