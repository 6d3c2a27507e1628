/* build: an engine's flat state from programs and classes (indices, collective slots, resources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- construction ------------------------------------------------------ */

/* Capacity of resource @r of a device of class @cl (work units per picosecond). */

static gboolean index_work(const MmEngineProgram *p, ProgIndex *ix, GError **error)
{
  const uint32_t n_res = p->n_links;
  uint64_t total = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) total += p->ops[i].n_xfer;
  ix->work_first = g_new(uint32_t, p->n_ops + 1);
  ix->work_res = g_new(uint32_t, total + 1);
  ix->work_amt = g_new(double, total + 1);
  g_autofree uint8_t *used = g_new0(uint8_t, n_res + 1);
  uint32_t w = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmEngineOp *op = &p->ops[i];
    ix->work_first[i] = w;
    for (uint32_t k = 0; k < op->n_xfer; k++) {
      uint32_t r = p->xfer_link[op->xfer_first + k];
      double amt = p->xfer_bytes[op->xfer_first + k];
      if (r >= n_res) {
        g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID,
                    "op %u: work on resource %u, but a device has %u resources", i, r, n_res);
        return FALSE;
      }
      if (!(amt > 0)) continue;
      uint32_t j = ix->work_first[i];
      while (j < w && ix->work_res[j] != r) j++;
      if (j == w) {
        ix->work_res[w] = r;
        ix->work_amt[w++] = 0;
      }
      ix->work_amt[j] += amt;
      used[r] = 1;
    }
    ix->max_work = MAX(ix->max_work, w - ix->work_first[i]);
  }
  ix->work_first[p->n_ops] = w;
  ix->used_res = g_new(uint32_t, n_res + 1);
  for (uint32_t r = 0; r < n_res; r++)
    if (used[r]) ix->used_res[ix->n_used++] = r;
  return TRUE;
}

/* A stable LSD radix sort by a 64-bit key, 11 bits a pass, skipping the digits every key
 * shares (collective ids and op indices leave most high digits equal): a few linear passes
 * where qsort's comparisons through a function pointer were 15-20% of building an engine for a
 * pipeline (perf, Llama-3-70B sweep with pipeline degrees). Stable: elements of equal keys keep
 * their order, which callers rely on. @tmp holds @n elements. */
#define RADIX_BITS 11
#define RADIX_SORT_BY(name, T, KEY)                                                               \
  static void name(T *a, T *tmp, size_t n)                                                        \
  {                                                                                               \
    uint64_t diff = 0;                                                                            \
    for (size_t i = 1; i < n; i++) diff |= KEY(a[i]) ^ KEY(a[0]);                                 \
    T *src = a, *dst = tmp;                                                                       \
    for (unsigned shift = 0; shift < 64; shift += RADIX_BITS) {                                   \
      const uint64_t mask = (1u << RADIX_BITS) - 1;                                               \
      if (!((diff >> shift) & mask)) continue;                                                    \
      size_t at[1u << RADIX_BITS] = {0};                                                          \
      for (size_t i = 0; i < n; i++) at[(KEY(src[i]) >> shift) & mask]++;                        \
      size_t sum = 0;                                                                             \
      for (size_t d = 0; d < (1u << RADIX_BITS); d++) {                                           \
        const size_t c = at[d];                                                                   \
        at[d] = sum;                                                                              \
        sum += c;                                                                                 \
      }                                                                                           \
      for (size_t i = 0; i < n; i++) dst[at[(KEY(src[i]) >> shift) & mask]++] = src[i];           \
      T *t = src;                                                                                 \
      src = dst;                                                                                  \
      dst = t;                                                                                    \
    }                                                                                             \
    if (src != a) memcpy(a, src, n * sizeof(T));                                                  \
  }

#define U64_KEY(x) (x)
RADIX_SORT_BY(sort_u64, uint64_t, U64_KEY)

