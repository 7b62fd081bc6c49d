/* Optimized softmax / log_softmax over the last dim and mean / sum over trailing dims (the SIMD
 * template opt/reduce.inc, compiled per ISA under arch/). */
#include "kernels/isa.h"

OA_OPT_SIMD(softmax, OA_ISA_YES)
OA_OPT_SIMD(log_softmax, OA_ISA_YES)
OA_OPT_SIMD(mean, OA_ISA_YES)
OA_OPT_SIMD(sum, OA_ISA_YES)
