/* The device ABI: what a device implements. The one header a device plugin includes.
 *
 * A device is an object whose first member is `oa_device_t { const oa_device_vtable_t *vtable; }`,
 * a versioned table of function pointers; a device library exports one factory that creates its
 * devices. Names follow PyTorch's device-agnostic API (torch.accelerator, torch.Stream,
 * torch.Event, the allocator's memory stats); the structure follows IREE's HAL and ggml-backend.
 * New slots are only ever appended to oa_device_vtable_t; a slot a device leaves NULL (or one past
 * the struct_size it was built with) is reported as OA_ERR_UNSUPPORTED by the runtime and never
 * called. docs/device-interface.md gives the semantics of every slot and the conformance suite
 * (oa_conformance) checks them.
 *
 * A plugin does not link libopenaccel: it is loaded into applications that may link the runtime
 * statically, or not export it. Everything it needs is in this header (and the ones it includes)
 * as a type, a macro or a static inline function: the vtable, the factory, the allocator type,
 * the op call and plan, tensors, statuses and diagnostics, and the helpers at the end
 * (OA_DEVICE_EXPORT, oa_abi_diag_fail). The functions those headers also declare (oa_diag_fail,
 * oa_format, oa_status_name, oa_dtype_size, oa_platform_allocator, ...) belong to libopenaccel: a
 * plugin must not call them. The application's side of the interface, the checked oa_device_* /
 * oa_stream_* / oa_event_* calls, is openaccel/device.h; the registry is openaccel/registry.h.
 */
#ifndef OPENACCEL_DEVICE_ABI_H
#define OPENACCEL_DEVICE_ABI_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h> /* vsnprintf, for oa_abi_diag_fail */

#include "openaccel/allocator.h"
#include "openaccel/op.h"
#include "openaccel/status.h"
#include "openaccel/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version history (a runtime accepts devices of every version up to its own; a device of a newer
 * version than the runtime is refused at registration, so it never reads what the runtime lacks):
 *   1  the vtable below, oa_tensor_t up to `name`
 *   2  oa_tensor_t.quant: the quantization parameters of int8 / uint8 tensors (openaccel/types.h) */
#define OA_DEVICE_ABI_VERSION 2

typedef struct oa_device oa_device_t;
typedef struct oa_stream oa_stream_t; /* device-defined; NULL means the device's default stream */
typedef struct oa_event oa_event_t;   /* device-defined */

typedef enum oa_device_kind {
  OA_DEVICE_KIND_CPU = 0,
  OA_DEVICE_KIND_ACCELERATOR = 1
} oa_device_kind_t;

enum {
  OA_DEVICE_FLAG_ASYNC = 1u << 0,          /* streams run asynchronously to the host */
  OA_DEVICE_FLAG_EVENTS = 1u << 1,         /* events are supported */
  OA_DEVICE_FLAG_TIMING = 1u << 2,         /* events can measure elapsed time */
  OA_DEVICE_FLAG_HOST_VISIBLE = 1u << 3    /* device memory is host-addressable */
};

typedef struct oa_device_properties {
  char name[64];          /* e.g. "cpu (x86_64, avx2+fma)" */
  char vendor[64];
  char kind_name[32];     /* the slot kind the exporter places ops on: "cpu", "vendor.sim" */
  oa_device_kind_t kind;
  uint64_t memory_total;  /* bytes; 0 = unknown */
  uint64_t memory_free;
  uint32_t alignment;     /* minimum alignment of allocations, bytes */
  uint32_t flags;         /* OA_DEVICE_FLAG_* */
} oa_device_properties_t;

/* As torch.accelerator.memory_stats(): bytes and counts of the device allocator. */
typedef struct oa_memory_stats {
  int64_t allocated_bytes;      /* current */
  int64_t peak_allocated_bytes; /* since creation or the last reset_peak */
  int64_t allocation_count;     /* successful allocations, cumulative */
  int64_t free_count;           /* frees, cumulative */
} oa_memory_stats_t;

typedef enum oa_copy_kind {
  OA_COPY_HOST_TO_DEVICE = 0,
  OA_COPY_DEVICE_TO_HOST = 1,
  OA_COPY_DEVICE_TO_DEVICE = 2
} oa_copy_kind_t;

enum { OA_EVENT_TIMING = 1u << 0 };

#define OA_TIMEOUT_INFINITE UINT64_MAX

