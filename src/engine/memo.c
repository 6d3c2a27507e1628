/* memo: runs kept by a digest of their programs and classes, replayed instead of simulated again. */
#include <string.h>

#include "internal.h"

/* ---- digest ------------------------------------------------------------ *
 * Four independent 64-bit lanes over the input's 8-byte words (word k of an array to lane
 * k mod 4, counts and lengths to lane 0), each step xxHash64's round, v = rotl(v + w * P2, 31) * P1:
 * a bijection of the lane for any word and of the word for any lane, so a difference in one word
 * always survives, and the multiply after the rotation spreads a difference over the lane's upper
 * bits, so differences in several words of a lane cancel only by chance (with the multiply first, a
 * top-bit difference stayed one bit and the next word of the lane could cancel it for every
 * input); the lanes run side by side. */

typedef struct {
  uint64_t v[4];
} Hasher;

#define P1 0x9E3779B185EBCA87u /* xxHash64's primes */
#define P2 0xC2B2AE3D27D4EB4Fu

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t round64(uint64_t v, uint64_t w) { return rotl64(v + w * P2, 31) * P1; }

static inline void step(Hasher *h, unsigned l, uint64_t w) { h->v[l] = round64(h->v[l], w); }

/* One word (a count, a flag) into lane 0. */
static inline void take(Hasher *h, uint64_t w) { step(h, 0, w); }

/* @n bytes: word k of them into lane k mod 4, a partial last word padded with zeros and
 * marked with its length (the callers hash every array's length before it). */
static void take_bytes(Hasher *h, const void *data, size_t n)
{
  const unsigned char *p = data;
  uint64_t a = h->v[0], b = h->v[1], c = h->v[2], d = h->v[3];
  for (; n >= 32; p += 32, n -= 32) {
    uint64_t w[4];
    memcpy(w, p, sizeof w);
    a = round64(a, w[0]);
    b = round64(b, w[1]);
    c = round64(c, w[2]);
    d = round64(d, w[3]);
  }
  h->v[0] = a, h->v[1] = b, h->v[2] = c, h->v[3] = d;
  for (unsigned l = 0; n >= 8; p += 8, n -= 8, l++) {
    uint64_t w;
    memcpy(&w, p, 8);
    step(h, l, w);
  }
  if (n) {
    uint64_t w = 0;
    memcpy(&w, p, n);
    step(h, 3, w ^ (uint64_t)n << 56);
  }
}

/* splitmix64's finalizer */
static inline uint64_t fmix(uint64_t x)
{
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

/* the ops' fields are hashed as their bytes: no padding between them may carry garbage */
G_STATIC_ASSERT(sizeof(MmEngineOp) == 8 * sizeof(uint32_t) + sizeof(uint16_t) + 2 * sizeof(uint8_t));

void mm_engine_digest(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                      uint32_t n_classes, MmEngineDigest *out)
{
  Hasher h = {{1, 2, 3, 4}};
  take(&h, (uint64_t)n_programs << 32 | n_classes);
  for (uint32_t q = 0; q < n_programs; q++) {
    const MmEngineProgram *p = &programs[q];
    take(&h, (uint64_t)p->n_ops << 32 | p->n_streams);
    take(&h, p->n_links);
    /* the dependency and transfer arrays as far as the ops read them (an op with none reads none,
     * whatever its first index says) */
    uint64_t deps = 0, xfers = 0;
    for (uint32_t i = 0; i < p->n_ops; i++) {
      const MmEngineOp *op = &p->ops[i];
      if (op->n_deps) deps = MAX(deps, (uint64_t)op->dep_first + op->n_deps);
      if (op->n_xfer) xfers = MAX(xfers, (uint64_t)op->xfer_first + op->n_xfer);
    }
    take(&h, deps << 32 | xfers);
    take_bytes(&h, p->ops, sizeof(MmEngineOp) * p->n_ops);
    if (deps) take_bytes(&h, p->deps, sizeof(uint32_t) * deps);
    if (xfers) {
      take_bytes(&h, p->xfer_link, sizeof(uint32_t) * xfers);
      take_bytes(&h, p->xfer_bytes, sizeof(double) * xfers);
    }
  }
  for (uint32_t c = 0; c < n_classes; c++) {
    const MmEngineClass *cl = &classes[c];
    take(&h, (uint64_t)cl->program << 32 | cl->rep_device);
    uint64_t pace;
    memcpy(&pace, &cl->slow_pace, sizeof pace);
    take(&h, pace);
    if (cl->program >= n_programs) continue; /* mm_engine_new refuses it */
    const MmEngineProgram *p = &programs[cl->program];
    take_bytes(&h, cl->dur, sizeof(MmTime) * p->n_ops);
    take(&h, cl->link_bw != NULL);
    if (cl->link_bw) take_bytes(&h, cl->link_bw, sizeof(double) * p->n_links);
  }
  out->h[0] = fmix(h.v[0] + fmix(h.v[1]));
  out->h[1] = fmix(h.v[2] + fmix(h.v[3] ^ 0x5555555555555555u));
}

/* ---- kept results ------------------------------------------------------ */

struct MmEngineResult {
  uint32_t n_classes, total_ops;
  OpState *st;       /* the op states as the run left them (start, end), in its order */
  MmTime *class_end; /* per class */
  uint64_t done;
  gboolean arith;
};

MmEngineResult *mm_engine_result_new(const MmEngine *e)
{
  g_return_val_if_fail(e, NULL);
  MmEngineResult *r = g_new0(MmEngineResult, 1);
  r->n_classes = e->n_classes;
  r->total_ops = e->total_ops;
  r->st = g_memdup2(e->st, sizeof(OpState) * ((gsize)e->total_ops + 1));
  r->class_end = g_memdup2(e->class_end, sizeof(MmTime) * e->n_classes);
  r->done = e->done;
  r->arith = e->arith;
  return r;
}

gsize mm_engine_result_size(const MmEngineResult *r)
{
  return sizeof *r + sizeof(OpState) * ((gsize)r->total_ops + 1) + sizeof(MmTime) * r->n_classes;
}

void mm_engine_result_free(MmEngineResult *r)
{
  if (!r) return;
  g_free(r->st);
  g_free(r->class_end);
  g_free(r);
}

MmEngine *mm_engine_new_replayed(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                                 uint32_t n_classes, const MmEngineResult *r, GError **error)
{
  g_return_val_if_fail(programs && classes && n_classes > 0 && r, NULL);
  g_autoptr(MmEngine) e = g_new0(MmEngine, 1);
  e->programs = programs;
  e->n_programs = n_programs;
  e->classes = classes;
  e->n_classes = n_classes;
  if (!mm__engine_layout(e, error)) return NULL;
  if (e->total_ops != r->total_ops || n_classes != r->n_classes) {
    g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID,
                "a kept run of %u classes and %u ops replayed for %u classes and %u ops", r->n_classes, r->total_ops,
                n_classes, e->total_ops);
    return NULL;
  }
  e->st = g_memdup2(r->st, sizeof(OpState) * ((gsize)e->total_ops + 1));
  e->class_end = g_memdup2(r->class_end, sizeof(MmTime) * n_classes);
  e->done = r->done;
  e->arith = r->arith;
  return g_steal_pointer(&e);
}

