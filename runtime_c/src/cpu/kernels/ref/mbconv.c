/* Reference mbconv_nhwc: the block's parts (kernels/mbconv.h) validated by conv2d_nhwc's
 * reference prepare (so a bad block gets the same messages as a bad convolution, prefixed with
 * the part) and run one after the other through full intermediate tensors in scratch. */
#include "kernels/mbconv.h"

oa_status_t oa_ref_conv2d_nhwc_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       oa_diag_t *diag);
oa_status_t oa_ref_conv2d_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                   const oa_kernel_env_t *env, oa_diag_t *diag);

/* the parts as messages name them */
static const char *const part_names[MB_PARTS] = {"expand (inputs 1, 2)", "depthwise (inputs 3, 4)",
                                                 "project (inputs 5, 6)"};

/* scratch: the expanded tensor (when there is an expansion), then the depthwise output */
static int64_t scratch_floats(const oa_mbconv_parts_t *m) {
  return (m->has_expand ? m->expanded.numel : 0) + m->depthwise.numel;
}

oa_status_t oa_ref_mbconv_nhwc_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       oa_diag_t *diag) {
  oa_mbconv_parts_t m;
  oa_status_t st = oa_mbconv_split(call, &m, diag);
  if (st) return st;
  if (!m.has_expand && call->inputs[2])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 2 (expand_bias) is present without input 1 (expand_weight)");
  for (int p = m.has_expand ? MB_EXPAND : MB_DW; p < MB_PARTS; p++) {
    oa_op_plan_t part;
    memset(&part, 0, sizeof part);
    if ((st = oa_ref_conv2d_nhwc_prepare(&m.calls[p], env, &part, diag)))
      return oa_diag_context(diag, st, "%s", part_names[p]);
  }
  const int64_t f = scratch_floats(&m);
  if (f > ((int64_t)1 << 50) || (uint64_t)f > SIZE_MAX / sizeof(float))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the block's intermediate tensors are too large for this platform");
  plan->scratch_bytes = (size_t)f * sizeof(float);
  return OA_OK;
}

oa_status_t oa_ref_mbconv_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                   const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  oa_mbconv_parts_t m;
  oa_status_t st = oa_mbconv_split(call, &m, diag);
  if (st) return st;
  m.expanded.data = scratch;
  m.depthwise.data = (float *)scratch + (m.has_expand ? m.expanded.numel : 0);
  for (int p = m.has_expand ? MB_EXPAND : MB_DW; p < MB_PARTS; p++) {
    oa_op_plan_t part;
    memset(&part, 0, sizeof part);
    /* prepare only fills the part's params (validated at the block's prepare; no allocation) */
    if ((st = oa_ref_conv2d_nhwc_prepare(&m.calls[p], env, &part, diag)) ||
        (st = oa_ref_conv2d_nhwc_run(&m.calls[p], &part, NULL, env, diag)))
      return st;
  }
  return OA_OK;
}
