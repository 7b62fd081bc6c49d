/* Attention part of simd_impl.h: sdpa (softmax(q k^T * scale + mask) v) as a blocked "flash"
 * kernel.
 *
 * 1. Every key matrix is packed once per call into scratch as panels of 2 * VW keys:
 *    kp[panel][e][lane] (zero padded), so a score block is an outer-product style micro-kernel:
 *    4 query rows x 2 vectors of keys, one broadcast of q[r][e] per row and two FMAs per e.
 * 2. Each task is 4 query rows of one head. It walks the keys in blocks of 64 (only up to the
 *    last allowed key with is_causal): scores, then the causal / boolean / float mask, then the
 *    online softmax update (running max m and sum l per row; the output accumulators are rescaled
 *    by exp(m_old - m_new) when the max grows), then acc += p v with 4 rows x 2 vectors of the
 *    value row per step. Finally out = acc / l.
 * A block where a row is still fully masked leaves that row untouched, so a row masked
 * everywhere ends with 0 / 0 = NaN, as the reference (and PyTorch's math path) give. Batch dims
 * of key / value / mask broadcast to the query's and gqa_groups > 1 maps query head h to key /
 * value head h / groups, as in the reference. Tasks are (head, 4-row block) pairs, split over
 * threads; each output row is computed the same way whatever the split. */

#define SA_MR 4
#define SA_JP (2 * VW)  /* keys per packed panel */
#define SA_KB 64        /* keys per online-softmax block (a multiple of SA_JP) */
#define SA_EV_MAX 512   /* widest value row handled (the accumulators live on the stack) */

enum { AP_L, AP_S, AP_E, AP_EV, AP_BATCH, AP_CAUSAL, AP_GROUPS, AP_HAS_MASK, AP_MASK_BOOL, AP_SPAD, AP_KBATCH };

typedef struct {
  const oa_tensor_t *qt, *kt, *vt, *mt;
  const float *q, *k, *v;
  float *out, *kp;
  int64_t L, S, E, Ev, groups, s_pad, nblk, m_rows, m_cols;
  int causal, mask_bool;
  float scale;
} sa_ctx_t;

/* Flat batch index of t (key, value or mask) for query batch index b (the reference's rule). */
static int64_t sa_map_batch(const oa_tensor_t *q, const oa_tensor_t *t, int64_t b, int64_t groups, int32_t tail) {
  const int32_t nb = q->ndim - 2, tb = t->ndim - tail;
  int64_t idx = 0, mul = 1;
  for (int32_t d = nb - 1; d >= 0; d--) {
    const int64_t qi = b % q->shape[d];
    b /= q->shape[d];
    const int32_t td = d - (nb - tb);
    if (td < 0) continue;
    const int64_t n = t->shape[td];
    int64_t ti = n == 1 ? 0 : qi;
    if (groups > 1 && d == nb - 1 && tail == 2 && n * groups == q->shape[d]) ti = qi / groups;
    idx += ti * mul;
    mul *= n;
  }
  return idx;
}

static void sa_pack_range(void *pc, int64_t b0, int64_t b1) {
  const sa_ctx_t *c = (const sa_ctx_t *)pc;
  const int64_t S = c->S, E = c->E;
  for (int64_t kb = b0; kb < b1; kb++) {
    const float *ks = c->k + kb * S * E;
    float *dst = c->kp + kb * c->s_pad * E;
    for (int64_t j = 0; j < c->s_pad; j++) {
      float *d = dst + (j / SA_JP) * E * SA_JP + j % SA_JP;
      if (j < S) {
        for (int64_t e = 0; e < E; e++) d[e * SA_JP] = ks[j * E + e];
      } else {
        for (int64_t e = 0; e < E; e++) d[e * SA_JP] = 0.0f;
      }
    }
  }
}

/* scores s[r][0 .. 2 VW) of 4 query rows against one packed panel, times scale */
static inline void sa_qk_panel(const float *const *qr, const float *kpp, int64_t E, float scale, float (*s)[SA_KB],
                               int64_t col) {
  vf a00 = vf_zero(), a01 = vf_zero(), a10 = vf_zero(), a11 = vf_zero();
  vf a20 = vf_zero(), a21 = vf_zero(), a30 = vf_zero(), a31 = vf_zero();
  const float *q0 = qr[0], *q1 = qr[1], *q2 = qr[2], *q3 = qr[3];
  for (int64_t e = 0; e < E; e++) {
    const vf k0 = vf_load(kpp + e * SA_JP), k1 = vf_load(kpp + e * SA_JP + VW);
    vf b = vf_set1(q0[e]);
    a00 = vf_fma(b, k0, a00);
    a01 = vf_fma(b, k1, a01);
    b = vf_set1(q1[e]);
    a10 = vf_fma(b, k0, a10);
    a11 = vf_fma(b, k1, a11);
    b = vf_set1(q2[e]);
    a20 = vf_fma(b, k0, a20);
    a21 = vf_fma(b, k1, a21);
    b = vf_set1(q3[e]);
    a30 = vf_fma(b, k0, a30);
    a31 = vf_fma(b, k1, a31);
  }
  const vf sc = vf_set1(scale);
  vf_store(&s[0][col], vf_mul(a00, sc));
  vf_store(&s[0][col + VW], vf_mul(a01, sc));
  vf_store(&s[1][col], vf_mul(a10, sc));
  vf_store(&s[1][col + VW], vf_mul(a11, sc));
  vf_store(&s[2][col], vf_mul(a20, sc));
  vf_store(&s[2][col + VW], vf_mul(a21, sc));
  vf_store(&s[3][col], vf_mul(a30, sc));
  vf_store(&s[3][col + VW], vf_mul(a31, sc));
}

