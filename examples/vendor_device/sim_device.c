/* vendor.sim: a simulated accelerator, and the template a vendor copies to plug a device into
 * openaccel.
 *
 * What it simulates
 * - its own memory: one pool reserved at device creation (OA_SIM_MEMORY_BYTES, default 256 MiB),
 *   carved by a first-fit allocator that honours alignment (at least SIM_MIN_ALIGN bytes). Device
 *   addresses are opaque (a tag + an offset, never a valid host pointer), so every byte moves
 *   through copy(); every address the device receives is range-checked against its live
 *   allocations: a bad address is an error, never a crash.
 * - in-order asynchronous streams: each stream is a worker thread draining a bounded ring of
 *   commands (copy, execute op, record event, wait event). The default stream (NULL) is a
 *   device-internal stream created with the device.
 * - events: recorded when the stream reaches them (with a timestamp), queried, waited for by the
 *   host with a time-out or by another stream; a failure on a stream is sticky: every later event
 *   recorded on it carries it and every waiter (host or stream) sees it. A never-recorded event is
 *   complete.
 * - ops: conv2d, linear, relu, add in float32, and conv2d_q8, linear_q8 in int8 (the requantization
 *   rule of docs/quantization.md, bit-exact with the reference kernels), with their own validation
 *   and simple kernels working on the pool.
 *
 * How to use it as a template
 * Copy this file and CMakeLists.txt, rename "vendor.sim", and fill in every place marked
 * `VENDOR:`. It includes one header, openaccel/device_abi.h, and links nothing of openaccel (messages
 * go through its header-only oa_abi_diag_fail); the library exports one symbol, `oa_device_factory`,
 * which loaders find with dlsym. Run the conformance suite on the result:
 * `openaccel conformance --device libyours.so` (or `oa_conformance --device ...`). For a first
 * version, skeleton_device.c (every slot "unsupported") is a smaller place to start.
 *
 * Fault injection (for the conformance suite's own negative tests), chosen by OA_SIM_FAULT when a
 * device is created: "misaligned" (allocations 16 bytes off their alignment), "out_of_order" (the
 * stream runs pairs of queued commands last-in first-out), "wrong_result" (relu is slightly off),
 * "q8_rounding" (conv2d_q8 rounds ties away from zero instead of to even), "no_sticky" (failures are
 * forgotten). A real device has none of this: delete it when copying.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "openaccel/device_abi.h" /* the one header a device plugin needs */

/* ---- constants ------------------------------------------------------------------------------- */

#define SIM_KIND_NAME "vendor.sim"          /* VENDOR: the device kind the exporter places ops on */
#define SIM_MIN_ALIGN 256u                   /* VENDOR: the hardware's minimum buffer alignment */
#define SIM_DEFAULT_MEMORY ((size_t)256 << 20)
#define SIM_MIN_MEMORY ((size_t)1 << 20)
#define SIM_RING 256u                        /* commands a stream queues before enqueue blocks */
#define SIM_MAX_DEVICES 4u
#define SIM_COMPUTE_UNITS 4
#define SIM_MAX_ELEMS ((int64_t)1 << 40)    /* bound on any tensor's element count */
#define SIM_ARG_MAX ((int64_t)1 << 30)      /* bound on strides, pads, dilations, kernel sizes */
#define SIM_F32 OA_DTYPE_BIT(OA_DTYPE_FLOAT32)
#define SIM_I8 OA_DTYPE_BIT(OA_DTYPE_INT8)

#if UINTPTR_MAX > 0xFFFFFFFFu
/* a non-canonical address range on x86_64 and aarch64: dereferencing one on the host faults */
#define SIM_ADDR_BASE(index) (((uintptr_t)0x51u << 56) | ((uintptr_t)(index) << 48))
#define SIM_MAX_MEMORY ((size_t)1 << 40)
#else
#define SIM_ADDR_BASE(index) ((uintptr_t)0xA0000000u + ((uintptr_t)(index) << 28))
#define SIM_MAX_MEMORY ((size_t)1 << 28)
#endif

typedef enum sim_fault {
  FAULT_NONE,
  FAULT_MISALIGNED,
  FAULT_OUT_OF_ORDER,
  FAULT_WRONG_RESULT,
  FAULT_Q8_ROUNDING,
  FAULT_NO_STICKY
} sim_fault_t;

/* ---- objects ----------------------------------------------------------------------------------- */

/* One range of the pool: free or handed out. The table is sorted by offset and covers the pool. */
typedef struct sim_block {
  size_t off, size;
  int used;     /* 1: handed out by allocate, 2: by wrap_memory */
  size_t asked; /* bytes the caller asked for (for the stats) */
} sim_block_t;

struct sim_op;

/* A tensor as a command carries it: an offset into the pool plus metadata (copied at enqueue, so
 * the caller's call structure may go away before the stream runs the command). */
typedef struct sim_tensor {
  size_t off;
  int present;
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  int64_t numel;
} sim_tensor_t;

enum { SIM_MAX_IN = 5, SIM_MAX_FLOATS = 2 };

typedef enum sim_cmd_kind { CMD_COPY, CMD_OP, CMD_RECORD, CMD_WAIT, CMD_FAIL } sim_cmd_kind_t;

typedef struct sim_cmd {
  sim_cmd_kind_t kind;
  oa_status_t status;          /* CMD_FAIL: the failure to make sticky */
  /* CMD_COPY */
  oa_copy_kind_t copy_kind;
  size_t dst_off, src_off, size;
  void *host_dst;
  const void *host_src;
  /* CMD_OP */
  const struct sim_op *op;
  sim_tensor_t in[SIM_MAX_IN], out;
  double floats[SIM_MAX_FLOATS];
  int64_t params[OA_OP_PARAM_WORDS];
  /* CMD_RECORD / CMD_WAIT */
  oa_event_t *event;
  uint64_t gen;
} sim_cmd_t;

typedef struct sim_device sim_device_t;

struct oa_stream {
  sim_device_t *dev;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work;     /* to the worker: a command arrived, or quit */
  pthread_cond_t changed;  /* to the host: a command was taken or finished */
  sim_cmd_t ring[SIM_RING];
  uint32_t head, count;
  uint32_t busy;           /* commands taken by the worker and not finished */
  int quit;
  oa_status_t failure;     /* sticky: the first failure on this stream */
  struct oa_stream *next;  /* the device's list of streams */
};

struct oa_event {
  uint32_t flags;
  uint64_t recorded_gen; /* bumped by every record */
  uint64_t done_gen;     /* the latest record a stream has reached */
  oa_status_t status;    /* the recording stream's failure when it reached the record */
  uint64_t time_ns;
  uint32_t refs;         /* queued commands that point at this event */
};

struct sim_device {
  oa_device_t base; /* first: the runtime sees an oa_device_t */
  oa_allocator_t allocator;
  uint32_t index;
  sim_fault_t fault;
  uintptr_t addr_base;
  /* VENDOR: a real device keeps its driver handles here. */
  uint8_t *pool;     /* the simulated device memory (host memory only this file touches) */
  size_t pool_size;
  pthread_mutex_t mem_lock;
  sim_block_t *blocks;
  uint32_t n_blocks, cap_blocks;
  oa_memory_stats_t stats;
  size_t used_bytes; /* bytes of the pool in handed-out blocks */
  pthread_mutex_t streams_lock;
  oa_stream_t *streams;  /* every live stream, the default one included */
  oa_stream_t *default_stream;
  pthread_mutex_t ev_lock; /* guards every event of this device */
  pthread_cond_t ev_cv;    /* broadcast when an event completes or loses a reference */
};

static sim_device_t *sim_of(oa_device_t *dev) { return (sim_device_t *)dev; }

/* ---- small helpers ------------------------------------------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void shape_str(const int64_t *shape, int32_t ndim, char *buf, size_t size) {
  size_t n = 0;
  int w = snprintf(buf, size, "[");
  n = w > 0 ? (size_t)w : 0;
  for (int32_t d = 0; d < ndim && n + 1 < size; d++) {
    w = snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (w < 0) break;
    n += (size_t)w;
  }
  if (n + 1 < size) snprintf(buf + n, size - n, "]");
}

static size_t align_up(size_t v, size_t a) { return (v + (a - 1)) & ~(a - 1); }

/* ---- memory: a first-fit allocator over the pool ----------------------------------------------- */
/* VENDOR: replace with the driver's allocator (or keep this one over a carve-out the driver maps);
 * keep the range check of every address the device receives. */

static int blocks_reserve(sim_device_t *d, uint32_t extra) {
  if (d->n_blocks + extra <= d->cap_blocks) return 1;
  uint32_t cap = d->cap_blocks ? d->cap_blocks : 64;
  while (cap < d->n_blocks + extra) {
    if (cap > UINT32_MAX / 2) return 0;
    cap *= 2;
  }
  sim_block_t *nb = (sim_block_t *)d->allocator.alloc(d->allocator.ctx, (size_t)cap * sizeof *nb, 16);
  if (!nb) return 0;
  if (d->blocks) {
    memcpy(nb, d->blocks, (size_t)d->n_blocks * sizeof *nb);
    d->allocator.free(d->allocator.ctx, d->blocks);
  }
  d->blocks = nb;
  d->cap_blocks = cap;
  return 1;
}

/* Index of the block holding offset `off` (blocks cover the whole pool). */
static uint32_t block_at(const sim_device_t *d, size_t off) {
  uint32_t lo = 0, hi = d->n_blocks; /* the answer is in [lo, hi) */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (d->blocks[mid].off <= off) lo = mid;
    else hi = mid;
  }
  return lo;
}

