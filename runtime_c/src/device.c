/* Checked wrappers over a device's vtable: a NULL slot, or a slot past the size of the table
 * the device was built with, is OA_ERR_UNSUPPORTED rather than a crash. */
#include <stddef.h>

#include "openaccel/device.h"
#include "openaccel/platform.h"

#define HAS_SLOT(dev, slot)                                                                          \
  ((dev) && (dev)->vtable && (dev)->vtable->abi_version >= 1 &&                                      \
   (dev)->vtable->struct_size >= offsetof(oa_device_vtable_t, slot) + sizeof((dev)->vtable->slot) && \
   (dev)->vtable->slot)

#define CALL(dev, slot, ...) (HAS_SLOT(dev, slot) ? (dev)->vtable->slot(__VA_ARGS__) : OA_ERR_UNSUPPORTED)

oa_status_t oa_device_get_properties(oa_device_t *dev, oa_device_properties_t *out_props) {
  if (!out_props) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, get_properties, dev, out_props);
}

oa_status_t oa_device_query_i64(oa_device_t *dev, const char *category, const char *key, int64_t *out_value) {
  if (!category || !key || !out_value) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, query_i64, dev, category, key, out_value);
}

oa_status_t oa_device_supports_op(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask) {
  if (!op || !out_dtype_mask) return OA_ERR_INVALID_ARGUMENT;
  *out_dtype_mask = 0;
  return CALL(dev, supports_op, dev, op, out_dtype_mask);
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

oa_status_t oa_device_synchronize(oa_device_t *dev) { return CALL(dev, synchronize, dev); }

void oa_device_destroy(oa_device_t *dev) {
  if (HAS_SLOT(dev, destroy)) dev->vtable->destroy(dev);
}

oa_status_t oa_device_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr) {
  if (!out_ptr) return OA_ERR_INVALID_ARGUMENT;
  *out_ptr = NULL;
  return CALL(dev, allocate, dev, size, alignment, out_ptr);
}

oa_status_t oa_device_free(oa_device_t *dev, void *ptr) { return CALL(dev, free, dev, ptr); }

oa_status_t oa_device_wrap_memory(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr) {
  if (!out_ptr) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, wrap_memory, dev, host_ptr, size, out_ptr);
}

oa_status_t oa_device_unwrap_memory(oa_device_t *dev, void *ptr) { return CALL(dev, unwrap_memory, dev, ptr); }

oa_status_t oa_device_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                           oa_copy_kind_t kind) {
  return CALL(dev, copy, dev, stream, dst, src, size, kind);
}

oa_status_t oa_device_memory_stats(oa_device_t *dev, oa_memory_stats_t *out_stats) {
  if (!out_stats) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, memory_stats, dev, out_stats);
}

oa_status_t oa_device_reset_peak_memory_stats(oa_device_t *dev) { return CALL(dev, reset_peak_memory_stats, dev); }

oa_status_t oa_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out_stream) {
  if (!out_stream) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, stream_create, dev, priority, out_stream);
}

oa_status_t oa_stream_destroy(oa_device_t *dev, oa_stream_t *stream) { return CALL(dev, stream_destroy, dev, stream); }
oa_status_t oa_stream_query(oa_device_t *dev, oa_stream_t *stream) { return CALL(dev, stream_query, dev, stream); }
oa_status_t oa_stream_synchronize(oa_device_t *dev, oa_stream_t *stream) {
  return CALL(dev, stream_synchronize, dev, stream);
}
oa_status_t oa_stream_wait_event(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event) {
  return CALL(dev, stream_wait_event, dev, stream, event);
}

oa_status_t oa_event_create(oa_device_t *dev, uint32_t flags, oa_event_t **out_event) {
  if (!out_event) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, event_create, dev, flags, out_event);
}
oa_status_t oa_event_destroy(oa_device_t *dev, oa_event_t *event) { return CALL(dev, event_destroy, dev, event); }
oa_status_t oa_event_record(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream) {
  return CALL(dev, event_record, dev, event, stream);
}
oa_status_t oa_event_query(oa_device_t *dev, oa_event_t *event) { return CALL(dev, event_query, dev, event); }
oa_status_t oa_event_synchronize(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns) {
  return CALL(dev, event_synchronize, dev, event, timeout_ns);
}
oa_status_t oa_event_elapsed_ms(oa_device_t *dev, oa_event_t *start, oa_event_t *end, float *out_ms) {
  if (!out_ms) return OA_ERR_INVALID_ARGUMENT;
  return CALL(dev, event_elapsed_ms, dev, start, end, out_ms);
}

