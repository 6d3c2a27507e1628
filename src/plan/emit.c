/* emit: ops and their dependencies; collectives over a block's strategy levels and between stages. */
#include <math.h>
#include <string.h>

#include "internal.h"

void mm__deps_compact(const Lower *L, Deps *d)
{
  uint32_t latest[MM_STREAM_COUNT], n = 0;
  for (int s = 0; s < MM_STREAM_COUNT; s++) latest[s] = NONE;
  for (uint32_t i = 0; i < d->n; i++) {
    const uint32_t s = L->ops[d->v[i]].stream;
    if (latest[s] == NONE || d->v[i] > latest[s]) latest[s] = d->v[i];
  }
  for (int s = 0; s < MM_STREAM_COUNT; s++)
    if (latest[s] != NONE) d->v[n++] = latest[s];
  d->n = n;
}

/* ---- emitting ---------------------------------------------------------- */

void mm__emit_grow(Lower *L, uint32_t nops, uint32_t nd, uint32_t nx)
{
  if (L->n_xfer + nx > L->cap_xfer) {
    L->cap_xfer = 2 * L->cap_xfer + nx + 64;
    L->xfer_link = g_renew(uint32_t, L->xfer_link, L->cap_xfer);
    L->xfer_bytes = g_renew(double, L->xfer_bytes, L->cap_xfer);
  }
  if (L->n_ops + nops > L->cap_ops) {
    L->cap_ops = 2 * L->cap_ops + nops + 63;
    L->ops = g_renew(MmEngineOp, L->ops, L->cap_ops);
    L->info = g_renew(MmOpInfo, L->info, L->cap_ops);
    L->dur = g_renew(MmTime, L->dur, L->cap_ops + 1);
  }
  if (L->n_deps + nd > L->cap_deps) {
    L->cap_deps = 2 * L->cap_deps + nd + 64;
    L->deps = g_renew(uint32_t, L->deps, L->cap_deps);
  }
}

/* Appends an op moving @xbytes[i] over links @link[i] (@nx of them; @sequential phases). */
static uint32_t emit_raw(Lower *L, MmStreamId stream, const Deps *d, const MmOpInfo *info, uint32_t nx,
                         const uint32_t *link, const double *xbytes, gboolean sequential, uint32_t coll,
                         int64_t degree, int64_t stride, int32_t peer)
{
  const uint32_t idx = mm__emit_start(L, stream, d, nx, link, xbytes, sequential, coll, degree, stride, peer);
  L->info[idx] = *info;
  return mm__emit_finish(L, stream, idx);
}

/* Appends an op. @coll: MM_NO_COLL (compute), COLL_SELF (a collective of this program's
 * groups) or a shared id; @cost NULL for a member that moves no data itself. */
uint32_t mm__emit(Lower *L, MmStreamId stream, const Deps *d, const MmOpInfo *info, const MmCommCost *cost,
                     uint32_t coll, int64_t degree, int64_t stride, int32_t peer)
{
  return emit_raw(L, stream, d, info, cost ? cost->n_use : 0, cost ? cost->link : NULL, cost ? cost->bytes : NULL,
                  cost && cost->sequential, coll, degree, stride, peer);
}

/* Waits for the last op of every stream: what ends the iteration waits for everything. */
Deps mm__deps_all_streams(const Lower *L)
{
  Deps d = {.n = 0};
  for (int i = 0; i < MM_STREAM_COUNT; i++) mm__deps_add(L, &d, L->last_on[i]);
  return d;
}

/* ---- collectives over strategy levels ----------------------------------- */

/* The groups of block @bi's levels (MM_MASK_EXPERTS: its expert layout's) whose strategy is in @mask: consecutive levels (those of
 * degree 1 take no digit) form one group of their product with the innermost stride. */
typedef struct {
  int64_t degree[MM_MAX_LEVELS], stride[MM_MAX_LEVELS];
  int n;
} Runs;

static void level_runs(const MmBlockSetup *bs, uint32_t mask, Runs *r)
{
  r->n = 0;
  gboolean open = FALSE;
  const MmLevel *levels;
  const int64_t *strides;
  const guint n = mm_plan_mask_levels(bs, mask, &levels, &strides);
  for (guint i = 0; i < n; i++) {
    const MmLevel *lv = &levels[i];
    if (lv->degree <= 1) continue;
    if (!(mask & MASK(lv->strategy))) {
      open = FALSE;
      continue;
    }
    if (open) {
      r->degree[r->n - 1] *= lv->degree;
    } else {
      r->degree[r->n] = lv->degree;
      r->stride[r->n++] = strides[i];
      open = TRUE;
    }
  }
}


