/* Structured mutations of .oab files (fuzz/mutate_oab.c) for the fuzzer's custom mutator. */
#ifndef OA_FUZZ_MUTATE_OAB_H
#define OA_FUZZ_MUTATE_OAB_H

#include <stddef.h>
#include <stdint.h>

/* Change `count` field values of the .oab file in `data` in place (dims, offsets, tensor indices,
 * ops, arguments, sizes, table offsets), chosen by `seed`. Returns `size`, or 0 when `data` is not
 * a walkable .oab file (the caller then mutates bytes instead). */
size_t oa_fuzz_mutate_oab(uint8_t *data, size_t size, unsigned int seed, unsigned int count);

#endif