/* acc[r][ev0 .. ev0 + 2 VW) += sum_jj p[r][jj] v[jj][...] for jj < nb (full vectors) */
static inline void sa_pv_full(float (*acc)[SA_EV_MAX], float (*p)[SA_KB], const float *vrow, int64_t Ev, int64_t nb,
                              int64_t ev0) {
  vf a00 = vf_load(&acc[0][ev0]), a01 = vf_load(&acc[0][ev0 + VW]);
  vf a10 = vf_load(&acc[1][ev0]), a11 = vf_load(&acc[1][ev0 + VW]);
  vf a20 = vf_load(&acc[2][ev0]), a21 = vf_load(&acc[2][ev0 + VW]);
  vf a30 = vf_load(&acc[3][ev0]), a31 = vf_load(&acc[3][ev0 + VW]);
  for (int64_t jj = 0; jj < nb; jj++) {
    const float *vr = vrow + jj * Ev + ev0;
    const vf v0 = vf_load(vr), v1 = vf_load(vr + VW);
    vf b = vf_set1(p[0][jj]);
    a00 = vf_fma(b, v0, a00);
    a01 = vf_fma(b, v1, a01);
    b = vf_set1(p[1][jj]);
    a10 = vf_fma(b, v0, a10);
    a11 = vf_fma(b, v1, a11);
    b = vf_set1(p[2][jj]);
    a20 = vf_fma(b, v0, a20);
    a21 = vf_fma(b, v1, a21);
    b = vf_set1(p[3][jj]);
    a30 = vf_fma(b, v0, a30);
    a31 = vf_fma(b, v1, a31);
  }
  vf_store(&acc[0][ev0], a00);
  vf_store(&acc[0][ev0 + VW], a01);
  vf_store(&acc[1][ev0], a10);
  vf_store(&acc[1][ev0 + VW], a11);
  vf_store(&acc[2][ev0], a20);
  vf_store(&acc[2][ev0 + VW], a21);
  vf_store(&acc[3][ev0], a30);
  vf_store(&acc[3][ev0 + VW], a31);
}

/* the same for a last chunk of n (< VW) columns */
static inline void sa_pv_part(float (*acc)[SA_EV_MAX], float (*p)[SA_KB], const float *vrow, int64_t Ev, int64_t nb,
                              int64_t ev0, int64_t n) {
  vf a0 = vf_load_part(&acc[0][ev0], n, 0.0f), a1 = vf_load_part(&acc[1][ev0], n, 0.0f);
  vf a2 = vf_load_part(&acc[2][ev0], n, 0.0f), a3 = vf_load_part(&acc[3][ev0], n, 0.0f);
  for (int64_t jj = 0; jj < nb; jj++) {
    const vf v = vf_load_part(vrow + jj * Ev + ev0, n, 0.0f);
    a0 = vf_fma(vf_set1(p[0][jj]), v, a0);
    a1 = vf_fma(vf_set1(p[1][jj]), v, a1);
    a2 = vf_fma(vf_set1(p[2][jj]), v, a2);
    a3 = vf_fma(vf_set1(p[3][jj]), v, a3);
  }
  vf_store_part(&acc[0][ev0], n, a0);
  vf_store_part(&acc[1][ev0], n, a1);
  vf_store_part(&acc[2][ev0], n, a2);
  vf_store_part(&acc[3][ev0], n, a3);
}

