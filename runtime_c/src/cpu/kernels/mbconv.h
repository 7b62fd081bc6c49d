/* mbconv_nhwc (the fused inverted-residual block of MobileNet-style networks) as the three
 * conv2d_nhwc calls it stands for: [1x1 expand ->] depthwise -> 1x1 project, with the two
 * intermediate tensors described here (their data pointers are the caller's). The reference
 * kernel validates the block by validating each part with conv2d_nhwc's prepare and runs the
 * parts one after the other; the optimized kernel (opt/mbconv.c) runs them row band by row band. */
#ifndef OA_KERNELS_MBCONV_H
#define OA_KERNELS_MBCONV_H

#include "kernel.h"

enum { MB_EXPAND, MB_DW, MB_PROJECT, MB_PARTS };

typedef struct oa_mbconv_parts {
  oa_tensor_t expanded;   /* [N, H, W, E] (the input itself when there is no expansion) */
  oa_tensor_t depthwise;  /* [N, OH, OW, E] */
  oa_tensor_t *in[MB_PARTS][3];
  oa_tensor_t *out[MB_PARTS][1];
  int64_t ints[MB_PARTS][OA_ARG_CONV2D_NHWC_BLOCK + 1]; /* each part's conv2d_nhwc ints (input_nchw: 0) */
  double floats[MB_PARTS][OA_ARG_CONV2D_NHWC_NUM_FLOATS];
  oa_op_call_t calls[MB_PARTS];
  int has_expand;
} oa_mbconv_parts_t;

/* an intermediate float32 [n, h, w, c] tensor (n, h, w from a validated tensor, c <= 2^30); 0 when
 * its size would pass 2^50 elements */
static inline int oa_mbconv_tensor(oa_tensor_t *t, const char *name, int64_t n, int64_t h, int64_t w, int64_t c) {
  memset(t, 0, sizeof *t);
  t->shape[0] = n;
  t->shape[1] = h;
  t->shape[2] = w;
  t->shape[3] = c;
  t->ndim = 4;
  t->dtype = OA_DTYPE_FLOAT32;
  t->name = name;
  const int64_t lim = (int64_t)1 << 50;
  int64_t numel = 1;
  for (int d = 0; d < 4; d++) {
    if (t->shape[d] < 0) return 0;
    if (t->shape[d] && numel > lim / t->shape[d]) return 0;
    numel *= t->shape[d];
  }
  t->numel = numel;
  t->nbytes = (size_t)numel * sizeof(float);
  return 1;
}

/* Split the call into its parts; checks what the split itself reads (arity, presence, the ranks
 * of input, depthwise weight and output), the parts check the rest. Intermediate sizes are
 * saturated at 2^50 per dim product so a hostile file cannot overflow them. */
