/* vendor.skeleton: the smallest honest device, the file a vendor starts from.
 *
 * It builds as a device library (libopenaccel_vendor_skeleton.so), loads, and answers every call
 * the way a device that cannot do anything yet must: it claims no op, no capability key and no
 * flag; allocate, wrap_memory, stream_create and prepare_op are OA_ERR_UNSUPPORTED; what is
 * trivially true for a device that holds nothing is OK (free(NULL), a zero-byte copy, stats of
 * zero, synchronize). The event slots stay NULL, which the runtime reports as unsupported: the
 * conformance suite requires OA_DEVICE_FLAG_EVENTS to come with them, so fill them in together
 * with the flag.
 *
 * How to use it
 * 1. Copy this file, rename SKEL_KIND_NAME ("npu.acme": the kind files place ops on) and the
 *    library in CMakeLists.txt.
 * 2. Run the conformance suite: `oa_conformance --device libyours.so` (or `openaccel conformance
 *    --device libyours.so`). properties and queries pass; every FAIL row names the slot that
 *    answered UNSUPPORTED; fill that slot in (`VENDOR:` marks each one) and run it again, until
 *    nothing fails. sim_device.c, next to this file, implements every slot of a simulated
 *    accelerator (its own memory, asynchronous streams, events, four ops) to compare with.
 * 3. Claim an op in supports_op only once prepare_op / execute_op run it: the suite then compares
 *    it with the reference CPU kernels (op.<name>.<dtype> rows).
 *
 * It includes one header, openaccel/device_abi.h, and links nothing of openaccel; the library
 * exports one symbol, oa_device_factory. */
#include <string.h>

#include "openaccel/device_abi.h"

#define SKEL_KIND_NAME "vendor.skeleton" /* VENDOR: the device kind the exporter places ops on */
#define SKEL_ALIGN 64u                    /* VENDOR: the hardware's minimum buffer alignment */

typedef struct skel_device {
  oa_device_t base;          /* first: the runtime sees an oa_device_t */
  oa_allocator_t allocator;  /* the factory's, for this object (and any other state of yours) */
  uint32_t index;
  oa_status_t failure;       /* the default stream's sticky failure */
  /* VENDOR: driver handles, memory pools, queues ... */
} skel_device_t;

static skel_device_t *skel_of(oa_device_t *dev) { return (skel_device_t *)dev; }

static void skel_destroy(oa_device_t *dev) {
  skel_device_t *d = skel_of(dev);
  oa_allocator_t a = d->allocator;
  /* VENDOR: wait for the hardware, release its memory and close the driver. */
  a.free(a.ctx, d);
}

/* ---- capability queries -------------------------------------------------------------------------- */

static oa_status_t skel_get_properties(oa_device_t *dev, oa_device_properties_t *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "skeleton accelerator #%u", (unsigned)skel_of(dev)->index);
  snprintf(out->vendor, sizeof out->vendor, "your company"); /* VENDOR */
  snprintf(out->kind_name, sizeof out->kind_name, "%s", SKEL_KIND_NAME);
  out->kind = OA_DEVICE_KIND_ACCELERATOR;
  out->memory_total = 0; /* VENDOR: bytes of device memory (0 = unknown) */
  out->memory_free = 0;
  out->alignment = SKEL_ALIGN;
  out->flags = 0; /* VENDOR: ASYNC, EVENTS, TIMING, HOST_VISIBLE: only what you implement */
  return OA_OK;
}

static oa_status_t skel_query_i64(oa_device_t *dev, const char *category, const char *key, int64_t *out_value) {
  (void)dev; (void)category; (void)key; (void)out_value;
  return OA_ERR_NOT_FOUND; /* VENDOR: "category.key" integers, stable while the device lives */
}

static oa_status_t skel_supports_op(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask) {
  (void)dev; (void)op;
  /* VENDOR: OA_DTYPE_BIT(...) of each dtype you run `op` in (its first input's), and OA_OK: e.g.
   * "conv2d" -> OA_DTYPE_BIT(OA_DTYPE_FLOAT32); an int8 engine: "conv2d_q8" / "linear_q8" ->
   * OA_DTYPE_BIT(OA_DTYPE_INT8), once it gives the reference kernels' bytes (the requantization
   * rule of docs/quantization.md; sim_device.c restates it; op.conv2d_q8.int8 checks it bit for bit) */
  *out_dtype_mask = 0;
  return OA_ERR_NOT_FOUND;
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static oa_status_t skel_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr) {
  (void)dev; (void)size; (void)alignment; (void)out_ptr;
  return OA_ERR_UNSUPPORTED; /* VENDOR: the driver's allocator; keep the stats below exact */
}

static oa_status_t skel_free(oa_device_t *dev, void *ptr) {
  (void)dev;
  return ptr ? OA_ERR_INVALID_ARGUMENT : OA_OK; /* nothing was ever handed out */
}

static oa_status_t skel_wrap(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr) {
  (void)dev; (void)host_ptr; (void)size; (void)out_ptr;
  return OA_ERR_UNSUPPORTED; /* VENDOR: map host memory, or upload it into an allocation */
}

static oa_status_t skel_unwrap(oa_device_t *dev, void *ptr) {
  (void)dev;
  return ptr ? OA_ERR_INVALID_ARGUMENT : OA_OK;
}

