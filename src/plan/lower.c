/* lower: one iteration of a scenario -> a program of compute and collective ops per device behaviour. */
#include <math.h>
#include <string.h>

#include "plan.h"

const char *const mm_stream_names[] = {"compute",     "comm_intra",  "comm_inter",  "pp_send_fwd",
                                       "pp_send_bwd", "pp_recv_fwd", "pp_recv_bwd", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_stream_names) == MM_STREAM_COUNT + 1);
const char *const mm_phase_names[] = {"fwd", "bwd", "recompute", "optimizer", NULL};
const char *const mm_reason_names[] = {"fsdp", "tp", "ddp", "mp", "moe", "pp", "cp", "zero", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_reason_names) == MM_REASON_COUNT + 1);

#define NONE UINT32_MAX
#define MAX_DEPS 16
#define MASK(strategy) (1u << (strategy))
/* Collective ids shared by different programs: pipeline transfers and the tied-embedding
 * gradient. Other collectives use their op index (below 2^31). */
#define COLL_SELF (MM_NO_COLL - 1)
#define COLL_TIED 0x7ffffff0u
#define COLL_P2P 0x80000000u

typedef struct {
  uint32_t v[MAX_DEPS];
  uint32_t n;
} Deps;

static void deps_add(Deps *d, uint32_t op)
{
  if (op == NONE) return;
  for (uint32_t i = 0; i < d->n; i++)
    if (d->v[i] == op) return;
  g_assert(d->n < MAX_DEPS);
  d->v[d->n++] = op;
}

static Deps deps_one(uint32_t op)
{
  Deps d = {.n = 0};
  deps_add(&d, op);
  return d;
}

/* A copy of @d's used entries (or an empty set). */
static inline void deps_copy(Deps *to, const Deps *d)
{
  to->n = d ? d->n : 0;
  if (to->n) memcpy(to->v, d->v, sizeof(uint32_t) * to->n);
}

typedef enum { PART_FWD, PART_BWD_IN, PART_BWD_W } Part;

/* A compute segment: consecutive layer parts that no collective separates. */
typedef struct {
  double time_s, flops, model_flops, bytes;
  uint32_t kernels, first, last;
  MmOpWhat what;
} Seg;

/* One unit's turn in the FSDP gather sequence. */
typedef struct {
  uint32_t unit;
  uint32_t micro;
  gboolean bwd;
} GatherItem;

/* Per-device cost of one part of one layer (computed once per canonical layer). */
typedef struct {
  double flops, model_flops, bytes, time_s;
  gboolean lookup;
} PartCost;

/* The last cost computed per collective kind: identical layers repeat it. */
typedef struct {
  MmCollective in;
  MmCommCost out;
  gboolean valid;
} CommMemo;

static gboolean same_coll(const MmCollective *a, const MmCollective *b)
{
  return a->kind == b->kind && a->bytes == b->bytes && a->degree == b->degree && a->stride == b->stride &&
         a->algorithm == b->algorithm && a->skew == b->skew && a->one_shot == b->one_shot;
}

typedef struct Template Template;

typedef struct {
  const MmScenario *s;
  const MmGraph *g;
  const MmModel *m;
  const MmHardware *hw;
  const MmLinks *links;
  MmEngineOp *ops;
  MmOpInfo *info;
  uint32_t n_ops, cap_ops;
  uint32_t *deps;
  uint32_t n_deps, cap_deps;
  uint32_t *xfer_link;
  double *xfer_bytes;
  uint32_t n_xfer, cap_xfer;
  PartCost *parts;      /* 3 per layer, indexed by canonical layer */
  double *unit_dense;   /* per unit: non-expert parameters on one device after TP/MP, before FSDP */
  double *unit_expert;  /* per unit: expert parameters on one device after TP/EP, before FSDP */
  Template *templates;  /* V_COUNT per unit, built on first use */
  gboolean *unit_moe;   /* per unit: experts spread over a group (all-to-alls) */
  CommMemo memo[MM_COLL_COUNT];
  uint32_t last_on[MM_STREAM_COUNT];
  guint first_trained;
  gboolean training;
  double launch_s; /* per kernel: eager launch, or replay from a captured graph */

  /* the behaviour this program lowers */
  uint32_t stage;
  double expert_load; /* routed tokens this device's experts get / the mean */
  double a2a_skew;    /* its All2All traffic / the mean */

  /* pipeline */
  const uint32_t *unit_chunk;
  uint32_t p, v, K, nm; /* stages, chunks per stage, chunks, micro-batches */
  uint32_t *chunk_first, *chunk_end; /* unit range of each chunk */
  gboolean *chunk_trained;           /* runs a backward */
  uint32_t cur_chunk;

  GatherItem *gq;
  uint32_t n_gq, gq_emitted, gq_pos;
  uint32_t *gq_op; /* gather op of each item */
} Lower;

/* ---- emitting ---------------------------------------------------------- */

/* Appends an op. @coll: MM_NO_COLL (compute), COLL_SELF (a collective of this program's
 * groups) or a shared id; @cost NULL for a member that moves no data itself. */
static uint32_t emit(Lower *L, MmStreamId stream, const Deps *d, const MmOpInfo *info, const MmCommCost *cost,
                     uint32_t coll, int64_t degree, int64_t stride, int32_t peer)
{
  uint32_t idx = L->n_ops, nd = d ? d->n : 0, nx = cost ? cost->n_use : 0;
  g_assert(idx < COLL_TIED);
  if (L->n_xfer + nx > L->cap_xfer) {
    L->cap_xfer = 2 * L->cap_xfer + nx + 64;
    L->xfer_link = g_renew(uint32_t, L->xfer_link, L->cap_xfer);
    L->xfer_bytes = g_renew(double, L->xfer_bytes, L->cap_xfer);
  }
  if (L->n_ops == L->cap_ops) {
    L->cap_ops = 2 * L->cap_ops + 64;
    L->ops = g_renew(MmEngineOp, L->ops, L->cap_ops);
    L->info = g_renew(MmOpInfo, L->info, L->cap_ops);
  }
  if (L->n_deps + nd > L->cap_deps) {
    L->cap_deps = 2 * L->cap_deps + nd + 64;
    L->deps = g_renew(uint32_t, L->deps, L->cap_deps);
  }
  L->ops[idx] = (MmEngineOp){
    .stream = stream, .dep_first = L->n_deps, .n_deps = nd,
    .coll = coll == COLL_SELF ? idx : coll, .degree = (uint32_t)degree, .stride = (uint32_t)stride, .peer = peer,
    .xfer_first = L->n_xfer, .n_xfer = (uint16_t)nx, .sequential = cost && cost->sequential,
  };
  for (uint32_t i = 0; i < nx; i++) {
    L->xfer_link[L->n_xfer] = cost->link[i];
    L->xfer_bytes[L->n_xfer++] = cost->bytes[i];
  }
  for (uint32_t i = 0; i < nd; i++) {
    g_assert(d->v[i] < idx);
    L->deps[L->n_deps++] = d->v[i];
  }
  L->info[idx] = *info;
  L->info[idx].chunk = (uint16_t)L->cur_chunk;
  L->n_ops++;
  L->last_on[stream] = idx;
  return idx;
}

/* Waits for the last op of every stream: what ends the iteration waits for everything. */
static Deps deps_all_streams(const Lower *L)
{
  Deps d = {.n = 0};
  for (int i = 0; i < MM_STREAM_COUNT; i++) deps_add(&d, L->last_on[i]);
  return d;
}

double mm_plan_compute_time(const MmHardware *hw, MmDtype dtype, double flops, double bytes)
{
  const MmDevice *d = &hw->device;
  double tc = flops > 0 ? flops / (d->peak_flops[dtype] * d->util_gemm.value) : 0;
  double tm = bytes > 0 ? bytes / (d->hbm_bw_Bps * d->util_hbm.value) : 0;
  return MAX(tc, tm);
}

/* Fraction of a layer's per-sample work one device does, and of its weights it reads.
 * TP splits GEMMs (and with sequence parallelism the norms); CP splits the sequence;
 * EP gives each rank its experts' share of the routed tokens. */
static void work_fractions(const Lower *L, const MmLayer *l, double *work, double *weights)
{
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  const MmBlock *b = &L->m->blocks[l->block];
  if (b->kind == MM_BLOCK_EMBEDDING_BAG) {
    *work = mm_plan_param_fraction(L->s, l->block, l) * (double)bs->degree[MM_STRAT_FSDP];
    *weights = *work;
    return;
  }
  const double tp = (double)bs->degree[MM_STRAT_TP], cp = (double)bs->degree[MM_STRAT_CP];
  const double ep = (double)bs->degree[MM_STRAT_EP];
  if (l->expert && ep > 1) {
    *work = L->expert_load / tp / cp;
    *weights = 1.0 / (tp * ep);
    return;
  }
  if (l->tp == MM_TP_REPLICATED) {
    *work = (mm_plan_seq_parallel(L->s, l->block) ? 1.0 / tp : 1.0) / cp;
    *weights = 1.0;
    return;
  }
  *work = 1.0 / tp / cp;
  *weights = 1.0 / tp;
}

static double experts_read(const Lower *L, const MmLayer *l, double samples);

static void part_cost(const Lower *L, uint32_t li, Part part, PartCost *pc)
{
  const MmLayer *l = &L->g->layers[li];
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  const MmCost *c = &l->cost;
  const double n = bs->samples_per_micro;
  double wf, pf;
  work_fractions(L, l, &wf, &pf);
  pf *= experts_read(L, l, n);
  double flops = 0, mflops = 0, bytes = 0;
  switch (part) {
  case PART_FWD:
    flops = n * c->fwd_exec_flops * wf;
    mflops = n * c->fwd_flops * wf;
    bytes = n * c->fwd_bytes * wf + c->weight_bytes * pf;
    break;
  case PART_BWD_IN:
    flops = n * c->bwd_input_exec_flops * wf;
    mflops = n * c->bwd_input_flops * wf;
    bytes = n * c->bwd_input_bytes * wf + (flops > 0 ? c->weight_bytes * pf : 0);
    break;
  case PART_BWD_W: {
    double ge = mm_dtype_bytes(bs->grad_dtype) / mm_dtype_bytes(L->m->blocks[l->block].dtype);
    flops = n * c->bwd_weight_flops * wf;
    mflops = flops;
    bytes = n * c->bwd_weight_bytes * wf + c->weight_bytes * pf * ge; /* weight gradients written */
    break;
  }
  }
  *pc = (PartCost){flops, mflops, bytes, 0, l->cls == MM_LAYER_LOOKUP};
  if (flops > 0 || bytes > 0)
    pc->time_s = mm_plan_compute_time(L->hw, bs->compute_dtype, flops, bytes) + L->launch_s;
}