static void insert_block(sim_device_t *d, uint32_t at, sim_block_t b) {
  memmove(&d->blocks[at + 1], &d->blocks[at], (size_t)(d->n_blocks - at) * sizeof b);
  d->blocks[at] = b;
  d->n_blocks++;
}

static void remove_block(sim_device_t *d, uint32_t at) {
  memmove(&d->blocks[at], &d->blocks[at + 1], (size_t)(d->n_blocks - at - 1) * sizeof(sim_block_t));
  d->n_blocks--;
}

/* Carve `size` bytes aligned to `alignment`; mem_lock held. */
static oa_status_t pool_alloc(sim_device_t *d, size_t size, size_t alignment, int kind, size_t *out_off) {
  size_t need = size ? size : 1; /* a zero-byte request still gets a unique address */
  size_t skew = d->fault == FAULT_MISALIGNED ? 16 : 0;
  if (need > d->pool_size || alignment > d->pool_size) return OA_ERR_OUT_OF_MEMORY;
  if (!blocks_reserve(d, 2)) return OA_ERR_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < d->n_blocks; i++) {
    sim_block_t b = d->blocks[i];
    if (b.used) continue;
    size_t start = align_up(b.off, alignment) + skew; /* offsets < 2^40: no overflow */
    size_t end = b.off + b.size;
    if (start > end || end - start < need) continue;
    uint32_t at = i;
    if (start > b.off) { /* free head */
      d->blocks[at].size = start - b.off;
      at++;
      insert_block(d, at, (sim_block_t){start, need, kind, size});
    } else {
      d->blocks[at] = (sim_block_t){start, need, kind, size};
    }
    if (start + need < end) insert_block(d, at + 1, (sim_block_t){start + need, end - start - need, 0, 0});
    d->used_bytes += need;
    d->stats.allocated_bytes += (int64_t)size;
    d->stats.allocation_count++;
    if (d->stats.allocated_bytes > d->stats.peak_allocated_bytes)
      d->stats.peak_allocated_bytes = d->stats.allocated_bytes;
    *out_off = start;
    return OA_OK;
  }
  return OA_ERR_OUT_OF_MEMORY;
}

/* Release the block starting at `off` handed out as `kind`; mem_lock held. */
static oa_status_t pool_free(sim_device_t *d, size_t off, int kind) {
  uint32_t i = block_at(d, off);
  if (d->blocks[i].off != off || d->blocks[i].used != kind) return OA_ERR_INVALID_ARGUMENT;
  d->used_bytes -= d->blocks[i].size;
  d->stats.allocated_bytes -= (int64_t)d->blocks[i].asked;
  d->stats.free_count++;
  d->blocks[i].used = 0;
  d->blocks[i].asked = 0;
  if (i + 1 < d->n_blocks && !d->blocks[i + 1].used) {
    d->blocks[i].size += d->blocks[i + 1].size;
    remove_block(d, i + 1);
  }
  if (i > 0 && !d->blocks[i - 1].used) {
    d->blocks[i - 1].size += d->blocks[i].size;
    remove_block(d, i);
  }
  return OA_OK;
}

/* Device address -> pool offset, or -1 when `addr` is not an address this device handed out. */
static int addr_to_off(const sim_device_t *d, const void *addr, size_t *out_off) {
  uintptr_t a = (uintptr_t)addr;
  if (a < d->addr_base || a - d->addr_base >= d->pool_size) return -1;
  *out_off = (size_t)(a - d->addr_base);
  return 0;
}

static void *off_to_addr(const sim_device_t *d, size_t off) { return (void *)(d->addr_base + off); }

/* [addr, addr + size) lies inside one live allocation: its pool offset; mem_lock held. */
static oa_status_t check_range(const sim_device_t *d, const void *addr, size_t size, size_t *out_off) {
  size_t off;
  if (addr_to_off(d, addr, &off)) return OA_ERR_INVALID_ARGUMENT;
  const sim_block_t *b = &d->blocks[block_at(d, off)];
  if (!b->used || size > b->size || off - b->off > b->size - size) return OA_ERR_INVALID_ARGUMENT;
  *out_off = off;
  return OA_OK;
}

/* ---- streams: a worker thread per stream ------------------------------------------------------- */

static void set_failure(oa_stream_t *s, oa_status_t st) {
  if (!st || s->dev->fault == FAULT_NO_STICKY) return;
  pthread_mutex_lock(&s->lock);
  if (!s->failure) s->failure = st;
  pthread_mutex_unlock(&s->lock);
}

static oa_status_t stream_failure(oa_stream_t *s) {
  pthread_mutex_lock(&s->lock);
  oa_status_t st = s->failure;
  pthread_mutex_unlock(&s->lock);
  return st;
}

static oa_status_t run_op(sim_device_t *d, const sim_cmd_t *c);

/* Run one command on the worker thread. VENDOR: this is where a real driver submits the command to
 * the hardware queue (or the worker is the hardware's completion thread). */
static void run_command(oa_stream_t *s, sim_cmd_t *c) {
  sim_device_t *d = s->dev;
  switch (c->kind) {
    case CMD_FAIL:
      set_failure(s, c->status);
      break;
    case CMD_COPY:
      if (stream_failure(s)) break; /* a failed stream runs nothing more */
      if (c->copy_kind == OA_COPY_HOST_TO_DEVICE) memcpy(d->pool + c->dst_off, c->host_src, c->size);
      else if (c->copy_kind == OA_COPY_DEVICE_TO_HOST) memcpy(c->host_dst, d->pool + c->src_off, c->size);
      else memmove(d->pool + c->dst_off, d->pool + c->src_off, c->size);
      break;
    case CMD_OP:
      if (stream_failure(s)) break;
      set_failure(s, run_op(d, c)); /* a kernel's failure (a bad value in device memory) sticks */
      break;
    case CMD_RECORD: {
      oa_status_t failure = stream_failure(s);
      pthread_mutex_lock(&d->ev_lock);
      oa_event_t *e = c->event;
      if (c->gen >= e->done_gen) {
        e->done_gen = c->gen;
        e->status = failure;
        e->time_ns = now_ns();
      }
      e->refs--;
      pthread_cond_broadcast(&d->ev_cv);
      pthread_mutex_unlock(&d->ev_lock);
      break;
    }
    case CMD_WAIT: {
      pthread_mutex_lock(&d->ev_lock);
      oa_event_t *e = c->event;
      while (e->done_gen < c->gen) pthread_cond_wait(&d->ev_cv, &d->ev_lock);
      oa_status_t st = e->status;
      e->refs--;
      pthread_cond_broadcast(&d->ev_cv);
      pthread_mutex_unlock(&d->ev_lock);
      set_failure(s, st); /* failures reach every waiter */
      break;
    }
  }
}

static void *stream_main(void *arg) {
  oa_stream_t *s = (oa_stream_t *)arg;
  sim_cmd_t batch[2];
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->count && !s->quit) pthread_cond_wait(&s->work, &s->lock);
    if (!s->count) break; /* quit with nothing queued */
    uint32_t n = 1;
    if (s->dev->fault == FAULT_OUT_OF_ORDER) {
      /* fault: wait briefly for a second command, then run the pair last-in first-out */
      if (s->count == 1 && !s->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        (void)pthread_cond_timedwait(&s->work, &s->lock, &ts);
      }
      if (s->count >= 2) n = 2;
    }
    for (uint32_t k = 0; k < n; k++) {
      uint32_t slot = (s->head + k) % SIM_RING;
      batch[n == 2 ? 1 - k : k] = s->ring[slot];
    }
    s->head = (s->head + n) % SIM_RING;
    s->count -= n;
    s->busy = n;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    for (uint32_t k = 0; k < n; k++) run_command(s, &batch[k]);
    pthread_mutex_lock(&s->lock);
    s->busy = 0;
    pthread_cond_broadcast(&s->changed);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* Queue a command (blocks while the ring is full). */
static void enqueue(oa_stream_t *s, const sim_cmd_t *c) {
  pthread_mutex_lock(&s->lock);
  while (s->count == SIM_RING) pthread_cond_wait(&s->changed, &s->lock);
  s->ring[(s->head + s->count) % SIM_RING] = *c;
  s->count++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
}

/* Poison a stream in order: the failure becomes sticky when the stream reaches this point. */
static oa_status_t enqueue_failure(oa_stream_t *s, oa_status_t st) {
  sim_cmd_t c;
  memset(&c, 0, sizeof c);
  c.kind = CMD_FAIL;
  c.status = st;
  enqueue(s, &c);
  return st;
}

static oa_status_t drain(oa_stream_t *s) {
  pthread_mutex_lock(&s->lock);
  while (s->count || s->busy) pthread_cond_wait(&s->changed, &s->lock);
  oa_status_t st = s->failure;
  pthread_mutex_unlock(&s->lock);
  return st;
}

