/* Checks: alloc.alignment, alloc.stats, alloc.limits, copy.roundtrip, copy.wrap. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- memory ---------------------------------------------------------------------------------------- */

int check_alloc_alignment(suite_t *s) {
  int rc = R_PASS;
  static const size_t aligns[] = {0, 16, 64, 256, 1024, 4096};
  static const size_t sizes[] = {1, 100, 4099};
  void *ptrs[18];
  size_t lens[18];
  int n = 0;
  for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      void *p = NULL;
      oa_status_t st = dev_alloc(s, sizes[z], aligns[a], &p);
      if (st == OA_ERR_INTERNAL) FAIL("allocate(%zu, %zu) returned OK and NULL", sizes[z], aligns[a]);
      if (st) FAIL("allocate(%zu bytes, alignment %zu) failed: %s", sizes[z], aligns[a], sn(st));
      size_t want = aligns[a] > s->props.alignment ? aligns[a] : s->props.alignment;
      if ((uintptr_t)p % want)
        FAIL("allocate(%zu bytes, alignment %zu) gave %p, which is %zu bytes off a %zu-byte boundary", sizes[z], aligns[a],
             p, (size_t)((uintptr_t)p % want), want);
      ptrs[n] = p;
      lens[n++] = sizes[z];
    }
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      uintptr_t a = (uintptr_t)ptrs[i], b = (uintptr_t)ptrs[j];
      if (a < b + lens[j] && b < a + lens[i]) FAIL("allocations %p (+%zu) and %p (+%zu) overlap", ptrs[i], lens[i], ptrs[j], lens[j]);
    }
  void *bad = NULL;
  oa_status_t rejected = oa_device_allocate(s->dev, 64, 48, &bad), st;
  if (!rejected) {
    (void)oa_device_free(s->dev, bad);
    FAIL("allocate with alignment 48 (not a power of two) succeeded");
  }
  if ((st = oa_device_free(s->dev, NULL))) FAIL("free(NULL) failed: %s", sn(st));
  for (int i = 0; i < n; i++) TRY(dev_free(s, ptrs[i]), "free");
  set_detail(s, "%d allocations (sizes 1..4099, alignments default..4096) aligned to max(alignment, %u) and disjoint; "
             "alignment 48 rejected (%s)", n, s->props.alignment, sn(rejected));
done:
  release_all(s);
  return rc;
}

int check_alloc_stats(suite_t *s) {
  int rc = R_PASS;
  oa_memory_stats_t s0, s1, s2, s3, s4;
  void *a = NULL, *b = NULL;
  if (!HAS(s, memory_stats)) SKIP("the device has no memory_stats slot");
  const int64_t slack = 2 * 8192; /* a device may account rounded-up sizes */
  TRY(oa_device_memory_stats(s->dev, &s0), "memory_stats");
  if (s0.peak_allocated_bytes < s0.allocated_bytes) FAIL("peak %lld < current %lld", (long long)s0.peak_allocated_bytes, (long long)s0.allocated_bytes);
  TRY(dev_alloc(s, 1000, 0, &a), "allocate 1000");
  TRY(dev_alloc(s, 5000, 0, &b), "allocate 5000");
  TRY(oa_device_memory_stats(s->dev, &s1), "memory_stats");
  int64_t grew = s1.allocated_bytes - s0.allocated_bytes;
  if (grew < 6000 || grew > 6000 + slack)
    FAIL("after allocating 1000 + 5000 bytes, allocated_bytes grew by %lld (expected 6000 to %lld)", (long long)grew,
         (long long)(6000 + slack));
  if (s1.allocation_count != s0.allocation_count + 2)
    FAIL("allocation_count went from %lld to %lld after 2 allocations", (long long)s0.allocation_count,
         (long long)s1.allocation_count);
  if (s1.peak_allocated_bytes < s1.allocated_bytes) FAIL("peak %lld < current %lld", (long long)s1.peak_allocated_bytes, (long long)s1.allocated_bytes);
  TRY(dev_free(s, b), "free");
  b = NULL;
  TRY(oa_device_memory_stats(s->dev, &s2), "memory_stats");
  if (s2.free_count != s1.free_count + 1)
    FAIL("free_count went from %lld to %lld after 1 free", (long long)s1.free_count, (long long)s2.free_count);
  if (s1.allocated_bytes - s2.allocated_bytes < 5000 || s1.allocated_bytes - s2.allocated_bytes > 5000 + slack)
    FAIL("freeing 5000 bytes lowered allocated_bytes by %lld", (long long)(s1.allocated_bytes - s2.allocated_bytes));
  if (s2.peak_allocated_bytes != s1.peak_allocated_bytes)
    FAIL("a free changed the peak from %lld to %lld", (long long)s1.peak_allocated_bytes, (long long)s2.peak_allocated_bytes);
  TRY(oa_device_reset_peak_memory_stats(s->dev), "reset_peak_memory_stats");
  TRY(oa_device_memory_stats(s->dev, &s3), "memory_stats");
  if (s3.peak_allocated_bytes != s3.allocated_bytes)
    FAIL("after reset_peak, peak %lld != current %lld", (long long)s3.peak_allocated_bytes, (long long)s3.allocated_bytes);
  if (s3.allocation_count != s2.allocation_count || s3.free_count != s2.free_count)
    FAIL("reset_peak changed the cumulative counts");
  TRY(dev_free(s, a), "free");
  a = NULL;
  TRY(oa_device_memory_stats(s->dev, &s4), "memory_stats");
  if (s4.allocated_bytes != s0.allocated_bytes)
    FAIL("after freeing everything, allocated_bytes is %lld (was %lld before)", (long long)s4.allocated_bytes,
         (long long)s0.allocated_bytes);
  if (s4.peak_allocated_bytes != s3.peak_allocated_bytes)
    FAIL("a free changed the peak from %lld to %lld", (long long)s3.peak_allocated_bytes, (long long)s4.peak_allocated_bytes);
  set_detail(s, "current/peak/counts follow 2 allocations and 2 frees (+%lld bytes accounted for 6000); reset_peak "
             "sets peak = current", (long long)grew);
done:
  release_all(s);
  return rc;
}

