/* engine: a queue of op completions in (time, seq) order; FIFO streams; collectives that wait for their group;
 * flows that share their device's resources max-min fairly (flows.c); construction in build.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

G_DEFINE_QUARK(mm-engine-error-quark, mm_engine_error)

/* ---- the event queue (internal.h, Bucket) ------------------------------- */

#define NONE UINT32_MAX

void mm__queue_init(MmEngine *e, uint32_t events)
{
  e->eheap_cap = 64;
  e->eheap = g_new(Event, e->eheap_cap);
  e->chunk_cap = MAX(64u, events / MM__CHUNK_KEYS + 64u);
  e->chunk = g_aligned_alloc(e->chunk_cap, sizeof(QueueChunk), 64); /* a chunk is two cache lines */
  e->bk_cap = 64;
  e->bk = g_new(Bucket, e->bk_cap);
  e->theap = g_new(uint32_t, e->bk_cap);
  e->hmask = 2 * e->bk_cap - 1;
  e->hslot = g_new(uint32_t, e->hmask + 1);
}

void mm__queue_free(MmEngine *e)
{
  g_free(e->eheap);
  g_aligned_free(e->chunk);
  g_free(e->bk);
  g_free(e->theap);
  g_free(e->hslot);
}

void mm__queue_reset(MmEngine *e)
{
  e->queued = e->n_bk = e->eheap_len = 0;
  e->popped = (Event){0, MM__NO_EVENT};
  if (!e->bucketed) return; /* the buckets' free lists and slots: only where they are used */
  for (uint32_t i = 0; i < e->chunk_cap; i++) e->chunk[i].next = i + 1 < e->chunk_cap ? i + 1 : NONE;
  e->chunk_free = 0;
  for (uint32_t b = 0; b < e->bk_cap; b++) e->bk[b].head = b + 1 < e->bk_cap ? b + 1 : NONE;
  e->bk_free = 0;
  memset(e->hslot, 0xff, sizeof(uint32_t) * (e->hmask + 1));
}

/* Buckets pop in (t, ord) order; ord tells apart the buckets of one time (see mm__queue_push, internal.h). */
static inline gboolean bucket_before(const MmEngine *e, uint32_t a, uint32_t b)
{
  return e->bk[a].t < e->bk[b].t || (e->bk[a].t == e->bk[b].t && e->bk[a].ord < e->bk[b].ord);
}

