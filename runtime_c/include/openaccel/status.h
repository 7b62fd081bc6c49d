/* Status codes and diagnostics shared by every openaccel call. */
#ifndef OPENACCEL_STATUS_H
#define OPENACCEL_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible call returns one of these. OA_OK is zero so `if (st) return st;` works. */
typedef enum oa_status {
  OA_OK = 0,
  OA_ERR_INVALID_ARGUMENT = 1,  /* the caller passed something wrong (shape, dtype, count, NULL) */
  OA_ERR_INVALID_PROGRAM = 2,   /* the .oab bytes are malformed or inconsistent */
  OA_ERR_UNSUPPORTED_VERSION = 3, /* the file needs a newer runtime */
  OA_ERR_UNSUPPORTED = 4,       /* op, dtype, argument or feature this build cannot run */
  OA_ERR_OUT_OF_MEMORY = 5,     /* a caller-provided buffer or a pool is too small */
  OA_ERR_NOT_FOUND = 6,         /* unknown name, key or index */
  OA_ERR_NOT_READY = 7,         /* asynchronous work still pending (not an error for queries) */
  OA_ERR_TIMEOUT = 8,           /* a wait ran out of time */
  OA_ERR_DEVICE = 9,            /* a device reported a failure */
  OA_ERR_IO = 10,               /* file or transport failure (tools only) */
  OA_ERR_INTERNAL = 11,         /* a runtime invariant broke: a bug to report */
  OA_ERR_CHECK_FAILED = 12      /* a bundled test's outputs were outside tolerance */
} oa_status_t;

/* Stable, upper-case name of a status, e.g. "INVALID_PROGRAM". Never NULL. */
const char *oa_status_name(oa_status_t status);

#define OA_DIAG_MESSAGE_BYTES 512

/* A caller-owned sink for the human-readable reason of a failure. Every function that takes an
 * `oa_diag_t *diag` accepts NULL (no message kept). Messages name what was wrong, where (op,
 * argument, tensor, file offset) and what was expected versus received. Building with
 * OA_NO_MESSAGES compiles the text out to save flash; codes stay. */
typedef struct oa_diag {
  oa_status_t status;
  char message[OA_DIAG_MESSAGE_BYTES];
} oa_diag_t;

/* Clear a diagnostic. */
void oa_diag_clear(oa_diag_t *diag);

/* Record `status` and a printf-style message (subset: %s %c %d %i %u %x %ld %lu %lld %llu %zu
 * %zd %p %g %%; precision for %g only), replacing any earlier message. Returns `status` so
 * callers can `return oa_diag_fail(diag, OA_ERR_..., "...")`. */
oa_status_t oa_diag_fail(oa_diag_t *diag, oa_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix an existing message with context ("instruction 12 (conv2d): ..."); keeps the status. */
oa_status_t oa_diag_context(oa_diag_t *diag, oa_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Format into `buf` (always NUL-terminated when size > 0) with the subset above; returns the
 * number of characters written, excluding the NUL. Dependency-free (no stdio). */
size_t oa_format(char *buf, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
size_t oa_vformat(char *buf, size_t size, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_STATUS_H */