static void seg_add(Lower *L, Seg *seg, uint32_t li, Part part)
{
  const PartCost *pc = &L->parts[3 * L->g->layers[li].canon + part];
  if (pc->time_s <= 0) return;
  if (seg->kernels == 0) seg->first = li;
  seg->last = li;
  seg->kernels++;
  seg->flops += pc->flops;
  seg->model_flops += pc->model_flops;
  seg->bytes += pc->bytes;
  seg->time_s += pc->time_s;
  if (pc->lookup) seg->what = MM_OP_LOOKUP;
}

/* ---- collectives over strategy levels ----------------------------------- */

/* The groups of block @bi's levels whose strategy is in @mask: consecutive levels (those of
 * degree 1 take no digit) form one group of their product with the innermost stride. */
typedef struct {
  int64_t degree[MM_MAX_LEVELS], stride[MM_MAX_LEVELS];
  int n;
} Runs;

static Runs level_runs(const MmBlockSetup *bs, uint32_t mask)
{
  Runs r;
  r.n = 0;
  gboolean open = FALSE;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *lv = &bs->levels[i];
    if (lv->degree <= 1) continue;
    if (!(mask & MASK(lv->strategy))) {
      open = FALSE;
      continue;
    }
    if (open) {
      r.degree[r.n - 1] *= lv->degree;
    } else {
      r.degree[r.n] = lv->degree;
      r.stride[r.n++] = bs->stride[i];
      open = TRUE;
    }
  }
  return r;
}

static int64_t mask_degree(const MmBlockSetup *bs, uint32_t mask)
{
  int64_t d = 1;
  for (int k = 0; k < MM_STRAT_COUNT; k++)
    if (mask & MASK(k)) d *= bs->degree[k];
  return d;
}

/* The cost of @c; repeats of the last collective of its kind (identical layers, the same
 * pipeline transfer every micro-batch) reuse it. */
static const MmCommCost *coll_cost(Lower *L, const MmCollective *c)
{
  CommMemo *memo = &L->memo[c->kind];
  if (!memo->valid || !same_coll(&memo->in, c)) {
    memo->in = *c;
    mm_comm_cost(L->hw, L->links, c, &memo->out); /* a forced algorithm that does not fit falls back to auto */
    memo->valid = TRUE;
  }
  return &memo->out;
}

static uint32_t emit_one(Lower *L, MmCollKind kind, MmReason reason, double size, int64_t degree, int64_t stride,
                         const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  double skew = kind == MM_COLL_ALL_TO_ALL && reason == MM_REASON_MOE ? L->a2a_skew : 1.0;
  MmCollective c = {kind, size, degree, stride, L->s->cfg->algorithm[kind], skew, L->s->cfg->serving.custom_all_reduce};
  const MmCommCost *cost = coll_cost(L, &c);
  MmOpInfo info = {
    .what = MM_OP_COLLECTIVE, .phase = (uint8_t)phase, .coll = (uint8_t)kind, .reason = (uint8_t)reason,
    .unit = unit, .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = size,
    .time_s = cost->time_s, .fixed_s = cost->latency_s, .algorithm = (uint8_t)cost->algorithm,
  };
  MmStreamId st = cost->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  return emit(L, st, d, &info, cost, COLL_SELF, degree, stride, 0);
}

/* Emits @kind over the groups of block @bi's levels in @mask, chained on @d:
 * AllGather outermost group first on a growing buffer, ReduceScatter innermost first
 * on a shrinking one, AllReduce over several groups as reduce-scatters, the outermost
 * all-reduce and all-gathers back. Returns the last op (NONE when nothing moves). */
