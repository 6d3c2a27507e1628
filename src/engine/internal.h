/* engine internals: the flat state shared by the engine's files (not a public header). */
#pragma once

#include <math.h>

#include "engine.h"

/* An event: the end of a stream's running op, or of a flow's work (the stream says which).
 * Ordered (t, seq) for determinism; key = seq << MM__STREAM_BITS | the global stream index.
 * An event whose key is not its stream's live one is stale (its flow was re-planned). */
typedef struct {
  MmTime t;
  uint64_t key;
} Event;

/* The queue holds events in buckets, each a FIFO of events of one time in chunks (events are pushed
 * in seq order, so a bucket pops in (t, seq) order); a binary heap orders the buckets by (time,
 * ord) and a direct-mapped table of slots, by time, names the bucket a push joins (see
 * mm__queue_push). Symmetric devices end their ops at the same picosecond (99.9% of the events
 * of a 16,384-GPU per-device run share their time with the one before), so the heap stays small
 * and a pop reads the next key of a chunk. A run of fewer classes (a symmetric run: its times are mostly
 * distinct, a bucket per event) keeps a plain binary heap of events instead: buckets made its
 * points 13% slower. */
#define MM__BUCKETED_CLASSES 64 /* from this many classes on, the queue keeps buckets */

/* A bucket's events sit in chunks of MM__CHUNK_KEYS keys (128 bytes), read in order by the pops,
 * so the keys after the one popped (and their streams, prefetched) are at hand: a linked list
 * of single events sent every pop of a 65,536-GPU per-device run to a cache miss (18% of its
 * time, perf). */
#define MM__CHUNK_KEYS 15

typedef struct {
  uint64_t key[MM__CHUNK_KEYS];
  uint32_t next; /* the bucket's next chunk, or the next free chunk */
  uint32_t n;    /* keys written */
} QueueChunk;
G_STATIC_ASSERT(sizeof(QueueChunk) == 128); /* two cache lines, the pool 64-byte aligned */

typedef struct {
  MmTime t;
  uint64_t ord;        /* the key of its first event: orders the buckets of one time */
  uint32_t head, tail; /* its first and last chunk; head: also the next free bucket */
  uint32_t pos;        /* the next key to pop in its head chunk */
} Bucket;

#define MM__STREAM_BITS 24
#define MM__MAX_STREAMS (1u << MM__STREAM_BITS)
G_STATIC_ASSERT(MM__MAX_STREAMS == MM_ENGINE_MAX_STREAMS);
#define MM__MAX_SEQ (UINT64_C(1) << (64 - MM__STREAM_BITS))
#define MM__NO_EVENT UINT64_MAX

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
  uint64_t *colls;      /* its collectives, (coll id << 32 | op), ascending */
  uint32_t n_colls;
  gboolean colls_unique; /* no collective id on two of its ops */
  uint32_t *used_res;   /* resources some op puts work on, ascending */
  uint32_t n_used;
} ProgIndex;

/* The state of one op of one class: one array of these, indexed mm__op_index (24 bytes:
 * the per-device runs hold tens of millions). */
typedef struct {
  MmTime start, end;
  uint32_t pending; /* unfinished dependencies */
  uint32_t aux;     /* a collective's slot (listed groups) or, on the leader of an arithmetic
                     * group, its members arrived, then (after the launch) finished */
} OpState;

#define MM__NOT_COLL UINT32_MAX /* OpState.aux of an op that is not a collective (set by each run) */

/* One stream of one class (indexed mm__stream_index, interleaved like the op states). A stream runs one op at a time, so it
 * also holds that op's flow progress and its one live event. */
typedef struct {
  uint64_t live;    /* the key of its live event; MM__NO_EVENT: none */
  MmTime upd;       /* flows: when rem was last brought up to date */
  double rem, rate; /* flows: work left (fraction) and pace (fraction per ps; 0: not planned yet) */
  uint32_t next, last; /* its next op's position in its program's stream_ops (the running op is the one
                        * before), and the end of its list there */
  uint32_t cls;     /* its class */
  uint32_t op;      /* the op it runs (or ran last) */
  uint32_t lead;    /* arithmetic groups: where the running collective's leader's state (its counter) is */
  uint8_t busy;     /* an op is running */
  uint8_t work;     /* that op is a flow doing its work: its live event ends the work, not the op */
} Stream;

/* Per class, what the per-event paths look up: one record instead of a chain through
 * classes[c] -> programs[] / index[] and several per-class arrays. */