typedef struct oa_device_vtable {
  uint32_t abi_version;   /* OA_DEVICE_ABI_VERSION the device was built against */
  uint32_t struct_size;   /* sizeof(oa_device_vtable_t) it was built with: slots past it are NULL */

  void (*destroy)(oa_device_t *dev);

  /* capability queries */
  oa_status_t (*get_properties)(oa_device_t *dev, oa_device_properties_t *out_props);
  oa_status_t (*query_i64)(oa_device_t *dev, const char *category, const char *key,
                           int64_t *out_value);
  oa_status_t (*supports_op)(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask);

  /* memory */
  oa_status_t (*allocate)(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr);
  oa_status_t (*free)(oa_device_t *dev, void *ptr);
  oa_status_t (*wrap_memory)(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr);
  oa_status_t (*unwrap_memory)(oa_device_t *dev, void *ptr);
  oa_status_t (*copy)(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src,
                      size_t size, oa_copy_kind_t kind);
  oa_status_t (*memory_stats)(oa_device_t *dev, oa_memory_stats_t *out_stats);
  oa_status_t (*reset_peak_memory_stats)(oa_device_t *dev);

  /* streams (in order) */
  oa_status_t (*stream_create)(oa_device_t *dev, int32_t priority, oa_stream_t **out_stream);
  oa_status_t (*stream_destroy)(oa_device_t *dev, oa_stream_t *stream);
  oa_status_t (*stream_query)(oa_device_t *dev, oa_stream_t *stream); /* OK or NOT_READY */
  oa_status_t (*stream_synchronize)(oa_device_t *dev, oa_stream_t *stream);
  oa_status_t (*stream_wait_event)(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event);

  /* events */
  oa_status_t (*event_create)(oa_device_t *dev, uint32_t flags, oa_event_t **out_event);
  oa_status_t (*event_destroy)(oa_device_t *dev, oa_event_t *event);
  oa_status_t (*event_record)(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream);
  oa_status_t (*event_query)(oa_device_t *dev, oa_event_t *event); /* OK, NOT_READY or sticky error */
  oa_status_t (*event_synchronize)(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns);
  oa_status_t (*event_elapsed_ms)(oa_device_t *dev, oa_event_t *start, oa_event_t *end,
                                  float *out_ms);

  oa_status_t (*synchronize)(oa_device_t *dev);

  /* execution */
  oa_status_t (*prepare_op)(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                            oa_diag_t *diag);
  oa_status_t (*execute_op)(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                            const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag);
} oa_device_vtable_t;

/* The common head of every device object; a device embeds it first. */
struct oa_device {
  const oa_device_vtable_t *vtable;
};

/* ---- factories (torch.accelerator: device_count) ---------------------------------------------- */

/* A device factory: the built-in CPU has one (oa_cpu_device_factory), and a vendor library
 * exports one through `const oa_device_factory_t *oa_device_factory(void)` (the symbol named
 * OA_DEVICE_FACTORY_SYMBOL, looked up with dlsym). An application registers it in an
 * oa_registry_t (openaccel/registry.h), which creates the devices. */
typedef struct oa_device_factory {
  uint32_t abi_version;      /* OA_DEVICE_ABI_VERSION */
  const char *kind_name;     /* the device slot kind it serves: "cpu", "vendor.sim" */
  void *ctx;                 /* factory-private */
  /* devices this factory can create on this system; must never fail (0 when none) */
  uint32_t (*device_count)(const struct oa_device_factory *factory);
  /* create device `index` using `allocator` for its own state (init time, never on execute) */
  oa_status_t (*create)(const struct oa_device_factory *factory, uint32_t index, const oa_allocator_t *allocator,
                        oa_device_t **out_device);
} oa_device_factory_t;

/* The entry point a device library exports, and its type. */
#define OA_DEVICE_FACTORY_SYMBOL "oa_device_factory"
typedef const oa_device_factory_t *(*oa_device_factory_fn)(void);

/* ---- helpers for plugins (header-only: nothing to link) --------------------------------------- */

/* Marks the one symbol a device library exports (build it with hidden visibility otherwise):
 *   OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void) { return &my_factory; } */
#if defined(__GNUC__)
#define OA_DEVICE_EXPORT __attribute__((visibility("default")))
#else
#define OA_DEVICE_EXPORT
#endif

#if defined(__GNUC__)
#define OA_ABI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define OA_ABI_PRINTF(fmt, args)
#endif

/* oa_diag_fail for plugins: record `status` and a printf-style message in `diag` (NULL: keep
 * nothing), replacing any earlier message; returns `status`, so a slot can
 * `return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "op '%s' ...", call->op);`. */
static inline OA_ABI_PRINTF(3, 4) oa_status_t oa_abi_diag_fail(oa_diag_t *diag, oa_status_t status,
                                                              const char *fmt, ...) {
  if (diag) {
    va_list ap;
    va_start(ap, fmt);
    diag->status = status;
    vsnprintf(diag->message, sizeof diag->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_DEVICE_ABI_H */