static gboolean index_program(const MmEngineProgram *p, ProgIndex *ix, GError **error)
{
  ix->succ_first = g_new0(uint32_t, p->n_ops + 1);
  ix->stream_first = g_new0(uint32_t, p->n_streams + 1);
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmEngineOp *op = &p->ops[i];
    if (op->stream >= p->n_streams) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "op %u: stream %u out of range", i, op->stream);
      return FALSE;
    }
    ix->stream_first[op->stream + 1]++;
    for (uint32_t k = 0; k < op->n_deps; k++) {
      uint32_t d = p->deps[op->dep_first + k];
      if (d >= i) {
        g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID,
                    "op %u depends on op %u, which does not precede it", i, d);
        return FALSE;
      }
      ix->succ_first[d + 1]++;
    }
    if (op->coll != MM_NO_COLL && op->peer == 0 && (op->degree == 0 || op->stride == 0)) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "op %u: collective without a group", i);
      return FALSE;
    }
    /* interference slows fixed ops only: a flow's pace is its shares', a collective's its group's */
    if (op->cil > MM_CIL_INTERFERES || (op->cil == MM_CIL_SLOWED && (op->n_xfer > 0 || op->coll != MM_NO_COLL))) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID,
                  "op %u: interference role %u (slowed ops carry no transfers and are no collectives)", i, op->cil);
      return FALSE;
    }
  }
  for (uint32_t i = 0; i < p->n_ops; i++) ix->succ_first[i + 1] += ix->succ_first[i];
  for (uint32_t s = 0; s < p->n_streams; s++) ix->stream_first[s + 1] += ix->stream_first[s];
  ix->succ = g_new(uint32_t, ix->succ_first[p->n_ops] + 1);
  ix->stream_ops = g_new(uint32_t, p->n_ops + 1);
  g_autofree uint32_t *fill = g_new0(uint32_t, MAX(p->n_ops, p->n_streams) + 1);
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmEngineOp *op = &p->ops[i];
    for (uint32_t k = 0; k < op->n_deps; k++) {
      uint32_t d = p->deps[op->dep_first + k];
      ix->succ[ix->succ_first[d] + fill[d]++] = i;
    }
  }
  memset(fill, 0, sizeof(uint32_t) * (MAX(p->n_ops, p->n_streams) + 1));
  for (uint32_t i = 0; i < p->n_ops; i++) {
    uint32_t s = p->ops[i].stream;
    ix->stream_ops[ix->stream_first[s] + fill[s]++] = i; /* program order within each stream */
  }
  return index_work(p, ix, error);
}

/* The program's collectives by id (ix->colls, colls_unique): what arithmetic groups look members up
 * by (mm__coll_op); listed groups never need them, so they are built only where groups may be
 * arithmetic (a pipeline's programs rarely number them in order: sorting them was 4% of a sweep
 * with pipeline degrees). */
static void index_colls(const MmEngineProgram *p, ProgIndex *ix)
{
  if (ix->colls) return;
  ix->colls = g_new(uint64_t, p->n_ops + 1);
  gboolean sorted = TRUE; /* lowering numbers collectives in program order: usually nothing to sort */
  for (uint32_t i = 0; i < p->n_ops; i++)
    if (p->ops[i].coll != MM_NO_COLL) {
      ix->colls[ix->n_colls] = (uint64_t)p->ops[i].coll << 32 | i;
      sorted = sorted && (ix->n_colls == 0 || ix->colls[ix->n_colls] > ix->colls[ix->n_colls - 1]);
      ix->n_colls++;
    }
  if (!sorted) {
    g_autofree uint64_t *tmp = g_new(uint64_t, ix->n_colls);
    sort_u64(ix->colls, tmp, ix->n_colls);
  }
  ix->colls_unique = TRUE;
  for (uint32_t k = 1; k < ix->n_colls; k++) ix->colls_unique &= ix->colls[k] >> 32 != ix->colls[k - 1] >> 32;
}

uint32_t mm__coll_op(const MmEngine *e, uint32_t m, uint32_t coll)
{
  const ProgIndex *ix = &e->index[e->classes[m].program];
  uint32_t lo = 0, hi = ix->n_colls;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ix->colls[mid] >> 32 < coll) lo = mid + 1;
    else hi = mid;
  }
  return lo < ix->n_colls && ix->colls[lo] >> 32 == coll ? (uint32_t)ix->colls[lo] : UINT32_MAX;
}