/* A copy of @bytes between device and host memory on @stream: one flow over the host link (its
 * effective bandwidth, shared with host-staged exchanges and the other copies). */
uint32_t mm__emit_host_copy(Lower *L, MmStreamId stream, MmOpWhat what, MmPhase phase, uint32_t unit, uint32_t micro,
                            double bytes, const Deps *d)
{
  const MmCommCost cost = {.n_use = 1, .link = {L->links->host}, .bytes = {bytes}};
  const MmOpInfo info = {
    .what = (uint8_t)what, .phase = (uint8_t)phase, .unit = unit, .micro = micro, .first_layer = NONE,
    .last_layer = NONE, .bytes = bytes, .time_s = bytes / L->links->bw_Bps[L->links->host],
  };
  return mm__emit(L, stream, d, &info, &cost, MM_NO_COLL, 0, 0, 0);
}

/* The cost of @c; repeats of one of the last MEMO_WAYS collectives of its kind (identical
 * layers, the same pipeline transfer every micro-batch) reuse it. The cost is a function of @c
 * alone (with the hardware and links), so reuse changes nothing. (transfer none: valid until the
 * next call) */
const MmCommCost *mm__coll_cost(Lower *L, const MmCollective *c)
{
  const guint k = c->kind;
  if (!L->memo) L->memo = g_new(CommMemo, MM_COLL_COUNT * MEMO_WAYS);
  CommMemo *row = &L->memo[k * MEMO_WAYS];
  const guint n = L->memo_n[k], last = L->memo_last[k];
  if (n > 0 && same_coll(&row[last].in, c)) return &row[last].out;
  for (guint i = 0; i < n; i++)
    if (i != last && same_coll(&row[i].in, c)) {
      L->memo_last[k] = (uint8_t)i;
      return &row[i].out;
    }
  /* a miss: fill the next free way, then replace them in turn */
  const guint i = n < MEMO_WAYS ? n : L->memo_next[k];
  if (n < MEMO_WAYS) L->memo_n[k]++;
  else L->memo_next[k] = (uint8_t)((i + 1) % MEMO_WAYS);
  row[i].in = *c;
  mm_comm_cost(L->hw, L->links, c, &row[i].out); /* a forced algorithm that does not fit falls back to auto */
  L->memo_last[k] = (uint8_t)i;
  return &row[i].out;
}

/* Under per-node dispatch, a token's copies in an MoE All2All of block @bi over @degree x @stride:
 * its top_k, and the most nodes of the group it reaches when its experts come from
 * router_group_topk of router_groups contiguous groups (0: any). Expert parallelism places the
 * experts contiguously, so the group's nodes hold equal contiguous shares of the experts: a group
 * spans max(1, nodes / router_groups) nodes. */
static void moe_route(const Lower *L, guint bi, int64_t degree, int64_t stride, MmCollective *c)
{
  const MmBlock *b = &L->m->blocks[bi];
  if (L->s->cfg->moe_dispatch != MM_MOE_DISPATCH_PER_NODE || b->experts <= 0) return;
  c->route_top_k = (double)b->top_k;
  if (b->router_groups <= 0) return;
  const double nodes = (double)mm_comm_group_shape(L->hw, degree, stride).nodes;
  c->route_nodes = MIN(nodes, (double)b->router_group_topk * MAX(1.0, nodes / (double)b->router_groups));
}

/* ---- expanded collectives (CollExp) ------------------------------------- */

#define CX_MAX_STEPS 4096   /* past this many recorded steps (or transfers) the cache starts over */
#define CX_MAX_XFER 65536

static guint cx_slot(guint bi, uint32_t mask, MmCollKind kind, MmReason reason, double bytes)
{
  uint64_t h;
  memcpy(&h, &bytes, sizeof h);
  h ^= ((uint64_t)bi << 32) ^ ((uint64_t)mask << 7) ^ ((uint64_t)kind << 3) ^ (uint64_t)reason;
  h *= 0x9E3779B97F4A7C15u; /* Fibonacci hashing: the top bits mix every input bit */
  return (guint)(h >> 58); /* CX_SLOTS = 64 */
}
G_STATIC_ASSERT(CX_SLOTS == 64);

