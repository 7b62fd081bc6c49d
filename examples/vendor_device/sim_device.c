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
 * - ops: conv2d, linear, relu, add in float32, with their own validation and simple kernels working
 *   on the pool.
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
 * "no_sticky" (failures are forgotten). A real device has none of this: delete it when copying.
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

#if UINTPTR_MAX > 0xFFFFFFFFu
/* a non-canonical address range on x86_64 and aarch64: dereferencing one on the host faults */
#define SIM_ADDR_BASE(index) (((uintptr_t)0x51u << 56) | ((uintptr_t)(index) << 48))
#define SIM_MAX_MEMORY ((size_t)1 << 40)
#else
#define SIM_ADDR_BASE(index) ((uintptr_t)0xA0000000u + ((uintptr_t)(index) << 28))
#define SIM_MAX_MEMORY ((size_t)1 << 28)
#endif

typedef enum sim_fault { FAULT_NONE, FAULT_MISALIGNED, FAULT_OUT_OF_ORDER, FAULT_WRONG_RESULT, FAULT_NO_STICKY } sim_fault_t;

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

enum { SIM_MAX_IN = 3, SIM_MAX_FLOATS = 2 };

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

static void run_op(sim_device_t *d, const sim_cmd_t *c);

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
      run_op(d, c);
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
typedef void (*sim_kernel_fn)(sim_device_t *d, const sim_cmd_t *c);

typedef struct sim_op {
  const char *name;
  uint32_t max_in;
  sim_check_fn check;
  sim_kernel_fn run;
} sim_op_t;

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static double farg(const oa_op_call_t *call, uint32_t i, double dflt) {
  return i < call->n_floats ? call->floats[i] : dflt;
}

/* A present float32 tensor whose metadata is self-consistent and bounded. */
static oa_status_t check_tensor(const oa_op_call_t *call, const oa_tensor_t *t, const char *arg, oa_diag_t *diag) {
  if (!t) return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: op '%s': tensor is missing", arg, call->op);
  if (t->dtype != OA_DTYPE_FLOAT32)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s ('%s'): %s supports float32 only, received dtype %d", arg,
                    t->name ? t->name : "", SIM_KIND_NAME, (int)t->dtype);
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
  if (t->numel != n || t->nbytes != (size_t)n * sizeof(float))
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: numel %lld / nbytes %zu do not match its shape (%lld elements)",
                    arg, (long long)t->numel, t->nbytes, (long long)n);
  return OA_OK;
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

static void relu_run(sim_device_t *d, const sim_cmd_t *c) {
  const float *x = (const float *)(void *)(d->pool + c->in[0].off);
  float *y = (float *)(void *)(d->pool + c->out.off);
  for (int64_t i = 0; i < c->out.numel; i++) {
    float v = x[i] > 0.0f ? x[i] : 0.0f;
    if (d->fault == FAULT_WRONG_RESULT) v *= 1.001f; /* fault: slightly wrong */
    y[i] = v;
  }
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

static void add_run(sim_device_t *d, const sim_cmd_t *c) {
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
}

/* linear: out[..., n] = sum_k x[..., k] * w[n, k] + b[n], fused act ------------------------------- */
enum { LIN_M, LIN_N, LIN_K, LIN_ACT };

static oa_status_t linear_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st = check_counts(call, 2, 3, diag);
  if (st) return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  if (x->ndim < 1 || w->ndim != 2)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'linear': expected input with >= 1 dims and a 2-D weight, "
                    "received %d and %d dims", (int)x->ndim, (int)w->ndim);
  int64_t n = w->shape[0], k = w->shape[1];
  if (x->shape[x->ndim - 1] != k)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'linear': input's last dim %lld does not match weight's %lld "
                    "in_features", (long long)x->shape[x->ndim - 1], (long long)k);
  int64_t want[OA_MAX_DIMS];
  memcpy(want, x->shape, sizeof want);
  want[x->ndim - 1] = n;
  if ((st = check_shape(o, want, x->ndim, "output 0", diag))) return st;
  if (b && (st = check_shape(b, &n, 1, "input 2 (bias)", diag))) return st;
  int64_t act = 0;
  if ((st = check_act(call, 0, &act, diag))) return st;
  params[LIN_M] = k ? x->numel / k : (n ? o->numel / n : 0);
  params[LIN_N] = n;
  params[LIN_K] = k;
  params[LIN_ACT] = act;
  return OA_OK;
}

static void linear_run(sim_device_t *d, const sim_cmd_t *c) {
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
}