static uint32_t emit_coll(Lower *L, guint bi, uint32_t mask, MmCollKind kind, MmReason reason, double bytes,
                          const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const MmBlockSetup *bs = &L->s->blocks[bi];
  if (bytes <= 0 || mask_degree(bs, mask) <= 1) return NONE;
  const Runs r = level_runs(bs, mask);
  Deps cur;
  deps_copy(&cur, d);
  uint32_t op = NONE;
#define STEP(k, i, sz)                                                                       \
  do {                                                                                       \
    op = emit_one(L, (k), reason, (sz), r.degree[i], r.stride[i], &cur, unit, micro, phase); \
    cur = deps_one(op);                                                                      \
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
static uint32_t emit_pair(Lower *L, MmStreamId stream, MmCollKind kind, gboolean moves_data, uint32_t coll,
                          int64_t delta, double bytes, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const int64_t peer = delta * L->s->stage_devices;
  MmCollective c = {kind, bytes, 2, pair_stride(L, delta), L->s->cfg->algorithm[kind], 1.0, FALSE};
  const MmCommCost *cost = coll_cost(L, &c);
  if (stream == MM_STREAM_COUNT) stream = cost->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  MmOpInfo info = {
    .what = MM_OP_COLLECTIVE, .phase = (uint8_t)phase, .coll = (uint8_t)kind, .reason = MM_REASON_PP, .unit = unit,
    .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = bytes, .time_s = cost->time_s,
    .fixed_s = cost->latency_s, .algorithm = (uint8_t)cost->algorithm,
  };
  return emit(L, stream, d, &info, moves_data ? cost : NULL, coll, 2, ABS(peer), (int32_t)peer);
}

/* A pipeline transfer across @boundary (chunk boundary -> boundary + 1) to or from the
 * stage @delta away. */
static uint32_t emit_p2p(Lower *L, gboolean send, gboolean bwd, uint32_t boundary, uint32_t micro, int64_t delta,
                         double bytes, const Deps *d, uint32_t unit)
{
  MmStreamId st = send ? (bwd ? MM_STREAM_PP_SEND_BWD : MM_STREAM_PP_SEND_FWD)
                       : (bwd ? MM_STREAM_PP_RECV_BWD : MM_STREAM_PP_RECV_FWD);
  uint32_t id = COLL_P2P + (boundary * L->nm + micro) * 2 + (bwd ? 1 : 0);
  return emit_pair(L, st, MM_COLL_P2P, send, id, delta, bytes, d, unit, micro, bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
}

/* ---- per-unit lowering ------------------------------------------------- */

/* MoE: the experts of a layer are spread over the ep group (or, without one, over the TP
 * group, as MAD-Max models it, unless "experts": "sharded" splits each over the TP ranks:
 * no group, mask 0); tokens are dispatched to their experts before the first expert layer
 * and combined after the last, by All2All. A transformer MoE layer does
 * this per layer; an MLP MoE (DLRM) once around the whole expert stack. */
static uint32_t moe_mask(const Lower *L, guint block)
{
  const MmBlockSetup *bs = &L->s->blocks[block];
  if (bs->degree[MM_STRAT_EP] > 1) return MASK(MM_STRAT_EP);
  return bs->experts_sharded ? 0u : MASK(MM_STRAT_TP);
}

/* Whether layer @l takes the TP collectives of a dense layer: non-expert layers, and expert
 * layers whose experts are sharded over the TP ranks (expert-TP without ep). */
static gboolean tp_collectives(const Lower *L, const MmLayer *l)
{
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  return !l->expert || (bs->experts_sharded && bs->degree[MM_STRAT_EP] <= 1);
}

/* Share of its experts' weights the busiest device of an expert group reads in one pass.
 * Only experts some token is routed to are read: with T tokens in the group (every EP rank's
 * micro-batch), each sent to k of E experts uniformly, an expert is touched with probability
 * q = 1 - (1 - k/E)^T. Each of the g devices the experts are spread over holds m = E/g; its
 * count is Binomial(m, q), and the step waits for the busiest: E[max] = sum_j P(max > j) with
 * P(max > 0) = 1 (some expert is always touched) and P(max > j) = 1 - F(j)^g above (devices
 * independent). 1 in training (q = 1); at decode batch 1 about k/E of a device holding all
 * experts, one whole expert on each of 8 devices holding one. */
static double experts_read(const Lower *L, const MmLayer *l, double samples)
{
  const MmBlock *b = &L->m->blocks[l->block];
  if (!l->expert || b->experts <= 0 || b->top_k <= 0) return 1.0;
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  const double E = (double)b->experts, g = (double)mask_degree(bs, moe_mask(L, l->block));
  const double T = samples * (b->kind == MM_BLOCK_TRANSFORMER ? L->g->tokens_per_sample : 1.0) *
                   (double)bs->degree[MM_STRAT_EP];
  const double q = 1.0 - pow(1.0 - MIN(1.0, (double)b->top_k / E), T);
  const double m = MAX(1.0, ceil(E / g));
  if (q >= 1.0 - 1e-9 || q <= 0) return 1.0; /* every expert read (or no tokens: a degenerate pass) */
  /* binomial terms in log space: no underflow for thousands of experts per device */
  const double lq = log(q), l1q = log1p(-q), lm = lgamma(m + 1.0);
  double F = 0, emax = 0;
  for (double j = 0; j < m; j++) {
    F = MIN(1.0, F + exp(lm - lgamma(j + 1.0) - lgamma(m - j + 1.0) + j * lq + (m - j) * l1q));
    emax += j == 0 ? 1.0 : 1.0 - pow(F, g);
  }
  return MIN(1.0, emax / m);
}

static gboolean moe_split(const Lower *L, const MmLayer *l)
{
  return l->expert && mask_degree(&L->s->blocks[l->block], moe_mask(L, l->block)) > 1;
}

static gboolean moe_dispatch_before(const Lower *L, const MmLayer *l)
{
  if (!moe_split(L, l)) return FALSE;
  if (l->role == MM_ROLE_FFN_UP) return TRUE;
  return l->role == MM_ROLE_MLP_FC && L->g->units[l->unit].index == 0;
}

static gboolean moe_combine_after(const Lower *L, uint32_t li)
{
  const MmLayer *l = &L->g->layers[li];
  if (!moe_split(L, l)) return FALSE;
  if (l->role == MM_ROLE_FFN_DOWN) return TRUE;
  const MmUnit *un = &L->g->units[l->unit];
  const MmBlock *b = &L->m->blocks[l->block];
  return b->kind == MM_BLOCK_MLP && un->index == b->count - 1 && li == un->first_layer + un->n_layers - 1;
}

/* Bytes of the MoE dispatch/combine one rank sends: its share of the routed tokens
 * (TP ranks split the tokens of their group; CP ranks hold a slice of each sequence). */
static double moe_bytes(const Lower *L, const MmLayer *l)
{
  const MmBlock *b = &L->m->blocks[l->block];
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  double tokens = b->kind == MM_BLOCK_TRANSFORMER ? L->g->tokens_per_sample : 1.0;
  double width = b->kind == MM_BLOCK_TRANSFORMER ? (double)b->hidden : (double)b->width;
  return bs->samples_per_micro * tokens * width * mm_dtype_bytes(b->dtype) * (double)b->top_k *
         b->capacity_factor / (double)bs->degree[MM_STRAT_TP] / (double)bs->degree[MM_STRAT_CP];
}

/* Sharded embedding tables exchange pooled outputs: All2All (table-, column-wise) or
 * ReduceScatter of partial sums (row-wise); backward the reverse. */
static uint32_t emit_mp_exchange(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *d)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const MmLayer *l = &L->g->layers[un->first_layer];
  MmShardKind sk = MM_SHARD_TABLE;
  for (guint i = 0; i < bs->n_levels; i++)
    if (bs->levels[i].strategy == MM_STRAT_MP) sk = bs->levels[i].sharding;
  double wf, pf;
  work_fractions(L, l, &wf, &pf);
  double full = bs->samples_per_micro * l->cost.out_bytes;
  MmCollKind kind = MM_COLL_ALL_TO_ALL;
  double bytes = full * wf;
  if (sk == MM_SHARD_ROW) {
    kind = phase == MM_PHASE_FWD ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_GATHER;
    bytes = full;
  }
  return emit_coll(L, un->block, MASK(MM_STRAT_MP), kind, MM_REASON_MP, bytes, d, u, micro, phase);
}

/* ---- unit templates ---------------------------------------------------- *
 * Identical units (80 transformer layers) lower to identical op sequences. Each
 * distinct unit is walked layer by layer once per variant, into a template of
 * compute segments and collectives; every unit then replays its template. */

typedef enum {
  T_SEG,  /* compute on the chain */
  T_COLL, /* a collective on the chain */
  T_WSEG, /* weight gradient beside the chain's last collective */
  T_SIDE, /* a collective off the chain that the next T_WSEG waits for (SP: the input re-gather) */
  T_RING, /* ring attention: the segment in `ring` pieces, K/V passed around the cp group between them */
} TKind;

typedef struct {
  uint8_t kind;   /* TKind */
  uint8_t coll;   /* MmCollKind */
  uint8_t reason; /* MmReason */
  uint32_t mask;  /* strategies whose levels form the group */
  double coll_bytes;
  Seg seg;        /* first / last: offsets from the unit's first layer */
} TItem;

struct Template {
  TItem *items;
  uint32_t n, cap;
  gboolean built;
};

enum { V_FWD, V_BWD_IN, V_BWD_NOIN, V_SELECTIVE, V_COUNT };

static void t_push(Template *t, const TItem *it)
{
  if (t->n == t->cap) {
    t->cap = 2 * t->cap + 8;
    t->items = g_renew(TItem, t->items, t->cap);
  }
  t->items[t->n++] = *it;
}

static void t_seg(Template *t, Seg *seg, uint32_t first_layer, TKind kind)
{
  if (seg->kernels == 0) return;
  TItem it = {.kind = (uint8_t)kind, .seg = *seg};
  it.seg.first -= first_layer;
  it.seg.last -= first_layer;
  t_push(t, &it);
  *seg = (Seg){.what = MM_OP_COMPUTE};
}

static void t_coll(Template *t, Seg *seg, uint32_t first_layer, TKind kind, MmCollKind coll, MmReason reason,
                   uint32_t mask, double bytes)
{
  t_seg(t, seg, first_layer, T_SEG);
  TItem it = {.kind = (uint8_t)kind, .coll = (uint8_t)coll, .reason = (uint8_t)reason, .mask = mask,
              .coll_bytes = bytes};
  t_push(t, &it);
}

/* Context parallelism over the attention core of layer @li: per exchange step, the K and V
 * chunk one rank holds (its share of kv heads under TP). */
static double cp_kv_bytes(const Lower *L, uint32_t li)
{
  const MmLayer *l = &L->g->layers[li];
  const MmBlock *b = &L->m->blocks[l->block];
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  double tp = (double)bs->degree[MM_STRAT_TP], cp = (double)bs->degree[MM_STRAT_CP];
  double width = b->kv_lora_rank > 0 ? (double)b->heads * (double)(b->head_dim + b->v_head_dim) / tp
                                     : (double)b->kv_heads * (double)(b->head_dim + b->v_head_dim) /
                                           MIN(tp, (double)b->kv_heads);
  return bs->samples_per_micro * (double)b->seq_len / cp * width * mm_dtype_bytes(b->dtype);
}

/* Ring attention (or the K/V all-gather) around the attention core @li of a forward (bwd:
 * the backward, which passes K/V and their gradients). */
static void t_attention_cp(Lower *L, Template *t, Seg *seg, uint32_t f, uint32_t li, Part part)
{
  const MmBlockSetup *bs = &L->s->blocks[L->g->layers[li].block];
  const double kv = cp_kv_bytes(L, li), cp = (double)bs->degree[MM_STRAT_CP];
  const gboolean bwd = part != PART_FWD;
  if (bs->cp_impl == MM_CP_ALL_GATHER) {
    if (!bwd) t_coll(t, seg, f, T_COLL, MM_COLL_ALL_GATHER, MM_REASON_CP, MASK(MM_STRAT_CP), kv * cp);
    seg_add(L, seg, li, part);
    if (bwd) t_coll(t, seg, f, T_COLL, MM_COLL_REDUCE_SCATTER, MM_REASON_CP, MASK(MM_STRAT_CP), kv * cp);
    return;
  }
  t_seg(t, seg, f, T_SEG);
  seg_add(L, seg, li, part);
  if (seg->kernels == 0) return;
  TItem it = {.kind = T_RING, .coll = MM_COLL_PERMUTE, .reason = MM_REASON_CP, .mask = MASK(MM_STRAT_CP),
              .coll_bytes = bwd ? 2.0 * kv : kv, .seg = *seg};
  it.seg.first -= f;
  it.seg.last -= f;
  t_push(t, &it);
  *seg = (Seg){.what = MM_OP_COMPUTE};
}

static gboolean cp_attention(const Lower *L, const MmLayer *l)
{
  return l->role == MM_ROLE_ATTN_CORE && L->s->blocks[l->block].degree[MM_STRAT_CP] > 1;
}

/* Forward (and recompute) of unit @u: segments split by TP all-reduces (SP: all-gathers
 * before column-parallel and reduce-scatters after row-parallel layers), MoE all-to-alls
 * and CP K/V exchanges. */
static void record_fwd(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const gboolean tp = bs->degree[MM_STRAT_TP] > 1, moe = L->unit_moe[u];
  const gboolean sp = mm_plan_seq_parallel(L->s, un->block);
  const double n = bs->samples_per_micro / (double)bs->degree[MM_STRAT_CP];
  const uint32_t f = un->first_layer, TPM = MASK(MM_STRAT_TP);
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f; li < f + un->n_layers; li++) {
    const MmLayer *l = &L->g->layers[li];
    if (moe && moe_dispatch_before(L, l))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_mask(L, l->block), moe_bytes(L, l));
    if (sp && l->tp == MM_TP_COLUMN && tp_collectives(L, l))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.act_bytes);
    if (cp_attention(L, l)) t_attention_cp(L, t, &seg, f, li, PART_FWD);
    else seg_add(L, &seg, li, PART_FWD);
    if (tp && l->tp == MM_TP_ROW && tp_collectives(L, l))
      t_coll(t, &seg, f, T_COLL, sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE, MM_REASON_TP, TPM,
             n * l->cost.out_bytes);
    if (moe && moe_combine_after(L, li))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_mask(L, l->block), moe_bytes(L, l));
  }
  t_seg(t, &seg, f, T_SEG);
}

/* Selective recompute: the attention cores of unit @u again, before its backward. */
static void record_selective(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++)
    if (L->g->layers[li].role == MM_ROLE_ATTN_CORE) seg_add(L, &seg, li, PART_FWD);
  t_seg(t, &seg, un->first_layer, T_SEG);
}

/* Backward of unit @u: input gradients in reverse; after a column-parallel op its
 * input-gradient AllReduce (SP: ReduceScatter, with the input re-gathered beside it for
 * the weight gradient), with its weight gradient beside it (a T_WSEG). */