static oa_status_t stream_start(sim_device_t *d, oa_stream_t **out) {
  oa_stream_t *s = (oa_stream_t *)d->allocator.alloc(d->allocator.ctx, sizeof *s, 64);
  if (!s) return OA_ERR_OUT_OF_MEMORY;
  memset(s, 0, sizeof *s);
  s->dev = d;
  if (pthread_mutex_init(&s->lock, NULL)) goto fail_mutex;
  if (pthread_cond_init(&s->work, NULL)) goto fail_work;
  if (pthread_cond_init(&s->changed, NULL)) goto fail_changed;
  if (pthread_create(&s->thread, NULL, stream_main, s)) goto fail_thread;
  pthread_mutex_lock(&d->streams_lock);
  s->next = d->streams;
  d->streams = s;
  pthread_mutex_unlock(&d->streams_lock);
  *out = s;
  return OA_OK;
fail_thread:
  pthread_cond_destroy(&s->changed);
fail_changed:
  pthread_cond_destroy(&s->work);
fail_work:
  pthread_mutex_destroy(&s->lock);
fail_mutex:
  d->allocator.free(d->allocator.ctx, s);
  return OA_ERR_DEVICE;
}

static void stream_stop(sim_device_t *d, oa_stream_t *s) {
  (void)drain(s);
  pthread_mutex_lock(&s->lock);
  s->quit = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&d->streams_lock);
  for (oa_stream_t **p = &d->streams; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  pthread_mutex_unlock(&d->streams_lock);
  pthread_cond_destroy(&s->changed);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  d->allocator.free(d->allocator.ctx, s);
}

/* NULL is the device's default stream. */
static oa_stream_t *resolve(sim_device_t *d, oa_stream_t *s) { return s ? s : d->default_stream; }

/* Wait until every stream of the device has drained; the first sticky failure among them. */
static oa_status_t drain_all(sim_device_t *d) {
  oa_status_t first = OA_OK;
  pthread_mutex_lock(&d->streams_lock);
  for (oa_stream_t *s = d->streams; s; s = s->next) {
    oa_status_t st = drain(s);
    if (st && !first) first = st;
  }
  pthread_mutex_unlock(&d->streams_lock);
  return first;
}

/* ---- the vtable: capability queries ------------------------------------------------------------- */

static oa_status_t sim_get_properties(oa_device_t *dev, oa_device_properties_t *out) {
  sim_device_t *d = sim_of(dev);
  memset(out, 0, sizeof *out);
  /* VENDOR: the hardware's name, your company, its memory and capabilities */
  snprintf(out->name, sizeof out->name, "vendor.sim simulated accelerator #%u", (unsigned)d->index);
  snprintf(out->vendor, sizeof out->vendor, "openaccel example vendor");
  snprintf(out->kind_name, sizeof out->kind_name, "%s", SIM_KIND_NAME);
  out->kind = OA_DEVICE_KIND_ACCELERATOR;
  out->alignment = SIM_MIN_ALIGN;
  out->memory_total = d->pool_size;
  pthread_mutex_lock(&d->mem_lock);
  out->memory_free = d->pool_size - d->used_bytes;
  pthread_mutex_unlock(&d->mem_lock);
  out->flags = OA_DEVICE_FLAG_ASYNC | OA_DEVICE_FLAG_EVENTS | OA_DEVICE_FLAG_TIMING; /* not host-visible */
  return OA_OK;
}

static oa_status_t sim_query_i64(oa_device_t *dev, const char *category, const char *key, int64_t *out) {
  sim_device_t *d = sim_of(dev);
  /* VENDOR: answer the keys your compiler / exporter needs; unknown keys are NOT_FOUND, and an
   * answer never changes while the device lives. */
  if (strcmp(category, "sim") == 0) {
    if (strcmp(key, "compute_units") == 0) { *out = SIM_COMPUTE_UNITS; return OA_OK; }
    if (strcmp(key, "memory_bytes") == 0) { *out = (int64_t)d->pool_size; return OA_OK; }
  } else if (strcmp(category, "device") == 0) {
    if (strcmp(key, "alignment") == 0) { *out = SIM_MIN_ALIGN; return OA_OK; }
    if (strcmp(key, "memory_total") == 0) { *out = (int64_t)d->pool_size; return OA_OK; }
  }
  return OA_ERR_NOT_FOUND;
}

/* ---- ops: validation (prepare) and kernels ------------------------------------------------------ */
/* VENDOR: your op list. prepare_op sees metadata only (data may be NULL) and must check everything
 * the kernel relies on: files are untrusted. Put what the kernel needs into plan->params. */

typedef oa_status_t (*sim_check_fn)(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag);
typedef oa_status_t (*sim_kernel_fn)(sim_device_t *d, const sim_cmd_t *c);

typedef struct sim_op {
  const char *name;
  uint64_t dtypes; /* what supports_op answers (OA_DTYPE_BIT of the input's dtype) */
  sim_check_fn check;
  sim_kernel_fn run;
} sim_op_t;

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static double farg(const oa_op_call_t *call, uint32_t i, double dflt) {
  return i < call->n_floats ? call->floats[i] : dflt;
}

static size_t dtype_bytes(int32_t dtype) {
  return dtype == OA_DTYPE_INT8 ? 1u : 4u; /* int8, or float32 / int32 */
}

static const char *dtype_text(int32_t dtype) {
  return dtype == OA_DTYPE_INT8 ? "int8" : dtype == OA_DTYPE_INT32 ? "int32" : "float32";
}

/* A present tensor of `dtype` whose metadata is self-consistent and bounded. */
static oa_status_t check_tensor_of(const oa_op_call_t *call, const oa_tensor_t *t, int32_t dtype, const char *arg,
                                   oa_diag_t *diag) {
  if (!t) return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: op '%s': tensor is missing", arg, call->op);
  if (t->dtype != dtype)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s ('%s'): op '%s' on %s takes %s here, received dtype %d", arg,
                    t->name ? t->name : "", call->op, SIM_KIND_NAME, dtype_text(dtype), (int)t->dtype);
  if (t->ndim < 0 || t->ndim > OA_MAX_DIMS)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: expected 0 to %d dims, received %d", arg, OA_MAX_DIMS,
                    (int)t->ndim);
  int64_t n = 1;
  for (int32_t k = 0; k < t->ndim; k++) {
    if (t->shape[k] < 0 || t->shape[k] > SIM_MAX_ELEMS)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: dim %d is %lld (expected 0 to 2^40)", arg, (int)k,
                      (long long)t->shape[k]);
    n = t->shape[k] && n > SIM_MAX_ELEMS / t->shape[k] ? SIM_MAX_ELEMS + 1 : n * t->shape[k];
  }
  if (n > SIM_MAX_ELEMS)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s: more than 2^40 elements", arg);
  if (t->numel != n || t->nbytes != (size_t)n * dtype_bytes(dtype))
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: numel %lld / nbytes %zu do not match its shape (%lld elements)",
                    arg, (long long)t->numel, t->nbytes, (long long)n);
  return OA_OK;
}

static oa_status_t check_tensor(const oa_op_call_t *call, const oa_tensor_t *t, const char *arg, oa_diag_t *diag) {
  return check_tensor_of(call, t, OA_DTYPE_FLOAT32, arg, diag);
}

static oa_status_t check_counts(const oa_op_call_t *call, uint32_t min_in, uint32_t max_in, oa_diag_t *diag) {
  if (call->n_inputs < min_in || call->n_inputs > max_in || call->n_outputs != 1)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': expected %u to %u inputs and 1 output, received %u and %u",
                    call->op, min_in, max_in, call->n_inputs, call->n_outputs);
  if (!call->inputs || !call->outputs || !call->outputs[0])
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': missing tensor array", call->op);
  if (call->n_ints && !call->ints) return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': ints is NULL", call->op);
  if (call->n_floats && !call->floats)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': floats is NULL", call->op);
  for (uint32_t i = 0; i < min_in; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "input %u", i);
    oa_status_t st = check_tensor(call, call->inputs[i], arg, diag);
    if (st) return st;
  }
  for (uint32_t i = min_in; i < call->n_inputs; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "input %u", i);
    oa_status_t st = call->inputs[i] ? check_tensor(call, call->inputs[i], arg, diag) : OA_OK;
    if (st) return st;
  }
  return check_tensor(call, call->outputs[0], "output 0", diag);
}

static oa_status_t check_shape(const oa_tensor_t *t, const int64_t *want, int32_t ndim, const char *arg,
                               oa_diag_t *diag) {
  int same = t->ndim == ndim;
  for (int32_t k = 0; same && k < ndim; k++) same = t->shape[k] == want[k];
  if (same) return OA_OK;
  char w[160], g[160];
  shape_str(want, ndim, w, sizeof w);
  shape_str(t->shape, t->ndim, g, sizeof g);
  return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): expected shape %s, received %s", arg,
                  t->name ? t->name : "", w, g);
}

static oa_status_t check_act(const oa_op_call_t *call, uint32_t act_index, int64_t *out_act, oa_diag_t *diag) {
  int64_t act = iarg(call, act_index);
  if (act < 0 || act > 2)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "op '%s': argument act = %lld (expected 0 none, 1 relu, 2 clamp)",
                    call->op, (long long)act);
  if (act == 2 && !(farg(call, 0, 0.0) <= farg(call, 1, 0.0)))
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': act_min = %g and act_max = %g: expected act_min <= act_max",
                    call->op, farg(call, 0, 0.0), farg(call, 1, 0.0));
  *out_act = act;
  return OA_OK;
}

static float act_apply(float v, int64_t act, float lo, float hi) {
  if (act == 1) return v > 0.0f ? v : 0.0f;
  if (act == 2) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

/* relu ---------------------------------------------------------------------------------------- */
static oa_status_t relu_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  (void)params;
  oa_status_t st = check_counts(call, 1, 1, diag);
  if (st) return st;
  return check_shape(call->outputs[0], call->inputs[0]->shape, call->inputs[0]->ndim, "output 0", diag);
}

