/* Reference unary elementwise kernels. */
#include <math.h>

#include "../kernel.h"

/* Shared prepare: one input, one output of the same shape; dtype in `allowed`. */
static oa_status_t unary_prepare(const oa_op_call_t *call, uint64_t allowed, int same_dtype, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, allowed, "input 0 (self)", diag))) return st;
  if (same_dtype && (st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  return oa_check_same_shape(call, y, x, "output 0", diag);
}

oa_status_t oa_ref_relu_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  (void)plan;
  return unary_prepare(call, OA_DT_NUM, 1, diag);
}

oa_status_t oa_ref_relu_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0];
  int64_t n = x->numel;
  switch (x->dtype) {
    case OA_DTYPE_FLOAT32: {
      const float *a = (const float *)x->data;
      float *o = (float *)call->outputs[0]->data;
      for (int64_t i = 0; i < n; i++) o[i] = a[i] > 0.0f ? a[i] : 0.0f;
      break;
    }
    case OA_DTYPE_INT32: {
      const int32_t *a = (const int32_t *)x->data;
      int32_t *o = (int32_t *)call->outputs[0]->data;
      for (int64_t i = 0; i < n; i++) o[i] = a[i] > 0 ? a[i] : 0;
      break;
    }
    case OA_DTYPE_INT64: {
      const int64_t *a = (const int64_t *)x->data;
      int64_t *o = (int64_t *)call->outputs[0]->data;
      for (int64_t i = 0; i < n; i++) o[i] = a[i] > 0 ? a[i] : 0;
      break;
    }
    default: break;
  }
  return OA_OK;
}
