/* The built-in CPU device: synchronous streams, host memory, the kernel table. */
#include <string.h>

#if defined(__unix__)
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>
#endif

#include "kernels/isa.h"
#include "kernels/kernel.h"
#include "threadpool.h"
#include "openaccel/cpu.h"
#include "openaccel/platform.h"

static oa_cpu_device_t *cpu_of(oa_device_t *dev) { return (oa_cpu_device_t *)dev; }

/* ---- streams and events: the CPU runs work when it is issued, so a stream only remembers a
 * failure (sticky: every event recorded after it carries it) and events only a timestamp. ---- */
struct oa_stream {
  oa_status_t failure;
};

struct oa_event {
  uint32_t flags;
  int32_t recorded;
  uint64_t time_ns;
  oa_status_t status;
};

static oa_status_t cpu_get_properties(oa_device_t *dev, oa_device_properties_t *out) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  memset(out, 0, sizeof *out);
  const oa_cpu_features_t *f = &cpu->features;
  const char *isa = f->avx2 && f->fma ? ", avx2+fma" : (f->neon ? ", neon" : (f->rvv ? ", rvv" : ""));
  oa_format(out->name, sizeof out->name, "cpu (%s%s%s)", oa_cpu_arch_name(f->arch), isa,
            cpu->options.reference_only ? ", reference kernels" : "");
  oa_format(out->vendor, sizeof out->vendor, "openaccel");
  oa_format(out->kind_name, sizeof out->kind_name, "cpu");
  out->kind = OA_DEVICE_KIND_CPU;
  out->alignment = 64;
#if defined(__unix__) && defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) out->memory_total = (uint64_t)pages * (uint64_t)page;
#if defined(_SC_AVPHYS_PAGES)
  long avail = sysconf(_SC_AVPHYS_PAGES);
  if (avail > 0 && page > 0) out->memory_free = (uint64_t)avail * (uint64_t)page;
#endif
#endif
  out->flags = OA_DEVICE_FLAG_HOST_VISIBLE | OA_DEVICE_FLAG_EVENTS | OA_DEVICE_FLAG_TIMING;
  return OA_OK;
}

/* the ISAs the optimized kernels may use: built into this binary, reported by the CPU, not
 * disabled by the options */
static uint32_t cpu_isas(const oa_cpu_device_t *cpu) {
  return oa_isa_built() & oa_isa_detected(&cpu->features) & ~cpu->options.disable_isas;
}

static oa_status_t cpu_query_i64(oa_device_t *dev, const char *category, const char *key, int64_t *out) {
  const oa_cpu_features_t *f = &cpu_of(dev)->features;
  if (!category || !key || !out) return OA_ERR_INVALID_ARGUMENT;
  if (strcmp(category, "cpu") != 0) return OA_ERR_NOT_FOUND;
  static const struct { const char *key; size_t off; } i32_keys[] = {
      {"neon", offsetof(oa_cpu_features_t, neon)},     {"fp16", offsetof(oa_cpu_features_t, fp16)},
      {"dotprod", offsetof(oa_cpu_features_t, dotprod)}, {"sse4_1", offsetof(oa_cpu_features_t, sse4_1)},
      {"avx", offsetof(oa_cpu_features_t, avx)},       {"avx2", offsetof(oa_cpu_features_t, avx2)},
      {"fma", offsetof(oa_cpu_features_t, fma)},       {"f16c", offsetof(oa_cpu_features_t, f16c)},
      {"avx512f", offsetof(oa_cpu_features_t, avx512f)}, {"cores", offsetof(oa_cpu_features_t, cores)},
      {"avx512bw", offsetof(oa_cpu_features_t, avx512bw)}, {"avx512dq", offsetof(oa_cpu_features_t, avx512dq)},
      {"avx512vl", offsetof(oa_cpu_features_t, avx512vl)},
      {"avx512_vnni", offsetof(oa_cpu_features_t, avx512_vnni)},
      {"avx_vnni", offsetof(oa_cpu_features_t, avx_vnni)},   {"amx_tile", offsetof(oa_cpu_features_t, amx_tile)},
      {"amx_int8", offsetof(oa_cpu_features_t, amx_int8)},   {"amx_bf16", offsetof(oa_cpu_features_t, amx_bf16)},
      {"v", offsetof(oa_cpu_features_t, rvv)},               {"vlen", offsetof(oa_cpu_features_t, rvv_vlen)},
      {"i8mm", offsetof(oa_cpu_features_t, i8mm)},
  };
  for (size_t i = 0; i < sizeof i32_keys / sizeof i32_keys[0]; i++) {
    if (strcmp(key, i32_keys[i].key) == 0) {
      int32_t v;
      memcpy(&v, (const char *)f + i32_keys[i].off, sizeof v);
      *out = v;
      return OA_OK;
    }
  }
  if (strcmp(key, "l1d_bytes") == 0) { *out = f->l1d_bytes; return OA_OK; }
  if (strcmp(key, "l2_bytes") == 0) { *out = f->l2_bytes; return OA_OK; }
  if (strcmp(key, "l3_bytes") == 0) { *out = f->l3_bytes; return OA_OK; }
  if (strcmp(key, "arch") == 0) { *out = f->arch; return OA_OK; }
  if (strcmp(key, "threads") == 0) { *out = cpu_of(dev)->options.threads; return OA_OK; }
  if (strcmp(key, "isas") == 0) { *out = cpu_of(dev)->options.reference_only ? 0 : cpu_isas(cpu_of(dev)); return OA_OK; }
  return OA_ERR_NOT_FOUND;
}

