/* engine internals: the flat state shared by the engine's files (not a public header). */
#pragma once

#include <math.h>

#include "engine.h"

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
  uint64_t *colls;      /* its collectives, (coll id << 32 | op), ascending */
  uint32_t n_colls;
  gboolean colls_unique; /* no collective id on two of its ops */
  uint32_t *used_res;   /* resources some op puts work on, ascending */
  uint32_t n_used;
} ProgIndex;

/* The state of one op of one class: one array of these, indexed op_base[c] + op (24 bytes:
 * the per-device runs hold tens of millions). */
typedef struct {
  MmTime start, end;
  uint32_t pending; /* unfinished dependencies */
  uint32_t aux;     /* a collective's slot (listed groups) or, on the leader of an arithmetic
                     * group, its members arrived, then (after the launch) finished */
} OpState;

/* A flow's progress, kept per stream: a stream runs one op at a time. */
typedef struct {
  MmTime upd;       /* when rem was last brought up to date */
  double rem, rate; /* work left (fraction) and pace (fraction per ps; 0: not planned yet) */
  uint32_t version; /* bumped whenever the stream's flow completion is re-planned or its work ends:
                     * an EV_FLOW event carrying an older one is stale */
} FlowState;

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
  FlowState *flow;  /* per stream */
  uint32_t *cursor; /* per stream: next op in its list */
  uint8_t *busy;

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

  Event *heap;
  uint32_t heap_len, heap_cap;
  uint64_t seq, done;
  MmTime now;
  gboolean overflow; /* a time past MM_TIME_MAX was asked for: the run fails */
};

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

/* The same for a span in (fractional, rounded up) picoseconds. */
static inline MmTime mm__after_ps(MmEngine *e, double ps)
{
  const double up = ceil(ps);
  return mm__after(e, !(up >= 0) ? 0 : up >= 18446744073709551616.0 ? MM_TIME_MAX : (MmTime)up);
}


/* The progress of flow @op of class @c: its stream's. */
static inline FlowState *mm__flow_state(MmEngine *e, uint32_t c, uint32_t op)
{
  return &e->flow[e->stream_base[c] + e->programs[e->classes[c].program].ops[op].stream];
}

static inline double resource_cap(const MmEngineClass *cl, uint32_t r) { return cl->link_bw ? cl->link_bw[r] : 0; }

/* engine.c: the event heap */
void mm__heap_push(MmEngine *e, MmTime t, uint32_t cls, uint32_t op, EventKind kind, uint32_t version);
Event mm__heap_pop(MmEngine *e);

/* build.c: the op of class @m's program with collective id @coll (UINT32_MAX: none) */
uint32_t mm__coll_op(const MmEngine *e, uint32_t m, uint32_t coll);

/* flows.c: ops with work on the device's resources, shared max-min fairly */
void mm__flow_begin(MmEngine *e, uint32_t c, uint32_t op);
void mm__flow_end(MmEngine *e, uint32_t c, uint32_t op);
