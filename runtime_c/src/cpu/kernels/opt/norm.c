/* Optimized layer_norm over the trailing dims (the SIMD template opt/norm.inc, compiled per ISA
 * under arch/). */
#include "kernels/isa.h"

OA_OPT_SIMD(layer_norm, OA_ISA_YES)