typedef struct {
  uint64_t key;
  uint32_t cls, op;
} SlotRef;

#define SLOT_KEY(x) ((x).key)
RADIX_SORT_BY(sort_slot_refs, SlotRef, SLOT_KEY)

/* Whether every collective group can be found by arithmetic: each class is the device of
 * its index (as --per-device lowers), no program has a collective id twice, and the
 * groups that (stride, degree) or the peer offset name, looked up by collective id, are
 * consistent (each member's op has the same group shape) and cover every collective op
 * exactly once: then they are the groups build_slots would list, in the same member order. */
static gboolean arith_groups(MmEngine *e)
{
  for (uint32_t c = 0; c < e->n_classes; c++)
    if (e->classes[c].rep_device != c) return FALSE;
  if (e->n_classes == 1) { /* a symmetric run: a group of more than its one device is not found by arithmetic */
    const MmEngineProgram *p = &e->programs[e->classes[0].program];
    for (uint32_t i = 0; i < p->n_ops; i++)
      if (p->ops[i].coll != MM_NO_COLL && (p->ops[i].peer != 0 || p->ops[i].degree > 1)) return FALSE;
  }
  for (uint32_t p = 0; p < e->n_programs; p++) {
    index_colls(&e->programs[p], &e->index[p]);
    if (!e->index[p].colls_unique) return FALSE;
  }
  uint64_t total = 0, seen = 0;
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    const ProgIndex *ix = &e->index[e->classes[c].program];
    total += ix->n_colls;
    for (uint32_t k = 0; k < ix->n_colls; k++) {
      const uint32_t i = (uint32_t)ix->colls[k];
      const MmEngineOp *o = &p->ops[i];
      const Group g = mm__arith_group(c, o); /* what the run will use */
      if (g.first > c || (uint64_t)g.first + (uint64_t)(g.n - 1) * g.step >= e->n_classes) return FALSE;
      if (g.first != c) continue; /* checked with its group's first member */
      for (uint32_t j = 0; j < g.n; j++) {
        const uint32_t m = g.first + j * g.step;
        if (e->crt[m].program == e->crt[c].program) { /* its op is o itself: only a peer pair's other end differs */
          if (j > 0 && o->peer != 0) return FALSE;
          continue;
        }
        const uint32_t mop = mm__coll_op(e, m, o->coll);
        if (mop == UINT32_MAX) return FALSE;
        const MmEngineOp *mo = &e->programs[e->classes[m].program].ops[mop];
        if (mo->degree != o->degree || mo->stride != o->stride || mo->peer != (j == 0 ? o->peer : -o->peer)) return FALSE;
      }
      seen += g.n;
    }
  }
  return seen == total;
}

/* A collective id's bucket for sort_by_coll: ids below 2^31 first, then those above (the lowering
 * numbers collectives from 0 and pipeline transfers from 2^31: two dense ranges). */
static inline uint64_t coll_bucket(uint64_t id, uint64_t low_end)
{
  return id < (UINT64_C(1) << 31) ? id : low_end + (id - (UINT64_C(1) << 31));
}

/* The stable sort of @refs by key when collective ids are dense (in two ranges, coll_bucket) and each
 * id's members nearly in order (FALSE, @refs untouched: they are not): a counting sort by collective
 * id, then each id's few members (one per class sharing it) by group, an insertion sort that finds
 * them mostly in order (classes are listed by their devices). One pass where the radix sort took four
 * to six over a pipeline's 64-bit keys (5% of a sweep with pipeline degrees, perf). */
