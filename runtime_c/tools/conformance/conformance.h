/* The conformance suite's internal header: the suite's state, the helpers every check group
 * uses (output, random data, resources released at the end of each check, copies), the check
 * functions of each group, and the op-case types shared by the generators and their runner.
 *
 *   main.c           driver: options, loading device libraries, the check table, the summary
 *   suite.c          output rows, resources, copies and small op calls on the device under test
 *   checks_props.c   properties, queries
 *   checks_memory.c  alloc.alignment, alloc.stats, alloc.limits, copy.roundtrip, copy.wrap
 *   checks_stream.c  stream.ordering
 *   checks_event.c   event.*, device.synchronize
 *   op_cases.c       the op set and the case generators (op.<name>.<dtype>)
 *   checks_ops.c     running the cases on the device and the reference CPU device, comparing */
#ifndef OA_CONFORMANCE_H
#define OA_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include "openaccel/openaccel.h"

/* The result of a check (one row). */
enum { R_PASS = 0, R_FAIL = 1, R_SKIP = 2 };

/* Every op of the op set (sdk/openaccel/opset.py): the names supports_op is asked about. */
extern const char *const k_ops[];
extern const size_t k_n_ops;

/* ---- the suite's state -------------------------------------------------------------------------- */

typedef enum res_kind { RES_DEVMEM, RES_WRAPPED, RES_STREAM, RES_EVENT, RES_HOST } res_kind_t;
typedef struct res {
  res_kind_t kind;
  void *p;
} res_t;
#define MAX_RES 1024

typedef struct suite {
  oa_device_t *dev;            /* the device under test */
  oa_device_properties_t props;
  const char *factory_kind;    /* kind_name of the factory that created it */
  uint32_t index;
  oa_device_t *ref;            /* reference CPU device */
  uint64_t seed;
  int json;
  const char *filter;
  int passed, failed, skipped;
  char detail[1024];
  res_t res[MAX_RES];
  uint32_t n_res;
  int res_overflow;
} suite_t;

/* ---- random data ---------------------------------------------------------------------------------- */

