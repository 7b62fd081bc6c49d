/* Portable depthwise convolution plane (one output at a time): fast/dwconv_tmpl.inc with a
 * "vector" of one float. */
#include "fast.h"

#define DW_FN oa_portable_dw
#define VW 1
#define VT float
#define VSET1(x) (x)
#define VLOADU(p) (*(p))
#define VLOADS2(p) (*(p))
#define VFMA(acc, a, b) ((acc) + (a) * (b))
#define VSTOREU(p, v) (*(p) = (v))
#define VSTOREN(p, v, n) ((void)(n), *(p) = (v))
#define VACT(v, e) oa_fast_act((v), &(e))
#include "dwconv_tmpl.inc"
#define DWC_FN oa_portable_dwc
#include "dwconv_nhwc_tmpl.inc"