static oa_status_t relu_run(sim_device_t *d, const sim_cmd_t *c) {
  const float *x = (const float *)(void *)(d->pool + c->in[0].off);
  float *y = (float *)(void *)(d->pool + c->out.off);
  for (int64_t i = 0; i < c->out.numel; i++) {
    float v = x[i] > 0.0f ? x[i] : 0.0f;
    if (d->fault == FAULT_WRONG_RESULT) v *= 1.001f; /* fault: slightly wrong */
    y[i] = v;
  }
  return OA_OK;
}

/* add: self + alpha * other with full broadcasting ------------------------------------------------ */

static oa_status_t add_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st = check_counts(call, 2, 2, diag);
  if (st) return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *o = call->outputs[0];
  int32_t nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  int64_t want[OA_MAX_DIMS];
  for (int32_t k = 0; k < nd; k++) {
    int32_t ka = k - (nd - a->ndim), kb = k - (nd - b->ndim);
    int64_t sa = ka >= 0 ? a->shape[ka] : 1, sb = kb >= 0 ? b->shape[kb] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char s1[160], s2[160];
      shape_str(a->shape, a->ndim, s1, sizeof s1);
      shape_str(b->shape, b->ndim, s2, sizeof s2);
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'add': inputs %s and %s do not broadcast (dim %d: %lld vs %lld)",
                      s1, s2, (int)k, (long long)sa, (long long)sb);
    }
    want[k] = sa == 1 ? sb : sa;
  }
  (void)params;
  return check_shape(o, want, nd, "output 0", diag);
}

/* Element strides of `t` broadcast to an output of `nd` dims (0 along broadcast dims). */
static void bstrides(const sim_tensor_t *t, const int64_t *oshape, int32_t nd, int64_t *st) {
  int64_t s = 1;
  for (int32_t k = nd - 1; k >= 0; k--) {
    int32_t kt = k - (nd - t->ndim);
    int64_t dim = kt >= 0 ? t->shape[kt] : 1;
    st[k] = dim == oshape[k] && dim != 1 ? s : 0;
    s *= dim;
  }
}

static oa_status_t add_run(sim_device_t *d, const sim_cmd_t *c) {
  const float *a = (const float *)(void *)(d->pool + c->in[0].off);
  const float *b = (const float *)(void *)(d->pool + c->in[1].off);
  float *y = (float *)(void *)(d->pool + c->out.off);
  float alpha = (float)c->floats[0];
  int32_t nd = c->out.ndim;
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS], idx[OA_MAX_DIMS] = {0};
  bstrides(&c->in[0], c->out.shape, nd, sa);
  bstrides(&c->in[1], c->out.shape, nd, sb);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < c->out.numel; i++) {
    y[i] = a[oa] + alpha * b[ob];
    for (int32_t k = nd - 1; k >= 0; k--) {
      oa += sa[k];
      ob += sb[k];
      if (++idx[k] < c->out.shape[k]) break;
      oa -= sa[k] * c->out.shape[k];
      ob -= sb[k] * c->out.shape[k];
      idx[k] = 0;
    }
  }
  return OA_OK;
}

/* linear: out[..., n] = sum_k x[..., k] * w[n, k] + b[n], fused act ------------------------------- */
/* A linear layer's input x [..., k], 2-D weight [n, k] and output [..., n] (linear, linear_q8):
 * sets *n, *k. */
static oa_status_t linear_io_check(const oa_op_call_t *call, const char *op, int64_t *n, int64_t *k, oa_diag_t *diag) {
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  if (x->ndim < 1 || w->ndim != 2)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': expected input with >= 1 dims and a 2-D weight, "
                    "received %d and %d dims", op, (int)x->ndim, (int)w->ndim);
  *n = w->shape[0];
  *k = w->shape[1];
  if (x->shape[x->ndim - 1] != *k)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': input's last dim %lld does not match weight's %lld "
                    "in_features", op, (long long)x->shape[x->ndim - 1], (long long)*k);
  int64_t want[OA_MAX_DIMS];
  memcpy(want, x->shape, sizeof want);
  want[x->ndim - 1] = *n;
  return check_shape(o, want, x->ndim, "output 0", diag);
}

enum { LIN_M, LIN_N, LIN_K, LIN_ACT };

static oa_status_t linear_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st = check_counts(call, 2, 3, diag);
  if (st) return st;
  const oa_tensor_t *x = call->inputs[0], *o = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  int64_t n = 0, k = 0;
  if ((st = linear_io_check(call, "linear", &n, &k, diag))) return st;
  if (b && (st = check_shape(b, &n, 1, "input 2 (bias)", diag))) return st;
  int64_t act = 0;
  if ((st = check_act(call, 0, &act, diag))) return st;
  params[LIN_M] = k ? x->numel / k : (n ? o->numel / n : 0);
  params[LIN_N] = n;
  params[LIN_K] = k;
  params[LIN_ACT] = act;
  return OA_OK;
}

static oa_status_t linear_run(sim_device_t *d, const sim_cmd_t *c) {
  const float *x = (const float *)(void *)(d->pool + c->in[0].off);
  const float *w = (const float *)(void *)(d->pool + c->in[1].off);
  const float *b = c->in[2].present ? (const float *)(void *)(d->pool + c->in[2].off) : NULL;
  float *y = (float *)(void *)(d->pool + c->out.off);
  int64_t m = c->params[LIN_M], n = c->params[LIN_N], k = c->params[LIN_K];
  float lo = (float)c->floats[0], hi = (float)c->floats[1];
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double acc = b ? b[j] : 0.0;
      for (int64_t p = 0; p < k; p++) acc += (double)x[i * k + p] * (double)w[j * k + p];
      y[i * n + j] = act_apply((float)acc, c->params[LIN_ACT], lo, hi);
    }
  }
  return OA_OK;
}

/* conv2d: NCHW, weight [O, C/groups, kH, kW], bias [O], fused act -------------------------------- */
enum { CV_SH, CV_SW, CV_PH, CV_PW, CV_DH, CV_DW, CV_G, CV_ACT };

/* The geometry shared by conv2d and conv2d_q8: ints 0..6 are stride, pad, dilation (h, w) and groups;
 * input [N, C, H, W], weight [O, C/groups, kH, kW], output [N, O, oH, oW], bias [O]. */
static oa_status_t conv_geometry(const oa_op_call_t *call, const oa_tensor_t *b, int64_t *params, oa_diag_t *diag) {
  oa_status_t st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  if (x->ndim != 4 || w->ndim != 4)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': expected 4-D input and weight, received %d and %d dims",
                    call->op, (int)x->ndim, (int)w->ndim);
  static const char *const names[] = {"stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w"};
  for (uint32_t i = 0; i < 6; i++) {
    int64_t v = iarg(call, i), lo = (i == 2 || i == 3) ? 0 : 1;
    if (v < lo || v > SIM_ARG_MAX)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': argument %s = %lld (expected %lld to 2^30)", call->op, names[i],
                      (long long)v, (long long)lo);
  }
  int64_t c = x->shape[1], g = iarg(call, CV_G), oc = w->shape[0];
  if (g < 1 || g > (c > 0 ? c : 1) || c % g || oc % g)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': argument groups = %lld must divide %lld input and %lld "
                    "output channels", call->op, (long long)g, (long long)c, (long long)oc);
  if (w->shape[1] != c / g)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': weight dim 1 is %lld, expected %lld (channels / groups)",
                    call->op, (long long)w->shape[1], (long long)(c / g));
  int64_t kh = w->shape[2], kw = w->shape[3];
  if (kh < 1 || kw < 1 || kh > SIM_ARG_MAX || kw > SIM_ARG_MAX)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': kernel %lld x %lld out of range", call->op, (long long)kh,
                    (long long)kw);
  int64_t out_hw[2];
  for (int k = 0; k < 2; k++) {
    int64_t in = x->shape[2 + k], kk = k ? kw : kh, s = iarg(call, (uint32_t)k), p = iarg(call, 2u + (uint32_t)k);
    int64_t dil = iarg(call, 4u + (uint32_t)k);
    int64_t span = dil * (kk - 1) + 1, padded = in + 2 * p; /* < 2^61: no overflow */
    if (span > padded)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': dilated kernel %lld exceeds the padded input %lld",
                      call->op, (long long)span, (long long)padded);
    out_hw[k] = (padded - span) / s + 1;
  }
  int64_t want[4] = {x->shape[0], oc, out_hw[0], out_hw[1]};
  if ((st = check_shape(o, want, 4, "output 0", diag))) return st;
  if (b && (st = check_shape(b, &oc, 1, "input 2 (bias)", diag))) return st;
  for (uint32_t i = 0; i < 7; i++) params[i] = iarg(call, i);
  return OA_OK;
}

static oa_status_t conv2d_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st = check_counts(call, 2, 3, diag);
  if (st) return st;
  if ((st = conv_geometry(call, call->n_inputs > 2 ? call->inputs[2] : NULL, params, diag))) return st;
  int64_t act = 0;
  if ((st = check_act(call, 7, &act, diag))) return st;
  params[CV_ACT] = act;
  return OA_OK;
}

