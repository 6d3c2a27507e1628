/* engine: a binary heap of op completions keyed (time, seq); FIFO streams; collectives that wait for their group;
 * flows that share their device's resources max-min fairly. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(mm-engine-error-quark, mm_engine_error)

typedef enum { EV_DONE, EV_FLOW } EventKind; /* EV_FLOW: a flow's work is done (stale if re-planned since) */

typedef struct {
  MmTime t;
  uint64_t seq;
  uint32_t cls;
  uint32_t op;
  uint32_t kind;    /* EventKind */
  uint32_t version; /* flows: stale when the op's version moved on */
} Event;

/* Per program: successors, per-stream op lists and per-op work, all CSR. Work is the
 * ops' transfers with amounts <= 0 dropped and repeats of a resource merged. */
typedef struct {
  uint32_t *succ_first; /* n_ops + 1 */
  uint32_t *succ;
  uint32_t *stream_first; /* n_streams + 1 */
  uint32_t *stream_ops;
  uint32_t *work_first; /* n_ops + 1 */
  uint32_t *work_res;
  double *work_amt;
  uint32_t max_work;    /* most work entries of one op */
  uint32_t *used_res;   /* resources some op puts work on, ascending */
  uint32_t n_used;
} ProgIndex;

/* The state of one op of one class: one array of these, indexed op_base[c] + op. */
typedef struct {
  MmTime start, end;
  MmTime upd;       /* flows: when rem was last brought up to date */
  double rem, rate; /* flows: work left (fraction) and pace (fraction per ps; 0: not planned yet) */
  uint32_t pending; /* unfinished dependencies */
  uint32_t version; /* flows: bumped when its completion is re-planned */
  uint32_t slot;    /* collective slot or UINT32_MAX */
} OpState;

struct MmEngine {
  const MmEngineProgram *programs;
  uint32_t n_programs;
  const MmEngineClass *classes;
  uint32_t n_classes;
  ProgIndex *index;

  uint32_t *op_base;     /* per class: offset of its ops in the flat per-op arrays */
  uint32_t *stream_base; /* per class: offset of its streams */
  uint32_t total_ops, total_streams;

  OpState *st;
  uint32_t *cursor; /* per stream: next op in its list */
  uint8_t *busy;

  uint32_t n_slots;
  uint32_t *slot_needed, *slot_arrived, *slot_first; /* slot_first: n_slots + 1 into members */
  uint32_t *slot_done; /* members whose own part has finished (all complete with the last) */
  uint32_t *member_cls, *member_op;
  MmTime *slot_dur;

  /* flows: per class the ops moving work (a flow in its tail is no longer active) */
  uint32_t *active; /* per class: up to n_streams op ids */
  uint32_t *n_active;
  uint32_t *res_users; /* per class x resource: active flows with work on it */
  uint32_t *res_base;  /* per class: offset into res_users */
  uint32_t total_res;

  /* scratch of one replan (one device at a time): per resource and per sharing entity */
  uint32_t max_res, max_ent;
  double *r_left;     /* capacity not yet given to fixed entities */
  double *r_share;    /* equal share of that among the unfixed entities */
  uint32_t *r_users;  /* unfixed entities on it */
  uint32_t *r_bound;  /* unfixed entities it bounds; UINT32_MAX: saturated this round */
  uint32_t *r_stamp;  /* == stamp: touched by this replan */
  uint32_t *touched;
  uint32_t stamp;
  uint32_t *ent_flow; /* position in the active list */
  uint32_t *ent_first, *ent_n; /* its work entries */
  uint32_t *ent_bind; /* the resource bounding it this round */
  uint8_t *ent_fixed;
  double *ent_ps;    /* ps for all its work at its share */
  double *flow_ps;   /* per active flow: ps for all its work at the shares */

  MmTime *class_end;      /* per class: the latest end of its ops (this run) */

  Event *heap;
  uint32_t heap_len, heap_cap;
  uint64_t seq, done;
  MmTime now;
};

/* ---- heap -------------------------------------------------------------- */

