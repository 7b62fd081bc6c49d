/* The standard device interface.
 *
 * A device is a versioned table of function pointers. Names follow PyTorch's device-agnostic API
 * (torch.accelerator, torch.Stream, torch.Event, the allocator's memory stats); the structure
 * follows IREE's HAL and ggml-backend. New slots are only ever appended to oa_device_vtable_t;
 * a slot a device leaves NULL is reported as OA_ERR_UNSUPPORTED by the oa_device_* wrappers.
 * See docs/device-interface.md for the mapping to torch.accelerator.
 */
#ifndef OPENACCEL_DEVICE_H
#define OPENACCEL_DEVICE_H

#include "openaccel/op.h"
#include "openaccel/status.h"
#include "openaccel/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OA_DEVICE_ABI_VERSION 1

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

/* ---- allocators: passed in explicitly (IREE style), never a hidden global ------------------ */
typedef struct oa_allocator {
  void *ctx;
  void *(*alloc)(void *ctx, size_t size, size_t alignment); /* NULL on failure */
  void (*free)(void *ctx, void *ptr);
} oa_allocator_t;

/* The platform layer's allocator (oa_platform_alloc / oa_platform_free). */
oa_allocator_t oa_platform_allocator(void);

/* ---- factories and the registry (torch.accelerator: device_count, current_device_index) ----- */

/* A device factory: the built-in CPU has one (oa_cpu_device_factory), and a vendor library
 * exports one through `const oa_device_factory_t *oa_device_factory(void)`. */
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

#define OA_REGISTRY_MAX_FACTORIES 8
#define OA_REGISTRY_MAX_DEVICES 16

/* A registry the application creates (no singleton, no static constructors). */
typedef struct oa_registry {
  oa_allocator_t allocator;
  const oa_device_factory_t *factories[OA_REGISTRY_MAX_FACTORIES];
  uint32_t n_factories;
  oa_device_t *devices[OA_REGISTRY_MAX_DEVICES];
  uint32_t n_devices;
  int32_t current;          /* current device index (torch.accelerator.current_device_index) */
  int32_t enumerated;
} oa_registry_t;

/* Initialise an empty registry that creates devices with `allocator` (NULL: the platform's). */
void oa_registry_init(oa_registry_t *registry, const oa_allocator_t *allocator);

/* Add a factory; its devices are created by the next oa_registry_enumerate. */
oa_status_t oa_registry_register(oa_registry_t *registry, const oa_device_factory_t *factory);

/* Create (once) every device of every registered factory, in registration order, and copy up to
 * `capacity` device pointers into the caller-owned `out_devices`; `out_count` gets how many
 * devices exist (which may exceed capacity). */
oa_status_t oa_registry_enumerate(oa_registry_t *registry, oa_device_t **out_devices, uint32_t capacity,
                                  uint32_t *out_count, oa_diag_t *diag);

/* torch.accelerator.device_count(): never fails, 0 before enumeration or on any error. */
uint32_t oa_device_count(const oa_registry_t *registry);

/* Device `index`, or NULL when out of range. */
oa_device_t *oa_registry_device(const oa_registry_t *registry, uint32_t index);

/* torch.accelerator.current_device_index() / set_device_index(): a negative index is a no-op. */
int32_t oa_registry_current_device(const oa_registry_t *registry);
oa_status_t oa_registry_set_current_device(oa_registry_t *registry, int32_t index);

/* Destroy every device the registry created. */
void oa_registry_release(oa_registry_t *registry);

/* Checked wrappers: NULL slots (or slots past the device's struct_size) give OA_ERR_UNSUPPORTED. */
oa_status_t oa_device_get_properties(oa_device_t *dev, oa_device_properties_t *out_props);
oa_status_t oa_device_query_i64(oa_device_t *dev, const char *category, const char *key,
                                int64_t *out_value);
oa_status_t oa_device_supports_op(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask);
oa_status_t oa_device_prepare_op(oa_device_t *dev, const oa_op_call_t *call,
                                 oa_op_plan_t *out_plan, oa_diag_t *diag);
oa_status_t oa_device_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                 const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag);
oa_status_t oa_device_synchronize(oa_device_t *dev);
void oa_device_destroy(oa_device_t *dev);
oa_status_t oa_device_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr);
oa_status_t oa_device_free(oa_device_t *dev, void *ptr);
oa_status_t oa_device_wrap_memory(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr);
oa_status_t oa_device_unwrap_memory(oa_device_t *dev, void *ptr);
oa_status_t oa_device_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                           oa_copy_kind_t kind);
oa_status_t oa_device_memory_stats(oa_device_t *dev, oa_memory_stats_t *out_stats);
oa_status_t oa_device_reset_peak_memory_stats(oa_device_t *dev);
oa_status_t oa_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out_stream);
oa_status_t oa_stream_destroy(oa_device_t *dev, oa_stream_t *stream);
oa_status_t oa_stream_query(oa_device_t *dev, oa_stream_t *stream);
oa_status_t oa_stream_synchronize(oa_device_t *dev, oa_stream_t *stream);
oa_status_t oa_stream_wait_event(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event);
oa_status_t oa_event_create(oa_device_t *dev, uint32_t flags, oa_event_t **out_event);
oa_status_t oa_event_destroy(oa_device_t *dev, oa_event_t *event);
oa_status_t oa_event_record(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream);
oa_status_t oa_event_query(oa_device_t *dev, oa_event_t *event);
oa_status_t oa_event_synchronize(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns);
oa_status_t oa_event_elapsed_ms(oa_device_t *dev, oa_event_t *start, oa_event_t *end, float *out_ms);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_DEVICE_H */
