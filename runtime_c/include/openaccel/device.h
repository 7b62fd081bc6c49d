/* The standard device interface, application side: the checked calls an application (and the
 * executor) makes on any device, the built-in CPU or a vendor accelerator.
 *
 * Each call forwards to the device's vtable (openaccel/device_abi.h, where the handles,
 * properties, stats and flags are defined: they are the contract both sides share). A slot the
 * device leaves NULL, or one past the vtable size it was built with, makes the call return
 * OA_ERR_UNSUPPORTED instead of crashing. Names follow PyTorch's device-agnostic API
 * (torch.accelerator, torch.Stream, torch.Event, the allocator's memory stats); see
 * docs/device-interface.md for the mapping and the semantics of each call.
 *
 * This header also includes openaccel/allocator.h and openaccel/registry.h, so code written
 * against the single device.h of earlier releases keeps compiling. A device plugin includes
 * openaccel/device_abi.h instead: these calls are functions of libopenaccel.
 */
#ifndef OPENACCEL_DEVICE_H
#define OPENACCEL_DEVICE_H

#include "openaccel/allocator.h"
#include "openaccel/device_abi.h"
#include "openaccel/op.h"
#include "openaccel/registry.h"
#include "openaccel/status.h"
#include "openaccel/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- capabilities ------------------------------------------------------------------------------ */

/* Name, vendor, kind, memory total/free, minimum alignment and OA_DEVICE_FLAG_* of the device. */
oa_status_t oa_device_get_properties(oa_device_t *dev, oa_device_properties_t *out_props);

/* An open-ended integer capability ("cpu", "avx2"; "device", "alignment"): OA_ERR_NOT_FOUND for
 * an unknown category or key; answers never change while the device lives. */
oa_status_t oa_device_query_i64(oa_device_t *dev, const char *category, const char *key,
                                int64_t *out_value);

/* The dtypes (OA_DTYPE_BIT mask) the device computes `op` in, or OA_ERR_NOT_FOUND and 0. */
oa_status_t oa_device_supports_op(oa_device_t *dev, const char *op, uint64_t *out_dtype_mask);

/* ---- execution ----------------------------------------------------------------------------------- */

/* Validate one instruction (tensor data may be NULL) and fill `out_plan`: kernel, scratch bytes,
 * precomputed parameters. Refusals say why in `diag`. */
oa_status_t oa_device_prepare_op(oa_device_t *dev, const oa_op_call_t *call,
                                 oa_op_plan_t *out_plan, oa_diag_t *diag);

/* Issue a prepared instruction on `stream` (NULL: the default stream) with `plan->scratch_bytes`
 * of `scratch`. A failure sticks to the stream. */
oa_status_t oa_device_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                 const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag);

/* torch.accelerator.synchronize(): wait for every stream of the device; the first sticky failure. */
oa_status_t oa_device_synchronize(oa_device_t *dev);

/* Release everything the device created (and the device itself, if a factory created it). */
void oa_device_destroy(oa_device_t *dev);

/* ---- memory ---------------------------------------------------------------------------------------- */

/* `size` bytes aligned to max(alignment, properties.alignment); `alignment` a power of two or 0.
 * OA_ERR_OUT_OF_MEMORY (stats unchanged) when the device cannot satisfy the request. */
oa_status_t oa_device_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr);

/* Free an allocation of this device; NULL is OK. */
oa_status_t oa_device_free(oa_device_t *dev, void *ptr);

/* A device view of `size` host bytes, which stay valid and unchanged until oa_device_unwrap_memory
 * (zero copy where the device can address host memory, an upload otherwise). */
oa_status_t oa_device_wrap_memory(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr);
oa_status_t oa_device_unwrap_memory(oa_device_t *dev, void *ptr);

/* Queue a copy of `size` bytes on `stream`; host buffers stay valid until the stream passed it. */
oa_status_t oa_device_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                           oa_copy_kind_t kind);

/* torch.accelerator.memory_stats() / reset_peak_memory_stats() (peak := current, counts kept). */
oa_status_t oa_device_memory_stats(oa_device_t *dev, oa_memory_stats_t *out_stats);
oa_status_t oa_device_reset_peak_memory_stats(oa_device_t *dev);

/* ---- streams (torch.Stream): in-order queues; NULL is the device's default stream --------------- */

/* A new stream (`priority` 0 or negative = higher, as torch; a device may ignore it). */
oa_status_t oa_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out_stream);
oa_status_t oa_stream_destroy(oa_device_t *dev, oa_stream_t *stream);

/* OA_ERR_NOT_READY while work is queued; once idle, OK or the stream's sticky failure. */
oa_status_t oa_stream_query(oa_device_t *dev, oa_stream_t *stream);

/* Wait until the stream drained; its sticky failure, if any. */
oa_status_t oa_stream_synchronize(oa_device_t *dev, oa_stream_t *stream);

/* Work issued to `stream` afterwards starts after `event`'s latest record; the host does not block. */
oa_status_t oa_stream_wait_event(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event);

/* ---- events (torch.Event) ------------------------------------------------------------------------ */

/* A new event; `flags` OA_EVENT_TIMING enables oa_event_elapsed_ms. */
oa_status_t oa_event_create(oa_device_t *dev, uint32_t flags, oa_event_t **out_event);
oa_status_t oa_event_destroy(oa_device_t *dev, oa_event_t *event);

/* Capture the work issued to `stream` so far; re-recording moves the event. */
oa_status_t oa_event_record(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream);

/* OK (complete, or never recorded), OA_ERR_NOT_READY, or the failure the event carries. */
oa_status_t oa_event_query(oa_device_t *dev, oa_event_t *event);

/* Host wait up to `timeout_ns` (OA_TIMEOUT_INFINITE: forever, 0: poll): OA_ERR_TIMEOUT when the
 * time ran out, else the event's status. */
oa_status_t oa_event_synchronize(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns);

/* Milliseconds between two recorded, complete OA_EVENT_TIMING events. */
oa_status_t oa_event_elapsed_ms(oa_device_t *dev, oa_event_t *start, oa_event_t *end, float *out_ms);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_DEVICE_H */
