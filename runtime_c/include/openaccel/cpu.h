/* The built-in CPU device: reference kernels everywhere, SIMD kernels where the CPU has them. */
#ifndef OPENACCEL_CPU_H
#define OPENACCEL_CPU_H

#include "openaccel/device.h"
#include "openaccel/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oa_cpu_arch {
  OA_CPU_ARCH_OTHER = 0,
  OA_CPU_ARCH_X86_64 = 1,
  OA_CPU_ARCH_AARCH64 = 2,
  OA_CPU_ARCH_ARM = 3,
  OA_CPU_ARCH_RISCV64 = 4
} oa_cpu_arch_t;

/* What the CPU can do, detected once (cpuid + XCR0 on x86, getauxval(AT_HWCAP) on Arm and RISC-V
 * Linux). A flag is 1 only when both the CPU and the OS support it (AVX-512: XCR0 saves the opmask
 * and ZMM state). Fields are only ever appended. */
typedef struct oa_cpu_features {
  oa_cpu_arch_t arch;
  int32_t neon, fp16, dotprod;     /* Arm */
  int32_t sse4_1, avx, avx2, fma, f16c, avx512f; /* x86 */
  int32_t cores;                   /* online logical CPUs, at least 1 */
  int64_t l1d_bytes, l2_bytes, l3_bytes; /* 0 when unknown */
  /* x86 AVX-512 sub-features (each implies avx512f), VNNI and AMX (cpuid leaf 7, XCR0) */
  int32_t avx512bw, avx512dq, avx512vl, avx512_vnni, avx_vnni;
  int32_t amx_tile, amx_int8, amx_bf16; /* CPU + XCR0 tile state + (Linux) the process's permission */
  /* RISC-V: the V extension (RVV 1.0, HWCAP bit 'V') and its VLEN in bits (0 when unknown: read
   * only in builds compiled with V, the qemu-riscv64-v target's) */
  int32_t rvv, rvv_vlen;
  /* Arm: the int8 matrix multiply-accumulate instructions (FEAT_I8MM: smmla; Linux HWCAP2_I8MM) */
  int32_t i8mm;
} oa_cpu_features_t;

/* Detect the features of the CPU this code runs on. */
void oa_cpu_detect(oa_cpu_features_t *out_features);

/* Name of the architecture ("x86_64", "aarch64", "arm", "riscv64", "other"). */
const char *oa_cpu_arch_name(oa_cpu_arch_t arch);

/* Options of a CPU device; all zero (or a NULL pointer to them) is the default. Initialise with
 * designated initializers ({.threads = 4}): fields are only ever appended. */
typedef struct oa_cpu_options {
  int32_t reference_only;          /* 1: use the portable reference kernels only */
  int32_t threads;                 /* worker threads for heavy kernels; 0 or 1 = none */
  /* everything the device allocates: its thread pool, memory from oa_device_allocate, streams,
   * events. NULL: the platform's (oa_platform_alloc). Copied at init; need not outlive the call. */
  const oa_allocator_t *allocator;
  /* OA_CPU_ISA_* bits the optimized kernels must not use; 0: every ISA this build has and the CPU
   * reports. Tests and the conformance suite set it to force each ISA (OA_CPU_ISA_PORTABLE alone
   * left: the portable C kernels; all bits: the reference kernels, as reference_only). */
  uint32_t disable_isas;
} oa_cpu_options_t;

/* Instruction sets of the optimized CPU kernels (bits of oa_cpu_options_t.disable_isas and of the
 * device query ("cpu", "isas"): the ones its kernels may use). Each optimized kernel picks the
 * best one it has among those, in the order AVX-512, AVX2, NEON, RVV, portable C. */
#define OA_CPU_ISA_PORTABLE (1u << 0) /* portable C11 (blocked GEMM, one-lane SIMD code) */
#define OA_CPU_ISA_AVX2 (1u << 1)     /* x86-64 AVX2 + FMA */
#define OA_CPU_ISA_NEON (1u << 2)     /* Arm Advanced SIMD (aarch64, armv7 with NEON) */
#define OA_CPU_ISA_AVX512 (1u << 3)   /* x86-64 AVX-512 F/BW/DQ/VL (with the OS saving ZMM state) */
#define OA_CPU_ISA_RVV (1u << 4)      /* RISC-V vector extension 1.0 ("v") */
/* Not an ISA of its own but an option of two: the x86 int8 dot products (vpdpbusd) inside the
 * AVX-512 kernels (AVX512-VNNI) and the AVX2 ones (AVX-VNNI, the VEX form), where the CPU has
 * them. Disabling it keeps those ISAs on their plain tiles (to test both on one machine). */
