/* Portable C11 variants ("portable") of the SIMD-family kernels: opt/simd_kernels.inc on the
 * one-lane backend of simd/vec.h, for every target. opt/<family>.c registers them only for the
 * ops where they beat the reference kernel. */
#define OA_SIMD_FN(name) oa_simd_portable_##name
#include "kernels/opt/simd_kernels.inc"
