/* Checks: properties, queries. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- properties and queries ----------------------------------------------------------------------- */

static int nonempty_cstr(const char *s, size_t cap) { return s[0] != '\0' && memchr(s, '\0', cap) != NULL; }

int check_properties(suite_t *s) {
  int rc = R_PASS;
  const oa_device_vtable_t *vt = s->dev->vtable;
  oa_device_properties_t p, q;
  if (!vt) FAIL("device has no vtable");
  if (vt->abi_version < 1 || vt->abi_version > OA_DEVICE_ABI_VERSION)
    FAIL("vtable abi_version %u: expected 1 to %d", vt->abi_version, OA_DEVICE_ABI_VERSION);
  if (vt->struct_size < offsetof(oa_device_vtable_t, get_properties) + sizeof(void *))
    FAIL("vtable struct_size %u is smaller than the first slots", vt->struct_size);
  static const struct { const char *name; size_t off; } required[] = {
      {"destroy", offsetof(oa_device_vtable_t, destroy)},
      {"get_properties", offsetof(oa_device_vtable_t, get_properties)},
      {"supports_op", offsetof(oa_device_vtable_t, supports_op)},
      {"allocate", offsetof(oa_device_vtable_t, allocate)},
      {"free", offsetof(oa_device_vtable_t, free)},
      {"copy", offsetof(oa_device_vtable_t, copy)},
      {"prepare_op", offsetof(oa_device_vtable_t, prepare_op)},
      {"execute_op", offsetof(oa_device_vtable_t, execute_op)},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    void *slot = NULL;
    if (vt->struct_size >= required[i].off + sizeof(void *)) memcpy(&slot, (const char *)vt + required[i].off, sizeof slot);
    if (!slot) FAIL("required slot '%s' is empty", required[i].name);
  }
  memset(&p, 0x5a, sizeof p);
  TRY(oa_device_get_properties(s->dev, &p), "get_properties");
  if (!nonempty_cstr(p.name, sizeof p.name)) FAIL("name is empty or not NUL-terminated");
  if (!nonempty_cstr(p.vendor, sizeof p.vendor)) FAIL("vendor is empty or not NUL-terminated");
  if (!nonempty_cstr(p.kind_name, sizeof p.kind_name)) FAIL("kind_name is empty or not NUL-terminated");
  if (s->factory_kind && strcmp(p.kind_name, s->factory_kind) != 0)
    FAIL("kind_name '%s' differs from its factory's kind_name '%s'", p.kind_name, s->factory_kind);
  if (p.kind != OA_DEVICE_KIND_CPU && p.kind != OA_DEVICE_KIND_ACCELERATOR) FAIL("kind %d is not a known kind", (int)p.kind);
  if (!p.alignment || (p.alignment & (p.alignment - 1))) FAIL("alignment %u is not a power of two", p.alignment);
  if (p.memory_total && p.memory_free > p.memory_total)
    FAIL("memory_free %llu > memory_total %llu", (unsigned long long)p.memory_free, (unsigned long long)p.memory_total);
  uint32_t known = OA_DEVICE_FLAG_ASYNC | OA_DEVICE_FLAG_EVENTS | OA_DEVICE_FLAG_TIMING | OA_DEVICE_FLAG_HOST_VISIBLE;
  if (p.flags & ~known) FAIL("unknown flag bits 0x%x", p.flags & ~known);
  if (p.kind == OA_DEVICE_KIND_CPU && !(p.flags & OA_DEVICE_FLAG_HOST_VISIBLE))
    FAIL("a CPU-kind device must set HOST_VISIBLE");
  int has_events = HAS(s, event_create) && HAS(s, event_destroy) && HAS(s, event_record) && HAS(s, event_query) &&
                   HAS(s, event_synchronize) && HAS(s, stream_wait_event);
  if ((p.flags & OA_DEVICE_FLAG_EVENTS) && !has_events)
    FAIL("flag EVENTS is set but an event slot (event_create/destroy/record/query/synchronize, stream_wait_event) is empty");
  if (!(p.flags & OA_DEVICE_FLAG_EVENTS) && HAS(s, event_create))
    FAIL("event slots are filled but flag EVENTS is not set");
  if ((p.flags & OA_DEVICE_FLAG_TIMING) && (!(p.flags & OA_DEVICE_FLAG_EVENTS) || !HAS(s, event_elapsed_ms)))
    FAIL("flag TIMING needs flag EVENTS and the event_elapsed_ms slot");
  if ((p.flags & OA_DEVICE_FLAG_ASYNC) && (!HAS(s, stream_synchronize) || !HAS(s, stream_query) || !HAS(s, synchronize)))
    FAIL("flag ASYNC needs stream_synchronize, stream_query and synchronize (the host must be able to wait)");
  if (HAS(s, stream_create) != HAS(s, stream_destroy)) FAIL("stream_create and stream_destroy must come together");
  if (HAS(s, wrap_memory) != HAS(s, unwrap_memory)) FAIL("wrap_memory and unwrap_memory must come together");
  if (HAS(s, memory_stats) != HAS(s, reset_peak_memory_stats))
    FAIL("memory_stats and reset_peak_memory_stats must come together");
  TRY(oa_device_get_properties(s->dev, &q), "get_properties (second call)");
  q.memory_free = p.memory_free;
  if (memcmp(&p.name, &q.name, sizeof p.name) || strcmp(p.vendor, q.vendor) || strcmp(p.kind_name, q.kind_name) ||
      p.kind != q.kind || p.memory_total != q.memory_total || p.alignment != q.alignment || p.flags != q.flags)
    FAIL("properties changed between two calls");
  set_detail(s, "'%s' by '%s', kind '%s' (%s), alignment %u, memory %llu/%llu bytes free, flags%s%s%s%s", p.name,
             p.vendor, p.kind_name, p.kind == OA_DEVICE_KIND_CPU ? "cpu" : "accelerator", p.alignment,
             (unsigned long long)p.memory_free, (unsigned long long)p.memory_total,
             p.flags & OA_DEVICE_FLAG_ASYNC ? " async" : "", p.flags & OA_DEVICE_FLAG_EVENTS ? " events" : "",
             p.flags & OA_DEVICE_FLAG_TIMING ? " timing" : "", p.flags & OA_DEVICE_FLAG_HOST_VISIBLE ? " host-visible" : "");
done:
  return rc;
}