typedef struct {
  const MmEngineOp *ops; /* its program's ops */
  const ProgIndex *ix;   /* its program's index */
  const MmTime *dur;     /* classes[c].dur */
  uint32_t program;
  uint32_t op_base;   /* where its op 0 is in the flat per-op arrays (mm__op_index) */
  uint32_t op_stride; /* the distance between its consecutive ops there, and between its
                       * consecutive streams in streams[] (the classes running its program) */
  uint32_t sbase;     /* where its stream 0 is in streams[] (mm__stream_index) */
} ClassRt;

struct MmEngine {
  const MmEngineProgram *programs;
  uint32_t n_programs;
  const MmEngineClass *classes;
  uint32_t n_classes;
  ProgIndex *index;

  ClassRt *crt;          /* per class: its program's tables and where its state lives */
  uint32_t *prog_base;   /* per program: where its classes' op states start */
  uint32_t *prog_users;  /* per program: the classes running it */
  uint32_t *stream_base; /* per class: offset of its active-flow list (one entry per stream) */
  uint32_t total_ops, total_streams;

  OpState *st;
  Stream *streams;

  /* Collective groups. Arithmetic (every class one device, class c = device c, as
   * --per-device lowers): a group's members are found from (stride, degree) or the peer
   * offset, its counter lives on its leader (the first member); nothing is stored per
   * member. Listed (otherwise): slots of matched (class, op) members sorted by group. */
  gboolean arith;
  uint32_t n_slots;
  uint32_t *slot_count; /* members arrived, then (after the launch) finished */
  uint32_t *slot_first; /* n_slots + 1 into members */
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
  uint32_t *interf;       /* per class: MM_CIL_INTERFERES ops running (this run) */
  uint32_t *slowed;       /* per class: 2 x the MM_CIL_SLOWED ops running, + 1 while slowed_si names the only one */
  uint32_t *slowed_si;    /* per class: the global stream of its one running slowed op */

  gboolean bucketed; /* the queue: buckets (see Bucket) where many classes run in step, else a heap of events */
  Event *eheap;
  uint32_t eheap_len, eheap_cap;
  QueueChunk *chunk;
  uint32_t chunk_cap, chunk_free, queued; /* queued: events pending (live or stale) */
  Bucket *bk;
  uint32_t bk_cap, bk_free, n_bk;
  uint32_t *theap;  /* bucket ids, a binary heap on their times (distinct) */
  uint32_t *hslot;  /* per slot (a hash of the time): the newest bucket of a time hashed there, or UINT32_MAX */
  uint32_t hmask;
  Event popped;     /* the last event popped (MM__NO_EVENT key: none yet); kept without NDEBUG */
  uint64_t seq, done;
  MmTime now;
  gboolean overflow; /* a time past MM_TIME_MAX was asked for: the run fails */
};

/* build.c: the layout of @e's classes (crt, prog_base, prog_users, stream_base, totals) from its
 * programs and classes; FALSE when a class names no program or the totals pass the limits. */
gboolean mm__engine_layout(MmEngine *e, GError **error);

/* now + @dt; past MM_TIME_MAX it saturates and flags the run as overflowed (never wraps, so
 * time never goes backwards). */
static inline MmTime mm__after(MmEngine *e, MmTime dt)
{
  if (G_UNLIKELY(dt > MM_TIME_MAX - e->now)) {
    e->overflow = TRUE;
    return MM_TIME_MAX;
  }
  return e->now + dt;
}

/* The same for a span in (fractional, rounded up) picoseconds: NaN and negatives are 0, past
 * 2^64 saturates. Below 2^63 ceil is a truncating conversion and one step up where it cut a
 * fraction (exact: a double that large is an integer), a third of what ceil() and an unsigned
 * conversion cost without SSE4.1; from 2^63 on the double is an integer already. */
static inline MmTime mm__after_ps(MmEngine *e, double ps)
{
  MmTime up;
  if (!(ps > 0)) {
    up = 0;
  } else if (ps < 9223372036854775808.0) { /* 2^63 */
    const int64_t whole = (int64_t)ps;
    up = (MmTime)whole + ((double)whole < ps);
  } else {
    up = ps >= 18446744073709551616.0 ? MM_TIME_MAX : (MmTime)ps;
  }
  return mm__after(e, up);
}


/* Where op @op of class @c is in the flat per-op arrays. */
static inline uint32_t mm__op_index(const MmEngine *e, uint32_t c, uint32_t op)
{
  return e->crt[c].op_base + op * e->crt[c].op_stride;
}