static oa_status_t cpu_supports_op(oa_device_t *dev, const char *op, uint64_t *out_mask) {
  (void)dev;
  uint64_t mask = 0;
  for (uint32_t i = 0; i < oa_kernel_table_size; i++)
    if (strcmp(oa_kernel_table[i].op, op) == 0) mask |= oa_kernel_table[i].dtypes;
  *out_mask = mask;
  return mask ? OA_OK : OA_ERR_NOT_FOUND;
}

static oa_status_t cpu_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  if (alignment & (alignment - 1)) return OA_ERR_INVALID_ARGUMENT; /* before raising it: 48 is not honoured by 64 */
  if (alignment < 64) alignment = 64;
  /* a size header in front of the block keeps the stats exact without a table */
  size_t head = alignment;
  if (size > SIZE_MAX - head) return OA_ERR_OUT_OF_MEMORY;
  uint8_t *block = (uint8_t *)cpu->allocator.alloc(cpu->allocator.ctx, size + head, alignment);
  if (!block) return OA_ERR_OUT_OF_MEMORY;
  memcpy(block + head - sizeof(size_t) * 2, &size, sizeof size);
  memcpy(block + head - sizeof(size_t), &head, sizeof head);
  cpu->stats.allocated_bytes += (int64_t)size;
  cpu->stats.allocation_count++;
  if (cpu->stats.allocated_bytes > cpu->stats.peak_allocated_bytes)
    cpu->stats.peak_allocated_bytes = cpu->stats.allocated_bytes;
  *out_ptr = block + head;
  return OA_OK;
}

static oa_status_t cpu_free(oa_device_t *dev, void *ptr) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  if (!ptr) return OA_OK;
  size_t size, head;
  memcpy(&size, (uint8_t *)ptr - sizeof(size_t) * 2, sizeof size);
  memcpy(&head, (uint8_t *)ptr - sizeof(size_t), sizeof head);
  cpu->stats.allocated_bytes -= (int64_t)size;
  cpu->stats.free_count++;
  cpu->allocator.free(cpu->allocator.ctx, (uint8_t *)ptr - head);
  return OA_OK;
}

static oa_status_t cpu_wrap(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr) {
  (void)dev;
  (void)size;
  *out_ptr = host_ptr; /* host memory is the CPU's memory: zero copy */
  return OA_OK;
}

static oa_status_t cpu_unwrap(oa_device_t *dev, void *ptr) {
  (void)dev;
  (void)ptr;
  return OA_OK;
}

static oa_status_t cpu_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                            oa_copy_kind_t kind) {
  (void)dev;
  (void)kind;
  if (stream && stream->failure) return stream->failure; /* a failed stream runs nothing more */
  if (size && (!dst || !src)) {
    if (stream) stream->failure = OA_ERR_INVALID_ARGUMENT;
    return OA_ERR_INVALID_ARGUMENT;
  }
  if (size) memmove(dst, src, size);
  return OA_OK;
}

static oa_status_t cpu_memory_stats(oa_device_t *dev, oa_memory_stats_t *out) {
  *out = cpu_of(dev)->stats;
  return OA_OK;
}

static oa_status_t cpu_reset_peak(oa_device_t *dev) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  cpu->stats.peak_allocated_bytes = cpu->stats.allocated_bytes;
  return OA_OK;
}

static oa_status_t cpu_synchronize(oa_device_t *dev) {
  (void)dev;
  return OA_OK; /* CPU work completes before execute_op returns */
}

/* ---- streams and events (the structs are at the top of this file) ---------------------------- */

static oa_status_t cpu_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  (void)priority;
  oa_stream_t *s = (oa_stream_t *)cpu->allocator.alloc(cpu->allocator.ctx, sizeof *s, 16);
  if (!s) return OA_ERR_OUT_OF_MEMORY;
  s->failure = OA_OK;
  *out = s;
  return OA_OK;
}

