/* engine: a binary heap of op completions keyed (time, seq); FIFO streams; collectives that wait for their group;
 * flows that share their device's resources max-min fairly (flows.c); construction in build.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

G_DEFINE_QUARK(mm-engine-error-quark, mm_engine_error)

/* ---- heap -------------------------------------------------------------- */

static inline gboolean ev_less(const Event *a, const Event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void mm__heap_push(MmEngine *e, MmTime t, uint32_t cls, uint32_t op, EventKind kind, uint32_t version)
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

Event mm__heap_pop(MmEngine *e)
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

/* ---- simulation -------------------------------------------------------- */

/* Starts op @op of class @c at now: fixed ops end after their duration; flows do
 * their work at their shares of the device's resources, then their tail. */
static void launch(MmEngine *e, uint32_t c, uint32_t op, MmTime fixed)
{
  const ProgIndex *ix = &e->index[e->classes[c].program];
  uint32_t g = e->op_base[c] + op;
  e->st[g].start = e->now;
  e->st[g].end = mm__after(e, fixed); /* final for fixed ops; updated when a flow ends */
  if (ix->work_first[op + 1] > ix->work_first[op]) {
    mm__flow_begin(e, c, op);
    return;
  }
  mm__heap_push(e, e->st[g].end, c, op, EV_DONE, 0);
}

/* ---- collective groups --------------------------------------------------- */

/* An arithmetic group: member classes first + j x step, j < n. */
typedef struct {
  uint32_t first, step, n;
} Group;

static inline Group arith_group(uint32_t c, const MmEngineOp *o)
{
  if (o->peer != 0) {
    const uint32_t step = o->peer > 0 ? (uint32_t)o->peer : (uint32_t)-(int64_t)o->peer;
    return (Group){o->peer > 0 ? c : c - step, step, 2};
  }
  return (Group){c - ((c / o->stride) % o->degree) * o->stride, o->stride, o->degree};
}

/* The op of member class @m matching op @op (collective @coll) of class @c. */
static inline uint32_t member_op(const MmEngine *e, uint32_t m, uint32_t c, uint32_t op, uint32_t coll)
{
  return e->classes[m].program == e->classes[c].program ? op : mm__coll_op(e, m, coll);
}

/* Member @c's collective op @op has been posted: when it is the last, all members
 * start together, each for the longest member's fixed time. */
static void arrive(MmEngine *e, uint32_t c, uint32_t op, const MmEngineOp *o)
{
  if (e->arith) {
    const Group g = arith_group(c, o);
    uint32_t *count = &e->st[e->op_base[g.first] + member_op(e, g.first, c, op, o->coll)].aux;
    if (++*count < g.n) return;
    *count = 0;
    MmTime dur = 0;
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) dur = MAX(dur, e->classes[m].dur[member_op(e, m, c, op, o->coll)]);
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) launch(e, m, member_op(e, m, c, op, o->coll), dur);
    return;
  }
  const uint32_t slot = e->st[e->op_base[c] + op].aux;
  if (++e->slot_count[slot] < e->slot_first[slot + 1] - e->slot_first[slot]) return;
  e->slot_count[slot] = 0;
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++)
    launch(e, e->member_cls[m], e->member_op[m], e->slot_dur[slot]);
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
  const MmEngineOp *o = &e->programs[cl->program].ops[op];
  if (o->coll == MM_NO_COLL) launch(e, c, op, cl->dur[op]);
  else arrive(e, c, op, o); /* a collective: the stream is held from the moment this member posts it */
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
  const MmEngineOp *o = &e->programs[e->classes[c].program].ops[op];
  if (o->coll == MM_NO_COLL) {
    complete(e, c, op);
    return;
  }
  if (e->arith) {
    const Group g = arith_group(c, o);
    if (g.n == 1) {
      complete(e, c, op);
      return;
    }
    if (++e->st[e->op_base[g.first] + member_op(e, g.first, c, op, o->coll)].aux < g.n) return;
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) complete(e, m, member_op(e, m, c, op, o->coll));
    return;
  }
  const uint32_t slot = e->st[e->op_base[c] + op].aux;
  const uint32_t n = e->slot_first[slot + 1] - e->slot_first[slot];
  if (n == 1) {
    complete(e, c, op);
    return;
  }
  if (++e->slot_count[slot] < n) return;
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++) complete(e, e->member_cls[m], e->member_op[m]);
}

gboolean mm_engine_run(MmEngine *e, GError **error)
{
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const MmEngineProgram *p = &e->programs[e->classes[c].program];
    OpState *st = &e->st[e->op_base[c]];
    for (uint32_t i = 0; i < p->n_ops; i++) {
      st[i].pending = p->ops[i].n_deps;
      if (e->arith) st[i].aux = 0;
    }
  }
  memset(e->cursor, 0, sizeof(uint32_t) * e->total_streams);
  memset(e->busy, 0, e->total_streams);
  memset(e->flow, 0, sizeof(FlowState) * e->total_streams);
  if (e->n_slots) memset(e->slot_count, 0, sizeof(uint32_t) * e->n_slots);
  memset(e->n_active, 0, sizeof(uint32_t) * e->n_classes);
  memset(e->res_users, 0, sizeof(uint32_t) * e->total_res);
  memset(e->class_end, 0, sizeof(MmTime) * e->n_classes);
  e->heap_len = 0;
  e->seq = 0;
  e->done = 0;
  e->now = 0;
  e->overflow = FALSE;
  for (uint32_t c = 0; c < e->n_classes; c++)
    for (uint32_t s = 0; s < e->programs[e->classes[c].program].n_streams; s++) try_start(e, c, s);
  while (e->heap_len > 0) {
    Event ev = mm__heap_pop(e);
    g_assert(ev.t >= e->now);
    switch ((EventKind)ev.kind) {
    case EV_DONE:
      e->now = ev.t;
      finish(e, ev.cls, ev.op);
      break;
    case EV_FLOW: {
      if (ev.version != mm__flow_state(e, ev.cls, ev.op)->version) break; /* re-planned since */
      e->now = ev.t;
      mm__flow_end(e, ev.cls, ev.op);
      MmTime tail = e->classes[ev.cls].dur[ev.op];
      if (tail == 0) finish(e, ev.cls, ev.op);
      else mm__heap_push(e, mm__after(e, tail), ev.cls, ev.op, EV_DONE, 0);
      break;
    }
    }
    if (G_UNLIKELY(e->overflow)) break;
  }
  if (e->overflow) {
    g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW,
                "the simulated iteration runs past %.3g s (the engine's picosecond clock); "
                "inputs this large should have been rejected before the simulation",
                mm_time_to_s(MM_TIME_MAX));
    return FALSE;
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

gboolean mm_engine_groups_arithmetic(const MmEngine *e) { return e->arith; }