static inline gboolean ev_less(const Event *a, const Event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(MmEngine *e, MmTime t, uint32_t cls, uint32_t op, EventKind kind, uint32_t version)
{
  g_assert(t >= e->now); /* time never goes backwards */
  if (e->heap_len == e->heap_cap) {
    e->heap_cap = e->heap_cap ? 2 * e->heap_cap : 64;
    e->heap = g_renew(Event, e->heap, e->heap_cap);
  }
  Event ev = {t, e->seq++, cls, op, kind, version};
  uint32_t i = e->heap_len++;
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (!ev_less(&ev, &e->heap[parent])) break;
    e->heap[i] = e->heap[parent];
    i = parent;
  }
  e->heap[i] = ev;
}

static Event heap_pop(MmEngine *e)
{
  Event top = e->heap[0];
  Event last = e->heap[--e->heap_len];
  uint32_t i = 0, n = e->heap_len;
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    const Event *best = &last;
    if (l < n && ev_less(&e->heap[l], best)) m = l, best = &e->heap[l];
    if (r < n && ev_less(&e->heap[r], best)) m = r;
    if (m == i) break;
    e->heap[i] = e->heap[m];
    i = m;
  }
  if (n > 0) e->heap[i] = last;
  return top;
}

/* ---- construction ------------------------------------------------------ */

/* Capacity of resource @r of a device of class @cl (work units per picosecond). */
static inline double resource_cap(const MmEngineClass *cl, uint32_t r) { return cl->link_bw ? cl->link_bw[r] : 0; }

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

typedef struct {
  uint64_t key;
  uint32_t cls, op;
} SlotRef;

static int slot_ref_cmp(const void *a, const void *b)
{
  const SlotRef *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
  return x->op < y->op ? -1 : x->op > y->op;
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
    for (uint32_t i = 0; i < p->n_ops; i++) {
      const MmEngineOp *op = &p->ops[i];
      if (op->coll == MM_NO_COLL) continue;
      uint64_t gid = op->peer != 0 ? MIN(d, (uint64_t)((int64_t)d + op->peer))
                                   : d - ((d / op->stride) % op->degree) * op->stride;
      refs[k++] = (SlotRef){((uint64_t)op->coll << 32) | gid, c, i};
    }
  }
  gboolean sorted = TRUE; /* one class: collective ids ascend already */
  for (uint32_t i = 1; i < n && sorted; i++) sorted = slot_ref_cmp(&refs[i - 1], &refs[i]) < 0;
  if (!sorted) qsort(refs, n, sizeof(SlotRef), slot_ref_cmp);
  for (uint32_t i = 0; i < e->total_ops; i++) e->st[i].slot = UINT32_MAX;
  e->slot_first = g_new0(uint32_t, n + 2);
  e->member_cls = g_new(uint32_t, n + 1);
  e->member_op = g_new(uint32_t, n + 1);
  uint32_t slots = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i == 0 || refs[i].key != refs[i - 1].key) e->slot_first[slots++] = i;
    e->member_cls[i] = refs[i].cls;
    e->member_op[i] = refs[i].op;
    e->st[e->op_base[refs[i].cls] + refs[i].op].slot = slots - 1;
  }
  e->slot_first[slots] = n;
  e->n_slots = slots;
  e->slot_needed = g_new0(uint32_t, slots + 1);
  e->slot_arrived = g_new0(uint32_t, slots + 1);
  e->slot_done = g_new0(uint32_t, slots + 1);
  e->slot_dur = g_new0(MmTime, slots + 1);
  for (uint32_t s = 0; s < slots; s++) {
    e->slot_needed[s] = e->slot_first[s + 1] - e->slot_first[s];
    for (uint32_t m = e->slot_first[s]; m < e->slot_first[s + 1]; m++) {
      MmTime d = e->classes[e->member_cls[m]].dur[e->member_op[m]];
      e->slot_dur[s] = MAX(e->slot_dur[s], d);
    }
  }
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
  e->op_base = g_new(uint32_t, n_classes + 1);
  e->stream_base = g_new(uint32_t, n_classes + 1);
  uint64_t ops = 0, streams = 0;
  for (uint32_t c = 0; c < n_classes; c++) {
    if (classes[c].program >= n_programs) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "class %u: no program %u", c, classes[c].program);
      return NULL;
    }
    e->op_base[c] = (uint32_t)ops;
    e->stream_base[c] = (uint32_t)streams;
    ops += programs[classes[c].program].n_ops;
    streams += programs[classes[c].program].n_streams;
    if (ops >= UINT32_MAX / 2) {
      g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "too many ops (%" G_GUINT64_FORMAT ")", ops);
      return NULL;
    }
  }
  e->total_ops = (uint32_t)ops;
  e->total_streams = (uint32_t)streams;
  e->st = g_new0(OpState, e->total_ops + 1);
  e->class_end = g_new0(MmTime, n_classes + 1);
  e->cursor = g_new0(uint32_t, e->total_streams + 1);
  e->busy = g_new0(uint8_t, e->total_streams + 1);
  e->heap_cap = MAX(64u, e->total_streams * 4);
  e->heap = g_new(Event, e->heap_cap);
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
    const uint32_t ents = MIN(e->index[p].work_first[programs[p].n_ops], programs[p].n_streams * e->index[p].max_work);
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
  build_slots(e);
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
  }
  g_free(e->index);
  g_free(e->op_base);
  g_free(e->stream_base);
  g_free(e->st);
  g_free(e->class_end);
  g_free(e->cursor);
  g_free(e->busy);
  g_free(e->slot_first);
  g_free(e->slot_needed);
  g_free(e->slot_arrived);
  g_free(e->slot_done);
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
  g_free(e->heap);
  g_free(e);
}

