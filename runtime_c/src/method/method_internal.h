/* The method phases (src/method/) and what they share: the prepared method's state, which lives
 * in the caller's memory, and the functions each phase hands to the next.
 *
 *   bind.c           device slots of the file -> devices of the config; one stream per accelerator slot
 *   layout.c         sizes and offsets of state + arena (layout_t), then state, pools and tensors
 *                    placed in the caller's memory
 *   prepare.c        one instruction at a time: its kernel and plan (oa_device_prepare_op), transfers,
 *                    events; oa_method_requirements / oa_method_prepare / create run the phases
 *   execute.c        the loop of calls, inputs and outputs; no allocation, no locks on the CPU path
 *   bundled_tests.c  the file's test vectors: write inputs, execute, compare outputs */
#ifndef OA_METHOD_INTERNAL_H
#define OA_METHOD_INTERNAL_H

#include <string.h>

#include "oab_schema.h"
#include "openaccel/method.h"
#include "openaccel/openaccel.h"
#include "openaccel/platform.h"
#include "program_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the executor reads integer and float arguments in place and needs a little-endian CPU"
#endif

typedef struct oa_instr {
  oa_op_call_t call;
  oa_op_plan_t plan;
  oa_device_t *device;
  oa_stream_t *stream;       /* the device slot's stream (NULL: synchronous CPU) */
  void *scratch;             /* the slot's scratch */
  int32_t debug;
  int32_t signal;            /* event to record when done, or -1 */
  oa_fb_vec_t waits;         /* events to wait for first */
  uint8_t kind;              /* OAB_INSTRUCTION_KIND_* */
  uint8_t slot;
  /* transfers */
  oa_device_t *copy_device;  /* NULL: both sides are host memory (memmove) */
  oa_copy_kind_t copy_kind;
} oa_instr_t;

/* A constant as an accelerator sees it: wrapped (or uploaded) into its memory at prepare. */
typedef struct oa_extra {
  oa_tensor_t tensor;
  oa_device_t *device;
} oa_extra_t;

struct oa_method {
  const oa_program_t *program;
  oa_method_view_t view;
  uint32_t n_tensors, n_instrs, n_inputs, n_outputs, n_tests, n_slots, n_pools;
  oa_tensor_t *tensors;
  oa_instr_t *instrs;
  oa_tensor_t **inputs;
  oa_tensor_t **outputs;
  oa_device_t *slot_device[OA_MAX_DEVICE_SLOTS];
  int slot_is_cpu[OA_MAX_DEVICE_SLOTS];
  oa_stream_t *slot_stream[OA_MAX_DEVICE_SLOTS];
  void *slot_scratch[OA_MAX_DEVICE_SLOTS];
  oa_event_t **events;
  oa_device_t **event_device;
  uint32_t n_events;
  struct oa_extra *extra;    /* device views of constants used by accelerator ops */
  uint32_t n_extra;
  uint8_t *pool_base[OA_MAX_POOLS];
  int pool_owned[OA_MAX_POOLS];
  uint8_t *scratch;
  size_t scratch_bytes;
  void *owned_memory; /* set by oa_method_create */
  uint64_t *profile;  /* per-instruction ns accumulators, or NULL */
  const int64_t *zeros; /* layout's n_zeros zero points of 0: the quant.zero_point of tensors whose file stores none */
};
#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~(size_t)((a)-1))

static inline int add_size(size_t *acc, size_t n) {
  if (*acc > SIZE_MAX - n) return 0;
  *acc += n;
  return 1;
}

static inline int mul_add_size(size_t *acc, size_t count, size_t elem) {
  if (elem && count > SIZE_MAX / elem) return 0;
  return add_size(acc, count * elem);
}

/* Where everything of a method lives in the caller's memory: offsets of the state's arrays (from
 * the start of the memory), each CPU pool's offset in the arena (SIZE_MAX: the pool comes from
 * its device), and the two sizes oa_memory_requirements_t reports. Scratch follows the arena; its
 * size is known only once every instruction is prepared. */
typedef struct layout {
  size_t tensors_off, instrs_off, ptrs_off, io_off, events_off, extra_off, zeros_off, state_bytes;
  uint32_t n_extra;
  uint32_t n_zeros; /* largest quant count among the tensors whose zero points the file does not store */
  size_t pool_off[OA_MAX_POOLS];
  size_t arena_bytes;
} layout_t;

/* ---- bind.c ---- */
/* Bind each device slot of the file to a device of the config, by kind name and ordinal. */
oa_status_t oa_method_bind(const oa_program_t *p, const oa_method_view_t *m, const oa_method_config_t *cfg,
                           oa_device_t **out_devs, int *out_is_cpu, oa_diag_t *diag);
/* One in-order stream per accelerator slot of `m` (the CPU runs synchronously). */
oa_status_t oa_method_open_streams(oa_method_t *m, oa_diag_t *diag);

/* ---- layout.c ---- */
/* Sizes and offsets of the state and the arena for the bound slots (`slot_is_cpu`). */
oa_status_t oa_method_layout(const oa_program_t *p, const oa_method_view_t *m, const int *slot_is_cpu,
                             layout_t *out, oa_diag_t *diag);
/* Point `m`'s arrays into `base` (the caller's memory, at least state + arena bytes) as `lay`
 * says, and obtain every pool: CPU pools in the arena, the others from their device. */
oa_status_t oa_method_place(oa_method_t *m, const layout_t *lay, uint8_t *base, oa_diag_t *diag);
/* Fill every tensor descriptor of `m` (data in its pool or segment) and the input/output lists;
 * inputs and outputs must be host memory. */
oa_status_t oa_method_place_tensors(oa_method_t *m, oa_diag_t *diag);
/* Fill one tensor descriptor; `pool_base` may be NULL (metadata only, data stays NULL). `zeros`:
 * at least layout's n_zeros zeros, the quant.zero_point of a tensor whose file stores none. */
oa_status_t oa_method_fill_tensor(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                  uint8_t *const *pool_base, const int64_t *zeros, oa_tensor_t *out,
                                  oa_diag_t *diag);

/* ---- prepare.c ---- */
/* Add where instruction `i` came from (op, source line) to the message of `st`. */
void oa_method_instr_context(const oa_program_t *p, const oa_method_view_t *m, uint32_t i, const char *op,
                             int32_t debug, oa_diag_t *diag, oa_status_t st);

#endif /* OA_METHOD_INTERNAL_H */
