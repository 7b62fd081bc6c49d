/* openaccel runtime: one header for applications. */
#ifndef OPENACCEL_OPENACCEL_H
#define OPENACCEL_OPENACCEL_H

#include "openaccel/allocator.h"
#include "openaccel/cpu.h"
#include "openaccel/device.h"
#include "openaccel/device_abi.h"
#include "openaccel/method.h"
#include "openaccel/op.h"
#include "openaccel/platform.h"
#include "openaccel/program.h"
#include "openaccel/registry.h"
#include "openaccel/status.h"
#include "openaccel/types.h"

#define OA_VERSION_MAJOR 0
#define OA_VERSION_MINOR 1
#define OA_VERSION_PATCH 0
#define OA_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the runtime library actually linked ("0.1.0"). */
const char *oa_version(void);

/* Convenience for hosts with an allocator: requirements + oa_platform_alloc + prepare.
 * Free with oa_method_destroy. Not for bare-metal builds (use oa_method_prepare). */
oa_status_t oa_method_create(const oa_program_t *program, uint32_t method_index,
                             const oa_method_config_t *config, oa_method_t **out_method,
                             oa_diag_t *diag);
void oa_method_destroy(oa_method_t *method);

/* sizeof of a public struct by name ("oa_program_t", "oa_tensor_t", "oa_cpu_device_t", ...), 0 if
 * unknown. Language bindings use it to check that their mirrors match this build. */
size_t oa_abi_sizeof(const char *type_name);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_OPENACCEL_H */