static gboolean sort_by_coll(SlotRef *refs, SlotRef *tmp, uint32_t n)
{
  uint64_t low_end = 0, high_end = 0; /* one past the largest id of each range */
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t id = refs[i].key >> 32;
    if (id < (UINT64_C(1) << 31)) low_end = MAX(low_end, id + 1);
    else high_end = MAX(high_end, id - (UINT64_C(1) << 31) + 1);
  }
  const uint64_t buckets = low_end + high_end;
  if (buckets > 4 * (uint64_t)n + 1024) return FALSE;
  g_autofree uint32_t *at = g_new0(uint32_t, buckets + 1);
  for (uint32_t i = 0; i < n; i++) at[coll_bucket(refs[i].key >> 32, low_end) + 1]++;
  for (uint64_t b = 0; b < buckets; b++) at[b + 1] += at[b];
  for (uint32_t i = 0; i < n; i++) tmp[at[coll_bucket(refs[i].key >> 32, low_end)]++] = refs[i];
  uint64_t moves = 0; /* bounded: groups far out of order (a run of many classes) go to the radix sort */
  for (uint32_t i = 1; i < n; i++) { /* within a run of one id: by group, stably */
    const SlotRef x = tmp[i];
    uint32_t j = i;
    while (j > 0 && tmp[j - 1].key > x.key) tmp[j] = tmp[j - 1], j--;
    tmp[j] = x;
    if ((moves += i - j) > 4 * (uint64_t)n + 1024) return FALSE;
  }
  memcpy(refs, tmp, sizeof(SlotRef) * n);
  return TRUE;
}

/* Groups matching collective ops of all classes into slots. A class stands for
 * all devices like its representative; its group instance is the representative's
 * index with the level digit cleared. */
static void build_slots(MmEngine *e)
{
  uint32_t n = 0;
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    for (uint32_t i = 0; i < p->n_ops; i++) n += p->ops[i].coll != MM_NO_COLL;
  }
  g_autofree SlotRef *refs = g_new(SlotRef, n + 1);
  uint32_t k = 0;
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    uint64_t d = e->classes[c].rep_device;
    /* a program's collectives take few group shapes (TP and FSDP alternate): their groups kept in a
     * small direct-mapped table, without two 64-bit divisions per collective (a tenth of building
     * an engine, perf) */
    struct {
      uint32_t stride, degree;
      uint64_t gid;
    } shape[8] = {{0}};
    for (uint32_t i = 0; i < p->n_ops; i++) {
      const MmEngineOp *op = &p->ops[i];
      if (op->coll == MM_NO_COLL) continue;
      uint64_t gid;
      if (op->peer != 0) {
        gid = MIN(d, (uint64_t)((int64_t)d + op->peer));
      } else {
        const uint32_t h = (op->stride * 31u + op->degree) & 7u; /* degree > 0: an empty entry never matches */
        if (shape[h].stride != op->stride || shape[h].degree != op->degree) {
          shape[h].stride = op->stride;
          shape[h].degree = op->degree;
          shape[h].gid = d - ((d / op->stride) % op->degree) * op->stride;
        }
        gid = shape[h].gid;
      }
      refs[k++] = (SlotRef){((uint64_t)op->coll << 32) | gid, c, i};
    }
  }
  /* members in (key, class, op) order: refs are listed by class and op, and the sort is stable */
  gboolean sorted = TRUE; /* one class: collective ids ascend already */
  for (uint32_t i = 1; i < n && sorted; i++) sorted = refs[i - 1].key <= refs[i].key;
  if (!sorted) {
    g_autofree SlotRef *tmp = g_new(SlotRef, n);
    if (!sort_by_coll(refs, tmp, n)) sort_slot_refs(refs, tmp, n);
  }
  e->slot_first = g_new0(uint32_t, n + 2);
  e->member_cls = g_new(uint32_t, n + 1);
  e->member_op = g_new(uint32_t, n + 1);
  uint32_t slots = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i == 0 || refs[i].key != refs[i - 1].key) e->slot_first[slots++] = i;
    e->member_cls[i] = refs[i].cls;
    e->member_op[i] = refs[i].op;
    e->st[mm__op_index(e, refs[i].cls, refs[i].op)].aux = slots - 1;
  }
  e->slot_first[slots] = n;
  e->n_slots = slots;
  e->slot_count = g_new0(uint32_t, slots + 1);
  e->slot_dur = g_new0(MmTime, slots + 1);
  for (uint32_t s = 0; s < slots; s++) {
    for (uint32_t m = e->slot_first[s]; m < e->slot_first[s + 1]; m++) {
      MmTime d = e->classes[e->member_cls[m]].dur[e->member_op[m]];
      e->slot_dur[s] = MAX(e->slot_dur[s], d);
    }
  }
}