/* Appends the op emit_one is about to emit to the expansion being recorded. */
static void cx_record(Lower *L, MmCollKind kind, double size, int64_t degree, int64_t stride, MmStreamId st,
                      const MmCommCost *cost, const MmOpInfo *info)
{
  if (L->n_cx_step == L->cap_cx_step) {
    L->cap_cx_step = 2 * L->cap_cx_step + 16;
    L->cx_step = g_renew(CollStep, L->cx_step, L->cap_cx_step);
  }
  if (L->n_cx_xfer + cost->n_use > L->cap_cx_xfer) {
    L->cap_cx_xfer = 2 * L->cap_cx_xfer + cost->n_use + 64;
    L->cx_link = g_renew(uint32_t, L->cx_link, L->cap_cx_xfer);
    L->cx_bytes = g_renew(double, L->cx_bytes, L->cap_cx_xfer);
  }
  L->cx_step[L->n_cx_step++] = (CollStep){
    .size = size, .time_s = info->time_s, .latency_s = info->fixed_s, .degree = degree, .stride = stride,
    .xfer_first = L->n_cx_xfer, .n_use = cost->n_use, .kind = (uint8_t)kind, .algorithm = (uint8_t)cost->algorithm,
    .stream = (uint8_t)st, .sequential = (uint8_t)(cost->sequential != 0),
  };
  for (uint32_t i = 0; i < cost->n_use; i++) {
    L->cx_link[L->n_cx_xfer] = cost->link[i];
    L->cx_bytes[L->n_cx_xfer++] = cost->bytes[i];
  }
  L->cx_rec->n_steps++;
}

/* The op record of one collective step (emit_one's, and its replays'). */
static MmOpInfo coll_info(uint8_t kind, uint8_t reason, MmPhase phase, uint32_t unit, uint32_t micro, double size,
                          double time_s, double latency_s, uint8_t algorithm)
{
  return (MmOpInfo){
    .what = MM_OP_COLLECTIVE, .phase = (uint8_t)phase, .coll = kind, .reason = reason, .unit = unit,
    .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = size, .time_s = time_s,
    .fixed_s = latency_s, .algorithm = algorithm,
  };
}

/* Emits the recorded expansion @x chained on @d, as mm__emit_coll did when it recorded it. */
static uint32_t cx_replay(Lower *L, const CollExp *x, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  Deps one; /* each later step waits for the one before */
  const Deps *dp = d;
  uint32_t op = NONE;
  for (uint32_t j = 0; j < x->n_steps; j++) {
    const CollStep *c = &L->cx_step[x->step_first + j];
    op = mm__emit_start(L, (MmStreamId)c->stream, dp, c->n_use, &L->cx_link[c->xfer_first],
                        &L->cx_bytes[c->xfer_first], c->sequential, COLL_SELF, c->degree, c->stride, 0);
    L->info[op] = coll_info(c->kind, x->reason, phase, unit, micro, c->size, c->time_s, c->latency_s, c->algorithm);
    mm__emit_finish(L, (MmStreamId)c->stream, op);
    mm__deps_set_one(&one, op);
    dp = &one;
  }
  return op;
}

/* The fixed time of collective @c (one step of the expansion L->cx_rec records over a group's levels)
 * called once per tensor of @t (fsdp_collectives per_tensor_list) instead of once on all their bytes,
 * less the one call's latency: each call's own latency on this step's ranks (that of its size: small
 * tensors take the low-latency protocols); and on the expansion's first step PyTorch's list copies,
 * one copy kernel per call and rank of the whole group (a launch each), the whole buffer copied once
 * at HBM bandwidth. All-gathers skip the persistent tensors (mm__emit_gather left their bytes out). */
