/* Optimized unary elementwise kernels (the SIMD template opt/elementwise.inc, compiled per ISA
 * under arch/). The portable C variants only of the ops where they beat the reference kernel
 * (measured with benchmarks/micro/simd.py --portable on x86-64 without AVX2): relu, sigmoid,
 * silu and exp have none (the reference's auto-vectorized loops or libm are as fast). */
#include "kernels/isa.h"

OA_OPT_SIMD(relu, OA_ISA_NO)
OA_OPT_SIMD(hardtanh, OA_ISA_YES)
OA_OPT_SIMD(clamp, OA_ISA_YES)
OA_OPT_SIMD(sigmoid, OA_ISA_NO)
OA_OPT_SIMD(tanh, OA_ISA_YES)
OA_OPT_SIMD(silu, OA_ISA_NO)
OA_OPT_SIMD(gelu, OA_ISA_YES)
OA_OPT_SIMD(exp, OA_ISA_NO)
OA_OPT_SIMD(erf, OA_ISA_YES)