/* ---- flows ------------------------------------------------------------- */

/* Sharing is max-min fair by progressive filling, as SimGrid's LMM solver, per device:
 * the sharing entities are the flows that carry work all at once and each resource
 * of a sequential flow (its phases hold their shares independently). Each round every
 * touched resource offers its unallocated capacity equally to its unfixed entities; an
 * entity is bounded by the resource where that share gives it the longest time. A
 * resource that bounds all its entities is a bottleneck: they get exactly its share
 * and are fixed (a flow bounded elsewhere takes less and leaves the rest), and the
 * next round shares what is left. Shares only grow from round to round, so what was
 * fixed stays feasible. Where no resource bounds all its entities (flows crossing two
 * resources with opposite weights), every unfixed entity is sped up by one factor of
 * its equal-share pace until a resource saturates, and that resource's entities are
 * fixed. Without overlap a flow gets every capacity whole: the same arithmetic as a
 * flow alone, so its times do not change. Cost: rounds x the active flows' entries. */

/* Gives entity @k the time @t_ps for all its work: takes its use of each of its resources. */
static void fix_entity(MmEngine *e, const ProgIndex *ix, uint32_t k, double t_ps)
{
  e->ent_fixed[k] = 1;
  e->ent_ps[k] = t_ps;
  for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++) {
    uint32_t r = ix->work_res[j];
    e->r_left[r] -= ix->work_amt[j] / t_ps;
    e->r_users[r]--;
  }
}

/* Shares the resources of class @c among its active flows: flow_ps[i] becomes the
 * time the i-th active flow needs for all its work at its shares (infinite: none). */