static void theap_push(MmEngine *e, uint32_t b)
{
  uint32_t i = e->n_bk++;
  while (i > 0 && bucket_before(e, b, e->theap[(i - 1) / 2])) {
    e->theap[i] = e->theap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  e->theap[i] = b;
}

static void theap_pop(MmEngine *e)
{
  const uint32_t last = e->theap[--e->n_bk], n = e->n_bk;
  uint32_t i = 0;
  for (;;) {
    uint32_t m = 2 * i + 1;
    if (m >= n) break;
    if (m + 1 < n && bucket_before(e, e->theap[m + 1], e->theap[m])) m++;
    if (!bucket_before(e, e->theap[m], last)) break;
    e->theap[i] = e->theap[m];
    i = m;
  }
  if (n > 0) e->theap[i] = last;
}

/* A new bucket for time @t whose first event has key @key, in the heap and in @t's slot. */
static uint32_t bucket_new(MmEngine *e, MmTime t, uint64_t key)
{
  if (e->bk_free == NONE) { /* grow the buckets, the heap and the slots together */
    const uint32_t old = e->bk_cap;
    e->bk_cap *= 2;
    e->bk = g_renew(Bucket, e->bk, e->bk_cap);
    e->theap = g_renew(uint32_t, e->theap, e->bk_cap);
    for (uint32_t b = old; b < e->bk_cap; b++) e->bk[b].head = b + 1 < e->bk_cap ? b + 1 : NONE;
    e->bk_free = old;
    e->hmask = 2 * e->bk_cap - 1;
    e->hslot = g_renew(uint32_t, e->hslot, e->hmask + 1);
    memset(e->hslot, 0xff, sizeof(uint32_t) * (e->hmask + 1)); /* forgotten: later pushes open new buckets */
  }
  const uint32_t b = e->bk_free;
  e->bk_free = e->bk[b].head;
  e->bk[b] = (Bucket){t, key, NONE, NONE, 0};
  e->hslot[mm__time_slot(e, t)] = b;
  theap_push(e, b);
  return b;
}

static inline gboolean ev_less(const Event *a, const Event *b) { return a->t < b->t || (a->t == b->t && a->key < b->key); }

/* Few classes: a binary heap of events (their times are mostly distinct). */
static void eheap_push(MmEngine *e, Event ev)
{
  if (e->eheap_len == e->eheap_cap) {
    e->eheap_cap *= 2;
    e->eheap = g_renew(Event, e->eheap, e->eheap_cap);
  }
  uint32_t i = e->eheap_len++;
  while (i > 0 && ev_less(&ev, &e->eheap[(i - 1) / 2])) {
    e->eheap[i] = e->eheap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  e->eheap[i] = ev;
}

G_ALWAYS_INLINE static inline Event eheap_pop(MmEngine *e)
{
  const Event top = e->eheap[0], last = e->eheap[--e->eheap_len];
  const uint32_t n = e->eheap_len;
  uint32_t i = 0;
  for (;;) {
    uint32_t m = 2 * i + 1;
    if (m >= n) break;
    if (m + 1 < n && ev_less(&e->eheap[m + 1], &e->eheap[m])) m++;
    if (!ev_less(&e->eheap[m], &last)) break;
    e->eheap[i] = e->eheap[m];
    i = m;
  }
  if (n > 0) e->eheap[i] = last;
  return top;
}

/* The out-of-line parts of mm__queue_push (internal.h) and queue_pop: the heap of events, a
 * full chunk, a new bucket, a bucket that is over. */
void mm__queue_heap_push(MmEngine *e, MmTime t, uint64_t key) { eheap_push(e, (Event){t, key}); }

/* A free chunk, empty, the last of its bucket; the pool doubles when none is free (the
 * chunks move: callers take pointers after this). */
static uint32_t chunk_take(MmEngine *e)
{
  if (G_UNLIKELY(e->chunk_free == NONE)) {
    const uint32_t old = e->chunk_cap;
    e->chunk_cap *= 2;
    QueueChunk *grown = g_aligned_alloc(e->chunk_cap, sizeof(QueueChunk), 64);
    memcpy(grown, e->chunk, sizeof(QueueChunk) * old);
    g_aligned_free(e->chunk);
    e->chunk = grown;
    for (uint32_t i = old; i < e->chunk_cap; i++) e->chunk[i].next = i + 1 < e->chunk_cap ? i + 1 : NONE;
    e->chunk_free = old;
  }
  const uint32_t id = e->chunk_free;
  e->chunk_free = e->chunk[id].next;
  e->chunk[id].next = NONE;
  e->chunk[id].n = 0;
  return id;
}

QueueChunk *mm__queue_append(MmEngine *e, uint32_t b)
{
  const uint32_t id = chunk_take(e);
  e->chunk[e->bk[b].tail].next = id;
  e->bk[b].tail = id;
  return &e->chunk[id];
}

void mm__queue_open(MmEngine *e, MmTime t, uint64_t key)
{
  const uint32_t b = bucket_new(e, t, key), id = chunk_take(e);
  e->chunk[id].key[0] = key;
  e->chunk[id].n = 1;
  e->bk[b].head = e->bk[b].tail = id;
}

/* Bucket @b (time @t) popped its last event: it leaves the heap and its slot. */
static void bucket_close(MmEngine *e, uint32_t b, MmTime t)
{
  uint32_t *slot = &e->hslot[mm__time_slot(e, t)];
  if (*slot == b) *slot = NONE;
  theap_pop(e);
  e->bk[b].head = e->bk_free;
  e->bk_free = b;
}

/* The first event in (t, seq) order; the queue must not be empty. Inline, with the heap's pop:
 * the run loop pops every event, and taking the head of the first bucket is a few loads. */
G_ALWAYS_INLINE static inline Event queue_pop(MmEngine *e)
{
  Event ev;
  e->queued--;
  if (!e->bucketed) {
    ev = eheap_pop(e);
  } else {
    const uint32_t b = e->theap[0];
    Bucket *bk = &e->bk[b];
    QueueChunk *ch = &e->chunk[bk->head];
    const uint32_t p = bk->pos++;
    ev = (Event){bk->t, ch->key[p]};
    /* the stream of the event three pops on (this pop's costs 8% of a 65,536-GPU run where it
     * is not fetched early), and the bucket's next chunk from half-way through this one */
    if (p + 3 < ch->n) __builtin_prefetch(&e->streams[ch->key[p + 3] & (MM__MAX_STREAMS - 1)]);
    if (p == MM__CHUNK_KEYS / 2 && ch->next != NONE) {
      __builtin_prefetch(&e->chunk[ch->next]);
      __builtin_prefetch((const char *)&e->chunk[ch->next] + 64);
    }
    if (bk->pos == ch->n) { /* the chunk is read: the bucket's last (over), or a full one before others */
      const uint32_t id = bk->head;
      if (ch->next == NONE) bucket_close(e, b, ev.t);
      else bk->head = ch->next, bk->pos = 0;
      ch->next = e->chunk_free;
      e->chunk_free = id;
    }
  }
#ifndef NDEBUG /* the order is total: (t, seq) strictly increases (checked in debug builds: it is per event) */
  g_assert(ev_less(&e->popped, &ev) || e->popped.key == MM__NO_EVENT);
  e->popped = ev;
#endif
  return ev;
}

Event mm__queue_pop(MmEngine *e) { return queue_pop(e); }

/* ---- simulation -------------------------------------------------------- */

/* Interference: the pace of class @c's slowed ops now. */
static inline double cil_pace(const MmEngine *e, uint32_t c)
{
  const double p = e->classes[c].slow_pace;
  return e->interf[c] > 0 && p > 0 ? p : 1.0;
}

/* The slowed op of class @c running on global stream @si keeps the work it has done at its pace
 * and ends at @pace (a new live event), unless it ends now (its event is queued: a fraction of a
 * picosecond left must not push it one later). */
static inline void cil_repace(MmEngine *e, uint32_t c, uint32_t si, double pace)
{
  Stream *sp = &e->streams[si];
  OpState *st = &e->st[mm__op_index(e, c, sp->op)];
  if (st->end <= e->now) return;
  sp->rem = MAX(0.0, sp->rem - (double)(e->now - sp->upd) * sp->rate);
  sp->upd = e->now;
  sp->rate = pace;
  st->end = mm__after_ps(e, sp->rem / pace);
  mm__queue_push(e, st->end, si);
}

/* Class @c's interfering ops went from none to some or back: its running slowed ops change
 * pace (the lowering runs one at a time, on the compute stream: found without a search). */
static void cil_retime(MmEngine *e, uint32_t c)
{
  const uint32_t n = e->slowed[c];
  if (n == 0) return;
  const double pace = cil_pace(e, c);
  if (n & 1) {
    cil_repace(e, c, e->slowed_si[c], pace);
    return;
  }
  const ClassRt *k = &e->crt[c];
  const uint32_t ns = e->programs[k->program].n_streams;
  for (uint32_t s = 0; s < ns; s++) {
    const uint32_t si = k->sbase + s * k->op_stride;
    const Stream *sp = &e->streams[si];
    if (sp->busy && sp->live != MM__NO_EVENT && k->ops[sp->op].cil == MM_CIL_SLOWED) cil_repace(e, c, si, pace);
  }
}

/* Starts op @op of class @c at now: fixed ops end after their duration (slowed ops at their
 * class's pace); flows do their work at their shares of the device's resources, then their tail. */
static void launch(MmEngine *e, uint32_t c, uint32_t op, MmTime fixed)
{
  const ClassRt *k = &e->crt[c];
  OpState *st = &e->st[k->op_base + op * k->op_stride];
  st->start = e->now;
  st->end = mm__after(e, fixed); /* final for fixed ops; updated when a flow or a slowed op ends */
  const uint32_t si = k->sbase + k->ops[op].stream * k->op_stride;
  const uint8_t cil = k->ops[op].cil;
  if (k->ix->work_first[op + 1] > k->ix->work_first[op]) {
    mm__flow_begin(e, c, op, si);
  } else if (G_UNLIKELY(cil == MM_CIL_SLOWED)) {
    Stream *sp = &e->streams[si];
    sp->rem = (double)fixed;
    sp->upd = e->now;
    sp->rate = cil_pace(e, c);
    /* one running: found directly; more: by a search (their count doubled, no flag) */
    e->slowed[c] = e->slowed[c] == 0 ? 3 : (e->slowed[c] & ~1u) + 2;
    e->slowed_si[c] = si;
    if (sp->rate != 1.0) st->end = mm__after_ps(e, sp->rem / sp->rate);
    mm__queue_push(e, st->end, si);
  } else {
    mm__queue_push(e, st->end, si);
  }
  if (G_UNLIKELY(cil == MM_CIL_INTERFERES) && e->interf[c]++ == 0 && e->classes[c].slow_pace > 0) cil_retime(e, c);
}

/* ---- collective groups --------------------------------------------------- */

/* Member @c's collective op @op (on stream @sp) has been posted: when it is the last, all
 * members start together, each for the longest member's fixed time. */
static void arrive(MmEngine *e, uint32_t c, uint32_t op, const MmEngineOp *o, Stream *sp)
{
  if (e->arith) {
    const Group g = mm__arith_group(c, o);
    sp->lead = mm__op_index(e, g.first, mm__member_op(e, g.first, c, op, o->coll)); /* for finish */
    uint32_t *count = &e->st[sp->lead].aux;
    if (++*count < g.n) return;
    *count = 0;
    MmTime dur = 0;
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) dur = MAX(dur, e->crt[m].dur[mm__member_op(e, m, c, op, o->coll)]);
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) launch(e, m, mm__member_op(e, m, c, op, o->coll), dur);
    return;
  }
  const uint32_t slot = e->st[mm__op_index(e, c, op)].aux;
  if (++e->slot_count[slot] < e->slot_first[slot + 1] - e->slot_first[slot]) return;
  e->slot_count[slot] = 0;
  for (uint32_t m = e->slot_first[slot]; m < e->slot_first[slot + 1]; m++)
    launch(e, e->member_cls[m], e->member_op[m], e->slot_dur[slot]);
}