/* Where each class's op states and streams live (crt, prog_base, stream_base, totals): a
 * function of the programs' sizes and the classes' programs alone, so that a replayed engine
 * (mm_engine_new_replayed) lays its results out as the run that made them did. */
gboolean mm__engine_layout(MmEngine *e, GError **error)
{
  e->crt = g_new0(ClassRt, e->n_classes + 1);
  e->stream_base = g_new(uint32_t, e->n_classes + 1);
  uint64_t ops = 0, streams = 0;
  for (uint32_t c = 0; c < e->n_classes; c++) {
    if (e->classes[c].program >= e->n_programs) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "class %u: no program %u", c, e->classes[c].program);
      return FALSE;
    }
    e->stream_base[c] = (uint32_t)streams;
    ops += e->programs[e->classes[c].program].n_ops;
    streams += e->programs[e->classes[c].program].n_streams;
    if (streams > MM__MAX_STREAMS) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "too many streams (more than %u)", MM__MAX_STREAMS);
      return FALSE;
    }
    if (ops >= UINT32_MAX / 2) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "too many ops (%" G_GUINT64_FORMAT ")", ops);
      return FALSE;
    }
  }
  e->total_ops = (uint32_t)ops;
  /* op states interleaved by program: op i of the k-th class running program p at
   * prog_base[p] + i x (classes running p) + k, so that devices running the same op at
   * the same time touch neighbouring states */
  e->prog_users = g_new0(uint32_t, e->n_programs + 1);
  e->prog_base = g_new0(uint32_t, e->n_programs + 1);
  g_autofree uint32_t *prog_sbase = g_new0(uint32_t, e->n_programs + 1);
  for (uint32_t c = 0; c < e->n_classes; c++) e->crt[c].op_base = e->prog_users[e->classes[c].program]++;
  for (uint32_t p = 0, base = 0, sb = 0; p < e->n_programs; p++) {
    e->prog_base[p] = base;
    prog_sbase[p] = sb;
    base += e->prog_users[p] * e->programs[p].n_ops;
    sb += e->prog_users[p] * e->programs[p].n_streams;
  }
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const uint32_t p = e->classes[c].program, rank = e->crt[c].op_base;
    e->crt[c] = (ClassRt){
        .ops = e->programs[p].ops,
        .ix = e->index ? &e->index[p] : NULL,
        .dur = e->classes[c].dur,
        .program = p,
        .op_base = e->prog_base[p] + rank,
        .op_stride = e->prog_users[p],
        .sbase = prog_sbase[p] + rank,
    };
  }
  e->total_streams = (uint32_t)streams;
  return TRUE;
}