static void share_resources(MmEngine *e, uint32_t c)
{
  const MmEngineClass *cl = &e->classes[c];
  const MmEngineProgram *p = &e->programs[cl->program];
  const ProgIndex *ix = &e->index[cl->program];
  const uint32_t *act = &e->active[e->stream_base[c]];
  const uint32_t na = e->n_active[c];
  if (++e->stamp == 0) { /* wrapped: forget every stamp */
    memset(e->r_stamp, 0, sizeof(uint32_t) * e->max_res);
    e->stamp = 1;
  }
  uint32_t ne = 0, nt = 0;
  for (uint32_t i = 0; i < na; i++) {
    const uint32_t op = act[i], first = ix->work_first[op], n = ix->work_first[op + 1] - first;
    const gboolean seq = p->ops[op].sequential;
    for (uint32_t j = first; j < first + n; j++) {
      uint32_t r = ix->work_res[j];
      if (e->r_stamp[r] != e->stamp) {
        e->r_stamp[r] = e->stamp;
        e->r_left[r] = resource_cap(cl, r);
        e->r_users[r] = 0;
        e->touched[nt++] = r;
      }
      e->r_users[r]++;
      if (seq || j == first) {
        e->ent_flow[ne] = i;
        e->ent_first[ne] = j;
        e->ent_n[ne] = seq ? 1 : n;
        e->ent_fixed[ne++] = 0;
      }
    }
  }
  for (uint32_t unfixed = ne; unfixed > 0;) {
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      e->r_share[r] = e->r_users[r] && e->r_left[r] > 0 ? e->r_left[r] / (double)e->r_users[r] : 0;
      e->r_bound[r] = 0;
    }
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      double t_ps = 0; /* the longest of its per-resource times: the bounding resource's */
      uint32_t bind = ix->work_res[e->ent_first[k]];
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++) {
        uint32_t r = ix->work_res[j];
        double tj = ix->work_amt[j] / e->r_share[r];
        if (tj > t_ps) t_ps = tj, bind = r;
      }
      e->ent_ps[k] = t_ps;
      e->ent_bind[k] = bind;
      e->r_bound[bind]++;
    }
    gboolean any = FALSE;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      if (e->r_users[r] && e->r_bound[r] == e->r_users[r]) e->r_bound[r] = UINT32_MAX, any = TRUE;
    }
    if (any) {
      for (uint32_t k = 0; k < ne; k++) {
        if (e->ent_fixed[k] || e->r_bound[e->ent_bind[k]] != UINT32_MAX) continue;
        fix_entity(e, ix, k, e->ent_ps[k]);
        unfixed--;
      }
      continue;
    }
    /* no bottleneck: scale every pace by the largest factor all resources allow */
    for (uint32_t t = 0; t < nt; t++) e->r_share[e->touched[t]] = 0; /* now: use at the equal-share paces */
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++)
        e->r_share[ix->work_res[j]] += ix->work_amt[j] / e->ent_ps[k];
    }
    double best = INFINITY;
    uint32_t sat = UINT32_MAX;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      if (e->r_users[r] == 0 || !(e->r_share[r] > 0)) continue;
      double f = e->r_left[r] / e->r_share[r];
      if (f < best) best = f, sat = r;
    }
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      gboolean on_sat = sat == UINT32_MAX; /* nothing can move: fix them all as they are */
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k] && !on_sat; j++)
        on_sat = ix->work_res[j] == sat;
      if (!on_sat) continue;
      fix_entity(e, ix, k, sat == UINT32_MAX ? e->ent_ps[k] : e->ent_ps[k] / best);
      unfixed--;
    }
  }
  /* a flow's time: its entity's, or the sum of its phases' in transfer order */
  for (uint32_t i = 0; i < na; i++) e->flow_ps[i] = 0;
  for (uint32_t k = 0; k < ne; k++) {
    uint32_t i = e->ent_flow[k];
    e->flow_ps[i] = p->ops[act[i]].sequential ? e->flow_ps[i] + e->ent_ps[k] : e->ent_ps[k];
  }
}

/* Moves flow @op's completion to its new pace @rate (work fraction per ps; 0: stalled). */
static void replan_flow(MmEngine *e, uint32_t c, uint32_t op, double rate)
{
  OpState *st = &e->st[e->op_base[c] + op];
  if (st->rem <= 0 || rate == st->rate) return; /* work done (completion pending), or pace unchanged */
  double moved = (double)(e->now - st->upd) * st->rate;
  if (st->rate > 0 && moved >= st->rem) {
    st->rem = 0; /* the work finished before now; keep the planned completion */
    return;
  }
  st->rem -= moved;
  st->upd = e->now;
  st->rate = rate;
  st->version++;
  if (rate > 0) heap_push(e, e->now + (MmTime)ceil(st->rem / rate), c, op, EV_FLOW, st->version);
}

/* Re-shares class @c's resources and re-plans every active flow whose pace changed
 * (the others' planned completions stand). */
static void replan_flows(MmEngine *e, uint32_t c)
{
  share_resources(e, c);
  const uint32_t *act = &e->active[e->stream_base[c]];
  for (uint32_t i = 0; i < e->n_active[c]; i++) replan_flow(e, c, act[i], 1.0 / e->flow_ps[i]);
}

/* A flow starts its work. Alone on its resources it takes them whole (the sharing
 * would give the same) and no other flow's pace changes; otherwise all are re-shared. */