static void record_bwd(Lower *L, uint32_t u, gboolean need_input_grad, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const gboolean tp = bs->degree[MM_STRAT_TP] > 1, moe = L->unit_moe[u], trained = !bs->frozen;
  const gboolean sp = mm_plan_seq_parallel(L->s, un->block);
  const double n = bs->samples_per_micro / (double)bs->degree[MM_STRAT_CP];
  const uint32_t f = un->first_layer, TPM = MASK(MM_STRAT_TP);
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f + un->n_layers; li-- > f;) {
    const MmLayer *l = &L->g->layers[li];
    const gboolean input_grad = li != f || need_input_grad;
    if (moe && moe_combine_after(L, li))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_mask(L, l->block), moe_bytes(L, l));
    if (sp && l->tp == MM_TP_ROW && tp_collectives(L, l)) /* the gradient of the reduce-scatter */
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.out_bytes);
    const gboolean column = tp && l->tp == MM_TP_COLUMN && tp_collectives(L, l) && input_grad;
    if (column && sp && trained)
      t_coll(t, &seg, f, T_SIDE, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.act_bytes);
    if (input_grad) {
      if (cp_attention(L, l)) t_attention_cp(L, t, &seg, f, li, PART_BWD_IN);
      else seg_add(L, &seg, li, PART_BWD_IN);
    }
    if (column) {
      t_coll(t, &seg, f, T_COLL, sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE, MM_REASON_TP, TPM,
             n * l->cost.act_bytes);
      if (trained) {
        seg_add(L, &seg, li, PART_BWD_W);
        t_seg(t, &seg, f, T_WSEG);
      }
    } else if (trained) {
      seg_add(L, &seg, li, PART_BWD_W);
    }
    if (moe && moe_dispatch_before(L, l))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_mask(L, l->block), moe_bytes(L, l));
  }
  t_seg(t, &seg, f, T_SEG);
}

static const Template *template_for(Lower *L, uint32_t u, int variant)
{
  const MmGraph *g = L->g;
  uint32_t cu = g->layers[g->layers[g->units[u].first_layer].canon].unit;
  Template *t = &L->templates[V_COUNT * cu + variant];
  if (!t->built) {
    if (variant == V_FWD) record_fwd(L, cu, t);
    else if (variant == V_SELECTIVE) record_selective(L, cu, t);
    else record_bwd(L, cu, variant == V_BWD_IN, t);
    t->built = TRUE;
  }
  return t;
}

static MmOpInfo seg_info(const Seg *sg, const MmUnit *un, uint32_t u, uint32_t micro, MmPhase phase, double scale)
{
  return (MmOpInfo){
    .what = (uint8_t)sg->what, .phase = (uint8_t)phase, .unit = u, .micro = micro,
    .first_layer = un->first_layer + sg->first, .last_layer = un->first_layer + sg->last, .kernels = sg->kernels,
    .flops = sg->flops * scale, .model_flops = sg->model_flops * scale, .bytes = sg->bytes * scale,
    .time_s = sg->time_s * scale, .fixed_s = sg->time_s * scale,
  };
}

/* Ring attention: piece 0 on the local K/V while the next chunk arrives; piece j once
 * chunk j is in; each exchange after the previous one (double buffering). */
static uint32_t replay_ring(Lower *L, const TItem *it, const MmUnit *un, uint32_t u, uint32_t micro, MmPhase phase,
                            const Deps *d)
{
  const int64_t cp = L->s->blocks[un->block].degree[MM_STRAT_CP];
  const double piece = 1.0 / (double)cp;
  MmOpInfo info = seg_info(&it->seg, un, u, micro, phase, piece);
  uint32_t perm = NONE, comp = NONE;
  for (int64_t j = 0; j < cp; j++) {
    uint32_t next = NONE;
    if (j + 1 < cp) {
      Deps pd = perm == NONE ? *d : deps_one(perm);
      next = emit_coll(L, un->block, it->mask, MM_COLL_PERMUTE, MM_REASON_CP, it->coll_bytes, &pd, u, micro, phase);
    }
    Deps cd = comp == NONE ? *d : deps_one(comp);
    deps_add(&cd, perm);
    comp = emit(L, MM_STREAM_COMPUTE, &cd, &info, NULL, MM_NO_COLL, 0, 0, 0);
    perm = next;
  }
  return comp;
}

/* Emits a template for unit @u. Returns the last op of the chain (the unit's output or
 * input gradient); *last_compute receives the last compute op emitted (or NONE). */
static uint32_t replay(Lower *L, const Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                       uint32_t *last_compute)
{
  const MmUnit *un = &L->g->units[u];
  Deps d = *in, coll_deps = *in;
  uint32_t last = NONE, side = NONE;
  *last_compute = NONE;
  for (uint32_t i = 0; i < t->n; i++) {
    const TItem *it = &t->items[i];
    if (it->kind == T_COLL) {
      uint32_t op = emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d,
                              u, micro, phase);
      if (op != NONE) {
        coll_deps = d;
        last = op;
        d = deps_one(op);
      }
      continue;
    }
    if (it->kind == T_SIDE) {
      side = emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d, u,
                       micro, phase);
      continue;
    }
    if (it->kind == T_RING) {
      last = *last_compute = replay_ring(L, it, un, u, micro, phase, &d);
      d = deps_one(last);
      continue;
    }
    MmOpInfo info = seg_info(&it->seg, un, u, micro, phase, 1.0);
    if (it->kind == T_WSEG) {
      /* the weight gradient waits for what the all-reduce waited for, not for the all-reduce */
      Deps wd = coll_deps;
      deps_add(&wd, side);
      side = NONE;
      *last_compute = emit(L, MM_STREAM_COMPUTE, &wd, &info, NULL, MM_NO_COLL, 0, 0, 0);
      continue;
    }
    last = *last_compute = emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
    d = deps_one(last);
  }
  return last;
}

/* Forward (or recompute) of one unit. Returns the op that produces its output. */
static uint32_t lower_fwd(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in)
{
  uint32_t lc;
  return replay(L, template_for(L, u, V_FWD), u, micro, phase, in, &lc);
}

/* Backward of one unit (after its recompute). Returns the op producing its input
 * gradient; *weights_done receives its last compute op (all its weight gradients
 * exist once it ends: the compute stream is FIFO). */