static inline oa_status_t oa_mbconv_split(const oa_op_call_t *call, oa_mbconv_parts_t *m, oa_diag_t *diag) {
  oa_status_t st;
  memset(m, 0, sizeof *m);
  if ((st = oa_check_arity(call, 6, 7, 1, 10, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) ||
      (st = oa_check_present(call, 3, "input 3 (dw_weight)", diag)) ||
      (st = oa_check_present(call, 5, "input 5 (project_weight)", diag)))
    return st;
  oa_tensor_t *x = call->inputs[0], *wd = call->inputs[3], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, x, 4, 4, "input 0 (input)", diag)) ||
      (st = oa_check_ndim(call, wd, 4, 4, "input 3 (dw_weight)", diag)) ||
      (st = oa_check_ndim(call, y, 4, 4, "output 0", diag)))
    return st;
  m->has_expand = call->inputs[1] != NULL;
  oa_tensor_t *b_project = call->n_inputs > 6 ? call->inputs[6] : NULL;
  const int64_t e = wd->shape[3];
  if (e < 1 || e > ((int64_t)1 << 30))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 3 (dw_weight) ('%s'): %lld channels are out of range",
                        wd->name, (long long)e);
  if (!oa_mbconv_tensor(&m->expanded, "expanded", x->shape[0], x->shape[1], x->shape[2], e) ||
      !oa_mbconv_tensor(&m->depthwise, "depthwise", y->shape[0], y->shape[1], y->shape[2], e))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "the block's intermediate tensors (%lld channels) are too large",
                        (long long)e);
  oa_tensor_t *dw_in = m->has_expand ? &m->expanded : x;
  oa_tensor_t *const ins[MB_PARTS][3] = {{x, call->inputs[1], call->inputs[2]},
                                         {dw_in, call->inputs[3], call->inputs[4]},
                                         {&m->depthwise, call->inputs[5], b_project}};
  oa_tensor_t *const outs[MB_PARTS] = {&m->expanded, &m->depthwise, y};
  const int64_t block = call->ints[OA_ARG_MBCONV_NHWC_BLOCK];
  /* each part's act and [min, max] by name; the depthwise part's geometry is the block's */
  static const uint32_t act_of[MB_PARTS] = {OA_ARG_MBCONV_NHWC_EXPAND_ACT, OA_ARG_MBCONV_NHWC_DW_ACT,
                                            OA_ARG_MBCONV_NHWC_PROJECT_ACT};
  static const uint32_t min_of[MB_PARTS] = {OA_ARG_MBCONV_NHWC_EXPAND_MIN, OA_ARG_MBCONV_NHWC_DW_MIN,
                                            OA_ARG_MBCONV_NHWC_PROJECT_MIN};
  static const uint32_t max_of[MB_PARTS] = {OA_ARG_MBCONV_NHWC_EXPAND_MAX, OA_ARG_MBCONV_NHWC_DW_MAX,
                                            OA_ARG_MBCONV_NHWC_PROJECT_MAX};
  static const uint32_t geometry[6][2] = {
      {OA_ARG_CONV2D_NHWC_STRIDE_H, OA_ARG_MBCONV_NHWC_STRIDE_H},
      {OA_ARG_CONV2D_NHWC_STRIDE_W, OA_ARG_MBCONV_NHWC_STRIDE_W},
      {OA_ARG_CONV2D_NHWC_PAD_H, OA_ARG_MBCONV_NHWC_PAD_H},
      {OA_ARG_CONV2D_NHWC_PAD_W, OA_ARG_MBCONV_NHWC_PAD_W},
      {OA_ARG_CONV2D_NHWC_DILATION_H, OA_ARG_MBCONV_NHWC_DILATION_H},
      {OA_ARG_CONV2D_NHWC_DILATION_W, OA_ARG_MBCONV_NHWC_DILATION_W}};
  for (int p = 0; p < MB_PARTS; p++) {
    const int dw = p == MB_DW;
    int64_t *ii = m->ints[p];
    for (int k = 0; k < 6; k++) { /* the 1x1 parts: stride 1, padding 0, dilation 1 */
      const uint32_t to = geometry[k][0], from = geometry[k][1];
      ii[to] = dw ? call->ints[from] : (to == OA_ARG_CONV2D_NHWC_PAD_H || to == OA_ARG_CONV2D_NHWC_PAD_W ? 0 : 1);
    }
    ii[OA_ARG_CONV2D_NHWC_GROUPS] = dw ? e : 1;
    ii[OA_ARG_CONV2D_NHWC_ACT] = call->ints[act_of[p]];
    ii[OA_ARG_CONV2D_NHWC_BLOCK] = dw ? 0 : block;
    m->floats[p][OA_ARG_CONV2D_NHWC_ACT_MIN] = call->n_floats > min_of[p] ? call->floats[min_of[p]] : 0.0;
    m->floats[p][OA_ARG_CONV2D_NHWC_ACT_MAX] = call->n_floats > max_of[p] ? call->floats[max_of[p]] : 0.0;
    for (int k = 0; k < 3; k++) m->in[p][k] = ins[p][k];
    m->out[p][0] = outs[p];
    oa_op_call_t *c = &m->calls[p];
    c->op = call->op;
    c->index = call->index;
    c->inputs = m->in[p];
    c->n_inputs = 3;
    c->outputs = m->out[p];
    c->n_outputs = 1;
    c->ints = ii;
    c->n_ints = OA_ARG_CONV2D_NHWC_BLOCK + 1;
    c->floats = m->floats[p];
    c->n_floats = OA_ARG_CONV2D_NHWC_NUM_FLOATS;
  }
  return OA_OK;
}

#endif /* OA_KERNELS_MBCONV_H */