int check_alloc_limits(suite_t *s) {
  int rc = R_PASS;
  oa_memory_stats_t before, after;
  int stats = HAS(s, memory_stats);
  void *p = NULL;
  if (stats) TRY(oa_device_memory_stats(s->dev, &before), "memory_stats");
  char note[160] = "";
  uint64_t total = s->props.memory_total;
  int probed_total = total && total < (uint64_t)SIZE_MAX / 2;
  if (probed_total) {
    size_t req = (size_t)total * 2;
    oa_status_t st = oa_device_allocate(s->dev, req, 0, &p);
    if (!st) {
      (void)oa_device_free(s->dev, p);
      p = NULL;
      if (!(s->props.flags & OA_DEVICE_FLAG_HOST_VISIBLE))
        FAIL("allocate(%zu bytes = 2 x memory_total) succeeded", req);
      snprintf(note, sizeof note, "; 2 x memory_total succeeded (the host OS overcommits)");
    } else if (st != OA_ERR_OUT_OF_MEMORY) {
      FAIL("allocate(%zu bytes = 2 x memory_total): expected OUT_OF_MEMORY, received %s", req, sn(st));
    }
  }
  size_t huge = SIZE_MAX / 2 + 1;
  oa_status_t st = oa_device_allocate(s->dev, huge, 0, &p);
  if (!st) {
    (void)oa_device_free(s->dev, p);
    FAIL("allocate(%zu bytes) succeeded", huge);
  }
  if (st != OA_ERR_OUT_OF_MEMORY) FAIL("allocate(SIZE_MAX/2 + 1): expected OUT_OF_MEMORY, received %s", sn(st));
  st = oa_device_allocate(s->dev, SIZE_MAX, 0, &p);
  if (!st) {
    (void)oa_device_free(s->dev, p);
    FAIL("allocate(SIZE_MAX) succeeded");
  }
  if (st != OA_ERR_OUT_OF_MEMORY) FAIL("allocate(SIZE_MAX): expected OUT_OF_MEMORY, received %s", sn(st));
  if (stats) {
    TRY(oa_device_memory_stats(s->dev, &after), "memory_stats");
    if (after.allocated_bytes != before.allocated_bytes || after.allocation_count != before.allocation_count +
        (note[0] ? 1 : 0))
      FAIL("failed allocations changed the stats (allocated %lld -> %lld, count %lld -> %lld)",
           (long long)before.allocated_bytes, (long long)after.allocated_bytes, (long long)before.allocation_count,
           (long long)after.allocation_count);
  }
  TRY(dev_alloc(s, 4096, 0, &p), "allocate 4096 bytes after the failed requests");
  set_detail(s, "requests beyond the device's memory fail with OUT_OF_MEMORY%s%s; the device still allocates afterwards",
             probed_total ? " (2 x memory_total, SIZE_MAX/2+1, SIZE_MAX)"
                          : total ? " (SIZE_MAX/2+1, SIZE_MAX; memory_total exceeds the address space)"
                                  : " (SIZE_MAX/2+1, SIZE_MAX; memory_total unknown)",
             note);
done:
  release_all(s);
  return rc;
}

/* ---- copies ------------------------------------------------------------------------------------------- */