#define OA_CPU_ISA_VNNI (1u << 5)
/* Another option of the AVX-512 ISA: the Intel AMX int8 tiles (tdpbssd) of conv2d_q8 / linear_q8,
 * where the CPU has amx_tile + amx_int8 (and avx512_vnni) and the OS grants the tile data state
 * (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM)). Preferred over VNNI when both are allowed; disabling
 * it keeps the AVX-512 ISA on its VNNI or plain tiles. */
#define OA_CPU_ISA_AMX (1u << 6)
#define OA_CPU_ISA_ALL 0xffffffffu

/* The CPU device object. Its storage belongs to the caller (static, stack or heap). Treat the
 * fields as private. */
typedef struct oa_cpu_device {
  oa_device_t base;
  oa_cpu_features_t features;
  oa_cpu_options_t options;  /* as given, with options.allocator cleared (the copy is `allocator`) */
  oa_memory_stats_t stats;
  oa_allocator_t allocator;  /* everything the device allocates goes through this one */
  int32_t owned;             /* 1: created by the factory, freed by destroy */
  struct oa_threadpool *pool; /* worker threads when options.threads > 1 */
} oa_cpu_device_t;

/* Initialise a CPU device in `storage`; `options` may be NULL for defaults.
 * What it allocates, all through options->allocator (the platform's when NULL):
 * - init: nothing with threads 0 or 1. With threads > 1 (in builds with the thread pool,
 *   OA_THREADS) it allocates the pool (two blocks: its state and the worker handles) and starts
 *   threads - 1 worker threads (the caller is the last); their stacks come from the OS thread
 *   library, not from the allocator.
 * - later, only when asked: oa_device_allocate (one block each), oa_stream_create and
 *   oa_event_create (one small block each), all freed by the matching free / destroy calls.
 * - oa_device_prepare_op and oa_device_execute_op: nothing.
 * oa_cpu_device_deinit (or oa_device_destroy) frees the thread pool. OA_ERR_INVALID_ARGUMENT for
 * an allocator without alloc or free; OA_ERR_OUT_OF_MEMORY when the pool cannot be allocated. */
oa_status_t oa_cpu_device_init(oa_cpu_device_t *storage, const oa_cpu_options_t *options,
                               oa_device_t **out_device);

/* The variant of the kernel a CPU device's plan runs ("ref", "portable", "avx2", "neon", "avx512",
 * "rvv"); "" for NULL or a plan the CPU device did not prepare. */
const char *oa_cpu_plan_kernel(const oa_op_plan_t *plan);

/* Stop the CPU device's worker threads (if any). Safe to call twice. */
void oa_cpu_device_deinit(oa_cpu_device_t *storage);

/* The built-in CPU device factory (one device, default options). The device object and
 * everything it allocates come from the allocator the registry hands the factory. */
const oa_device_factory_t *oa_cpu_device_factory(void);

/* Names of the ops this build has CPU kernels for, one at a time (index from 0); NULL past the
 * end. The exporter and `openaccel targets` compare this with the files they produce. */
const char *oa_cpu_kernel_op_name(uint32_t index);

/* Names of the CPU features a file may require (Program.required_features), which are also the
 * CPU device's "cpu" query keys ("neon", "avx2", "avx512f", "v", ...), one at a time from 0; NULL
 * past the end. */
const char *oa_cpu_feature_name(uint32_t index);

/* Check the CPU features `program` requires against `cpu_device` (a device of kind CPU, asked with
 * oa_device_query_i64(dev, "cpu", name)). OA_OK when it has all of them (or none are required);
 * OA_ERR_UNSUPPORTED naming the needed features, the target the file was exported for and what
 * this CPU has; OA_ERR_INVALID_PROGRAM naming a required feature this runtime does not know.
 * Called before a method's ops are prepared on that device. Allocates nothing. */
oa_status_t oa_cpu_check_required_features(const oa_program_t *program, oa_device_t *cpu_device,
                                           oa_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_CPU_H */