int check_queries(suite_t *s) {
  int rc = R_PASS;
  int64_t v = 0;
  uint64_t mask = 0;
  oa_status_t st;
  if (!HAS(s, query_i64)) SKIP("the device has no query_i64 slot");
  static const char *const unknown[][2] = {{"oa_conformance", "no_such_key"}, {"device", "no_such_key_42"},
                                           {"cpu", "no_such_key_42"}, {"", ""}};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    if ((st = oa_device_query_i64(s->dev, unknown[i][0], unknown[i][1], &v)) != OA_ERR_NOT_FOUND)
      FAIL("query '%s.%s': expected NOT_FOUND, received %s", unknown[i][0], unknown[i][1], sn(st));
  static const char *const probe[][2] = {
      {"device", "alignment"}, {"device", "memory_total"}, {"device", "flags"}, {"sim", "compute_units"},
      {"sim", "memory_bytes"}, {"cpu", "arch"}, {"cpu", "neon"}, {"cpu", "fp16"}, {"cpu", "dotprod"},
      {"cpu", "sse4_1"}, {"cpu", "avx"}, {"cpu", "avx2"}, {"cpu", "fma"}, {"cpu", "f16c"}, {"cpu", "avx512f"},
      {"cpu", "cores"}, {"cpu", "l1d_bytes"}, {"cpu", "l2_bytes"}, {"cpu", "l3_bytes"}, {"cpu", "threads"}};
  int answered = 0;
  char list[256] = "";
  size_t ln = 0;
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
    int64_t a = 0, b = 0, c = 0;
    st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &a);
    if (st == OA_ERR_NOT_FOUND) continue;
    if (st) FAIL("query '%s.%s': expected OK or NOT_FOUND, received %s", probe[i][0], probe[i][1], sn(st));
    void *tmp = NULL;
    TRY(dev_alloc(s, 4096, 0, &tmp), "allocate between two queries");
    if ((st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &b)) ||
        (st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &c)))
      FAIL("query '%s.%s' answered once, then %s", probe[i][0], probe[i][1], sn(st));
    if (a != b || a != c)
      FAIL("query '%s.%s' is not stable: %lld, %lld, %lld", probe[i][0], probe[i][1], (long long)a, (long long)b,
           (long long)c);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "alignment") && a != (int64_t)s->props.alignment)
      FAIL("device.alignment = %lld but properties.alignment = %u", (long long)a, s->props.alignment);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "memory_total") &&
        (uint64_t)a != s->props.memory_total)
      FAIL("device.memory_total = %lld but properties.memory_total = %llu", (long long)a,
           (unsigned long long)s->props.memory_total);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "flags") && (uint64_t)a != s->props.flags)
      FAIL("device.flags = %lld but properties.flags = %u", (long long)a, s->props.flags);
    answered++;
    if (ln + 40 < sizeof list) {
      int w = snprintf(list + ln, sizeof list - ln, "%s%s.%s=%lld", ln ? ", " : "", probe[i][0], probe[i][1], (long long)a);
      if (w > 0) ln += (size_t)w;
    }
  }
  if ((st = oa_device_supports_op(s->dev, "oa_conformance_no_such_op", &mask)) != OA_ERR_NOT_FOUND || mask)
    FAIL("supports_op('oa_conformance_no_such_op'): expected NOT_FOUND and an empty mask, received %s, 0x%llx", sn(st),
         (unsigned long long)mask);
  int claimed = 0;
  for (size_t i = 0; i < k_n_ops; i++) {
    uint64_t m1 = 0, m2 = 0;
    oa_status_t s1 = oa_device_supports_op(s->dev, k_ops[i], &m1), s2 = oa_device_supports_op(s->dev, k_ops[i], &m2);
    if (s1 != s2 || m1 != m2) FAIL("supports_op('%s') is not stable", k_ops[i]);
    if (s1 && s1 != OA_ERR_NOT_FOUND) FAIL("supports_op('%s'): expected OK or NOT_FOUND, received %s", k_ops[i], sn(s1));
    if (!s1 && !m1) FAIL("supports_op('%s') is OK with an empty dtype mask", k_ops[i]);
    if (s1 == OA_ERR_NOT_FOUND && m1) FAIL("supports_op('%s') is NOT_FOUND with a dtype mask", k_ops[i]);
    claimed += !s1;
  }
  set_detail(s, "%d keys answered and stable (%s); unknown keys and ops NOT_FOUND; %d ops claimed", answered,
             answered ? list : "none", claimed);
done:
  release_all(s);
  return rc;
}