static oa_status_t conv2d_run(sim_device_t *d, const sim_cmd_t *c) {
  const float *x = (const float *)(void *)(d->pool + c->in[0].off);
  const float *w = (const float *)(void *)(d->pool + c->in[1].off);
  const float *b = c->in[2].present ? (const float *)(void *)(d->pool + c->in[2].off) : NULL;
  float *y = (float *)(void *)(d->pool + c->out.off);
  const int64_t *p = c->params;
  int64_t n = c->in[0].shape[0], ch = c->in[0].shape[1], h = c->in[0].shape[2], wd = c->in[0].shape[3];
  int64_t oc = c->out.shape[1], oh = c->out.shape[2], ow = c->out.shape[3];
  int64_t kh = c->in[1].shape[2], kw = c->in[1].shape[3], g = p[CV_G], cg = ch / g, og = oc / g;
  float lo = (float)c->floats[0], hi = (float)c->floats[1];
  for (int64_t in = 0; in < n; in++)
    for (int64_t o = 0; o < oc; o++) {
      int64_t c0 = (o / og) * cg;
      for (int64_t yy = 0; yy < oh; yy++)
        for (int64_t xx = 0; xx < ow; xx++) {
          double acc = b ? b[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t ky = 0; ky < kh; ky++) {
              int64_t iy = yy * p[CV_SH] - p[CV_PH] + ky * p[CV_DH];
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < kw; kx++) {
                int64_t ix = xx * p[CV_SW] - p[CV_PW] + kx * p[CV_DW];
                if (ix < 0 || ix >= wd) continue;
                acc += (double)x[((in * ch + c0 + ci) * h + iy) * wd + ix] * (double)w[((o * cg + ci) * kh + ky) * kw + kx];
              }
            }
          y[((in * oc + o) * oh + yy) * ow + xx] = act_apply((float)acc, p[CV_ACT], lo, hi);
        }
    }
  return OA_OK;
}

/* ---- int8: conv2d_q8 and linear_q8 ------------------------------------------------------------ */
/* The requantization rule of docs/quantization.md, restated here rather than included: a plugin
 * builds against openaccel/device_abi.h alone, and the runtime's kernels/quant_rule.h is not an
 * installed header. The conformance suite (op.conv2d_q8.int8, op.linear_q8.int8) compares every
 * output byte with the reference kernels (tolerance 0), ties and saturation included.
 * VENDOR: your hardware's int8 engine must give these bytes; where it cannot (a different
 * rounding), leave the op out of supports_op and the exporter keeps it on the CPU. */
#define Q8_SHIFT_MAX 62

/* round_half_even(p / 2^n) on the magnitude (symmetric in sign), |p| < 2^62, 0 <= n <= 62 */
static int64_t q8_round_shift(int64_t p, int32_t n, int ties_away) {
  if (n == 0) return p;
  uint64_t u = p < 0 ? (uint64_t)0 - (uint64_t)p : (uint64_t)p;
  uint64_t q = u >> n, rem = u & (((uint64_t)1 << n) - 1u), half = (uint64_t)1 << (n - 1);
  if (rem > half || (rem == half && ((q & 1u) || ties_away))) q++; /* ties_away: the q8_rounding fault */
  return p < 0 ? -(int64_t)q : (int64_t)q;
}

/* The bias's addend round_half_even(bias * 2^shift) (file format 1.4: the bias is float32 in output
 * steps, added after the multiply): 0 when bias is not finite or the addend is 2^61 or more in
 * magnitude. bias * 2^shift is exact in double (a float32 times a power of two). */
static int q8_bias_addend(float bias, int32_t shift, int64_t *out) {
  double t = (double)bias;
  for (int32_t i = 0; i < shift; i++) t *= 2.0;
  if (!(t > -2305843009213693952.0 && t < 2305843009213693952.0)) return 0; /* 2^61 */
  const double u = t < 0 ? -t : t;
  int64_t q = (int64_t)u;
  const double f = u - (double)q;
  if (f > 0.5 || (f == 0.5 && (q & 1))) q++;
  *out = t < 0 ? -q : q;
  return 1;
}

static int64_t q8_badd(const float *b, int64_t c, int32_t shift) {
  int64_t a = 0;
  return b && q8_bias_addend(b[c], shift, &a) ? a : 0; /* the values were checked (q8_requant_values) */
}

/* acc -> int8: saturate to int32, times the multiplier, plus the bias's addend, rounded shift, zero
 * point, clamp (docs/quantization.md) */
static int8_t q8_requant(int64_t acc, int64_t mult, int32_t shift, int64_t badd, int64_t zp, int64_t lo, int64_t hi,
                         int ties_away) {
  if (acc > INT32_MAX) acc = INT32_MAX;
  if (acc < INT32_MIN) acc = INT32_MIN;
  int64_t r = q8_round_shift(acc * mult + badd, shift, ties_away);
  if (r < lo - zp) return (int8_t)lo; /* |r| < 2^62: clamp before adding the zero point */
  if (r > hi - zp) return (int8_t)hi;
  return (int8_t)(r + zp);
}

/* The int8 ops' inputs: input int8, weight int8, bias float32 [C_out] in output steps (file format
 * 1.4; may be absent), multiplier and shift int8 (file format 1.2) [C_out] or [1]; integer arguments zero points and clamp bounds within int8. */
enum { Q8_ZIN, Q8_ZOUT, Q8_LO, Q8_HI, Q8_MONE, Q8_BIAS, Q8_N };

static oa_status_t q8_check(const oa_op_call_t *call, uint32_t first_int, int64_t cout, int64_t *q, oa_diag_t *diag) {
  oa_status_t st;
  static const char *const names[] = {"input_zp", "output_zp", "act_min", "act_max"};
  if (call->n_ints < first_int + 4)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': expected %u integer arguments, received %u", call->op,
                    first_int + 4, call->n_ints);
  for (uint32_t i = 0; i < 4; i++) {
    int64_t v = iarg(call, first_int + i), lo = i == 3 ? iarg(call, first_int + 2) : -128;
    if (v < lo || v > 127)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': argument %s = %lld (expected %lld to 127)", call->op,
                      names[i], (long long)v, (long long)lo);
    q[i] = v;
  }
  const oa_tensor_t *b = call->inputs[2], *m = call->inputs[3], *sh = call->inputs[4];
  if (b && ((st = check_tensor_of(call, b, OA_DTYPE_FLOAT32, "input 2 (bias)", diag)) ||
            (st = check_shape(b, &cout, 1, "input 2 (bias)", diag))))
    return st;
  if ((st = check_tensor_of(call, m, OA_DTYPE_INT32, "input 3 (multiplier)", diag)) ||
      (st = check_tensor_of(call, sh, OA_DTYPE_INT8, "input 4 (shift)", diag)))
    return st;
  if (m->ndim != 1 || (m->shape[0] != cout && m->shape[0] != 1))
    return check_shape(m, &cout, 1, "input 3 (multiplier)", diag);
  if ((st = check_shape(sh, m->shape, 1, "input 4 (shift)", diag))) return st;
  /* The tensors' quantization parameters (oa_tensor_t.quant, device ABI 2) describe the mapping the
   * arguments encode. A device whose hardware takes real scales reads them here; this one checks
   * that they agree with the zero points it uses. */
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  const oa_tensor_t *qt[2] = {x, o};
  for (int k = 0; k < 2; k++) {
    if (qt[k]->quant.scale && (qt[k]->quant.count != 1 || qt[k]->quant.zero_point[0] != q[k]))
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): its quantization parameters (%u values, zero point "
                      "%lld) disagree with argument %s = %lld", k ? "output 0" : "input 0", qt[k]->name ? qt[k]->name : "",
                      qt[k]->quant.count, (long long)qt[k]->quant.zero_point[0], names[k], (long long)q[k]);
  }
  if (w->quant.scale && (w->quant.count != (uint32_t)(w->quant.axis == 0 ? cout : 1) || w->quant.axis > 0))
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 ('%s'): weight quantization parameters along axis %d "
                    "(%u values): expected per tensor or per output channel (axis 0, %lld values)",
                    w->name ? w->name : "", (int)w->quant.axis, w->quant.count, (long long)cout);
  /* weights are symmetric (the op's rule has no weight zero point): every one of the count values is
   * 0, whether the file stores them or not (an empty zero_point: the executor hands over zeros) */
  for (uint32_t c = 0; w->quant.scale && c < w->quant.count; c++)
    if (w->quant.zero_point[c])
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 ('%s'): weight zero point %u is %lld: expected 0 "
                      "(symmetric weights)", w->name ? w->name : "", c, (long long)w->quant.zero_point[c]);
  q[Q8_MONE] = m->shape[0] == 1 && cout != 1;
  q[Q8_BIAS] = b != NULL;
  return OA_OK;
}

/* multiplier, shift and bias live in device memory: checked when the command runs (a bad value
 * fails the stream, as a device would report a fault): multiplier >= 0, shift in [12, 62], the
 * bias (float32, output steps) finite with an addend below 2^61 (q8_bias_addend) */
static oa_status_t q8_requant_values(const int32_t *mult, const int8_t *shift, int64_t n, const float *bias,
                                     int64_t cout) {
  for (int64_t c = 0; c < n; c++)
    if (mult[c] < 0 || shift[c] < 12 || shift[c] > Q8_SHIFT_MAX) return OA_ERR_INVALID_PROGRAM;
  for (int64_t c = 0; bias && c < cout; c++) {
    int64_t a;
    if (!q8_bias_addend(bias[c], shift[n == 1 ? 0 : c], &a)) return OA_ERR_INVALID_PROGRAM;
  }
  return OA_OK;
}

