/* Loading and verifying a .oab program. Nothing is copied or allocated: the program refers to
 * the caller's bytes (a buffer, an mmapped file, flash), which must outlive it. */
#ifndef OPENACCEL_PROGRAM_H
#define OPENACCEL_PROGRAM_H

#include "openaccel/status.h"
#include "openaccel/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format this runtime writes and reads. Files with a larger major are refused. */
#define OA_FORMAT_MAJOR 1
#define OA_FORMAT_MINOR 4

/* Required alignment of the buffer handed to oa_program_load (constants are used in place). */
#define OA_PROGRAM_ALIGNMENT 16

typedef struct oa_program {
  const uint8_t *data;
  size_t size;
  size_t flatbuffer_size;
  size_t segment_base;
  size_t segment_size;
  size_t root;            /* position of the root table */
  uint32_t format_major;
  uint32_t format_minor;
  uint32_t method_count;
  uint32_t operator_count;
  uint32_t segment_count;
} oa_program_t;

/* Verify `data` completely (header, every flatbuffer offset, vtable, vector and string, every
 * tensor/instruction/segment/test reference and size) and describe it in `out_program`.
 * `data` must be OA_PROGRAM_ALIGNMENT-aligned. Errors: INVALID_ARGUMENT (NULL, misaligned),
 * INVALID_PROGRAM (malformed: the message gives the file offset), UNSUPPORTED_VERSION. */
oa_status_t oa_program_load(const void *data, size_t size, oa_program_t *out_program,
                            oa_diag_t *diag);

/* Index of the method called `name` ("forward"), or OA_ERR_NOT_FOUND. */
oa_status_t oa_program_find_method(const oa_program_t *program, const char *name,
                                   uint32_t *out_index);

/* The producer string recorded by the exporter ("" if none). */
const char *oa_program_producer(const oa_program_t *program);

/* The target the file was exported for ("" if none). */
const char *oa_program_target(const oa_program_t *program);

/* Name of operator `index` of the op manifest, or NULL when out of range. */
const char *oa_program_operator_name(const oa_program_t *program, uint32_t index);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_PROGRAM_H */