static oa_status_t skel_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                             oa_copy_kind_t kind) {
  (void)dev; (void)stream; (void)dst; (void)src; (void)kind;
  return size ? OA_ERR_UNSUPPORTED : OA_OK; /* VENDOR: queue a DMA on the stream */
}

static oa_status_t skel_memory_stats(oa_device_t *dev, oa_memory_stats_t *out_stats) {
  (void)dev;
  memset(out_stats, 0, sizeof *out_stats); /* VENDOR: current, peak, allocation and free counts */
  return OA_OK;
}

static oa_status_t skel_reset_peak(oa_device_t *dev) {
  (void)dev;
  return OA_OK;
}

/* ---- streams: only the default stream (NULL) exists, and nothing ever runs on it --------------------- */

static oa_status_t skel_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out_stream) {
  (void)dev; (void)priority; (void)out_stream;
  return OA_ERR_UNSUPPORTED; /* VENDOR: a hardware queue (in order) */
}

static oa_status_t skel_stream_destroy(oa_device_t *dev, oa_stream_t *stream) {
  (void)dev;
  return stream ? OA_ERR_INVALID_ARGUMENT : OA_OK; /* the default stream is not destroyed */
}

static oa_status_t skel_stream_query(oa_device_t *dev, oa_stream_t *stream) {
  return stream ? OA_ERR_INVALID_ARGUMENT : skel_of(dev)->failure;
}

static oa_status_t skel_stream_synchronize(oa_device_t *dev, oa_stream_t *stream) {
  return stream ? OA_ERR_INVALID_ARGUMENT : skel_of(dev)->failure;
}

static oa_status_t skel_synchronize(oa_device_t *dev) { return skel_of(dev)->failure; }

/* ---- execution ---------------------------------------------------------------------------------------- */

static oa_status_t skel_prepare_op(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                   oa_diag_t *diag) {
  (void)dev; (void)out_plan;
  /* VENDOR: check everything execute_op will rely on (files are untrusted), then fill out_plan.
   * int8 ops take their requantization (zero points, clamp bounds, multiplier / shift constants)
   * from the call's arguments and inputs (docs/ops.md); the tensors' scales and zero points are in
   * call->inputs[i]->quant (oa_quant_params_t, device ABI 2; scale NULL when absent) for hardware
   * that takes real scales. */
  return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s has no kernel for op '%s' yet", SKEL_KIND_NAME,
                          call && call->op ? call->op : "?");
}

static oa_status_t skel_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                   const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag) {
  skel_device_t *d = skel_of(dev);
  (void)plan; (void)scratch;
  /* VENDOR: queue the prepared kernel on the stream. Nothing was prepared: a failure that sticks. */
  oa_status_t st = oa_abi_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "op '%s' was not prepared by this %s device",
                                    call && call->op ? call->op : "?", SKEL_KIND_NAME);
  if (!stream && !d->failure) d->failure = st;
  return st;
}

static const oa_device_vtable_t skel_vtable = {
    .abi_version = OA_DEVICE_ABI_VERSION,
    .struct_size = sizeof(oa_device_vtable_t),
    .destroy = skel_destroy,
    .get_properties = skel_get_properties,
    .query_i64 = skel_query_i64,
    .supports_op = skel_supports_op,
    .allocate = skel_allocate,
    .free = skel_free,
    .wrap_memory = skel_wrap,
    .unwrap_memory = skel_unwrap,
    .copy = skel_copy,
    .memory_stats = skel_memory_stats,
    .reset_peak_memory_stats = skel_reset_peak,
    .stream_create = skel_stream_create,
    .stream_destroy = skel_stream_destroy,
    .stream_query = skel_stream_query,
    .stream_synchronize = skel_stream_synchronize,
    /* VENDOR: with OA_DEVICE_FLAG_EVENTS: stream_wait_event, event_create, event_destroy,
     * event_record, event_query, event_synchronize; with OA_DEVICE_FLAG_TIMING: event_elapsed_ms */
    .synchronize = skel_synchronize,
    .prepare_op = skel_prepare_op,
    .execute_op = skel_execute_op,
};

/* ---- discovery ------------------------------------------------------------------------------------------ */

static uint32_t skel_factory_count(const oa_device_factory_t *factory) {
  (void)factory;
  return 1; /* VENDOR: ask the driver how many devices there are; never fail (0 when none) */
}

static oa_status_t skel_factory_create(const oa_device_factory_t *factory, uint32_t index,
                                       const oa_allocator_t *allocator, oa_device_t **out_device) {
  if (!allocator || !out_device || index >= skel_factory_count(factory)) return OA_ERR_INVALID_ARGUMENT;
  skel_device_t *d = (skel_device_t *)allocator->alloc(allocator->ctx, sizeof *d, 16);
  if (!d) return OA_ERR_OUT_OF_MEMORY;
  memset(d, 0, sizeof *d);
  d->base.vtable = &skel_vtable;
  d->allocator = *allocator;
  d->index = index;
  /* VENDOR: open device `index` */
  *out_device = &d->base;
  return OA_OK;
}

static const oa_device_factory_t skel_factory = {OA_DEVICE_ABI_VERSION, SKEL_KIND_NAME, NULL, skel_factory_count,
                                                 skel_factory_create};

/* The one exported symbol: loaders dlsym("oa_device_factory") and register what it returns. */
OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void);
OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void) { return &skel_factory; }