static oa_status_t q8_counts(const oa_op_call_t *call, oa_diag_t *diag) {
  oa_status_t st;
  if (call->n_inputs != 5 || call->n_outputs != 1 || !call->inputs || !call->outputs)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': expected 5 inputs and 1 output, received %u and %u",
                    call->op, call->n_inputs, call->n_outputs);
  if (call->n_ints && !call->ints) return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op '%s': ints is NULL", call->op);
  if ((st = check_tensor_of(call, call->inputs[0], OA_DTYPE_INT8, "input 0", diag)) ||
      (st = check_tensor_of(call, call->inputs[1], OA_DTYPE_INT8, "input 1 (weight)", diag)) ||
      (st = check_tensor_of(call, call->outputs[0], OA_DTYPE_INT8, "output 0", diag)))
    return st;
  return OA_OK;
}

enum { CQ_Q = 7 }; /* conv2d_q8 params: the conv geometry (0..6), then Q8_* */

static oa_status_t conv2d_q8_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = q8_counts(call, diag))) return st;
  if ((st = conv_geometry(call, NULL, params, diag))) return st;
  return q8_check(call, 7, call->inputs[1]->shape[0], params + CQ_Q, diag);
}

static oa_status_t conv2d_q8_run(sim_device_t *d, const sim_cmd_t *c) {
  const int8_t *x = (const int8_t *)(d->pool + c->in[0].off), *w = (const int8_t *)(d->pool + c->in[1].off);
  const int64_t *p = c->params, *q = c->params + CQ_Q;
  const float *b = q[Q8_BIAS] ? (const float *)(void *)(d->pool + c->in[2].off) : NULL;
  const int32_t *mult = (const int32_t *)(void *)(d->pool + c->in[3].off);
  const int8_t *shift = (const int8_t *)(void *)(d->pool + c->in[4].off);
  int8_t *y = (int8_t *)(d->pool + c->out.off);
  oa_status_t st = q8_requant_values(mult, shift, c->in[3].numel, b, c->out.shape[1]);
  if (st) return st;
  int64_t n = c->in[0].shape[0], ch = c->in[0].shape[1], h = c->in[0].shape[2], wd = c->in[0].shape[3];
  int64_t oc = c->out.shape[1], oh = c->out.shape[2], ow = c->out.shape[3];
  int64_t kh = c->in[1].shape[2], kw = c->in[1].shape[3], g = p[CV_G], cg = ch / g, og = oc / g;
  int ties_away = d->fault == FAULT_Q8_ROUNDING;
  for (int64_t in = 0; in < n; in++)
    for (int64_t o = 0; o < oc; o++) {
      int64_t c0 = (o / og) * cg, k = q[Q8_MONE] ? 0 : o;
      for (int64_t yy = 0; yy < oh; yy++)
        for (int64_t xx = 0; xx < ow; xx++) {
          int64_t acc = 0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t ky = 0; ky < kh; ky++) {
              int64_t iy = yy * p[CV_SH] - p[CV_PH] + ky * p[CV_DH];
              if (iy < 0 || iy >= h) continue; /* padding is the input's zero point: adds 0 */
              for (int64_t kx = 0; kx < kw; kx++) {
                int64_t ix = xx * p[CV_SW] - p[CV_PW] + kx * p[CV_DW];
                if (ix < 0 || ix >= wd) continue;
                acc += ((int64_t)x[((in * ch + c0 + ci) * h + iy) * wd + ix] - q[Q8_ZIN]) *
                       w[((o * cg + ci) * kh + ky) * kw + kx];
              }
            }
          y[((in * oc + o) * oh + yy) * ow + xx] =
              q8_requant(acc, mult[k], shift[k], q8_badd(b, o, shift[k]), q[Q8_ZOUT], q[Q8_LO], q[Q8_HI],
                         ties_away);
        }
    }
  return OA_OK;
}

enum { LQ_M, LQ_N, LQ_K, LQ_Q }; /* linear_q8 params: rows, outputs, inner dim, then Q8_* */

static oa_status_t linear_q8_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = q8_counts(call, diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  int64_t n = 0, k = 0;
  if ((st = linear_io_check(call, "linear_q8", &n, &k, diag))) return st;
  int64_t rows = 1;
  for (int32_t dd = 0; dd < x->ndim - 1; dd++) rows *= x->shape[dd];
  params[LQ_M] = rows;
  params[LQ_N] = n;
  params[LQ_K] = k;
  return q8_check(call, 0, n, params + LQ_Q, diag);
}

static oa_status_t linear_q8_run(sim_device_t *d, const sim_cmd_t *c) {
  const int8_t *x = (const int8_t *)(d->pool + c->in[0].off), *w = (const int8_t *)(d->pool + c->in[1].off);
  const int64_t *q = c->params + LQ_Q;
  const float *b = q[Q8_BIAS] ? (const float *)(void *)(d->pool + c->in[2].off) : NULL;
  const int32_t *mult = (const int32_t *)(void *)(d->pool + c->in[3].off);
  const int8_t *shift = (const int8_t *)(void *)(d->pool + c->in[4].off);
  int8_t *y = (int8_t *)(d->pool + c->out.off);
  oa_status_t st = q8_requant_values(mult, shift, c->in[3].numel, b, c->params[LQ_N]);
  if (st) return st;
  int64_t m = c->params[LQ_M], n = c->params[LQ_N], k = c->params[LQ_K];
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t acc = 0, kk = q[Q8_MONE] ? 0 : j;
      for (int64_t p = 0; p < k; p++) acc += ((int64_t)x[i * k + p] - q[Q8_ZIN]) * w[j * k + p];
      y[i * n + j] = q8_requant(acc, mult[kk], shift[kk], q8_badd(b, j, shift[kk]), q[Q8_ZOUT], q[Q8_LO],
                                q[Q8_HI], 0);
    }
  return OA_OK;
}

static const sim_op_t sim_ops[] = {
    {"conv2d", SIM_F32, conv2d_check, conv2d_run},
    {"linear", SIM_F32, linear_check, linear_run},
    {"relu", SIM_F32, relu_check, relu_run},
    {"add", SIM_F32, add_check, add_run},
    {"conv2d_q8", SIM_I8, conv2d_q8_check, conv2d_q8_run},
    {"linear_q8", SIM_I8, linear_q8_check, linear_q8_run},
};
#define SIM_N_OPS (sizeof sim_ops / sizeof sim_ops[0])

static const sim_op_t *find_op(const char *name) {
  for (size_t i = 0; i < SIM_N_OPS; i++)
    if (strcmp(sim_ops[i].name, name) == 0) return &sim_ops[i];
  return NULL;
}

static oa_status_t run_op(sim_device_t *d, const sim_cmd_t *c) { return c->op->run(d, c); }

static oa_status_t sim_supports_op(oa_device_t *dev, const char *op, uint64_t *out_mask) {
  (void)dev;
  const sim_op_t *o = find_op(op);
  *out_mask = o ? o->dtypes : 0;
  return *out_mask ? OA_OK : OA_ERR_NOT_FOUND;
}

static oa_status_t sim_prepare_op(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                  oa_diag_t *diag) {
  (void)dev;
  if (!call || !out_plan || !call->op) return oa_abi_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL call or plan");
  const sim_op_t *op = find_op(call->op);
  if (!op)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s has no kernel for op '%s' (it runs conv2d, linear, relu, add, conv2d_q8, "
                    "linear_q8)",
                    SIM_KIND_NAME, call->op);
  memset(out_plan, 0, sizeof *out_plan);
  oa_status_t st = op->check(call, out_plan->params, diag);
  if (st) return st;
  out_plan->kernel = op;
  out_plan->scratch_bytes = 0;
  return OA_OK;
}

/* A tensor of the call as the command carries it: range-checked against live allocations. */
static oa_status_t bind_tensor(sim_device_t *d, const oa_tensor_t *t, sim_tensor_t *out, const char *arg,
                               oa_diag_t *diag) {
  memset(out, 0, sizeof *out);
  if (!t) return OA_OK;
  out->present = 1;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof out->shape);
  out->numel = t->numel;
  pthread_mutex_lock(&d->mem_lock);
  oa_status_t st = check_range(d, t->data, t->nbytes, &out->off);
  pthread_mutex_unlock(&d->mem_lock);
  if (st)
    return oa_abi_diag_fail(diag, st, "%s ('%s'): %p (+%zu bytes) is not inside memory this %s device handed out", arg,
                    t->name ? t->name : "", t->data, t->nbytes, SIM_KIND_NAME);
  return OA_OK;
}

static oa_status_t sim_execute_op(oa_device_t *dev, oa_stream_t *stream, const oa_op_call_t *call,
                                  const oa_op_plan_t *plan, void *scratch, oa_diag_t *diag) {
  sim_device_t *d = sim_of(dev);
  oa_stream_t *s = resolve(d, stream);
  (void)scratch; /* the sim's kernels need none */
  if (s->dev != d) return oa_abi_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "stream belongs to another device");
  const sim_op_t *op = NULL;
  for (size_t i = 0; plan && i < SIM_N_OPS; i++)
    if (plan->kernel == (const void *)&sim_ops[i]) op = &sim_ops[i];
  if (!op || !call || !call->op || strcmp(op->name, call->op) != 0)
    return enqueue_failure(s, oa_abi_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "op '%s' was not prepared by this %s device",
                                       call && call->op ? call->op : "?", SIM_KIND_NAME));
  sim_cmd_t c;
  memset(&c, 0, sizeof c);
  c.kind = CMD_OP;
  c.op = op;
  /* The command must be self-consistent even if the caller passes a call other than the one it
   * prepared: validate again (metadata only, cheap) and bind every address. */
  oa_status_t st = op->check(call, c.params, diag);
  if (st) return enqueue_failure(s, st);
  for (uint32_t i = 0; i < call->n_inputs && i < SIM_MAX_IN; i++) {
    char arg[16];
    snprintf(arg, sizeof arg, "input %u", i);
    if ((st = bind_tensor(d, call->inputs[i], &c.in[i], arg, diag))) return enqueue_failure(s, st);
  }
  if ((st = bind_tensor(d, call->outputs[0], &c.out, "output 0", diag))) return enqueue_failure(s, st);
  c.floats[0] = farg(call, 0, strcmp(op->name, "add") == 0 ? 1.0 : 0.0); /* add's alpha defaults to 1 */
  c.floats[1] = farg(call, 1, 0.0);
  enqueue(s, &c);
  return OA_OK;
}

