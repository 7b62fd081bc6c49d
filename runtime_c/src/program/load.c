/* Program phase 1, load: the file header (identifier, extended header, flatbuffer and segment
 * bounds), the root table and the format version. Hands verify.c an oa_program_t whose byte ranges
 * are known to lie inside the caller's buffer; the program is only returned once verify accepts
 * it. Nothing is copied or allocated: constants stay where they are (zero copy). */
#include <string.h>

#include "oab_schema.h"
#include "openaccel/program.h"
#include "program_internal.h"

#define HEADER_MAGIC "OAXH"
#define HEADER_BYTES 40 /* root offset + identifier + 32-byte extended header */

oa_status_t oa_program_load(const void *data, size_t size, oa_program_t *out_program, oa_diag_t *diag) {
  oa_diag_clear(diag);
  if (!data || !out_program) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "program data or output is NULL");
  if ((uintptr_t)data % OA_PROGRAM_ALIGNMENT)
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "program buffer at %p is not %d-byte aligned", data,
                        OA_PROGRAM_ALIGNMENT);
  const uint8_t *b = (const uint8_t *)data;
  if (size < HEADER_BYTES)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "file is %zu bytes, too small for an .oab header (%d bytes)",
                        size, HEADER_BYTES);
  if (memcmp(b + 4, OAB_FILE_IDENTIFIER, 4) != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "not an .oab file: bytes 4..8 are not the identifier \"%s\"", OAB_FILE_IDENTIFIER);
  if (memcmp(b + 8, HEADER_MAGIC, 4) != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "bad extended header magic at byte offset 8 (expected \"%s\")",
                        HEADER_MAGIC);
  uint32_t header_size = oa_rd_u32(b + 12);
  uint64_t fb_size = oa_rd_u64(b + 16), seg_base = oa_rd_u64(b + 24), seg_size = oa_rd_u64(b + 32);
  if (header_size < 32)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "extended header size %u at byte offset 12 is below 32", header_size);
  if (fb_size < HEADER_BYTES || fb_size > size)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "flatbuffer size %llu (byte offset 16) does not fit the %zu-byte file (truncated?)",
                        (unsigned long long)fb_size, size);
  if (seg_base < fb_size || seg_base % 64 || seg_base > size || seg_size > size - seg_base)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "segment data [%llu, +%llu) (byte offsets 24, 32) does not fit the %zu-byte file (truncated?)",
                        (unsigned long long)seg_base, (unsigned long long)seg_size, size);
  oa_program_t p;
  memset(&p, 0, sizeof p);
  p.data = b;
  p.size = size;
  p.flatbuffer_size = (size_t)fb_size;
  p.segment_base = (size_t)seg_base;
  p.segment_size = (size_t)seg_size;
  oa_fb_t fb = {b, p.flatbuffer_size};
  oa_fb_table_t root;
  oa_status_t st;
  uint16_t major, minor;
  if ((st = oa_fb_root(&fb, &root, diag))) return st;
  p.root = root.pos;
  if ((st = oa_fb_u16(&root, OAB_PROGRAM_FORMAT_MAJOR, 0, &major, diag))) return st;
  if ((st = oa_fb_u16(&root, OAB_PROGRAM_FORMAT_MINOR, 0, &minor, diag))) return st;
  p.format_major = major;
  p.format_minor = minor;
  if (major == 0) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "file has no format version");
  if (major > OA_FORMAT_MAJOR)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED_VERSION,
                        "file format %u.%u is newer than this runtime reads (%d.x); update the openaccel runtime",
                        major, minor, OA_FORMAT_MAJOR);
  if ((st = oa_program_verify(&p, &root, diag))) return st;
  *out_program = p;
  return OA_OK;
}