/* The global index of stream @s of class @c. */
static inline uint32_t mm__stream_index(const MmEngine *e, uint32_t c, uint32_t s)
{
  return e->crt[c].sbase + s * e->crt[c].op_stride;
}

/* The global index of the stream op @op of class @c runs on. */
static inline uint32_t mm__stream_of(const MmEngine *e, uint32_t c, uint32_t op)
{
  return mm__stream_index(e, c, e->crt[c].ops[op].stream);
}

static inline double resource_cap(const MmEngineClass *cl, uint32_t r) { return cl->link_bw ? cl->link_bw[r] : 0; }

/* engine.c: the queue */
void mm__queue_init(MmEngine *e, uint32_t events);
void mm__queue_reset(MmEngine *e); /* empty (a new run) */
void mm__queue_free(MmEngine *e);
void mm__queue_heap_push(MmEngine *e, MmTime t, uint64_t key);        /* few classes: the heap of events */
QueueChunk *mm__queue_append(MmEngine *e, uint32_t b); /* bucket @b's last chunk is full: a new one after it */
void mm__queue_open(MmEngine *e, MmTime t, uint64_t key);    /* the event @key opens a bucket for @t */
Event mm__queue_pop(MmEngine *e); /* the first event in (t, seq) order; not empty (the run loop inlines it) */

static inline uint32_t mm__time_slot(const MmEngine *e, MmTime t)
{
  return (uint32_t)((t * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & e->hmask;
}

/* An event at @t for global stream @si, which becomes the stream's live one. It joins the
 * bucket its time's slot names when that bucket is for its time; else it opens a new one. A
 * slot names the newest bucket of its time (or another time's, or none), so an event only ever
 * joins the newest bucket of its time: every event of an older bucket of the same time was
 * pushed before it, and older buckets pop first (their ord, their first key, is smaller).
 * Buckets of one time thus pop their events in key order; a time has more than one bucket only
 * where two pending times shared a slot. Inline with the slow paths out of line: it runs once
 * or twice per event, and joining a bucket is a handful of loads and stores. */
static inline void mm__queue_push(MmEngine *e, MmTime t, uint32_t si)
{
  g_assert(t >= e->now); /* time never goes backwards */
  if (G_UNLIKELY(e->seq >= MM__MAX_SEQ - 1)) e->overflow = TRUE; /* 2^40 events (not reached in practice); the
                                                                     * last seq could make a key equal MM__NO_EVENT */
  const uint64_t key = e->seq++ << MM__STREAM_BITS | si;
  e->streams[si].live = key;
  e->queued++;
  if (!e->bucketed) {
    mm__queue_heap_push(e, t, key);
    return;
  }
  const uint32_t b = e->hslot[mm__time_slot(e, t)];
  if (G_LIKELY(b != UINT32_MAX && e->bk[b].t == t)) {
    QueueChunk *ch = &e->chunk[e->bk[b].tail];
    if (G_UNLIKELY(ch->n == MM__CHUNK_KEYS)) ch = mm__queue_append(e, b);
    ch->key[ch->n++] = key;
  } else {
    mm__queue_open(e, t, key);
  }
}

/* build.c: the op of class @m's program with collective id @coll (UINT32_MAX: none) */
uint32_t mm__coll_op(const MmEngine *e, uint32_t m, uint32_t coll);

/* An arithmetic group: member classes first + j x step, j < n (first may wrap below 0 for a
 * peer pair at the low edge: callers that take programs as given check first + (n-1) step). */
typedef struct {
  uint32_t first, step, n;
} Group;

/* The group of class @c's collective op @o, from its peer offset or (stride, degree). */
static inline Group mm__arith_group(uint32_t c, const MmEngineOp *o)
{
  if (o->peer != 0) {
    const uint32_t step = o->peer > 0 ? (uint32_t)o->peer : (uint32_t)-(int64_t)o->peer;
    return (Group){o->peer > 0 ? c : c - step, step, 2};
  }
  return (Group){c - ((c / o->stride) % o->degree) * o->stride, o->stride, o->degree};
}

/* The op of member class @m matching op @op (collective @coll) of class @c. */
static inline uint32_t mm__member_op(const MmEngine *e, uint32_t m, uint32_t c, uint32_t op, uint32_t coll)
{
  return e->crt[m].program == e->crt[c].program ? op : mm__coll_op(e, m, coll);
}

/* flows.c: ops with work on the device's resources, shared max-min fairly */
void mm__flow_begin(MmEngine *e, uint32_t c, uint32_t op, uint32_t si); /* si: its global stream */
void mm__flow_end(MmEngine *e, uint32_t c, uint32_t op, uint32_t si);