static oa_status_t cpu_stream_destroy(oa_device_t *dev, oa_stream_t *stream) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  if (stream) cpu->allocator.free(cpu->allocator.ctx, stream);
  return OA_OK;
}

static oa_status_t cpu_stream_query(oa_device_t *dev, oa_stream_t *stream) {
  (void)dev;
  return stream ? stream->failure : OA_OK;
}

static oa_status_t cpu_stream_synchronize(oa_device_t *dev, oa_stream_t *stream) {
  (void)dev;
  return stream ? stream->failure : OA_OK;
}

static oa_status_t cpu_stream_wait_event(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event) {
  (void)dev;
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  /* CPU work ran already; a failed event poisons the waiting stream (failures propagate) */
  if (event->status && stream && !stream->failure) stream->failure = event->status;
  return OA_OK;
}

static oa_status_t cpu_event_create(oa_device_t *dev, uint32_t flags, oa_event_t **out) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  oa_event_t *e = (oa_event_t *)cpu->allocator.alloc(cpu->allocator.ctx, sizeof *e, 16);
  if (!e) return OA_ERR_OUT_OF_MEMORY;
  e->flags = flags;
  e->recorded = 0;
  e->time_ns = 0;
  e->status = OA_OK;
  *out = e;
  return OA_OK;
}

static oa_status_t cpu_event_destroy(oa_device_t *dev, oa_event_t *event) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  if (event) cpu->allocator.free(cpu->allocator.ctx, event);
  return OA_OK;
}

static oa_status_t cpu_event_record(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream) {
  (void)dev;
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  event->recorded = 1;
  event->time_ns = oa_platform_now_ns();
  event->status = stream ? stream->failure : OA_OK;
  return OA_OK;
}

static oa_status_t cpu_event_query(oa_device_t *dev, oa_event_t *event) {
  (void)dev;
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  return event->status; /* never recorded = complete, as torch.Event.query() */
}

static oa_status_t cpu_event_synchronize(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns) {
  (void)dev;
  (void)timeout_ns;
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  return event->status;
}

static oa_status_t cpu_event_elapsed_ms(oa_device_t *dev, oa_event_t *start, oa_event_t *end, float *out_ms) {
  (void)dev;
  if (!start || !end) return OA_ERR_INVALID_ARGUMENT;
  if (!(start->flags & OA_EVENT_TIMING) || !(end->flags & OA_EVENT_TIMING)) return OA_ERR_UNSUPPORTED;
  if (!start->recorded || !end->recorded) return OA_ERR_NOT_READY;
  if (start->status) return start->status;
  if (end->status) return end->status;
  *out_ms = (float)((double)(end->time_ns - start->time_ns) / 1e6);
  return OA_OK;
}

static void cpu_destroy(oa_device_t *dev) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  oa_cpu_device_deinit(cpu);
  if (cpu->owned) cpu->allocator.free(cpu->allocator.ctx, cpu);
}

void oa_cpu_device_deinit(oa_cpu_device_t *storage) {
  if (!storage) return;
  oa_threadpool_destroy(storage->pool);
  storage->pool = NULL;
}

/* the kernels' environment; the ISA set only for prepare (run never chooses an ISA) */
static oa_kernel_env_t env_of(oa_cpu_device_t *cpu, int for_prepare) {
  oa_kernel_env_t env;
  env.features = &cpu->features;
  env.pool = cpu->pool;
  env.isas = for_prepare ? cpu_isas(cpu) : 0u;
  return env;
}

static oa_status_t cpu_prepare_op(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                  oa_diag_t *diag) {
  oa_cpu_device_t *cpu = cpu_of(dev);
  oa_kernel_env_t env = env_of(cpu, 1);
  const oa_kernel_t *ref = NULL;
  for (uint32_t i = 0; i < oa_kernel_table_size; i++) {
    const oa_kernel_t *k = &oa_kernel_table[i];
    if (strcmp(k->variant, "ref") == 0 && strcmp(k->op, call->op) == 0) {
      ref = k;
      break;
    }
  }
  if (!ref)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED,
                        "no CPU kernel for op '%s' in this runtime build (rebuild the runtime with this op, "
                        "or re-export for this runtime)", call->op);
  memset(out_plan, 0, sizeof *out_plan);
  oa_status_t st = ref->prepare(call, &env, out_plan, diag);
  if (st) return st;
  out_plan->kernel = ref;
  if (cpu->options.reference_only || !env.isas) return OA_OK;
  for (uint32_t i = 0; i < oa_kernel_table_size; i++) {
    const oa_kernel_t *k = &oa_kernel_table[i];
    if (k == ref || strcmp(k->op, call->op) != 0) continue;
    oa_op_plan_t trial;
    memset(&trial, 0, sizeof trial);
    if (k->prepare(call, &env, &trial, NULL) == OA_OK) {
      if (!trial.kernel) trial.kernel = k; /* an "opt" prepare names the ISA variant it chose */
      *out_plan = trial;
      break;
    }
  }
  return OA_OK;
}