/* ---- the memo ---------------------------------------------------------- */

typedef struct {
  MmEngineDigest d;
  MmEngineResult *r;
} Kept;

struct MmEngineMemo {
  GMutex lock;
  GHashTable *table; /* &Kept.d -> Kept (owned by order) */
  GQueue order;      /* Kept, oldest first */
  gsize budget, size;
  uint64_t hits, kept;
};

static guint digest_hash(gconstpointer k) { return (guint)((const MmEngineDigest *)k)->h[0]; }

static gboolean digest_equal(gconstpointer a, gconstpointer b) { return memcmp(a, b, sizeof(MmEngineDigest)) == 0; }

static void kept_free(Kept *k)
{
  mm_engine_result_free(k->r);
  g_free(k);
}

MmEngineMemo *mm_engine_memo_new(gsize budget)
{
  MmEngineMemo *m = g_new0(MmEngineMemo, 1);
  g_mutex_init(&m->lock);
  m->table = g_hash_table_new(digest_hash, digest_equal);
  g_queue_init(&m->order);
  m->budget = budget;
  return m;
}

void mm_engine_memo_free(MmEngineMemo *m)
{
  if (!m) return;
  g_hash_table_destroy(m->table);
  g_queue_clear_full(&m->order, (GDestroyNotify)kept_free);
  g_mutex_clear(&m->lock);
  g_free(m);
}

void mm_engine_memo_counts(MmEngineMemo *m, uint64_t *hits, uint64_t *kept)
{
  g_mutex_lock(&m->lock);
  if (hits) *hits = m->hits;
  if (kept) *kept = m->kept;
  g_mutex_unlock(&m->lock);
}

/* Keeps @r (transfer full) under @d unless the digest is kept already (another thread ran it
 * too) or it alone passes the budget; the oldest go while the memo is over it. */
static void keep(MmEngineMemo *m, const MmEngineDigest *d, MmEngineResult *r)
{
  const gsize size = mm_engine_result_size(r) + sizeof(Kept);
  g_mutex_lock(&m->lock);
  if (size > m->budget || g_hash_table_contains(m->table, d)) {
    g_mutex_unlock(&m->lock);
    mm_engine_result_free(r);
    return;
  }
  Kept *k = g_new(Kept, 1);
  *k = (Kept){*d, r};
  g_hash_table_insert(m->table, &k->d, k);
  g_queue_push_tail(&m->order, k);
  m->size += size;
  m->kept++;
  while (m->size > m->budget) {
    Kept *old = g_queue_pop_head(&m->order);
    g_hash_table_remove(m->table, &old->d);
    m->size -= mm_engine_result_size(old->r) + sizeof(Kept);
    kept_free(old);
  }
  g_mutex_unlock(&m->lock);
}

MmEngine *mm_engine_memo_run(MmEngineMemo *m, const MmEngineProgram *programs, uint32_t n_programs,
                             const MmEngineClass *classes, uint32_t n_classes, gboolean *hit, GError **error)
{
  if (hit) *hit = FALSE;
  MmEngineDigest d;
  if (m) {
    mm_engine_digest(programs, n_programs, classes, n_classes, &d);
    g_mutex_lock(&m->lock);
    const Kept *k = g_hash_table_lookup(m->table, &d);
    MmEngine *e = k ? mm_engine_new_replayed(programs, n_programs, classes, n_classes, k->r, NULL) : NULL;
    if (e) m->hits++;
    g_mutex_unlock(&m->lock);
    if (e) {
      if (hit) *hit = TRUE;
      return e;
    }
  }
  g_autoptr(MmEngine) e = mm_engine_new(programs, n_programs, classes, n_classes, error);
  if (!e || !mm_engine_run(e, error)) return NULL;
  if (m) keep(m, &d, mm_engine_result_new(e));
  return g_steal_pointer(&e);
}