static uint32_t lower_bwd(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                          uint32_t *weights_done)
{
  Deps d = *in;
  uint32_t rec_last = NONE;
  if (L->s->cfg->recompute == MM_RECOMPUTE_FULL)
    deps_add(&d, replay(L, template_for(L, u, V_FWD), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  else if (L->s->cfg->recompute == MM_RECOMPUTE_SELECTIVE)
    deps_add(&d, replay(L, template_for(L, u, V_SELECTIVE), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  uint32_t lc;
  uint32_t out = replay(L, template_for(L, u, need_input_grad ? V_BWD_IN : V_BWD_NOIN), u, micro, MM_PHASE_BWD, &d, &lc);
  *weights_done = lc != NONE ? lc : rec_last;
  return out;
}

/* ---- FSDP gather sequence ---------------------------------------------- */

static void precompute_units(Lower *L)
{
  const MmGraph *g = L->g;
  L->unit_dense = g_new0(double, g->n_units + 1);
  L->unit_expert = g_new0(double, g->n_units + 1);
  L->unit_moe = g_new0(gboolean, g->n_units + 1);
  for (uint32_t u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const MmBlockSetup *bs = &L->s->blocks[un->block];
    if (u > 0 && g->layers[un->first_layer].canon != un->first_layer) { /* identical to the previous unit */
      L->unit_dense[u] = L->unit_dense[u - 1];
      L->unit_expert[u] = L->unit_expert[u - 1];
      L->unit_moe[u] = L->unit_moe[u - 1];
      continue;
    }
    for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      double p = (double)l->cost.params * mm_plan_param_fraction(L->s, un->block, l) * (double)bs->degree[MM_STRAT_FSDP];
      if (l->expert) L->unit_expert[u] += p;
      else L->unit_dense[u] += p;
      L->unit_moe[u] |= moe_split(L, l);
    }
  }
}

static double unit_params(const Lower *L, uint32_t u)
{
  return L->unit_dense[u] + L->unit_expert[u];
}

static gboolean fsdp_unit(const Lower *L, uint32_t u)
{
  const MmUnit *un = &L->g->units[u];
  return L->s->blocks[un->block].degree[MM_STRAT_FSDP] > 1 && L->g->units[u].cost.params > 0;
}

static void gq_add(GArray *a, uint32_t u, uint32_t micro, gboolean bwd)
{
  GatherItem it = {u, micro, bwd};
  g_array_append_val(a, it);
}

/* The order in which FSDP units compute over the stage's schedule: the order their
 * AllGathers are issued, `fsdp_prefetch` ahead of the compute. */
static void build_gather_queue(Lower *L, const MmPipeStep *steps, guint n_steps)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(GatherItem));
  for (guint i = 0; i < n_steps; i++) {
    const uint32_t k = steps[i].chunk * L->p + L->stage;
    if (!steps[i].bwd) {
      for (uint32_t u = L->chunk_first[k]; u < L->chunk_end[k]; u++)
        if (fsdp_unit(L, u)) gq_add(a, u, steps[i].micro, FALSE);
    } else {
      for (uint32_t u = L->chunk_end[k]; u-- > L->chunk_first[k];)
        if (L->g->units[u].block >= L->first_trained && fsdp_unit(L, u)) gq_add(a, u, steps[i].micro, TRUE);
    }
  }
  L->n_gq = a->len;
  L->gq = (GatherItem *)(void *)g_array_free(a, FALSE);
  L->gq_op = g_new(uint32_t, L->n_gq + 1);
}

static void emit_gather(Lower *L, const Deps *d)
{
  uint32_t i = L->gq_emitted++;
  const GatherItem *it = &L->gq[i];
  const MmUnit *un = &L->g->units[it->unit];
  double bytes = unit_params(L, it->unit) * mm_dtype_bytes(L->m->blocks[un->block].dtype);
  L->gq_op[i] = emit_coll(L, un->block, MASK(MM_STRAT_FSDP), MM_COLL_ALL_GATHER, MM_REASON_FSDP, bytes, d, it->unit,
                          it->micro, it->bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
}

/* The gather of the unit about to compute (issued earlier). */
static uint32_t gather_for(Lower *L, uint32_t u, uint32_t micro, gboolean bwd)
{
  g_assert(L->gq_pos < L->gq_emitted);
  const GatherItem *it = &L->gq[L->gq_pos];
  g_assert(it->unit == u && it->micro == micro && it->bwd == bwd);
  (void)u, (void)micro, (void)bwd;
  return L->gq_op[L->gq_pos];
}

/* After a unit computed: its buffer is free, so the gather `prefetch + 1` units ahead may go. */
static void gather_advance(Lower *L, uint32_t compute_done)
{
  L->gq_pos++;
  uint32_t want = L->gq_pos + (uint32_t)L->s->cfg->fsdp_prefetch + 1;
  while (L->gq_emitted < MIN(want, L->n_gq)) {
    Deps d = deps_one(compute_done);
    emit_gather(L, &d);
  }
}

/* ---- gradient synchronization ------------------------------------------ */

static gboolean block_reads(const MmBlock *c, guint b)
{
  for (guint i = 0; i < c->n_inputs; i++)
    if (c->inputs[i] == b) return TRUE;
  return FALSE;
}

static gboolean mp_block(const Lower *L, guint b)
{
  return L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && L->s->blocks[b].degree[MM_STRAT_MP] > 1;
}

/* Last unit of block @b. */
static uint32_t block_last_unit(const Lower *L, guint b)
{
  return L->g->block_first_unit[b] + L->g->block_units[b] - 1;
}

/* Replicas that hold the same parameters and average their gradients: data-parallel
 * levels, and for non-expert parameters the ep and cp ranks too. */
static uint32_t replica_mask(gboolean expert)
{
  return MASK(MM_STRAT_DDP) | MASK(MM_STRAT_CP) | (expert ? 0u : MASK(MM_STRAT_EP));
}

typedef struct {
  uint32_t *fwd_out;  /* m x blocks: the op producing a block's output, per micro-batch */
  uint32_t *bwd_out, *mp_bwd;
  gboolean *bwd_done;
  double *bucket_bytes; /* 2 x blocks: non-expert, expert gradients waiting for their AllReduce */
  uint32_t *bucket_dep;
} IterState;

/* Emits the backward exchange of MP tables once every trained consumer has its input gradient. */
static void hoist_mp_backward(Lower *L, IterState *st, uint32_t micro)
{
  const MmModel *m = L->m;
  const uint32_t *fwd = &st->fwd_out[micro * m->n_blocks];
  for (guint e = L->first_trained; e < m->n_blocks; e++) {
    if (!mp_block(L, e) || st->mp_bwd[e] != NONE) continue;
    Deps d = {.n = 0};
    gboolean ready = TRUE, any = FALSE;
    for (guint c = e + 1; c < m->n_blocks; c++) {
      if (!block_reads(&m->blocks[c], e)) continue;
      any = TRUE;
      if (!st->bwd_done[c]) ready = FALSE;
      else deps_add(&d, st->bwd_out[c]);
    }
    if (!ready) continue;
    if (!any) deps_add(&d, fwd[e]);
    st->mp_bwd[e] = emit_mp_exchange(L, block_last_unit(L, e), micro, MM_PHASE_BWD, &d);
  }
}

/* All-reduce (ZeRO-2: reduce-scatter) of a gradient bucket; slot 0 non-expert, 1 expert. */
static void flush_bucket(Lower *L, IterState *st, guint b, int slot, uint32_t micro)
{
  const guint i = 2 * b + (guint)slot;
  if (st->bucket_bytes[i] <= 0) return;
  Deps d = deps_one(st->bucket_dep[i]);
  MmCollKind kind = L->s->blocks[b].zero >= 2 ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE;
  emit_coll(L, b, replica_mask(slot == 1), kind, MM_REASON_DDP, st->bucket_bytes[i], &d, NONE, micro, MM_PHASE_BWD);
  st->bucket_bytes[i] = 0;
}

/* The ddp level of a block that asked for sparse gradient synchronization, or -1. */
static int sparse_level(const Lower *L, guint b)
{
  const MmBlockSetup *bs = &L->s->blocks[b];
  int found = -1, ddp_levels = 0;
  for (guint i = 0; i < bs->n_levels; i++) {
    if (bs->levels[i].strategy != MM_STRAT_DDP || bs->levels[i].degree <= 1) continue;
    ddp_levels++;
    if (bs->levels[i].grad_sync != MM_GRAD_SYNC_DENSE) found = (int)i;
  }
  return ddp_levels == 1 ? found : -1; /* one data-parallel level: its group exchanges the rows */
}
static MmSparseGrad sparse_grad(const Lower *L, guint b, int level)
{
  const MmBlock *bk = &L->m->blocks[b];
  const MmBlockSetup *bs = &L->s->blocks[b];
  double rows, lookups, dim;
  if (bk->kind == MM_BLOCK_EMBEDDING_BAG) {
    rows = (double)bk->rows;
    dim = (double)bk->dim;
    lookups = bs->samples_per_micro * (double)L->s->micro_steps * bk->pooling; /* per table */
  } else {
    rows = (double)bk->vocab;
    dim = (double)bk->hidden;
    lookups = bs->samples_per_micro * (double)L->s->micro_steps * (double)bk->seq_len;
  }
  double p = (double)bs->levels[level].degree;
  double local = rows * -expm1(-lookups / rows), uni = rows * -expm1(-p * lookups / rows);
  double overlap = p > 1 && local > 0 ? CLAMP((p * local - uni) / ((p - 1.0) * local), 0.0, 1.0) : 1.0;
  double tables = bk->kind == MM_BLOCK_EMBEDDING_BAG ? (double)bk->tables * bs->mp_fraction : 1.0;
  MmSparseGrad g = {
    .rows = (int64_t)(rows * tables), .dim = (int64_t)dim, .elem_bytes = mm_dtype_bytes(bs->grad_dtype),
    .touched_frac = local / rows, .overlap = overlap, .degree = bs->levels[level].degree,
    .stride = bs->stride[level],
  };
  return g;
}

/* Sparse synchronization of an embedding gradient: all-gather of the (padded) local row
 * indices, de-duplication on the GPU, AllReduce of the union's rows; host staging folds
 * the CPU de-duplication into the exchange. */
static void emit_sparse_sync(Lower *L, guint b, int level, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmBlockSetup *bs = &L->s->blocks[b];
  MmSparseGrad g = sparse_grad(L, b, level);
  MmSparseCost sc;
  MmGradSync want = bs->levels[level].grad_sync;
  if (want == MM_GRAD_SYNC_AUTO) mm_comm_sparse_best(L->hw, L->links, &g, &sc);
  else mm_comm_sparse_cost(L->hw, L->links, &g, want == MM_GRAD_SYNC_HOST ? MM_SYNC_HOST : MM_SYNC_SPARSE, &sc);
  Deps d = deps_one(weights_done);
  if (sc.method == MM_SYNC_DENSE) {
    emit_coll(L, b, MASK(MM_STRAT_DDP), MM_COLL_ALL_REDUCE, MM_REASON_DDP, sc.value_bytes, &d, u, micro, MM_PHASE_BWD);
    return;
  }
  const MmCommCost *cag = &sc.gather, *car = &sc.reduce;
  const double dedup = sc.dedup_s;
  MmStreamId st = cag->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  MmOpInfo info = {.what = MM_OP_COLLECTIVE, .phase = MM_PHASE_BWD, .coll = MM_COLL_ALL_GATHER, .reason = MM_REASON_DDP,
                   .unit = u, .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = sc.index_bytes,
                   .time_s = cag->time_s, .fixed_s = cag->latency_s, .algorithm = (uint8_t)cag->algorithm};
  uint32_t op = emit(L, st, &d, &info, cag, COLL_SELF, g.degree, g.stride, 0);
  d = deps_one(op);
  if (sc.method == MM_SYNC_SPARSE && dedup > 0) {
    MmOpInfo di = {.what = MM_OP_COMPUTE, .phase = MM_PHASE_BWD, .unit = u, .micro = micro,
                   .first_layer = L->g->units[u].first_layer, .last_layer = L->g->units[u].first_layer, .kernels = 2,
                   .bytes = dedup * L->hw->device.hbm_bw_Bps * L->hw->device.util_hbm.value, .time_s = dedup, .fixed_s = dedup};
    op = emit(L, MM_STREAM_COMPUTE, &d, &di, NULL, MM_NO_COLL, 0, 0, 0);
    d = deps_one(op);
  }
  info.coll = MM_COLL_ALL_REDUCE;
  info.bytes = sc.value_bytes;
  info.time_s = car->time_s + (sc.method == MM_SYNC_HOST ? dedup : 0);
  info.fixed_s = car->latency_s + (sc.method == MM_SYNC_HOST ? dedup : 0); /* CPU de-duplication, on the host path */
  info.algorithm = (uint8_t)car->algorithm;
  emit(L, st, &d, &info, car, COLL_SELF, g.degree, g.stride, 0);
}


/* Gradient synchronization of one unit after its backward. */
static void sync_grads(Lower *L, IterState *st, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmUnit *un = &L->g->units[u];
  const guint b = un->block;
  const MmBlockSetup *bs = &L->s->blocks[b];
  if (bs->frozen || weights_done == NONE || un->cost.params == 0) return;
  const gboolean last_micro = micro + 1 == L->nm;
  const double ge = mm_dtype_bytes(bs->grad_dtype);
  const double grads[2] = {L->unit_dense[u] * ge, L->unit_expert[u] * ge};
  if (L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && bs->degree[MM_STRAT_FSDP] <= 1 && bs->degree[MM_STRAT_DDP] <= 1)
    return; /* sharded tables update in place */
  Deps d = deps_one(weights_done);
  if (bs->degree[MM_STRAT_FSDP] > 1) {
    /* FSDP reduce-scatters every micro-step; HSDP then all-reduces the shard across replicas */
    uint32_t rs = emit_coll(L, b, MASK(MM_STRAT_FSDP), MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, grads[0] + grads[1], &d,
                            u, micro, MM_PHASE_BWD);
    if (!last_micro) return;
    for (int x = 0; x < 2; x++) {
      Deps r = deps_one(rs);
      emit_coll(L, b, replica_mask(x == 1), MM_COLL_ALL_REDUCE, MM_REASON_DDP,
                grads[x] / (double)bs->degree[MM_STRAT_FSDP], &r, u, micro, MM_PHASE_BWD);
    }
  } else if (last_micro && bs->degree[MM_STRAT_DDP] > 1 && sparse_level(L, b) >= 0) {
    emit_sparse_sync(L, b, sparse_level(L, b), u, micro, weights_done);
  } else if (last_micro) {
    /* DDP accumulates locally (no_sync) and all-reduces buckets during the last backward */
    for (int x = 0; x < 2; x++) {
      if (grads[x] <= 0 || mask_degree(bs, replica_mask(x == 1)) <= 1) continue;
      st->bucket_bytes[2 * b + (guint)x] += grads[x];
      st->bucket_dep[2 * b + (guint)x] = weights_done;
      if (L->s->cfg->ddp_overlap && st->bucket_bytes[2 * b + (guint)x] >= L->s->cfg->ddp_bucket_bytes)
        flush_bucket(L, st, b, x, micro);
    }
  }
}

/* ---- the iteration ----------------------------------------------------- */

/* Units of block @b inside chunk @k: [*u0, *u1); FALSE when none. */
static gboolean block_in_chunk(const Lower *L, guint b, uint32_t k, uint32_t *u0, uint32_t *u1)
{
  const uint32_t bf = L->g->block_first_unit[b], be = bf + L->g->block_units[b];
  *u0 = MAX(bf, L->chunk_first[k]);
  *u1 = MIN(be, L->chunk_end[k]);
  return *u0 < *u1;
}

/* Forward of chunk @k for micro-batch @mi; @in: what its first block waits for (the
 * pipeline receive). Returns the op producing the chunk's output. */
static uint32_t chunk_fwd(Lower *L, IterState *st, uint32_t k, uint32_t mi, const Deps *in)
{
  const MmModel *m = L->m;
  uint32_t *fwd = &st->fwd_out[mi * m->n_blocks];
  uint32_t last = NONE;
  for (guint b = 0; b < m->n_blocks; b++) {
    uint32_t u0, u1;
    if (!block_in_chunk(L, b, k, &u0, &u1)) continue;
    const MmBlock *bk = &m->blocks[b];
    Deps bin = {.n = 0};
    if (u0 == L->g->block_first_unit[b]) {
      for (guint i = 0; i < bk->n_inputs; i++) {
        guint src = bk->inputs[i];
        if (L->unit_chunk[block_last_unit(L, src)] == k) deps_add(&bin, fwd[src]);
        else for (uint32_t j = 0; j < in->n; j++) deps_add(&bin, in->v[j]);
      }
    } else {
      bin = *in;
    }
    uint32_t out = NONE;
    for (uint32_t u = u0; u < u1; u++) {
      Deps d = out == NONE ? bin : deps_one(out);
      if (fsdp_unit(L, u)) deps_add(&d, gather_for(L, u, mi, FALSE));
      out = lower_fwd(L, u, mi, MM_PHASE_FWD, &d);
      if (fsdp_unit(L, u)) gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
    }
    if (mp_block(L, b)) {
      Deps d = deps_one(out);
      out = emit_mp_exchange(L, block_last_unit(L, b), mi, MM_PHASE_FWD, &d);
    }
    fwd[b] = last = out;
  }
  return last;
}

/* Backward of chunk @k for micro-batch @mi; @gin: the gradient of its output (the
 * pipeline receive; the last chunk starts from the loss). Returns the op producing the
 * gradient of its input. */
static uint32_t chunk_bwd(Lower *L, IterState *st, uint32_t k, uint32_t mi, const Deps *gin)
{
  const MmModel *m = L->m;
  const guint nb = m->n_blocks;
  const uint32_t *fwd = &st->fwd_out[mi * nb];
  const gboolean last_micro = mi + 1 == L->nm;
  for (guint b = 0; b < nb; b++) {
    st->bwd_done[b] = FALSE;
    st->mp_bwd[b] = NONE;
    st->bwd_out[b] = NONE;
  }
  uint32_t first_out = NONE;
  for (guint b = nb; b-- > L->first_trained;) {
    uint32_t u0, u1;
    if (!block_in_chunk(L, b, k, &u0, &u1)) continue;
    const MmBlock *bk = &m->blocks[b];
    Deps grad = {.n = 0};
    if (u1 == block_last_unit(L, b) + 1) {
      gboolean consumed = FALSE;
      for (guint c = b + 1; c < nb; c++) {
        if (!block_reads(&m->blocks[c], b)) continue;
        consumed = TRUE;
        if (L->unit_chunk[L->g->block_first_unit[c]] == k) deps_add(&grad, st->bwd_out[c]);
        else for (uint32_t j = 0; j < gin->n; j++) deps_add(&grad, gin->v[j]);
      }
      if (!consumed) deps_add(&grad, fwd[b]); /* the loss */
    } else {
      grad = *gin;
    }
    if (mp_block(L, b)) {
      hoist_mp_backward(L, st, mi);
      grad = deps_one(st->mp_bwd[b]);
    }
    gboolean need_in = FALSE;
    for (guint i = 0; i < bk->n_inputs; i++) need_in |= bk->inputs[i] >= L->first_trained;
    const uint32_t bf = L->g->block_first_unit[b];
    uint32_t out = NONE;
    for (uint32_t u = u1; u-- > u0;) {
      Deps d = out == NONE ? grad : deps_one(out);
      if (fsdp_unit(L, u)) deps_add(&d, gather_for(L, u, mi, TRUE));
      uint32_t wd = NONE;
      out = lower_bwd(L, u, mi, &d, u == bf ? need_in : TRUE, &wd);
      if (fsdp_unit(L, u)) gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
      sync_grads(L, st, u, mi, wd);
    }
    if (last_micro && L->s->cfg->ddp_overlap) {
      flush_bucket(L, st, b, 0, mi);
      flush_bucket(L, st, b, 1, mi);
    }
    st->bwd_out[b] = out;
    st->bwd_done[b] = TRUE;
    first_out = out;
    hoist_mp_backward(L, st, mi);
  }
  return first_out;
}

/* Bytes crossing the boundary after chunk @k: the last unit's output of one micro-batch,
 * split over the TP ranks (Megatron's scatter/gather) and the CP ranks. */
static double boundary_bytes(const Lower *L, uint32_t k)
{
  const uint32_t u = L->chunk_end[k] - 1;
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const MmLayer *l = &L->g->layers[un->first_layer + un->n_layers - 1];
  return bs->samples_per_micro * l->cost.out_bytes / (double)bs->degree[MM_STRAT_TP] /
         (double)bs->degree[MM_STRAT_CP];
}

/* Stage offset from this stage to the one running chunk @k. */
static int64_t stage_delta(const Lower *L, uint32_t k)
{
  return (int64_t)(k % L->p) - (int64_t)L->stage;
}

/* Megatron's scatter/gather: each TP rank sends 1/t of a boundary tensor; the receiving
 * TP group all-gathers it (not with sequence parallelism: the tensor stays sharded). */
static uint32_t gather_boundary(Lower *L, uint32_t recv, uint32_t unit, uint32_t mi, MmPhase phase, double bytes)
{
  const guint b = L->g->units[unit].block;
  if (L->s->blocks[b].degree[MM_STRAT_TP] <= 1 || mm_plan_seq_parallel(L->s, b)) return recv;
  Deps d = deps_one(recv);
  uint32_t op = emit_coll(L, b, MASK(MM_STRAT_TP), MM_COLL_ALL_GATHER, MM_REASON_PP,
                          bytes * (double)L->s->blocks[b].degree[MM_STRAT_TP], &d, unit, mi, phase);
  return op == NONE ? recv : op;
}

/* The input activations of chunk @k (from the stage of chunk k - 1). */
static uint32_t recv_activations(Lower *L, uint32_t k, uint32_t mi)
{
  double bytes = boundary_bytes(L, k - 1);
  uint32_t r = emit_p2p(L, FALSE, FALSE, k - 1, mi, stage_delta(L, k - 1), bytes, NULL, L->chunk_first[k]);
  return gather_boundary(L, r, L->chunk_first[k], mi, MM_PHASE_FWD, bytes);
}

/* The gradient of chunk @k's output (from the stage of chunk k + 1). */
static uint32_t recv_gradients(Lower *L, uint32_t k, uint32_t mi)
{
  double bytes = boundary_bytes(L, k);
  uint32_t r = emit_p2p(L, FALSE, TRUE, k, mi, stage_delta(L, k + 1), bytes, NULL, L->chunk_end[k] - 1);
  return gather_boundary(L, r, L->chunk_end[k] - 1, mi, MM_PHASE_BWD, bytes);
}

/* The tied word-embedding gradient, all-reduced between the first and the last stage. */
static void emit_tied(Lower *L)
{
  if (L->p <= 1 || !L->training) return;
  const MmModel *m = L->m;
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlock *bk = &m->blocks[b];
    if (bk->kind != MM_BLOCK_LM_HEAD || !bk->tied || L->s->blocks[b].frozen) continue;
    const uint32_t k = L->unit_chunk[L->g->block_first_unit[b]];
    if (k % L->p == 0) return; /* head and embedding share a stage */
    if (L->stage != 0 && L->stage != k % L->p) return;
    const MmBlockSetup *bs = &L->s->blocks[b];
    const double bytes = (double)bk->vocab * (double)bk->hidden * mm_dtype_bytes(bs->grad_dtype) /
                         (double)bs->degree[MM_STRAT_TP];
    const int64_t delta = (int64_t)(k % L->p) * (L->stage == 0 ? 1 : -1);
    Deps d = deps_all_streams(L);
    emit_pair(L, MM_STREAM_COUNT, MM_COLL_ALL_REDUCE, TRUE, COLL_TIED, delta, bytes, &d, L->g->block_first_unit[b],
              L->nm - 1, MM_PHASE_BWD);
    return;
  }
}

/* Non-expert and expert parameters of block @b on this stage's device (after TP/MP/EP,
 * before FSDP); FALSE when the stage holds none of its units. */
static gboolean stage_block_params(const Lower *L, guint b, double *dense, double *expert)
{
  gboolean any = FALSE;
  *dense = *expert = 0;
  for (uint32_t u = L->g->block_first_unit[b]; u < L->g->block_first_unit[b] + L->g->block_units[b]; u++) {
    if (L->unit_chunk[u] % L->p != L->stage) continue;
    any = TRUE;
    *dense += L->unit_dense[u];
    *expert += L->unit_expert[u];
  }
  return any;
}

/* One optimizer step after every gradient has arrived; ZeRO-1/2 then all-gather the
 * updated weights. */
static void emit_optimizer(Lower *L)
{
  const MmModel *m = L->m;
  double bytes = 0, dense, expert;
  uint32_t kernels = 0;
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlock *bk = &m->blocks[b];
    const MmBlockSetup *bs = &L->s->blocks[b];
    if (bs->frozen || bk->kind == MM_BLOCK_EMBEDDING_BAG || !stage_block_params(L, b, &dense, &expert)) continue;
    /* ZeRO shards the update over the replicas */
    double params = (dense / mm_plan_zero_shards(bs, FALSE) + expert / mm_plan_zero_shards(bs, TRUE)) /
                    (double)bs->degree[MM_STRAT_FSDP];
    double e = mm_dtype_bytes(bk->dtype), ge = mm_dtype_bytes(bs->grad_dtype);
    bytes += params * (2.0 * e + ge + 2.0 * mm_plan_optimizer_bytes(bs->optimizer, bk));
    kernels++;
  }
  if (kernels == 0) return;
  Deps d = deps_all_streams(L);
  MmOpInfo info = {
    .what = MM_OP_OPTIMIZER, .phase = MM_PHASE_OPTIMIZER, .unit = MM_NO_UNIT, .micro = 0, .first_layer = NONE,
    .last_layer = NONE, .kernels = kernels, .bytes = bytes,
    .time_s = mm_plan_compute_time(L->hw, MM_DTYPE_FP32, 0, bytes) + kernels * L->launch_s,
  };
  info.fixed_s = info.time_s;
  uint32_t opt = emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlockSetup *bs = &L->s->blocks[b];
    if (bs->frozen || bs->zero == 0 || m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG ||
        !stage_block_params(L, b, &dense, &expert))
      continue;
    const double e = mm_dtype_bytes(m->blocks[b].dtype);
    Deps od = deps_one(opt);
    emit_coll(L, b, replica_mask(FALSE), MM_COLL_ALL_GATHER, MM_REASON_ZERO, dense * e, &od, MM_NO_UNIT, 0,
              MM_PHASE_OPTIMIZER);
    emit_coll(L, b, replica_mask(TRUE), MM_COLL_ALL_GATHER, MM_REASON_ZERO, expert * e, &od, MM_NO_UNIT, 0,
              MM_PHASE_OPTIMIZER);
  }
}