static void flow_begin(MmEngine *e, uint32_t c, uint32_t op)
{
  const MmEngineClass *cl = &e->classes[c];
  const ProgIndex *ix = &e->index[cl->program];
  const gboolean seq = e->programs[cl->program].ops[op].sequential;
  uint32_t *users = &e->res_users[e->res_base[c]];
  OpState *st = &e->st[e->op_base[c] + op];
  st->rem = 1.0;
  st->upd = e->now;
  st->rate = 0;
  e->active[e->stream_base[c] + e->n_active[c]++] = op;
  gboolean shared = FALSE;
  double t_ps = 0; /* as the sharing computes it with every share whole */
  for (uint32_t j = ix->work_first[op]; j < ix->work_first[op + 1]; j++) {
    uint32_t r = ix->work_res[j];
    shared |= users[r]++ > 0;
    double tj = ix->work_amt[j] / resource_cap(cl, r);
    t_ps = seq ? t_ps + tj : tj > t_ps ? tj : t_ps;
  }
  if (shared) replan_flows(e, c);
  else replan_flow(e, c, op, 1.0 / t_ps);
}

/* The flow's work is done: it leaves the sharing (its tail holds nothing); the flows
 * it shared a resource with are re-planned. */
static void flow_end(MmEngine *e, uint32_t c, uint32_t op)
{
  const ProgIndex *ix = &e->index[e->classes[c].program];
  uint32_t *users = &e->res_users[e->res_base[c]];
  uint32_t *act = &e->active[e->stream_base[c]];
  for (uint32_t i = 0; i < e->n_active[c]; i++) {
    if (act[i] == op) {
      act[i] = act[--e->n_active[c]];
      break;
    }
  }
  OpState *st = &e->st[e->op_base[c] + op];
  st->rem = 0;
  st->version++;
  gboolean shared = FALSE;
  for (uint32_t j = ix->work_first[op]; j < ix->work_first[op + 1]; j++) shared |= --users[ix->work_res[j]] > 0;
  if (shared) replan_flows(e, c);
}

/* ---- simulation -------------------------------------------------------- */

/* Starts op @op of class @c at now: fixed ops end after their duration; flows do
 * their work at their shares of the device's resources, then their tail. */
static void launch(MmEngine *e, uint32_t c, uint32_t op, MmTime fixed)
{
  const ProgIndex *ix = &e->index[e->classes[c].program];
  uint32_t g = e->op_base[c] + op;
  e->st[g].start = e->now;
  e->st[g].end = e->now + fixed; /* final for fixed ops; updated when a flow ends */
  if (ix->work_first[op + 1] > ix->work_first[op]) {
    flow_begin(e, c, op);
    return;
  }
  heap_push(e, e->now + fixed, c, op, EV_DONE, 0);
}

/* Starts the head op of stream @s of class @c if the stream is idle and the op ready. */
static void try_start(MmEngine *e, uint32_t c, uint32_t s)
{
  const uint32_t si = e->stream_base[c] + s;
  if (e->busy[si]) return;
  const MmEngineClass *cl = &e->classes[c];
  const ProgIndex *ix = &e->index[cl->program];
  const uint32_t pos = ix->stream_first[s] + e->cursor[si];
  if (pos >= ix->stream_first[s + 1]) return;
  const uint32_t op = ix->stream_ops[pos];
  const uint32_t g = e->op_base[c] + op;
  if (e->st[g].pending) return;
  e->busy[si] = 1;
  e->cursor[si]++;
  const uint32_t slot = e->st[g].slot;
  if (slot == UINT32_MAX) {
    launch(e, c, op, cl->dur[op]);
    return;
  }
  /* A collective: the stream is held from the moment this member posts it. */
  if (++e->slot_arrived[slot] < e->slot_needed[slot]) return;
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++)
    launch(e, e->member_cls[m], e->member_op[m], e->slot_dur[slot]);
}

static void complete(MmEngine *e, uint32_t c, uint32_t op)
{
  const MmEngineClass *cl = &e->classes[c];
  const MmEngineProgram *p = &e->programs[cl->program];
  const ProgIndex *ix = &e->index[cl->program];
  const uint32_t base = e->op_base[c];
  const uint32_t s = p->ops[op].stream;
  e->st[base + op].end = e->now;
  e->class_end[c] = e->now; /* completions come in time order */
  e->done++;
  e->busy[e->stream_base[c] + s] = 0;
  for (uint32_t k = ix->succ_first[op]; k < ix->succ_first[op + 1]; k++) {
    uint32_t succ = ix->succ[k];
    if (--e->st[base + succ].pending == 0 && p->ops[succ].stream != s) try_start(e, c, p->ops[succ].stream);
  }
  try_start(e, c, s);
}

/* An op's own part is over: a collective member waits until every member's part is,
 * then all complete together (the slowest member sets the end). */