static void sa_task(const sa_ctx_t *c, int64_t t) {
  const int64_t L = c->L, S = c->S, E = c->E, Ev = c->Ev;
  const int64_t b = t / c->nblk, i0 = (t % c->nblk) * SA_MR;
  const int64_t mr = simd_min64(SA_MR, L - i0);
  const int64_t kbi = sa_map_batch(c->qt, c->kt, b, c->groups, 2);
  const int64_t vbi = sa_map_batch(c->qt, c->vt, b, c->groups, 2);
  const int64_t mbi = c->mt ? sa_map_batch(c->qt, c->mt, b, 1, c->mt->ndim >= 2 ? 2 : c->mt->ndim) : 0;
  const float *kp = c->kp + kbi * c->s_pad * E;
  const float *vb = c->v + vbi * S * Ev;
  const float *qr[SA_MR];
  int64_t ri[SA_MR];
  float acc[SA_MR][SA_EV_MAX];
  float s[SA_MR][SA_KB];
  float m[SA_MR], l[SA_MR];
  for (int r = 0; r < SA_MR; r++) {
    ri[r] = i0 + simd_min64(r, mr - 1); /* rows past L repeat the last one (never stored) */
    qr[r] = c->q + (b * L + ri[r]) * E;
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int64_t e = 0; e < Ev; e++) acc[r][e] = 0.0f;
  }
  const int64_t jend = c->causal ? simd_min64(S, i0 + mr) : S;
  for (int64_t j0 = 0; j0 < jend; j0 += SA_KB) {
    const int64_t nb = simd_min64(SA_KB, jend - j0);
    for (int64_t col = 0; col < nb; col += SA_JP)
      sa_qk_panel(qr, kp + (j0 + col) / SA_JP * E * SA_JP, E, c->scale, s, col);
    for (int r = 0; r < SA_MR; r++) {
      float *sr = s[r];
      const int64_t i = ri[r];
      if (c->causal)
        for (int64_t jj = simd_max64(0, i - j0 + 1); jj < nb; jj++) sr[jj] = -INFINITY;
      if (c->mt) {
        const int64_t base = mbi * c->m_rows * c->m_cols + (c->m_rows == 1 ? 0 : i) * c->m_cols;
        if (c->mask_bool) {
          const uint8_t *mk = (const uint8_t *)c->mt->data + base;
          for (int64_t jj = 0; jj < nb; jj++)
            if (!mk[c->m_cols == 1 ? 0 : j0 + jj]) sr[jj] = -INFINITY;
        } else {
          const float *mk = (const float *)c->mt->data + base;
          for (int64_t jj = 0; jj < nb; jj++) sr[jj] += mk[c->m_cols == 1 ? 0 : j0 + jj];
        }
      }
      /* block max, then the online update */
      vf mv = vf_set1(-INFINITY);
      int64_t jj = 0;
      for (; jj + VW <= nb; jj += VW) mv = vf_max_nan(mv, vf_load(sr + jj));
      if (jj < nb) mv = vf_max_nan(mv, vf_load_part(sr + jj, nb - jj, -INFINITY));
      const float bm = vf_hmax(mv);
      const float mnew = bm > m[r] ? bm : m[r];
      if (mnew == -INFINITY) { /* still fully masked: contributes nothing */
        for (jj = 0; jj < nb; jj++) sr[jj] = 0.0f;
        continue;
      }
      const vf vmn = vf_set1(mnew);
      vf sum = vf_zero();
      for (jj = 0; jj + VW <= nb; jj += VW) {
        const vf e = vexp_neg(vf_sub(vf_load(sr + jj), vmn));
        vf_store(sr + jj, e);
        sum = vf_add(sum, e);
      }
      if (jj < nb) {
        const vf e = vexp_neg(vf_sub(vf_load_part(sr + jj, nb - jj, -INFINITY), vmn));
        vf_store_part(sr + jj, nb - jj, e);
        sum = vf_add(sum, e);
      }
      float alpha_l[VW];
      vf_store(alpha_l, vexp_neg(vf_set1(m[r] - mnew))); /* exp(-inf) = 0 on the first block */
      const float alpha = alpha_l[0];
      l[r] = l[r] * alpha + vf_hsum(sum);
      m[r] = mnew;
      if (alpha != 1.0f) {
        const vf va = vf_set1(alpha);
        int64_t e = 0;
        for (; e + VW <= Ev; e += VW) vf_store(&acc[r][e], vf_mul(vf_load(&acc[r][e]), va));
        for (; e < Ev; e++) acc[r][e] *= alpha;
      }
    }
    const float *vrow = vb + j0 * Ev;
    int64_t ev0 = 0;
    for (; ev0 + 2 * VW <= Ev; ev0 += 2 * VW) sa_pv_full(acc, s, vrow, Ev, nb, ev0);
    for (; ev0 < Ev; ev0 += VW) sa_pv_part(acc, s, vrow, Ev, nb, ev0, simd_min64(VW, Ev - ev0));
  }
  for (int64_t r = 0; r < mr; r++) {
    float *o = c->out + (b * L + i0 + r) * Ev;
    const vf inv = vf_set1(1.0f / l[r]); /* l = 0 (fully masked) gives 0 * inf = NaN */
    int64_t e = 0;
    for (; e + VW <= Ev; e += VW) vf_store(o + e, vf_mul(vf_load(&acc[r][e]), inv));
    if (e < Ev) vf_store_part(o + e, Ev - e, vf_mul(vf_load_part(&acc[r][e], Ev - e, 0.0f), inv));
  }
}

