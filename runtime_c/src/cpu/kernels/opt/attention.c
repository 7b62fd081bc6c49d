/* Optimized sdpa, a blocked "flash" kernel (the SIMD template opt/attention.inc, compiled per ISA
 * under arch/). */
#include "kernels/isa.h"

OA_OPT_SIMD(sdpa, OA_ISA_YES)