static void finish(MmEngine *e, uint32_t c, uint32_t op)
{
  const uint32_t slot = e->st[e->op_base[c] + op].slot;
  if (slot == UINT32_MAX || e->slot_needed[slot] == 1) {
    complete(e, c, op);
    return;
  }
  if (++e->slot_done[slot] < e->slot_needed[slot]) return;
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++) complete(e, e->member_cls[m], e->member_op[m]);
}

gboolean mm_engine_run(MmEngine *e, GError **error)
{
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    for (uint32_t i = 0; i < p->n_ops; i++) e->st[e->op_base[c] + i].pending = p->ops[i].n_deps;
  }
  memset(e->cursor, 0, sizeof(uint32_t) * e->total_streams);
  memset(e->busy, 0, e->total_streams);
  memset(e->slot_arrived, 0, sizeof(uint32_t) * e->n_slots);
  memset(e->slot_done, 0, sizeof(uint32_t) * e->n_slots);
  for (uint32_t i = 0; i < e->total_ops; i++) e->st[i].version = 0;
  memset(e->n_active, 0, sizeof(uint32_t) * e->n_classes);
  memset(e->res_users, 0, sizeof(uint32_t) * e->total_res);
  memset(e->class_end, 0, sizeof(MmTime) * e->n_classes);
  e->heap_len = 0;
  e->seq = 0;
  e->done = 0;
  e->now = 0;
  for (uint32_t c = 0; c < e->n_classes; c++)
    for (uint32_t s = 0; s < e->programs[e->classes[c].program].n_streams; s++) try_start(e, c, s);
  while (e->heap_len > 0) {
    Event ev = heap_pop(e);
    g_assert(ev.t >= e->now);
    switch ((EventKind)ev.kind) {
    case EV_DONE:
      e->now = ev.t;
      finish(e, ev.cls, ev.op);
      break;
    case EV_FLOW: {
      if (ev.version != e->st[e->op_base[ev.cls] + ev.op].version) break; /* re-planned since */
      e->now = ev.t;
      flow_end(e, ev.cls, ev.op);
      MmTime tail = e->classes[ev.cls].dur[ev.op];
      if (tail == 0) finish(e, ev.cls, ev.op);
      else heap_push(e, e->now + tail, ev.cls, ev.op, EV_DONE, 0);
      break;
    }
    }
  }
  if (e->done != e->total_ops) {
    /* name the first stuck op for the bug report */
    for (uint32_t c = 0; c < e->n_classes; c++) {
      const MmEngineProgram *p = &e->programs[e->classes[c].program];
      for (uint32_t s = 0; s < p->n_streams; s++) {
        const ProgIndex *ix = &e->index[e->classes[c].program];
        uint32_t pos = ix->stream_first[s] + e->cursor[e->stream_base[c] + s];
        if (pos < ix->stream_first[s + 1] || e->busy[e->stream_base[c] + s]) {
          uint32_t op = ix->stream_ops[pos < ix->stream_first[s + 1] ? pos : pos - 1];
          g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_DEADLOCK,
                      "deadlock: %" G_GUINT64_FORMAT " of %u ops finished; class %u stream %u waits at op %u",
                      e->done, e->total_ops, c, s, op);
          return FALSE;
        }
      }
    }
    g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_DEADLOCK, "deadlock");
    return FALSE;
  }
  return TRUE;
}

MmTime mm_engine_class_end(const MmEngine *e, uint32_t cls)
{
  g_return_val_if_fail(cls < e->n_classes, 0);
  return e->class_end[cls];
}

MmTime mm_engine_makespan(const MmEngine *e)
{
  MmTime t = 0;
  for (uint32_t c = 0; c < e->n_classes; c++) t = MAX(t, e->class_end[c]);
  return t;
}

void mm_engine_class_times(const MmEngine *e, uint32_t cls, MmTime *start, MmTime *end)
{
  const OpState *st = &e->st[e->op_base[cls]];
  uint32_t n = e->programs[e->classes[cls].program].n_ops;
  for (uint32_t i = 0; i < n; i++) {
    start[i] = st[i].start;
    end[i] = st[i].end;
  }
}

MmTime mm_engine_op_start(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->st[e->op_base[cls] + op].start;
}

MmTime mm_engine_op_end(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->st[e->op_base[cls] + op].end;
}

uint64_t mm_engine_events(const MmEngine *e) { return e->done; }