MmEngine *mm_engine_new(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                        uint32_t n_classes, GError **error)
{
  g_return_val_if_fail(programs && classes && n_classes > 0, NULL);
  g_autoptr(MmEngine) e = g_new0(MmEngine, 1);
  e->programs = programs;
  e->n_programs = n_programs;
  e->classes = classes;
  e->n_classes = n_classes;
  e->index = g_new0(ProgIndex, n_programs);
  for (uint32_t p = 0; p < n_programs; p++)
    if (!index_program(&programs[p], &e->index[p], error)) return NULL;
  if (!mm__engine_layout(e, error)) return NULL;
  e->st = g_new0(OpState, e->total_ops + 1);
  e->class_end = g_new0(MmTime, n_classes + 1);
  e->interf = g_new0(uint32_t, 3 * (gsize)n_classes + 1);
  e->slowed = e->interf + n_classes;
  e->slowed_si = e->slowed + n_classes;
  e->streams = g_new0(Stream, e->total_streams + 1);
  mm__queue_init(e, e->total_streams * 2);
  e->bucketed = n_classes >= MM__BUCKETED_CLASSES;
  e->active = g_new0(uint32_t, e->total_streams + 1);
  e->n_active = g_new0(uint32_t, n_classes + 1);
  e->res_base = g_new(uint32_t, n_classes + 1);
  for (uint32_t c = 0; c < n_classes; c++) {
    const ProgIndex *ix = &e->index[classes[c].program];
    e->res_base[c] = e->total_res;
    e->total_res += programs[classes[c].program].n_links;
    for (uint32_t u = 0; u < ix->n_used; u++) {
      uint32_t r = ix->used_res[u];
      double cap = resource_cap(&classes[c], r);
      if (!(cap > 0) || isinf(cap)) {
        g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID,
                    "class %u: resource %u carries work but its capacity is not a positive finite number", c, r);
        return NULL;
      }
    }
  }
  for (uint32_t p = 0; p < n_programs; p++) {
    const uint32_t n_res = programs[p].n_links;
    const uint32_t ents = (uint32_t)MIN((uint64_t)e->index[p].work_first[programs[p].n_ops],
                                        (uint64_t)programs[p].n_streams * e->index[p].max_work);
    e->max_res = MAX(e->max_res, n_res);
    e->max_ent = MAX(e->max_ent, ents);
  }
  e->res_users = g_new0(uint32_t, e->total_res + 1);
  e->r_left = g_new(double, e->max_res + 1);
  e->r_share = g_new(double, e->max_res + 1);
  e->r_users = g_new(uint32_t, e->max_res + 1);
  e->r_bound = g_new(uint32_t, e->max_res + 1);
  e->r_stamp = g_new0(uint32_t, e->max_res + 1);
  e->touched = g_new(uint32_t, e->max_res + 1);
  e->ent_flow = g_new(uint32_t, e->max_ent + 1);
  e->ent_first = g_new(uint32_t, e->max_ent + 1);
  e->ent_n = g_new(uint32_t, e->max_ent + 1);
  e->ent_bind = g_new(uint32_t, e->max_ent + 1);
  e->ent_fixed = g_new(uint8_t, e->max_ent + 1);
  e->ent_ps = g_new(double, e->max_ent + 1);
  uint32_t max_streams = 0;
  for (uint32_t p = 0; p < n_programs; p++) max_streams = MAX(max_streams, programs[p].n_streams);
  e->flow_ps = g_new(double, max_streams + 1);
  e->arith = arith_groups(e);
  if (!e->arith) build_slots(e);
  return g_steal_pointer(&e);
}

void mm_engine_free(MmEngine *e)
{
  if (!e) return;
  for (uint32_t p = 0; e->index && p < e->n_programs; p++) {
    g_free(e->index[p].succ_first);
    g_free(e->index[p].succ);
    g_free(e->index[p].stream_first);
    g_free(e->index[p].stream_ops);
    g_free(e->index[p].work_first);
    g_free(e->index[p].work_res);
    g_free(e->index[p].work_amt);
    g_free(e->index[p].used_res);
    g_free(e->index[p].colls);
  }
  g_free(e->index);
  g_free(e->crt);
  g_free(e->prog_base);
  g_free(e->prog_users);
  g_free(e->stream_base);
  g_free(e->st);
  g_free(e->class_end);
  g_free(e->interf);
  g_free(e->streams);
  g_free(e->slot_first);
  g_free(e->slot_count);
  g_free(e->slot_dur);
  g_free(e->member_cls);
  g_free(e->member_op);
  g_free(e->active);
  g_free(e->n_active);
  g_free(e->res_users);
  g_free(e->res_base);
  g_free(e->r_left);
  g_free(e->r_share);
  g_free(e->r_users);
  g_free(e->r_bound);
  g_free(e->r_stamp);
  g_free(e->touched);
  g_free(e->ent_flow);
  g_free(e->ent_first);
  g_free(e->ent_n);
  g_free(e->ent_bind);
  g_free(e->ent_fixed);
  g_free(e->ent_ps);
  g_free(e->flow_ps);
  mm__queue_free(e);
  g_free(e);
}