/* ---- memory ------------------------------------------------------------------------------------- */

static oa_status_t sim_allocate(oa_device_t *dev, size_t size, size_t alignment, void **out_ptr) {
  sim_device_t *d = sim_of(dev);
  if (alignment & (alignment - 1)) return OA_ERR_INVALID_ARGUMENT;
  if (alignment < SIM_MIN_ALIGN) alignment = SIM_MIN_ALIGN;
  size_t off;
  pthread_mutex_lock(&d->mem_lock);
  oa_status_t st = pool_alloc(d, size, alignment, 1, &off);
  pthread_mutex_unlock(&d->mem_lock);
  if (st) return st;
  *out_ptr = off_to_addr(d, off);
  return OA_OK;
}

static oa_status_t release(sim_device_t *d, void *ptr, int kind) {
  size_t off;
  if (!ptr) return OA_OK;
  if (addr_to_off(d, ptr, &off)) return OA_ERR_INVALID_ARGUMENT;
  /* Queued work may still use the block: like cudaFree, wait for the streams first. VENDOR: a
   * driver can instead defer the free until the streams that used the block pass this point. */
  (void)drain_all(d);
  pthread_mutex_lock(&d->mem_lock);
  oa_status_t st = pool_free(d, off, kind);
  pthread_mutex_unlock(&d->mem_lock);
  return st;
}

static oa_status_t sim_free(oa_device_t *dev, void *ptr) { return release(sim_of(dev), ptr, 1); }

/* The device cannot read host memory, so a wrapped constant is uploaded into a new allocation.
 * VENDOR: a device that can map host memory (an IOMMU, shared DRAM) maps it here instead. */
static oa_status_t sim_wrap(oa_device_t *dev, void *host_ptr, size_t size, void **out_ptr) {
  sim_device_t *d = sim_of(dev);
  if (size && !host_ptr) return OA_ERR_INVALID_ARGUMENT;
  size_t off;
  pthread_mutex_lock(&d->mem_lock);
  oa_status_t st = pool_alloc(d, size, SIM_MIN_ALIGN, 2, &off);
  pthread_mutex_unlock(&d->mem_lock);
  if (st) return st;
  if (size) memcpy(d->pool + off, host_ptr, size); /* a fresh block: no queued work touches it */
  *out_ptr = off_to_addr(d, off);
  return OA_OK;
}

static oa_status_t sim_unwrap(oa_device_t *dev, void *ptr) { return release(sim_of(dev), ptr, 2); }

static oa_status_t sim_copy(oa_device_t *dev, oa_stream_t *stream, void *dst, const void *src, size_t size,
                            oa_copy_kind_t kind) {
  sim_device_t *d = sim_of(dev);
  oa_stream_t *s = resolve(d, stream);
  if (s->dev != d) return OA_ERR_INVALID_ARGUMENT;
  if (!size) return OA_OK;
  sim_cmd_t c;
  memset(&c, 0, sizeof c);
  c.kind = CMD_COPY;
  c.copy_kind = kind;
  c.size = size;
  oa_status_t st = OA_OK;
  pthread_mutex_lock(&d->mem_lock);
  switch (kind) {
    case OA_COPY_HOST_TO_DEVICE:
      if (!src) st = OA_ERR_INVALID_ARGUMENT;
      else st = check_range(d, dst, size, &c.dst_off);
      c.host_src = src;
      break;
    case OA_COPY_DEVICE_TO_HOST:
      if (!dst) st = OA_ERR_INVALID_ARGUMENT;
      else st = check_range(d, src, size, &c.src_off);
      c.host_dst = dst;
      break;
    case OA_COPY_DEVICE_TO_DEVICE:
      st = check_range(d, src, size, &c.src_off);
      if (!st) st = check_range(d, dst, size, &c.dst_off);
      break;
    default:
      st = OA_ERR_INVALID_ARGUMENT;
      break;
  }
  pthread_mutex_unlock(&d->mem_lock);
  if (st) return enqueue_failure(s, st); /* an error now, and the stream is poisoned in order */
  /* VENDOR: the host buffer must stay valid until the stream passes the copy (as with
   * cudaMemcpyAsync); the DMA engine reads or writes it then. */
  enqueue(s, &c);
  return OA_OK;
}

static oa_status_t sim_memory_stats(oa_device_t *dev, oa_memory_stats_t *out) {
  sim_device_t *d = sim_of(dev);
  pthread_mutex_lock(&d->mem_lock);
  *out = d->stats;
  pthread_mutex_unlock(&d->mem_lock);
  return OA_OK;
}

static oa_status_t sim_reset_peak(oa_device_t *dev) {
  sim_device_t *d = sim_of(dev);
  pthread_mutex_lock(&d->mem_lock);
  d->stats.peak_allocated_bytes = d->stats.allocated_bytes;
  pthread_mutex_unlock(&d->mem_lock);
  return OA_OK;
}

/* ---- streams and events -------------------------------------------------------------------------- */

static oa_status_t sim_stream_create(oa_device_t *dev, int32_t priority, oa_stream_t **out) {
  (void)priority; /* VENDOR: map torch's priority (0 or negative = higher) to hardware queues */
  return stream_start(sim_of(dev), out);
}

static oa_status_t sim_stream_destroy(oa_device_t *dev, oa_stream_t *stream) {
  sim_device_t *d = sim_of(dev);
  if (!stream || stream == d->default_stream || stream->dev != d) return OA_ERR_INVALID_ARGUMENT;
  stream_stop(d, stream);
  return OA_OK;
}

static oa_status_t sim_stream_query(oa_device_t *dev, oa_stream_t *stream) {
  oa_stream_t *s = resolve(sim_of(dev), stream);
  pthread_mutex_lock(&s->lock);
  oa_status_t st = s->count || s->busy ? OA_ERR_NOT_READY : s->failure;
  pthread_mutex_unlock(&s->lock);
  return st;
}

static oa_status_t sim_stream_synchronize(oa_device_t *dev, oa_stream_t *stream) {
  return drain(resolve(sim_of(dev), stream));
}

static oa_status_t sim_stream_wait_event(oa_device_t *dev, oa_stream_t *stream, oa_event_t *event) {
  sim_device_t *d = sim_of(dev);
  oa_stream_t *s = resolve(d, stream);
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  sim_cmd_t c;
  memset(&c, 0, sizeof c);
  c.kind = CMD_WAIT;
  c.event = event;
  pthread_mutex_lock(&d->ev_lock);
  c.gen = event->recorded_gen; /* the latest record at the time of the call */
  if (c.gen) event->refs++;
  pthread_mutex_unlock(&d->ev_lock);
  if (!c.gen) return OA_OK; /* never recorded = complete */
  enqueue(s, &c);
  return OA_OK;
}

static oa_status_t sim_event_create(oa_device_t *dev, uint32_t flags, oa_event_t **out) {
  sim_device_t *d = sim_of(dev);
  oa_event_t *e = (oa_event_t *)d->allocator.alloc(d->allocator.ctx, sizeof *e, 16);
  if (!e) return OA_ERR_OUT_OF_MEMORY;
  memset(e, 0, sizeof *e);
  e->flags = flags;
  *out = e;
  return OA_OK;
}

static oa_status_t sim_event_destroy(oa_device_t *dev, oa_event_t *event) {
  sim_device_t *d = sim_of(dev);
  if (!event) return OA_OK;
  pthread_mutex_lock(&d->ev_lock);
  while (event->refs) pthread_cond_wait(&d->ev_cv, &d->ev_lock); /* queued commands still point at it */
  pthread_mutex_unlock(&d->ev_lock);
  d->allocator.free(d->allocator.ctx, event);
  return OA_OK;
}

static oa_status_t sim_event_record(oa_device_t *dev, oa_event_t *event, oa_stream_t *stream) {
  sim_device_t *d = sim_of(dev);
  oa_stream_t *s = resolve(d, stream);
  if (!event || s->dev != d) return OA_ERR_INVALID_ARGUMENT;
  sim_cmd_t c;
  memset(&c, 0, sizeof c);
  c.kind = CMD_RECORD;
  c.event = event;
  pthread_mutex_lock(&d->ev_lock);
  c.gen = ++event->recorded_gen;
  event->refs++;
  pthread_mutex_unlock(&d->ev_lock);
  enqueue(s, &c);
  return OA_OK;
}

static oa_status_t sim_event_query(oa_device_t *dev, oa_event_t *event) {
  sim_device_t *d = sim_of(dev);
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&d->ev_lock);
  oa_status_t st = event->done_gen < event->recorded_gen ? OA_ERR_NOT_READY : event->status;
  pthread_mutex_unlock(&d->ev_lock);
  return st;
}