/* ---- allocators ---------------------------------------------------------------------------- */

static void *platform_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  return oa_platform_alloc(size, alignment);
}

static void platform_free(void *ctx, void *ptr) {
  (void)ctx;
  oa_platform_free(ptr);
}

oa_allocator_t oa_platform_allocator(void) {
  oa_allocator_t a = {NULL, platform_alloc, platform_free};
  return a;
}

/* ---- registry ------------------------------------------------------------------------------ */

void oa_registry_init(oa_registry_t *registry, const oa_allocator_t *allocator) {
  if (!registry) return;
  *registry = (oa_registry_t){0};
  registry->allocator = allocator ? *allocator : oa_platform_allocator();
}

oa_status_t oa_registry_register(oa_registry_t *registry, const oa_device_factory_t *factory) {
  if (!registry || !factory || !factory->create || !factory->device_count || !factory->kind_name)
    return OA_ERR_INVALID_ARGUMENT;
  if (factory->abi_version == 0 || factory->abi_version > OA_DEVICE_ABI_VERSION) return OA_ERR_UNSUPPORTED_VERSION;
  if (registry->n_factories >= OA_REGISTRY_MAX_FACTORIES) return OA_ERR_OUT_OF_MEMORY;
  registry->factories[registry->n_factories++] = factory;
  registry->enumerated = 0;
  return OA_OK;
}

oa_status_t oa_registry_enumerate(oa_registry_t *registry, oa_device_t **out_devices, uint32_t capacity,
                                  uint32_t *out_count, oa_diag_t *diag) {
  if (!registry || !out_count || (capacity && !out_devices))
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL registry, count or device array");
  if (!registry->enumerated) {
    oa_registry_release(registry);
    for (uint32_t f = 0; f < registry->n_factories; f++) {
      const oa_device_factory_t *fac = registry->factories[f];
      uint32_t n = fac->device_count(fac);
      for (uint32_t i = 0; i < n; i++) {
        if (registry->n_devices >= OA_REGISTRY_MAX_DEVICES)
          return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "more than %d devices", OA_REGISTRY_MAX_DEVICES);
        oa_device_t *dev = NULL;
        oa_status_t st = fac->create(fac, i, &registry->allocator, &dev);
        if (st || !dev)
          return oa_diag_fail(diag, st ? st : OA_ERR_DEVICE, "factory '%s' could not create device %u: %s",
                              fac->kind_name, i, oa_status_name(st));
        registry->devices[registry->n_devices++] = dev;
      }
    }
    registry->enumerated = 1;
  }
  for (uint32_t i = 0; i < capacity && i < registry->n_devices; i++) out_devices[i] = registry->devices[i];
  *out_count = registry->n_devices;
  return OA_OK;
}

uint32_t oa_device_count(const oa_registry_t *registry) { return registry ? registry->n_devices : 0; }

oa_device_t *oa_registry_device(const oa_registry_t *registry, uint32_t index) {
  return registry && index < registry->n_devices ? registry->devices[index] : NULL;
}

int32_t oa_registry_current_device(const oa_registry_t *registry) { return registry ? registry->current : 0; }

oa_status_t oa_registry_set_current_device(oa_registry_t *registry, int32_t index) {
  if (!registry) return OA_ERR_INVALID_ARGUMENT;
  if (index < 0) return OA_OK; /* torch semantics: a negative index is a no-op */
  if ((uint32_t)index >= registry->n_devices) return OA_ERR_NOT_FOUND;
  registry->current = index;
  return OA_OK;
}

void oa_registry_release(oa_registry_t *registry) {
  if (!registry) return;
  for (uint32_t i = registry->n_devices; i > 0; i--) oa_device_destroy(registry->devices[i - 1]);
  registry->n_devices = 0;
  registry->current = 0;
  registry->enumerated = 0;
}