static void sa_range(void *pc, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; t++) sa_task((const sa_ctx_t *)pc, t);
}

oa_status_t OA_SIMD_FN(sdpa_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)diag;
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  if (call->n_inputs < 3 || call->n_inputs > 4 || call->n_outputs != 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *q = call->inputs[0], *k = call->inputs[1], *v = call->inputs[2], *o = call->outputs[0];
  const oa_tensor_t *mask = call->n_inputs > 3 ? call->inputs[3] : NULL;
  if (!simd_is_f32(q) || !simd_is_f32(k) || !simd_is_f32(v) || !simd_is_f32(o)) return OA_ERR_UNSUPPORTED;
  if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2) return OA_ERR_UNSUPPORTED;
  if (mask && mask->dtype != OA_DTYPE_FLOAT32 && mask->dtype != OA_DTYPE_BOOL) return OA_ERR_UNSUPPORTED;
  const int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
  const int64_t S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
  if (L < 1 || E < 1 || S < 1 || Ev < 1 || Ev > SA_EV_MAX) return OA_ERR_UNSUPPORTED;
  if (k->shape[k->ndim - 1] != E || v->shape[v->ndim - 2] != S) return OA_ERR_UNSUPPORTED;
  const int64_t causal = call->n_ints > 0 ? call->ints[0] : 0, groups = call->n_ints > 1 ? call->ints[1] : 1;
  if ((causal != 0 && causal != 1) || groups < 1 || (causal && mask)) return OA_ERR_UNSUPPORTED;
  const int64_t s_pad = (S + SA_JP - 1) / SA_JP * SA_JP, kbatch = k->numel / (S * E);
  /* packed keys: kbatch * s_pad * E floats, at most 1 GiB */
  if (s_pad > ((int64_t)1 << 28) / E || kbatch > ((int64_t)1 << 28) / (s_pad * E)) return OA_ERR_UNSUPPORTED;
  const uint64_t bytes = (uint64_t)kbatch * (uint64_t)s_pad * (uint64_t)E * sizeof(float);
  if (bytes > (uint64_t)SIZE_MAX) return OA_ERR_UNSUPPORTED;
  int64_t *p = plan->params;
  p[AP_L] = L;
  p[AP_S] = S;
  p[AP_E] = E;
  p[AP_EV] = Ev;
  p[AP_BATCH] = q->numel / (L * E);
  p[AP_CAUSAL] = causal;
  p[AP_GROUPS] = groups;
  p[AP_HAS_MASK] = mask != NULL;
  p[AP_MASK_BOOL] = mask && mask->dtype == OA_DTYPE_BOOL;
  p[AP_SPAD] = s_pad;
  p[AP_KBATCH] = kbatch;
  plan->scratch_bytes = (size_t)bytes;
  return OA_OK;
}

oa_status_t OA_SIMD_FN(sdpa_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int64_t *p = plan->params;
  sa_ctx_t c;
  c.qt = call->inputs[0];
  c.kt = call->inputs[1];
  c.vt = call->inputs[2];
  c.mt = p[AP_HAS_MASK] ? call->inputs[3] : NULL;
  c.q = (const float *)c.qt->data;
  c.k = (const float *)c.kt->data;
  c.v = (const float *)c.vt->data;
  c.out = (float *)call->outputs[0]->data;
  c.kp = (float *)scratch;
  c.L = p[AP_L];
  c.S = p[AP_S];
  c.E = p[AP_E];
  c.Ev = p[AP_EV];
  c.groups = p[AP_GROUPS];
  c.s_pad = p[AP_SPAD];
  c.nblk = (c.L + SA_MR - 1) / SA_MR;
  c.causal = (int)p[AP_CAUSAL];
  c.mask_bool = (int)p[AP_MASK_BOOL];
  c.m_rows = c.mt ? (c.mt->ndim >= 2 ? c.mt->shape[c.mt->ndim - 2] : 1) : 0;
  c.m_cols = c.mt ? (c.mt->ndim >= 1 ? c.mt->shape[c.mt->ndim - 1] : 1) : 0;
  c.scale = (float)(call->n_floats > 0 ? call->floats[0] : 1.0 / sqrt((double)c.E));
  struct oa_threadpool *pool = env ? env->pool : NULL;
  oa_parallel_for(pool, p[AP_KBATCH], simd_max64(1, 65536 / (c.s_pad * c.E)), sa_pack_range, &c);
  const int64_t work = SA_MR * c.S * (c.E + c.Ev);
  oa_parallel_for(pool, p[AP_BATCH] * c.nblk, simd_max64(1, 32768 / work), sa_range, &c);
  return OA_OK;
}
