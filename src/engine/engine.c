/* engine: a binary heap of op completions keyed (time, seq); FIFO streams; collectives that wait for their group. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(mm-engine-error-quark, mm_engine_error)

typedef struct {
  MmTime t;
  uint64_t seq;
  uint32_t cls;
  uint32_t op;
} Event;

/* Per program: successors and per-stream op lists, both CSR. */
typedef struct {
  uint32_t *succ_first; /* n_ops + 1 */
  uint32_t *succ;
  uint32_t *stream_first; /* n_streams + 1 */
  uint32_t *stream_ops;
} ProgIndex;

struct MmEngine {
  const MmEngineProgram *programs;
  uint32_t n_programs;
  const MmEngineClass *classes;
  uint32_t n_classes;
  ProgIndex *index;

  uint32_t *op_base;     /* per class: offset of its ops in the flat per-op arrays */
  uint32_t *stream_base; /* per class: offset of its streams */
  uint32_t total_ops, total_streams;

  uint32_t *pending; /* unfinished dependencies */
  MmTime *start, *end;
  uint32_t *cursor; /* per stream: next op in its list */
  uint8_t *busy;

  uint32_t *slot_of; /* per op: collective slot or UINT32_MAX */
  uint32_t n_slots;
  uint32_t *slot_needed, *slot_arrived, *slot_first; /* slot_first: n_slots + 1 into members */
  uint32_t *member_cls, *member_op;
  MmTime *slot_dur;

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

static void heap_push(MmEngine *e, MmTime t, uint32_t cls, uint32_t op)
{
  g_assert(t >= e->now); /* time never goes backwards */
  if (e->heap_len == e->heap_cap) {
    e->heap_cap = e->heap_cap ? 2 * e->heap_cap : 64;
    e->heap = g_renew(Event, e->heap, e->heap_cap);
  }
  Event ev = {t, e->seq++, cls, op};
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
    if (op->coll != MM_NO_COLL && (op->degree == 0 || op->stride == 0)) {
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
  return TRUE;
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
      uint64_t gid = d - ((d / op->stride) % op->degree) * op->stride;
      refs[k++] = (SlotRef){((uint64_t)op->coll << 32) | gid, c, i};
    }
  }
  gboolean sorted = TRUE; /* one class: collective ids ascend already */
  for (uint32_t i = 1; i < n && sorted; i++) sorted = slot_ref_cmp(&refs[i - 1], &refs[i]) < 0;
  if (!sorted) qsort(refs, n, sizeof(SlotRef), slot_ref_cmp);
  e->slot_of = g_new(uint32_t, e->total_ops + 1);
  memset(e->slot_of, 0xff, sizeof(uint32_t) * (e->total_ops + 1));
  e->slot_first = g_new0(uint32_t, n + 2);
  e->member_cls = g_new(uint32_t, n + 1);
  e->member_op = g_new(uint32_t, n + 1);
  uint32_t slots = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i == 0 || refs[i].key != refs[i - 1].key) e->slot_first[slots++] = i;
    e->member_cls[i] = refs[i].cls;
    e->member_op[i] = refs[i].op;
    e->slot_of[e->op_base[refs[i].cls] + refs[i].op] = slots - 1;
  }
  e->slot_first[slots] = n;
  e->n_slots = slots;
  e->slot_needed = g_new0(uint32_t, slots + 1);
  e->slot_arrived = g_new0(uint32_t, slots + 1);
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
  e->pending = g_new(uint32_t, e->total_ops + 1);
  e->start = g_new0(MmTime, e->total_ops + 1);
  e->end = g_new0(MmTime, e->total_ops + 1);
  e->cursor = g_new0(uint32_t, e->total_streams + 1);
  e->busy = g_new0(uint8_t, e->total_streams + 1);
  e->heap_cap = MAX(64u, e->total_streams * 2);
  e->heap = g_new(Event, e->heap_cap);
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
  }
  g_free(e->index);
  g_free(e->op_base);
  g_free(e->stream_base);
  g_free(e->pending);
  g_free(e->start);
  g_free(e->end);
  g_free(e->cursor);
  g_free(e->busy);
  g_free(e->slot_of);
  g_free(e->slot_first);
  g_free(e->slot_needed);
  g_free(e->slot_arrived);
  g_free(e->slot_dur);
  g_free(e->member_cls);
  g_free(e->member_op);
  g_free(e->heap);
  g_free(e);
}

/* ---- simulation -------------------------------------------------------- */

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
  if (e->pending[g]) return;
  e->busy[si] = 1;
  e->cursor[si]++;
  e->start[g] = e->now;
  const uint32_t slot = e->slot_of[g];
  if (slot == UINT32_MAX) {
    e->end[g] = e->now + cl->dur[op];
    heap_push(e, e->end[g], c, op);
    return;
  }
  /* A collective: the stream is held from the moment this member posts it. */
  if (++e->slot_arrived[slot] < e->slot_needed[slot]) return;
  const MmTime end = e->now + e->slot_dur[slot];
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++) {
    uint32_t mg = e->op_base[e->member_cls[m]] + e->member_op[m];
    e->start[mg] = e->now;
    e->end[mg] = end;
    heap_push(e, end, e->member_cls[m], e->member_op[m]);
  }
}

static void complete(MmEngine *e, uint32_t c, uint32_t op)
{
  const MmEngineClass *cl = &e->classes[c];
  const MmEngineProgram *p = &e->programs[cl->program];
  const ProgIndex *ix = &e->index[cl->program];
  const uint32_t base = e->op_base[c];
  const uint32_t s = p->ops[op].stream;
  e->done++;
  e->busy[e->stream_base[c] + s] = 0;
  for (uint32_t k = ix->succ_first[op]; k < ix->succ_first[op + 1]; k++) {
    uint32_t succ = ix->succ[k];
    if (--e->pending[base + succ] == 0 && p->ops[succ].stream != s) try_start(e, c, p->ops[succ].stream);
  }
  try_start(e, c, s);
}

gboolean mm_engine_run(MmEngine *e, GError **error)
{
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    for (uint32_t i = 0; i < p->n_ops; i++) e->pending[e->op_base[c] + i] = p->ops[i].n_deps;
  }
  memset(e->cursor, 0, sizeof(uint32_t) * e->total_streams);
  memset(e->busy, 0, e->total_streams);
  memset(e->slot_arrived, 0, sizeof(uint32_t) * e->n_slots);
  e->heap_len = 0;
  e->seq = 0;
  e->done = 0;
  e->now = 0;
  for (uint32_t c = 0; c < e->n_classes; c++)
    for (uint32_t s = 0; s < e->programs[e->classes[c].program].n_streams; s++) try_start(e, c, s);
  while (e->heap_len > 0) {
    Event ev = heap_pop(e);
    g_assert(ev.t >= e->now);
    e->now = ev.t;
    complete(e, ev.cls, ev.op);
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
  MmTime t = 0;
  const MmEngineProgram *p = &e->programs[e->classes[cls].program];
  for (uint32_t i = 0; i < p->n_ops; i++) t = MAX(t, e->end[e->op_base[cls] + i]);
  return t;
}

MmTime mm_engine_makespan(const MmEngine *e)
{
  MmTime t = 0;
  for (uint32_t i = 0; i < e->total_ops; i++) t = MAX(t, e->end[i]);
  return t;
}

MmTime mm_engine_op_start(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->start[e->op_base[cls] + op];
}

MmTime mm_engine_op_end(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->end[e->op_base[cls] + op];
}

uint64_t mm_engine_events(const MmEngine *e) { return e->done; }