/* conv2d: NCHW, weight [O, C/groups, kH, kW], bias [O], fused act -------------------------------- */
enum { CV_SH, CV_SW, CV_PH, CV_PW, CV_DH, CV_DW, CV_G, CV_ACT };

static oa_status_t conv2d_check(const oa_op_call_t *call, int64_t *params, oa_diag_t *diag) {
  oa_status_t st = check_counts(call, 2, 3, diag);
  if (st) return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  if (x->ndim != 4 || w->ndim != 4)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': expected 4-D input and weight, received %d and %d dims",
                    (int)x->ndim, (int)w->ndim);
  static const char *const names[] = {"stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w"};
  for (uint32_t i = 0; i < 6; i++) {
    int64_t v = iarg(call, i), lo = (i == 2 || i == 3) ? 0 : 1;
    if (v < lo || v > SIM_ARG_MAX)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': argument %s = %lld (expected %lld to 2^30)", names[i],
                      (long long)v, (long long)lo);
  }
  int64_t c = x->shape[1], g = iarg(call, CV_G), oc = w->shape[0];
  if (g < 1 || g > (c > 0 ? c : 1) || c % g || oc % g)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': argument groups = %lld must divide %lld input and %lld "
                    "output channels", (long long)g, (long long)c, (long long)oc);
  if (w->shape[1] != c / g)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': weight dim 1 is %lld, expected %lld (channels / groups)",
                    (long long)w->shape[1], (long long)(c / g));
  int64_t kh = w->shape[2], kw = w->shape[3];
  if (kh < 1 || kw < 1 || kh > SIM_ARG_MAX || kw > SIM_ARG_MAX)
    return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': kernel %lld x %lld out of range", (long long)kh,
                    (long long)kw);
  int64_t out_hw[2];
  for (int k = 0; k < 2; k++) {
    int64_t in = x->shape[2 + k], kk = k ? kw : kh, s = iarg(call, (uint32_t)k), p = iarg(call, 2u + (uint32_t)k);
    int64_t dil = iarg(call, 4u + (uint32_t)k);
    int64_t span = dil * (kk - 1) + 1, padded = in + 2 * p; /* < 2^61: no overflow */
    if (span > padded)
      return oa_abi_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "op 'conv2d': dilated kernel %lld exceeds the padded input %lld",
                      (long long)span, (long long)padded);
    out_hw[k] = (padded - span) / s + 1;
  }
  int64_t want[4] = {x->shape[0], oc, out_hw[0], out_hw[1]};
  if ((st = check_shape(o, want, 4, "output 0", diag))) return st;
  if (b && (st = check_shape(b, &oc, 1, "input 2 (bias)", diag))) return st;
  int64_t act = 0;
  if ((st = check_act(call, 7, &act, diag))) return st;
  for (uint32_t i = 0; i < 7; i++) params[i] = iarg(call, i);
  params[CV_ACT] = act;
  return OA_OK;
}

static void conv2d_run(sim_device_t *d, const sim_cmd_t *c) {
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
}

static const sim_op_t sim_ops[] = {
    {"conv2d", 3, conv2d_check, conv2d_run},
    {"linear", 3, linear_check, linear_run},
    {"relu", 1, relu_check, relu_run},
    {"add", 2, add_check, add_run},
};
#define SIM_N_OPS (sizeof sim_ops / sizeof sim_ops[0])

static const sim_op_t *find_op(const char *name) {
  for (size_t i = 0; i < SIM_N_OPS; i++)
    if (strcmp(sim_ops[i].name, name) == 0) return &sim_ops[i];
  return NULL;
}

static void run_op(sim_device_t *d, const sim_cmd_t *c) { c->op->run(d, c); }

static oa_status_t sim_supports_op(oa_device_t *dev, const char *op, uint64_t *out_mask) {
  (void)dev;
  *out_mask = find_op(op) ? SIM_F32 : 0;
  return *out_mask ? OA_OK : OA_ERR_NOT_FOUND;
}

static oa_status_t sim_prepare_op(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                  oa_diag_t *diag) {
  (void)dev;
  if (!call || !out_plan || !call->op) return oa_abi_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL call or plan");
  const sim_op_t *op = find_op(call->op);
  if (!op)
    return oa_abi_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s has no kernel for op '%s' (it runs conv2d, linear, relu, add)",
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
    else if (!strcmp(f, "no_sticky")) fault = FAULT_NO_STICKY;
    else if (strcmp(f, "none") != 0) {
      /* VENDOR: say why the device refuses to start; the runtime passes stderr through */
      fprintf(stderr, "vendor.sim: OA_SIM_FAULT=%s is not a fault this simulator knows (misaligned, "
              "out_of_order, wrong_result, no_sticky, none)\n", f);
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