typedef struct rng {
  uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static inline uint32_t rng_below(rng_t *r, uint32_t n) { return n ? (uint32_t)(rng_next(r) % n) : 0; }

/* uniform in [-1, 1) with 24 bits */
static inline float rng_float(rng_t *r) { return (float)((double)(rng_next(r) >> 40) / 8388608.0 - 1.0); }

/* A stream of its own for every check (and op), so that --filter does not change the data. */
rng_t rng_for(const suite_t *s, const char *name);
void fill_bytes(rng_t *r, uint8_t *p, size_t n);

/* ---- output ----------------------------------------------------------------------------------------- */

void set_detail(suite_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void report(suite_t *s, const char *name, int result);
int wanted(const suite_t *s, const char *name);

/* ---- resources: everything a check creates is released when it ends ------------------------------- */

#define HAS(s, slot)                                                                                   \
  ((s)->dev->vtable && (s)->dev->vtable->struct_size >= offsetof(oa_device_vtable_t, slot) + sizeof(void *) && \
   (s)->dev->vtable->slot != NULL)

void track(suite_t *s, res_kind_t kind, void *p);
void untrack(suite_t *s, void *p);
void release_all(suite_t *s);
void *host_alloc(suite_t *s, size_t n);
oa_status_t dev_alloc(suite_t *s, size_t n, size_t alignment, void **out);
oa_status_t dev_free(suite_t *s, void *p);
/* A stream for a check: a new one when the device can create streams, else the default (NULL). */
oa_status_t new_stream(suite_t *s, oa_stream_t **out);
oa_status_t new_event(suite_t *s, uint32_t flags, oa_event_t **out);

static inline oa_status_t h2d(suite_t *s, oa_stream_t *st, void *d, const void *h, size_t n) {
  return oa_device_copy(s->dev, st, d, h, n, OA_COPY_HOST_TO_DEVICE);
}
static inline oa_status_t d2h(suite_t *s, oa_stream_t *st, void *h, const void *d, size_t n) {
  return oa_device_copy(s->dev, st, h, d, n, OA_COPY_DEVICE_TO_HOST);
}
static inline oa_status_t d2d(suite_t *s, oa_stream_t *st, void *dst, const void *src, size_t n) {
  return oa_device_copy(s->dev, st, dst, src, n, OA_COPY_DEVICE_TO_DEVICE);
}

/* Wait for a stream; a device without stream slots is synchronous (its copies are done). */
oa_status_t sync_stream(suite_t *s, oa_stream_t *stream);

/* Device address + offset, without forming an out-of-object host pointer (device addresses
 * need not be host pointers). */
static inline void *dptr_add(void *p, size_t off) { return (void *)((uintptr_t)p + off); }

static inline const char *sn(oa_status_t st) { return oa_status_name(st); }

/* Inside a check (`suite_t *s`, `int rc`, a `done:` label that releases what it created): end it
 * with a FAIL or SKIP row and a detail, or FAIL when a call returns an error. */
#define FAIL(...)           \
  do {                      \
    set_detail(s, __VA_ARGS__); \
    rc = R_FAIL;            \
    goto done;              \
  } while (0)
#define SKIP(...)           \
  do {                      \
    set_detail(s, __VA_ARGS__); \
    rc = R_SKIP;            \
    goto done;              \
  } while (0)
#define TRY(expr, what)                                                     \
  do {                                                                      \
    oa_status_t st_ = (expr);                                               \
    if (st_) FAIL("%s failed: %s", what, sn(st_));                          \
  } while (0)

/* ---- small op calls on the device under test (stream.ordering, event.sticky_failure) --------------- */

/* Prepare an op call on the device under test over device buffers (float32 1-D tensors). */
oa_status_t prep_simple(suite_t *s, const char *op, oa_tensor_t *ts, uint32_t n_in, oa_op_call_t *call,
                        oa_tensor_t **ptrs, oa_op_plan_t *plan, const double *floats, uint32_t n_floats);
void f32_tensor(oa_tensor_t *t, void *data, int64_t n, const char *name);
int claims_f32(suite_t *s, const char *op);

/* ---- the checks: each returns R_PASS, R_FAIL or R_SKIP with s->detail set ------------------------- */

int check_properties(suite_t *s);
int check_queries(suite_t *s);
int check_alloc_alignment(suite_t *s);
int check_alloc_stats(suite_t *s);
int check_alloc_limits(suite_t *s);
int check_copy_roundtrip(suite_t *s);
int check_copy_wrap(suite_t *s);
int check_stream_ordering(suite_t *s);
int check_event_record_query(suite_t *s);
int check_event_host_wait_timeout(suite_t *s);
int check_event_elapsed(suite_t *s);
int check_event_cross_stream_wait(suite_t *s);
int check_event_sticky_failure(suite_t *s);
int check_device_synchronize(suite_t *s);

/* ---- op cases (op_cases.c) and their runner (checks_ops.c) ------------------------------------------ */

#define MAX_CASES 12
#define MAX_IN 8
#define MAX_OUT 3

typedef struct tspec {
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  int present;
  int constant; /* a weight: the executor wraps these into the device (wrap_memory) */
  float scale;  /* float inputs: uniform in [-scale, scale) (special: the step of the half-way points) */
  int32_t dtype; /* 1 + OA_DTYPE_* when this tensor's dtype is not the case's (int8 ops), 0: the case's */
  int ranged;    /* integer inputs: uniform in [lo, hi] instead of the dtype's default fill */
  int64_t lo, hi;
  int special;   /* float inputs: NaN, +-inf, -0.0, +-3e38 and half-way points (k + 0.5) * scale */
  int quant;     /* oa_tensor_t.quant it carries: 0 none, 1 per tensor (qscale, qzp), 2 per channel (axis 0) */
  float qscale;
  int64_t qzp;
} tspec_t;

typedef struct op_case {
  const char *name;
  uint32_t n_in, n_out;
  tspec_t in[MAX_IN], out[MAX_OUT];
  int64_t ints[16];
  uint32_t n_ints;
  double floats[8];
  uint32_t n_floats;
} op_case_t;

typedef int (*gen_fn)(int32_t dtype, op_case_t *cases);

typedef struct gen {
  const char *op;
  uint64_t dtypes; /* dtypes the generator produces inputs for */
  int sums;        /* tolerance class: 1 = accumulates sums; TOL_EXACT = every output bit for bit (the int8 ops) */
  gen_fn fn;
} gen_t;
#define TOL_EXACT 2

/* The generator for `op`, or NULL when this suite has none. */
const gen_t *find_gen(const char *op);

/* One op.<name>.<dtype> row for every op the device claims (supports_op). */
void run_op_checks(suite_t *s);

#endif /* OA_CONFORMANCE_H */