/* Starts the head op of stream @sp (of class @c, record @k) if the stream is idle and the op ready. */
static inline void try_start(MmEngine *e, uint32_t c, const ClassRt *k, Stream *sp)
{
  if (sp->busy || sp->next >= sp->last) return;
  const uint32_t op = k->ix->stream_ops[sp->next];
  const OpState *st = &e->st[k->op_base + op * k->op_stride];
  if (st->pending) return;
  sp->busy = 1;
  sp->next++;
  sp->op = op;
  if (st->aux == MM__NOT_COLL) launch(e, c, op, k->dur[op]);
  else arrive(e, c, op, &k->ops[op], sp); /* a collective: the stream is held from the moment this member posts it */
}

static void complete(MmEngine *e, uint32_t c, uint32_t op)
{
  const ClassRt *k = &e->crt[c];
  const ProgIndex *ix = k->ix;
  OpState *st = &e->st[k->op_base]; /* op i's state: st[i x stride] */
  Stream *streams = &e->streams[k->sbase];   /* stream s: streams[s x stride] */
  const uint32_t stride = k->op_stride;
  const uint32_t s = k->ops[op].stream;
  st[op * stride].end = e->now;
  e->class_end[c] = e->now; /* completions come in time order */
  e->done++;
  streams[s * stride].busy = 0;
  if (G_UNLIKELY(k->ops[op].cil == MM_CIL_SLOWED)) e->slowed[c] = e->slowed[c] <= 3 ? 0 : (e->slowed[c] & ~1u) - 2;
  else if (G_UNLIKELY(k->ops[op].cil == MM_CIL_INTERFERES) && --e->interf[c] == 0 && e->classes[c].slow_pace > 0)
    cil_retime(e, c);
  for (uint32_t i = ix->succ_first[op]; i < ix->succ_first[op + 1]; i++) {
    const uint32_t succ = ix->succ[i], ss = k->ops[succ].stream;
    if (--st[succ * stride].pending == 0 && ss != s) try_start(e, c, k, &streams[ss * stride]);
  }
  try_start(e, c, k, &streams[s * stride]);
}