int check_copy_roundtrip(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "copy.roundtrip");
  static const size_t sizes[] = {1, 13, 4096, 65536 + 7, 1 << 20};
  oa_stream_t *streams[2] = {NULL, NULL};
  TRY(new_stream(s, &streams[1]), "stream_create");
  int n_streams = streams[1] ? 2 : 1;
  for (int k = 0; k < n_streams; k++) {
    oa_stream_t *st = streams[k];
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      size_t n = sizes[z];
      uint8_t *src = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n), *model = (uint8_t *)host_alloc(s, n);
      void *a = NULL, *b = NULL;
      if (!src || !out || !model) FAIL("out of host memory");
      fill_bytes(&r, src, n);
      memset(out, 0, n);
      TRY(dev_alloc(s, n, 0, &a), "allocate");
      TRY(dev_alloc(s, n, 0, &b), "allocate");
      TRY(h2d(s, st, a, src, n), "copy host to device");
      TRY(sync_stream(s, st), "stream_synchronize after the host-to-device copy");
      TRY(d2d(s, st, b, a, n), "copy device to device");
      TRY(sync_stream(s, st), "stream_synchronize after the device-to-device copy");
      TRY(d2h(s, st, out, b, n), "copy device to host");
      TRY(sync_stream(s, st), "stream_synchronize after the device-to-host copy");
      for (size_t i = 0; i < n; i++)
        if (out[i] != src[i])
          FAIL("%s stream, %zu bytes: H2D -> D2D -> D2H changed byte %zu (0x%02x -> 0x%02x)", k ? "a new" : "the default",
               n, i, src[i], out[i]);
      if (n >= 16) { /* sub-ranges at offsets: device address arithmetic */
        size_t len = n - 8;
        memcpy(model, src, n);
        memmove(model + 5, src + 3, len);
        TRY(d2d(s, st, dptr_add(b, 5), dptr_add(a, 3), len), "copy device to device at offsets");
        TRY(sync_stream(s, st), "stream_synchronize");
        TRY(d2h(s, st, out, b, n), "copy device to host");
        TRY(sync_stream(s, st), "stream_synchronize");
        for (size_t i = 0; i < n; i++)
          if (out[i] != model[i]) FAIL("%zu bytes: D2D of %zu bytes from offset 3 to offset 5 wrong at byte %zu", n, len, i);
        memset(out, 0, n);
        TRY(d2h(s, st, out + 2, dptr_add(a, 1), n - 3), "copy device to host from an offset");
        TRY(sync_stream(s, st), "stream_synchronize");
        for (size_t i = 0; i < n - 3; i++)
          if (out[i + 2] != src[i + 1]) FAIL("%zu bytes: D2H from offset 1 wrong at byte %zu", n, i);
      }
      TRY(h2d(s, st, a, src, 0), "a zero-byte copy");
      TRY(dev_free(s, a), "free");
      TRY(dev_free(s, b), "free");
    }
  }
  set_detail(s, "H2D -> D2D -> D2H exact for 1 B .. 1 MiB on %s, incl. copies at offsets; zero-byte copy OK",
             n_streams == 2 ? "the default and a new stream" : "the default stream");
done:
  release_all(s);
  return rc;
}

int check_copy_wrap(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "copy.wrap");
  oa_memory_stats_t before, after;
  int stats = HAS(s, memory_stats);
  if (!HAS(s, wrap_memory)) SKIP("the device has no wrap_memory slot");
  const size_t n = 10000;
  uint8_t *src = (uint8_t *)host_alloc(s, n), *keep = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n);
  void *w = NULL, *d = NULL;
  if (!src || !keep || !out) FAIL("out of host memory");
  fill_bytes(&r, src, n);
  memcpy(keep, src, n);
  if (stats) TRY(oa_device_memory_stats(s->dev, &before), "memory_stats");
  TRY(oa_device_wrap_memory(s->dev, src, n, &w), "wrap_memory");
  if (!w) FAIL("wrap_memory returned OK and NULL");
  track(s, RES_WRAPPED, w);
  TRY(d2h(s, NULL, out, w, n), "copy from wrapped memory to host");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  for (size_t i = 0; i < n; i++)
    if (out[i] != keep[i]) FAIL("wrapped memory read back wrong at byte %zu", i);
  TRY(dev_alloc(s, n, 0, &d), "allocate");
  TRY(d2d(s, NULL, d, dptr_add(w, 17), n - 17), "copy from wrapped memory (offset 17) to device memory");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  memset(out, 0, n);
  TRY(d2h(s, NULL, out, d, n - 17), "copy device to host");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  for (size_t i = 0; i < n - 17; i++)
    if (out[i] != keep[i + 17]) FAIL("D2D from wrapped memory wrong at byte %zu", i);
  if (memcmp(src, keep, n)) FAIL("wrapping changed the host bytes");
  untrack(s, w);
  TRY(oa_device_unwrap_memory(s->dev, w), "unwrap_memory");
  TRY(dev_free(s, d), "free");
  if (stats) {
    TRY(oa_device_memory_stats(s->dev, &after), "memory_stats");
    if (after.allocated_bytes != before.allocated_bytes)
      FAIL("after unwrap and free, allocated_bytes is %lld (was %lld)", (long long)after.allocated_bytes,
           (long long)before.allocated_bytes);
  }
  set_detail(s, "%zu wrapped host bytes read back through D2H and D2D (at an offset); unwrap releases them", n);
done:
  release_all(s);
  return rc;
}

