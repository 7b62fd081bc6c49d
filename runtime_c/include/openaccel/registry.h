/* The device registry: an object the application creates (no singleton, no static constructors),
 * into which it registers device factories (the CPU's, vendor libraries') and which creates their
 * devices once. torch.accelerator's device_count / current_device_index live here. */
#ifndef OPENACCEL_REGISTRY_H
#define OPENACCEL_REGISTRY_H

#include <stdint.h>

#include "openaccel/allocator.h"
#include "openaccel/device_abi.h"
#include "openaccel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OA_REGISTRY_MAX_FACTORIES 8
#define OA_REGISTRY_MAX_DEVICES 16

/* A registry the application creates (no singleton, no static constructors). Treat the fields
 * as private; its size is part of the ABI (language bindings allocate it). */
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

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_REGISTRY_H */
