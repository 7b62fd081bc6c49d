/* Optimized float32 add / sub / mul / div with broadcasting (the SIMD template opt/binary.inc,
 * compiled per ISA under arch/). No portable C variants: the reference kernel's loops are as fast. */
#include "kernels/isa.h"

OA_OPT_SIMD(add, OA_ISA_NO)
OA_OPT_SIMD(sub, OA_ISA_NO)
OA_OPT_SIMD(mul, OA_ISA_NO)
OA_OPT_SIMD(div, OA_ISA_NO)