/* Lowers this stage's schedule: per step a chunk's forward (after receiving its input,
 * before sending its output) or backward (after receiving its output's gradient, before
 * sending its input's); then gradient buckets, the tied embedding and the optimizer. */
static void lower_program(Lower *L)
{
  const guint nb = L->m->n_blocks;
  const uint32_t p = L->p, v = L->v, m = L->nm, K = L->K;
  g_autofree MmPipeStep *steps = g_new(MmPipeStep, 2 * (gsize)m * v + 1);
  guint n_steps = mm_pipe_schedule(L->s->cfg->pipeline.schedule, p, v, m, L->stage, L->training, steps);
  build_gather_queue(L, steps, n_steps);

  IterState st;
  st.fwd_out = g_new(uint32_t, (gsize)m * nb + 1);
  for (gsize i = 0; i < (gsize)m * nb; i++) st.fwd_out[i] = NONE;
  st.bwd_out = g_new(uint32_t, nb);
  st.mp_bwd = g_new(uint32_t, nb);
  st.bwd_done = g_new0(gboolean, nb);
  st.bucket_bytes = g_new0(double, 2 * nb);
  st.bucket_dep = g_new(uint32_t, 2 * nb);

  for (uint32_t i = 0; i < MIN((uint32_t)L->s->cfg->fsdp_prefetch + 1, L->n_gq); i++) emit_gather(L, NULL);

  /* synchronous exchange: the next step waits for this step's transfers */
  const gboolean sync = !L->s->cfg->pipeline.overlap_p2p;
  uint32_t pending = NONE;
  for (guint i = 0; i < n_steps; i++) {
    const uint32_t k = steps[i].chunk * p + L->stage, mi = steps[i].micro;
    L->cur_chunk = k;
    if (!steps[i].bwd) {
      Deps in = {.n = 0};
      if (sync) deps_add(&in, pending);
      if (k > 0) deps_add(&in, recv_activations(L, k, mi));
      uint32_t out = chunk_fwd(L, &st, k, mi, &in);
      pending = NONE;
      if (k + 1 < K) {
        Deps d = deps_one(out);
        pending = emit_p2p(L, TRUE, FALSE, k, mi, stage_delta(L, k + 1), boundary_bytes(L, k), &d, L->chunk_end[k] - 1);
      }
      continue;
    }
    if (!L->chunk_trained[k]) continue;
    Deps gin = {.n = 0};
    if (sync) deps_add(&gin, pending);
    if (k + 1 < K) deps_add(&gin, recv_gradients(L, k, mi));
    uint32_t out = chunk_bwd(L, &st, k, mi, &gin);
    pending = NONE;
    if (k > 0 && L->chunk_trained[k - 1] && out != NONE) {
      Deps d = deps_one(out);
      pending = emit_p2p(L, TRUE, TRUE, k - 1, mi, stage_delta(L, k - 1), boundary_bytes(L, k - 1), &d, L->chunk_first[k]);
    }
  }
  g_assert(L->gq_pos == L->n_gq);
  L->cur_chunk = L->stage;

  if (L->training && !L->s->cfg->ddp_overlap) {
    /* gradients all-reduced after the whole backward, in bucket-sized pieces */
    for (guint b = nb; b-- > 0;) {
      for (int x = 0; x < 2; x++) {
        const guint i = 2 * b + (guint)x;
        double left = st.bucket_bytes[i], size = L->s->cfg->ddp_bucket_bytes;
        st.bucket_dep[i] = L->last_on[MM_STREAM_COMPUTE];
        while (left > 0) {
          st.bucket_bytes[i] = MIN(left, size);
          left -= st.bucket_bytes[i];
          flush_bucket(L, &st, b, x, m - 1);
        }
      }
    }
  }
  if (L->training) {
    emit_tied(L);
    emit_optimizer(L);
  }
  g_free(st.fwd_out);
  g_free(st.bwd_out);
  g_free(st.mp_bwd);
  g_free(st.bwd_done);
  g_free(st.bucket_bytes);
  g_free(st.bucket_dep);
}