static oa_status_t sim_event_synchronize(oa_device_t *dev, oa_event_t *event, uint64_t timeout_ns) {
  sim_device_t *d = sim_of(dev);
  if (!event) return OA_ERR_INVALID_ARGUMENT;
  struct timespec deadline;
  if (timeout_ns != OA_TIMEOUT_INFINITE) {
    uint64_t t = timeout_ns < UINT64_C(1000000000000000) ? timeout_ns : UINT64_C(1000000000000000); /* <= 11 days */
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    t += (uint64_t)deadline.tv_nsec;
    deadline.tv_sec += (time_t)(t / 1000000000u);
    deadline.tv_nsec = (long)(t % 1000000000u);
  }
  pthread_mutex_lock(&d->ev_lock);
  uint64_t target = event->recorded_gen;
  oa_status_t st = OA_OK;
  while (event->done_gen < target) {
    if (timeout_ns == OA_TIMEOUT_INFINITE) {
      pthread_cond_wait(&d->ev_cv, &d->ev_lock);
    } else if (pthread_cond_timedwait(&d->ev_cv, &d->ev_lock, &deadline) == ETIMEDOUT) {
      if (event->done_gen < target) st = OA_ERR_TIMEOUT;
      break;
    }
  }
  if (!st) st = event->status;
  pthread_mutex_unlock(&d->ev_lock);
  return st;
}

static oa_status_t sim_event_elapsed_ms(oa_device_t *dev, oa_event_t *start, oa_event_t *end, float *out_ms) {
  sim_device_t *d = sim_of(dev);
  if (!start || !end) return OA_ERR_INVALID_ARGUMENT;
  if (!(start->flags & OA_EVENT_TIMING) || !(end->flags & OA_EVENT_TIMING)) return OA_ERR_UNSUPPORTED;
  oa_status_t st = OA_OK;
  pthread_mutex_lock(&d->ev_lock);
  if (!start->recorded_gen || !end->recorded_gen || start->done_gen < start->recorded_gen ||
      end->done_gen < end->recorded_gen)
    st = OA_ERR_NOT_READY;
  else if (start->status)
    st = start->status;
  else if (end->status)
    st = end->status;
  else
    *out_ms = (float)(((double)end->time_ns - (double)start->time_ns) / 1e6);
  pthread_mutex_unlock(&d->ev_lock);
  return st;
}

static oa_status_t sim_synchronize(oa_device_t *dev) { return drain_all(sim_of(dev)); }

/* ---- creation and destruction ------------------------------------------------------------------- */

static void sim_destroy(oa_device_t *dev) {
  sim_device_t *d = sim_of(dev);
  oa_allocator_t a = d->allocator;
  for (;;) { /* streams the application forgot, then the default stream */
    pthread_mutex_lock(&d->streams_lock);
    oa_stream_t *s = d->streams;
    pthread_mutex_unlock(&d->streams_lock);
    if (!s) break;
    stream_stop(d, s);
  }
  pthread_cond_destroy(&d->ev_cv);
  pthread_mutex_destroy(&d->ev_lock);
  pthread_mutex_destroy(&d->streams_lock);
  pthread_mutex_destroy(&d->mem_lock);
  if (d->blocks) a.free(a.ctx, d->blocks);
  if (d->pool) a.free(a.ctx, d->pool);
  a.free(a.ctx, d);
}

static const oa_device_vtable_t sim_vtable = {
    .abi_version = OA_DEVICE_ABI_VERSION,
    .struct_size = sizeof(oa_device_vtable_t),
    .destroy = sim_destroy,
    .get_properties = sim_get_properties,
    .query_i64 = sim_query_i64,
    .supports_op = sim_supports_op,
    .allocate = sim_allocate,
    .free = sim_free,
    .wrap_memory = sim_wrap,
    .unwrap_memory = sim_unwrap,
    .copy = sim_copy,
    .memory_stats = sim_memory_stats,
    .reset_peak_memory_stats = sim_reset_peak,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_query = sim_stream_query,
    .stream_synchronize = sim_stream_synchronize,
    .stream_wait_event = sim_stream_wait_event,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_synchronize = sim_event_synchronize,
    .event_elapsed_ms = sim_event_elapsed_ms,
    .synchronize = sim_synchronize,
    .prepare_op = sim_prepare_op,
    .execute_op = sim_execute_op,
};

/* Parse a size in bytes (optionally with a K/M/G suffix). 0 on error. */
static size_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return 0;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, end++;
  else if (*end == 'M' || *end == 'm') shift = 20, end++;
  else if (*end == 'G' || *end == 'g') shift = 30, end++;
  if (*end || v > (unsigned long long)(SIM_MAX_MEMORY >> shift)) return 0;
  return (size_t)(v << shift);
}

static uint32_t sim_factory_count(const oa_device_factory_t *factory) {
  (void)factory;
  /* VENDOR: ask the driver how many devices there are; never fail (0 when none or on error) */
  const char *env = getenv("OA_SIM_DEVICES");
  if (!env || !*env) return 1;
  char *end;
  long n = strtol(env, &end, 10);
  if (*end || n < 0) return 0;
  return n > (long)SIM_MAX_DEVICES ? SIM_MAX_DEVICES : (uint32_t)n;
}

static oa_status_t sim_factory_create(const oa_device_factory_t *factory, uint32_t index,
                                      const oa_allocator_t *allocator, oa_device_t **out_device) {
  (void)factory;
  if (!allocator || !out_device || index >= SIM_MAX_DEVICES) return OA_ERR_INVALID_ARGUMENT;
  size_t pool_size = SIM_DEFAULT_MEMORY;
  const char *mem = getenv("OA_SIM_MEMORY_BYTES");
  if (mem && *mem) {
    pool_size = parse_size(mem);
    if (pool_size < SIM_MIN_MEMORY) return OA_ERR_INVALID_ARGUMENT;
  }
  sim_fault_t fault = FAULT_NONE;
  const char *f = getenv("OA_SIM_FAULT");
  if (f && *f) {
    if (!strcmp(f, "misaligned")) fault = FAULT_MISALIGNED;
    else if (!strcmp(f, "out_of_order")) fault = FAULT_OUT_OF_ORDER;
    else if (!strcmp(f, "wrong_result")) fault = FAULT_WRONG_RESULT;
    else if (!strcmp(f, "q8_rounding")) fault = FAULT_Q8_ROUNDING;
    else if (!strcmp(f, "no_sticky")) fault = FAULT_NO_STICKY;
    else if (strcmp(f, "none") != 0) {
      /* VENDOR: say why the device refuses to start; the runtime passes stderr through */
      fprintf(stderr, "vendor.sim: OA_SIM_FAULT=%s is not a fault this simulator knows (misaligned, "
              "out_of_order, wrong_result, q8_rounding, no_sticky, none)\n", f);
      return OA_ERR_INVALID_ARGUMENT;
    }
  }
  sim_device_t *d = (sim_device_t *)allocator->alloc(allocator->ctx, sizeof *d, 64);
  if (!d) return OA_ERR_OUT_OF_MEMORY;
  memset(d, 0, sizeof *d);
  d->base.vtable = &sim_vtable;
  d->allocator = *allocator;
  d->index = index;
  d->fault = fault;
  d->addr_base = SIM_ADDR_BASE(index);
  d->pool_size = pool_size;
  /* VENDOR: open the device, map or reserve its memory */
  d->pool = (uint8_t *)allocator->alloc(allocator->ctx, pool_size, 4096);
  oa_status_t st = d->pool && blocks_reserve(d, 64) ? OA_OK : OA_ERR_OUT_OF_MEMORY;
  int inited = 0; /* how many of the four synchronisation objects exist */
  pthread_condattr_t attr;
  if (!st && !pthread_mutex_init(&d->mem_lock, NULL)) inited++;
  if (inited == 1 && !pthread_mutex_init(&d->streams_lock, NULL)) inited++;
  if (inited == 2 && !pthread_mutex_init(&d->ev_lock, NULL)) inited++;
  if (inited == 3 && !pthread_condattr_init(&attr)) {
    if (!pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) && !pthread_cond_init(&d->ev_cv, &attr)) inited++;
    pthread_condattr_destroy(&attr);
  }
  if (!st && inited < 4) st = OA_ERR_DEVICE;
  if (!st) {
    d->blocks[0] = (sim_block_t){0, pool_size, 0, 0};
    d->n_blocks = 1;
    st = stream_start(d, &d->default_stream);
  }
  if (st) {
    if (inited > 3) pthread_cond_destroy(&d->ev_cv);
    if (inited > 2) pthread_mutex_destroy(&d->ev_lock);
    if (inited > 1) pthread_mutex_destroy(&d->streams_lock);
    if (inited > 0) pthread_mutex_destroy(&d->mem_lock);
    if (d->blocks) allocator->free(allocator->ctx, d->blocks);
    if (d->pool) allocator->free(allocator->ctx, d->pool);
    allocator->free(allocator->ctx, d);
    return st;
  }
  *out_device = &d->base;
  return OA_OK;
}

static const oa_device_factory_t sim_factory = {OA_DEVICE_ABI_VERSION, SIM_KIND_NAME, NULL, sim_factory_count,
                                                sim_factory_create};

/* The one exported symbol: loaders dlsym("oa_device_factory") and register what it returns. */
OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void);
OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void) { return &sim_factory; }
