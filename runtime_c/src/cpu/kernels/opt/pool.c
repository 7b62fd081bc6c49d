/* Optimized max_pool2d / avg_pool2d / adaptive_avg_pool2d (the SIMD template opt/pool.inc,
 * compiled per ISA under arch/). No portable C avg_pool2d: the reference kernel's direct window
 * sums are as fast as three passes of one-lane code. */
#include "kernels/isa.h"

OA_OPT_SIMD(max_pool2d, OA_ISA_YES)
OA_OPT_SIMD(avg_pool2d, OA_ISA_NO)
OA_OPT_SIMD(adaptive_avg_pool2d, OA_ISA_YES)