/* ---- pipeline schedules and chunks -------------------------------------- */

/* Megatron's mapping of the k-th virtual micro-batch to (chunk, micro-batch). */
static MmPipeStep virtual_step(guint p, guint v, guint k, gboolean bwd)
{
  guint in_group = k % (p * v);
  guint chunk = in_group / p;
  MmPipeStep s = {(uint8_t)bwd, (uint16_t)(bwd ? v - 1 - chunk : chunk), (k / (p * v)) * p + k % p};
  return s;
}

guint mm_pipe_schedule(MmPipeSchedule kind, guint p, guint v, guint m, guint stage, gboolean backward,
                       MmPipeStep *out)
{
  g_return_val_if_fail(p >= 1 && v >= 1 && m >= 1 && stage < p, 0);
  const guint total = m * v;
  guint n = 0, fk = 0, bk = 0;
  if (!backward || kind == MM_PIPE_GPIPE) {
    for (; fk < total; fk++) out[n++] = virtual_step(p, v, fk, FALSE);
    if (backward)
      for (; bk < total; bk++) out[n++] = virtual_step(p, v, bk, TRUE);
    return n;
  }
  guint warm = v == 1 ? MIN(p - stage - 1, m) : MIN((p - stage - 1) * 2 + (v - 1) * p, total);
  for (guint i = 0; i < warm; i++) out[n++] = virtual_step(p, v, fk++, FALSE);
  for (guint i = 0; i < total - warm; i++) {
    out[n++] = virtual_step(p, v, fk++, FALSE);
    out[n++] = virtual_step(p, v, bk++, TRUE);
  }
  while (bk < total) out[n++] = virtual_step(p, v, bk++, TRUE);
  return n;
}

uint32_t *mm_pipe_unit_chunks(const MmScenario *s, const MmGraph *g)
{
  uint32_t *chunk = g_new0(uint32_t, g->n_units + 1);
  const int64_t K = s->pp * s->vstages;
  if (K <= 1) return chunk;
  g_autofree int64_t *want = g_new(int64_t, K);
  const MmPipeline *pl = &s->cfg->pipeline;
  for (int64_t k = 0; k < K; k++) want[k] = pl->layers ? pl->layers[k] : s->layer_units / K;
  if (!pl->layers) {
    /* the remainder goes to the middle chunks first: the ends also hold embedding and head */
    int64_t rem = s->layer_units % K;
    for (int64_t i = 0; rem > 0; i++, rem--) want[K <= 2 ? i % K : 1 + i % (K - 2)]++;
  }
  int64_t k = 0, left = want[0];
  for (uint32_t u = 0; u < g->n_units; u++) {
    if (mm_block_is_layers(&s->model->blocks[g->units[u].block])) {
      while (left == 0 && k + 1 < K) left = want[++k];
      left--;
    }
    chunk[u] = (uint32_t)k;
  }
  return chunk;
}

/* ---- programs and classes ---------------------------------------------- */

static void lower_free(Lower *L)
{
  g_free(L->gq);
  g_free(L->gq_op);
  g_free(L->parts);
  for (uint32_t i = 0; L->templates && i < V_COUNT * L->g->n_units; i++) g_free(L->templates[i].items);
  g_free(L->templates);
  g_free(L->unit_dense);
  g_free(L->unit_expert);
  g_free(L->unit_moe);
  g_free(L->chunk_first);
  g_free(L->chunk_end);
  g_free(L->chunk_trained);
}

