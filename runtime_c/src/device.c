/* Checked wrappers over a device's vtable: a NULL slot, or a slot past the size of the table
 * the device was built with, is OA_ERR_UNSUPPORTED rather than a crash. */
#include <stddef.h>

#include "openaccel/device.h"

#define HAS_SLOT(dev, slot)                                                                       \
  ((dev) && (dev)->vtable && (dev)->vtable->abi_version >= 1 &&                                   \
   (dev)->vtable->struct_size >= offsetof(oa_device_vtable_t, slot) + sizeof((dev)->vtable->slot) && \
   (dev)->vtable->slot)

oa_status_t oa_device_get_properties(oa_device_t *dev, oa_device_properties_t *out_props) {
  if (!out_props) return OA_ERR_INVALID_ARGUMENT;
  return HAS_SLOT(dev, get_properties) ? dev->vtable->get_properties(dev, out_props) : OA_ERR_UNSUPPORTED;
}

oa_status_t oa_device_query_i64(oa_device_t *dev, const char *category, const char *key, int64_t *out_value) {
  if (!category || !key || !out_value) return OA_ERR_INVALID_ARGUMENT;
  return HAS_SLOT(dev, query_i64) ? dev->vtable->query_i64(dev, category, key, out_value) : OA_ERR_UNSUPPORTED;
}

oa_status_t oa_device_supports_op(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask) {
  if (!op || !out_dtype_mask) return OA_ERR_INVALID_ARGUMENT;
  *out_dtype_mask = 0;
  return HAS_SLOT(dev, supports_op) ? dev->vtable->supports_op(dev, op, out_dtype_mask) : OA_ERR_UNSUPPORTED;
}

oa_status_t oa_device_prepare_op(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                 oa_diag_t *diag) {
  if (!HAS_SLOT(dev, prepare_op))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "device cannot prepare ops (prepare_op slot is empty)");
  return dev->vtable->prepare_op(dev, call, out_plan, diag);
}

oa_status_t oa_device_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                 const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag) {
  if (!HAS_SLOT(dev, execute_op))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "device cannot execute ops (execute_op slot is empty)");
  return dev->vtable->execute_op(dev, stream, call, plan, scratch, diag);
}

oa_status_t oa_device_synchronize(oa_device_t *dev) {
  return HAS_SLOT(dev, synchronize) ? dev->vtable->synchronize(dev) : OA_ERR_UNSUPPORTED;
}