static oa_status_t cpu_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                  const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag) {
  oa_kernel_env_t env = env_of(cpu_of(dev), 0);
  const oa_kernel_t *k = plan ? (const oa_kernel_t *)plan->kernel : NULL;
  if (stream && stream->failure) return stream->failure; /* a failed stream runs nothing more */
  if (!k) {
    /* a failure like any other: later events on the stream carry it */
    oa_status_t st = oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "op '%s' was not prepared on this CPU device",
                                  call && call->op ? call->op : "?");
    if (stream) stream->failure = st;
    return st;
  }
  oa_status_t st = k->run(call, plan, scratch, &env, diag);
  if (st && stream) stream->failure = st;
  return st;
}

const char *oa_cpu_plan_kernel(const oa_op_plan_t *plan) {
  const oa_kernel_t *k = plan ? (const oa_kernel_t *)plan->kernel : NULL;
  return k && k->variant ? k->variant : "";
}

static const oa_device_vtable_t cpu_vtable = {
    .abi_version = OA_DEVICE_ABI_VERSION,
    .struct_size = sizeof(oa_device_vtable_t),
    .destroy = cpu_destroy,
    .get_properties = cpu_get_properties,
    .query_i64 = cpu_query_i64,
    .supports_op = cpu_supports_op,
    .allocate = cpu_allocate,
    .free = cpu_free,
    .wrap_memory = cpu_wrap,
    .unwrap_memory = cpu_unwrap,
    .copy = cpu_copy,
    .memory_stats = cpu_memory_stats,
    .reset_peak_memory_stats = cpu_reset_peak,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_query = cpu_stream_query,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_wait_event = cpu_stream_wait_event,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_synchronize,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .synchronize = cpu_synchronize,
    .prepare_op = cpu_prepare_op,
    .execute_op = cpu_execute_op,
};

oa_status_t oa_cpu_device_init(oa_cpu_device_t *storage, const oa_cpu_options_t *options,
                               oa_device_t **out_device) {
  if (!storage || !out_device) return OA_ERR_INVALID_ARGUMENT;
  const oa_allocator_t *allocator = options ? options->allocator : NULL;
  if (allocator && (!allocator->alloc || !allocator->free)) return OA_ERR_INVALID_ARGUMENT;
  memset(storage, 0, sizeof *storage);
  storage->base.vtable = &cpu_vtable;
  oa_cpu_detect(&storage->features);
  if (options) storage->options = *options;
  storage->options.allocator = NULL; /* the caller's pointer need not outlive this call */
  storage->allocator = allocator ? *allocator : oa_platform_allocator();
  oa_status_t st = oa_threadpool_create(storage->options.threads, &storage->allocator, &storage->pool);
  if (st) return st;
  *out_device = &storage->base;
  return OA_OK;
}

static uint32_t cpu_factory_count(const oa_device_factory_t *factory) {
  (void)factory;
  return 1;
}

static oa_status_t cpu_factory_create(const oa_device_factory_t *factory, uint32_t index,
                                      const oa_allocator_t *allocator, oa_device_t **out_device) {
  (void)factory;
  if (index != 0 || !allocator || !out_device) return OA_ERR_INVALID_ARGUMENT;
  if (!allocator->alloc || !allocator->free) return OA_ERR_INVALID_ARGUMENT;
  oa_cpu_device_t *cpu = (oa_cpu_device_t *)allocator->alloc(allocator->ctx, sizeof *cpu, 64);
  if (!cpu) return OA_ERR_OUT_OF_MEMORY;
  oa_cpu_options_t options = {.allocator = allocator};
  oa_status_t st = oa_cpu_device_init(cpu, &options, out_device);
  if (st) {
    allocator->free(allocator->ctx, cpu);
    return st;
  }
  cpu->owned = 1;
  return OA_OK;
}

static const oa_device_factory_t cpu_factory = {OA_DEVICE_ABI_VERSION, "cpu", NULL, cpu_factory_count,
                                                cpu_factory_create};

const oa_device_factory_t *oa_cpu_device_factory(void) { return &cpu_factory; }

const char *oa_cpu_kernel_op_name(uint32_t index) {
  /* unique op names in table order */
  uint32_t seen = 0;
  for (uint32_t i = 0; i < oa_kernel_table_size; i++) {
    int dup = 0;
    for (uint32_t j = 0; j < i && !dup; j++) dup = strcmp(oa_kernel_table[j].op, oa_kernel_table[i].op) == 0;
    if (dup) continue;
    if (seen++ == index) return oa_kernel_table[i].op;
  }
  return NULL;
}