/* Expert load of the hot ep rank and of the others: (1 + skew) x the mean, and what is left. */
static double behaviour_load(const MmScenario *s, gboolean hot)
{
  const double skew = s->cfg->expert_skew, ep = (double)s->ep_degree;
  if (skew <= 0 || ep <= 1) return 1.0;
  return hot ? 1.0 + skew : (ep - 1.0 - skew) / (ep - 1.0);
}

static void lower_behaviour(const MmScenario *s, const MmGraph *g, const MmLinks *links, const uint32_t *unit_chunk,
                            uint32_t stage, gboolean hot, MmPlanProgram *out)
{
  uint32_t guess = (uint32_t)MIN((gint64)(g->n_layers + 6 * g->n_units + 16) * 3 * s->micro_steps / s->pp + 64,
                                 G_MAXINT / 4);
  Lower L = {
    .s = s, .g = g, .m = s->model, .hw = s->hw, .links = links,
    .ops = g_new(MmEngineOp, guess), .info = g_new(MmOpInfo, guess), .cap_ops = guess,
    .deps = g_new(uint32_t, 2 * guess), .cap_deps = 2 * guess,
    .training = s->cfg->task != MM_TASK_INFERENCE,
    .launch_s = mm_plan_launch_s(s, g),
    .stage = stage, .expert_load = behaviour_load(s, hot), .a2a_skew = MAX(1.0, behaviour_load(s, hot)),
    .unit_chunk = unit_chunk, .p = (uint32_t)s->pp, .v = (uint32_t)s->vstages, .nm = (uint32_t)s->micro_steps,
  };
  L.K = L.p * L.v;
  L.first_trained = mm_plan_first_trained(s);
  L.chunk_first = g_new(uint32_t, L.K + 1);
  L.chunk_end = g_new0(uint32_t, L.K + 1);
  L.chunk_trained = g_new0(gboolean, L.K + 1);
  for (uint32_t k = 0; k < L.K; k++) L.chunk_first[k] = g->n_units;
  for (uint32_t u = 0; u < g->n_units; u++) {
    uint32_t k = unit_chunk[u];
    L.chunk_first[k] = MIN(L.chunk_first[k], u);
    L.chunk_end[k] = MAX(L.chunk_end[k], u + 1);
    L.chunk_trained[k] |= L.training && g->units[u].block >= L.first_trained;
  }
  L.parts = g_new(PartCost, 3 * (gsize)g->n_layers + 1);
  for (uint32_t li = 0; li < g->n_layers; li++)
    if (g->layers[li].canon == li)
      for (int part = PART_FWD; part <= PART_BWD_W; part++) part_cost(&L, li, (Part)part, &L.parts[3 * li + part]);
  for (int i = 0; i < MM_STREAM_COUNT; i++) L.last_on[i] = NONE;
  precompute_units(&L);
  L.templates = g_new0(Template, V_COUNT * (gsize)g->n_units + 1);
  lower_program(&L);
  lower_free(&L);

  *out = (MmPlanProgram){
    .ops = L.ops, .info = L.info, .deps = L.deps, .n_ops = L.n_ops, .xfer_link = L.xfer_link,
    .xfer_bytes = L.xfer_bytes, .stage = stage, .hot = hot,
  };
  out->dur = g_new(MmTime, out->n_ops + 1);
  for (uint32_t i = 0; i < out->n_ops; i++) out->dur[i] = mm_time_from_s(out->info[i].fixed_s);
  out->program = (MmEngineProgram){out->ops, out->n_ops, out->deps, MM_STREAM_COUNT, out->xfer_link, out->xfer_bytes,
                                   links->n};
}

void mm_plan_free(MmPlan *p)
{
  if (!p) return;
  for (uint32_t i = 0; i < p->n_programs; i++) {
    MmPlanProgram *pr = &p->programs[i];
    g_free(pr->ops);
    g_free(pr->info);
    g_free(pr->deps);
    g_free(pr->dur);
    g_free(pr->xfer_link);
    g_free(pr->xfer_bytes);
  }
  g_free(p->programs);
  g_free(p->engine_programs);
  g_free(p->link_bw);
  g_free(p->classes);
  g_free(p->class_count);
  g_free(p->unit_chunk);
  g_free(p);
}

MmPlan *mm_plan_new(const MmScenario *s, const MmGraph *g, const MmPlanOptions *opt, GError **error)
{
  g_return_val_if_fail(s && g && g->model == s->model, NULL);
  (void)error;
  MmPlan *p = g_new0(MmPlan, 1);
  p->scenario = s;
  p->graph = g;
  mm_comm_links(s->hw, &p->links);
  p->link_bw = g_new(double, p->links.n + 1);
  for (uint32_t i = 0; i < p->links.n; i++) p->link_bw[i] = p->links.bw_Bps[i] / MM_PS_PER_S;
  p->unit_chunk = mm_pipe_unit_chunks(s, g);

  /* behaviours: a program per stage, two when one ep rank gets more tokens than the others */
  const gboolean skewed = s->cfg->expert_skew > 0 && s->ep_degree > 1;
  const uint32_t per_stage = skewed ? 2 : 1;
  p->n_programs = (uint32_t)s->pp * per_stage;
  p->programs = g_new0(MmPlanProgram, p->n_programs);
  p->engine_programs = g_new(MmEngineProgram, p->n_programs);
  for (uint32_t st = 0; st < (uint32_t)s->pp; st++) {
    for (uint32_t h = 0; h < per_stage; h++) {
      MmPlanProgram *pr = &p->programs[st * per_stage + h];
      lower_behaviour(s, g, &p->links, p->unit_chunk, st, skewed && h == 0, pr);
      const int64_t hot_devices = s->stage_devices / s->ep_degree;
      pr->devices = !skewed ? s->stage_devices : h == 0 ? hot_devices : s->stage_devices - hot_devices;
      pr->rep_device = (uint32_t)(st * s->stage_devices + (h == 1 ? s->ep_stride : 0));
      p->engine_programs[st * per_stage + h] = pr->program;
    }
  }

  const gboolean per_device = p->per_device = opt && opt->per_device;
  p->n_classes = per_device ? (uint32_t)s->devices : p->n_programs;
  p->classes = g_new(MmEngineClass, p->n_classes);
  p->class_count = g_new(int64_t, p->n_classes);
  for (uint32_t c = 0; c < p->n_classes; c++) {
    uint32_t prog = c;
    if (per_device) {
      uint32_t st = (uint32_t)(c / s->stage_devices);
      gboolean cold = skewed && ((c % s->stage_devices) / s->ep_stride) % s->ep_degree != 0;
      prog = st * per_stage + (cold ? 1 : 0);
    }
    const MmPlanProgram *pr = &p->programs[prog];
    p->classes[c] = (MmEngineClass){prog, pr->dur, per_device ? c : pr->rep_device, p->link_bw};
    p->class_count[c] = per_device ? 1 : pr->devices;
  }

  /* MFU numerator: model FLOPs of the global batch (frozen blocks drop weight gradients;
   * blocks before the first trained one run no backward). */
  const gboolean training = s->cfg->task != MM_TASK_INFERENCE;
  const guint first_trained = mm_plan_first_trained(s);
  double per_sample = 0;
  for (guint b = 0; b < s->model->n_blocks; b++) {
    const MmCost *c = &g->block_cost[b];
    per_sample += c->fwd_flops;
    if (training && b >= first_trained) per_sample += c->bwd_input_flops;
    if (training && !s->blocks[b].frozen) per_sample += c->bwd_weight_flops;
  }
  p->model_flops_per_iteration = per_sample * (double)s->global_batch;
  p->mfu_dtype = s->blocks[s->ref_block].compute_dtype;
  p->peak_flops_per_device = s->hw->device.peak_flops[p->mfu_dtype];
  return p;
}

char *mm_plan_op_name(const MmPlan *p, const MmPlanProgram *prog, uint32_t op)
{
  g_return_val_if_fail(op < prog->n_ops, NULL);
  const MmOpInfo *in = &prog->info[op];
  g_autofree char *unit = in->unit == MM_NO_UNIT ? NULL : mm_graph_unit_name(p->graph, in->unit);
  g_autofree char *micro = p->scenario->micro_steps > 1 ? g_strdup_printf(" mb%u", in->micro) : g_strdup("");
  if (in->what == MM_OP_OPTIMIZER) return g_strdup("optimizer step");
  if (in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_PP && in->coll == MM_COLL_P2P) {
    static const char *const verbs[] = {"send", "send", "recv", "recv"};
    return g_strdup_printf("%s %s %s%s", verbs[prog->ops[op].stream - MM_STREAM_PP_SEND_FWD],
                           in->phase == MM_PHASE_FWD ? "activations" : "gradients", unit ? unit : "", micro);
  }
  if (in->what == MM_OP_COLLECTIVE)
    return g_strdup_printf("%s %s%s%s %s%s", mm_coll_names[in->coll], mm_reason_names[in->reason], unit ? " " : "",
                           unit ? unit : "", mm_phase_names[in->phase], micro);
  const MmUnit *un = &p->graph->units[in->unit];
  uint32_t lo = MIN(in->first_layer, in->last_layer), hi = MAX(in->first_layer, in->last_layer);
  if (lo == un->first_layer && hi == un->first_layer + un->n_layers - 1)
    return g_strdup_printf("%s %s%s", unit, mm_phase_names[in->phase], micro);
  const MmLayer *a = &p->graph->layers[lo], *b = &p->graph->layers[hi];
  if (lo == hi) return g_strdup_printf("%s.%s %s%s", unit, mm_role_names[a->role], mm_phase_names[in->phase], micro);
  return g_strdup_printf("%s.%s..%s %s%s", unit, mm_role_names[a->role], mm_role_names[b->role],
                         mm_phase_names[in->phase], micro);
}