static double per_tensor_extra_s(Lower *L, const MmCollective *c, const UnitTensors *t)
{
  const MmDevice *dev = &L->hw->device;
  const CollExp *x = L->cx_rec; /* emit_one runs inside mm__emit_coll's expansion */
  g_assert(x != NULL);
  const gboolean ag = c->kind == MM_COLL_ALL_GATHER;
  const double whole = ag ? c->bytes / (1.0 - t->persist_frac) : c->bytes; /* the unit's bytes at this step */
  double lat = 0, calls = 0;
  for (guint i = 0; i < t->n; i++) {
    if (t->persist[i] && ag) continue;
    MmCollective one = *c;
    one.bytes = whole * t->frac[i];
    lat += (double)t->count[i] * mm__coll_cost(L, &one)->latency_s;
    calls += (double)t->count[i];
  }
  if (calls == 0) return 0;
  double copy_s = 0;
  if (x->n_steps == 0)
    copy_s = calls * (double)mm_plan_mask_degree(&L->s->blocks[x->bi], x->mask) * L->launch_s +
             2.0 * x->bytes / (dev->hbm_bw_Bps * dev->util_hbm.value);
  return lat + copy_s - mm__coll_cost(L, c)->latency_s;
}

static uint32_t emit_one(Lower *L, guint bi, MmCollKind kind, MmReason reason, double size, int64_t degree,
                         int64_t stride, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const gboolean moe = kind == MM_COLL_ALL_TO_ALL && reason == MM_REASON_MOE;
  MmCollective c = {.kind = kind, .bytes = size, .degree = degree, .stride = stride,
                    .algorithm = L->s->cfg->algorithm[kind], .skew = moe ? L->a2a_skew : 1.0,
                    .one_shot = L->s->cfg->serving.custom_all_reduce};
  if (moe) moe_route(L, bi, degree, stride, &c);
  const double extra = L->coll_tensors ? per_tensor_extra_s(L, &c, L->coll_tensors) : 0;
  const MmCommCost *cost = mm__coll_cost(L, &c); /* last: the memo keeps it while it is read */
  const MmOpInfo info = coll_info((uint8_t)kind, (uint8_t)reason, phase, unit, micro, size, cost->time_s + extra,
                                  cost->latency_s + extra, (uint8_t)cost->algorithm);
  MmStreamId st = cost->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  if (L->cx_rec) cx_record(L, kind, size, degree, stride, st, cost, &info);
  return mm__emit(L, st, d, &info, cost, COLL_SELF, degree, stride, 0);
}

/* Emits @kind over the groups of block @bi's levels in @mask, chained on @d:
 * AllGather outermost group first on a growing buffer, ReduceScatter innermost first
 * on a shrinking one, AllReduce over several groups as reduce-scatters, the outermost
 * all-reduce and all-gathers back. Returns the last op (NONE when nothing moves). */
uint32_t mm__emit_coll(Lower *L, guint bi, uint32_t mask, MmCollKind kind, MmReason reason, double bytes,
                          const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  if (bytes <= 0) return NONE;
  /* the same collective of this lowering again: the ops recorded the first time */
  CollExp *x = &L->cx[cx_slot(bi, mask, kind, reason, bytes)];
  if (G_LIKELY(!L->no_replay && x->valid && x->bytes == bytes && x->mask == mask && x->bi == bi && x->kind == kind &&
               x->reason == reason && x->tensors == L->coll_tensors))
    return cx_replay(L, x, d, unit, micro, phase);
  if (L->n_cx_step > CX_MAX_STEPS || L->n_cx_xfer > CX_MAX_XFER) { /* start over: bounded memory */
    for (guint i = 0; i < CX_SLOTS; i++) L->cx[i].valid = FALSE;
    L->n_cx_step = L->n_cx_xfer = 0;
  }
  *x = (CollExp){.bytes = bytes, .tensors = L->coll_tensors, .mask = mask, .bi = bi, .kind = (uint8_t)kind,
                 .reason = (uint8_t)reason, .step_first = L->n_cx_step};
  const MmBlockSetup *bs = &L->s->blocks[bi];
  if (mm_plan_mask_degree(bs, mask) <= 1) {
    x->valid = TRUE; /* nothing moves */
    return NONE;
  }
  Runs r;
  level_runs(bs, mask, &r);
  L->cx_rec = x;
  Deps cur;
  deps_copy(&cur, d);
  uint32_t op = NONE;
#define STEP(k, i, sz)                                                                       \
  do {                                                                                       \
    op = emit_one(L, bi, (k), reason, (sz), r.degree[i], r.stride[i], &cur, unit, micro, phase); \
    mm__deps_set_one(&cur, op);                                                                   \
  } while (0)
  double size = bytes;
  switch (kind) {
  case MM_COLL_ALL_GATHER:
    for (int i = 0; i < r.n; i++) size /= (double)r.degree[i];
    for (int i = r.n; i-- > 0;) {
      size *= (double)r.degree[i];
      STEP(MM_COLL_ALL_GATHER, i, size);
    }
    break;
  case MM_COLL_REDUCE_SCATTER:
    for (int i = 0; i < r.n; i++) {
      STEP(MM_COLL_REDUCE_SCATTER, i, size);
      size /= (double)r.degree[i];
    }
    break;
  case MM_COLL_ALL_REDUCE:
    for (int i = 0; i + 1 < r.n; i++) {
      STEP(MM_COLL_REDUCE_SCATTER, i, size);
      size /= (double)r.degree[i];
    }
    STEP(MM_COLL_ALL_REDUCE, r.n - 1, size);
    for (int i = r.n - 1; i-- > 0;) {
      size *= (double)r.degree[i];
      STEP(MM_COLL_ALL_GATHER, i, size);
    }
    break;
  default:
    for (int i = 0; i < r.n; i++) STEP(kind, i, size);
    break;
  }
#undef STEP
  L->cx_rec = NULL;
  x->valid = TRUE;
  return op;
}