/* An op's own part is over (on stream @sp): a collective member waits until every member's
 * part is, then all complete together (the slowest member sets the end). */
static void finish(MmEngine *e, uint32_t c, uint32_t op, const Stream *sp)
{
  const ClassRt *k = &e->crt[c];
  const uint32_t aux = e->st[k->op_base + op * k->op_stride].aux;
  if (aux == MM__NOT_COLL) {
    complete(e, c, op);
    return;
  }
  const MmEngineOp *o = &k->ops[op];
  if (e->arith) {
    const uint32_t n = o->peer != 0 ? 2 : o->degree; /* mm__arith_group's n */
    if (n == 1) {
      complete(e, c, op);
      return;
    }
    if (++e->st[sp->lead].aux < n) return; /* the leader's counter, found when this member arrived */
    const Group g = mm__arith_group(c, o);
    for (uint32_t j = 0, m = g.first; j < g.n; j++, m += g.step) complete(e, m, mm__member_op(e, m, c, op, o->coll));
    return;
  }
  const uint32_t slot = aux;
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
  if (!e->index) {
    g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID, "a replayed engine cannot run (its results are kept)");
    return FALSE;
  }
  for (uint32_t q = 0; q < e->n_programs; q++) { /* in memory order */
    const MmEngineProgram *p = &e->programs[q];
    OpState *st = &e->st[e->prog_base[q]];
    for (uint32_t i = 0; i < p->n_ops; i++)
      for (uint32_t k = 0; k < e->prog_users[q]; k++, st++) {
        st->pending = p->ops[i].n_deps;
        if (p->ops[i].coll == MM_NO_COLL) st->aux = MM__NOT_COLL;
        else if (e->arith) st->aux = 0; /* else its slot, from the build */
      }
  }
  for (uint32_t c = 0; c < e->n_classes; c++) {
    const ProgIndex *ix = e->crt[c].ix;
    for (uint32_t s = 0; s < e->programs[e->classes[c].program].n_streams; s++)
      e->streams[mm__stream_index(e, c, s)] =
          (Stream){.live = MM__NO_EVENT, .cls = c, .next = ix->stream_first[s], .last = ix->stream_first[s + 1]};
  }
  if (e->n_slots) memset(e->slot_count, 0, sizeof(uint32_t) * e->n_slots);
  memset(e->n_active, 0, sizeof(uint32_t) * e->n_classes);
  memset(e->res_users, 0, sizeof(uint32_t) * e->total_res);
  memset(e->class_end, 0, sizeof(MmTime) * e->n_classes);
  memset(e->interf, 0, 2 * sizeof(uint32_t) * e->n_classes); /* and slowed */
  mm__queue_reset(e);
  e->seq = 0;
  e->done = 0;
  e->now = 0;
  e->overflow = FALSE;
  for (uint32_t c = 0; c < e->n_classes; c++)
    for (uint32_t s = 0; s < e->programs[e->classes[c].program].n_streams; s++)
      try_start(e, c, &e->crt[c], &e->streams[mm__stream_index(e, c, s)]);
  while (e->queued > 0) {
    const Event ev = queue_pop(e);
    const uint32_t si = (uint32_t)(ev.key & (MM__MAX_STREAMS - 1));
    Stream *sp = &e->streams[si];
    if (ev.key != sp->live) continue; /* a flow re-planned since */
    g_assert(ev.t >= e->now);
    e->now = ev.t;
    sp->live = MM__NO_EVENT;
    const uint32_t c = sp->cls;
    const uint32_t op = sp->op;
    if (sp->work) { /* a flow's work is done: its tail follows */
      mm__flow_end(e, c, op, si);
      const MmTime tail = e->crt[c].dur[op];
      if (tail == 0) finish(e, c, op, sp);
      else mm__queue_push(e, mm__after(e, tail), si);
    } else {
      finish(e, c, op, sp);
    }
    if (G_UNLIKELY(e->overflow)) break;
  }
  if (e->overflow && e->seq >= MM__MAX_SEQ - 1) {
    g_set_error(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW,
                "the run needs more than 2^%d events; inputs this large should have been rejected before the simulation",
                64 - MM__STREAM_BITS);
    return FALSE;
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
        const Stream *sp = &e->streams[mm__stream_index(e, c, s)];
        if (sp->next < sp->last || sp->busy) {
          uint32_t op = ix->stream_ops[sp->next < sp->last ? sp->next : sp->next - 1];
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
  uint32_t n = e->programs[e->classes[cls].program].n_ops;
  for (uint32_t i = 0; i < n; i++) {
    const OpState *st = &e->st[mm__op_index(e, cls, i)];
    start[i] = st->start;
    end[i] = st->end;
  }
}

MmTime mm_engine_op_start(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->st[mm__op_index(e, cls, op)].start;
}

MmTime mm_engine_op_end(const MmEngine *e, uint32_t cls, uint32_t op)
{
  return e->st[mm__op_index(e, cls, op)].end;
}

uint64_t mm_engine_events(const MmEngine *e) { return e->done; }

gboolean mm_engine_groups_arithmetic(const MmEngine *e) { return e->arith; }