/* The group stride that costs a transfer between this stage and the one @delta away:
 * the offset itself inside a node, a whole node's when the pair sits in two nodes. */
static int64_t pair_stride(const Lower *L, int64_t delta)
{
  const int64_t sd = L->s->stage_devices, g = L->hw->gpus_per_node, a = (int64_t)L->stage * sd;
  if (a / g != (a + delta * sd) / g) return g * MAX((int64_t)1, ABS(delta) * sd / g);
  return ABS(delta) * sd;
}

/* A collective between this device and the one @delta stages away, with the id @coll
 * both programs use: pipeline transfers (the sender moves the bytes, the receiver posts
 * a matching op without data and ends with it) and the tied-embedding AllReduce. */
uint32_t mm__emit_pair(Lower *L, MmStreamId stream, MmCollKind kind, gboolean moves_data, uint32_t coll,
                          int64_t delta, double bytes, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const int64_t peer = delta * L->s->stage_devices;
  MmCollective c = {.kind = kind, .bytes = bytes, .degree = 2, .stride = pair_stride(L, delta),
                    .algorithm = L->s->cfg->algorithm[kind], .skew = 1.0};
  const MmCommCost *cost = mm__coll_cost(L, &c);
  if (stream == MM_STREAM_COUNT) stream = cost->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  MmOpInfo info = {
    .what = MM_OP_COLLECTIVE, .phase = (uint8_t)phase, .coll = (uint8_t)kind, .reason = MM_REASON_PP, .unit = unit,
    .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = bytes, .time_s = cost->time_s,
    .fixed_s = cost->latency_s, .algorithm = (uint8_t)cost->algorithm,
  };
  return mm__emit(L, stream, d, &info, moves_data ? cost : NULL, coll, 2, ABS(peer), (int32_t)peer);
}

/* A pipeline transfer across @boundary (chunk boundary -> boundary + 1) to or from the
 * stage @delta away. */
uint32_t mm__emit_p2p(Lower *L, gboolean send, gboolean bwd, uint32_t boundary, uint32_t micro, int64_t delta,
                         double bytes, const Deps *d, uint32_t unit)
{
  /* the channels carry activations forward and gradients back; dualpipev's chunks on the way back
   * up send activations to the previous stage, so there a channel is a direction: to (from) the
   * next stage on the forward channels, to (from) the previous one on the backward channels, the
   * order in which each pair of stages exchanges tensors being the same on both sides */
  const gboolean back = L->s->cfg->pipeline.schedule == MM_PIPE_DUALPIPEV ? (send ? delta < 0 : delta > 0) : bwd;
  MmStreamId st = send ? (back ? MM_STREAM_PP_SEND_BWD : MM_STREAM_PP_SEND_FWD)
                       : (back ? MM_STREAM_PP_RECV_BWD : MM_STREAM_PP_RECV_FWD);
  uint32_t id = COLL_P2P + (boundary * L->nm + micro) * 2 + (bwd ? 1 : 0);
  return mm__emit_pair(L, st, MM_COLL_P2P, send, id, delta, bytes, d, unit, micro, bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
}
