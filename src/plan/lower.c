/* lower: one iteration of a scenario -> a program of compute and collective ops on three streams. */
#include <math.h>
#include <string.h>

#include "plan.h"

const char *const mm_stream_names[] = {"compute", "comm_intra", "comm_inter", NULL};
const char *const mm_phase_names[] = {"fwd", "bwd", "recompute", "optimizer", NULL};
const char *const mm_reason_names[] = {"fsdp", "tp", "ddp", "mp", "moe", NULL};

#define NONE UINT32_MAX
#define MAX_DEPS 24

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
         a->algorithm == b->algorithm && a->skew == b->skew;
}

typedef struct {
  const MmScenario *s;
  const MmGraph *g;
  const MmModel *m;
  const MmHardware *hw;
  MmEngineOp *ops;
  MmOpInfo *info;
  uint32_t n_ops, cap_ops;
  uint32_t *deps;
  uint32_t n_deps, cap_deps;
  uint32_t *xfer_link;
  double *xfer_bytes;
  uint32_t n_xfer, cap_xfer;
  MmLinks links;
  PartCost *parts; /* 3 per layer, indexed by canonical layer */
  double *unit_params;  /* per unit: parameters on one device after TP/MP, before FSDP */
  struct Template *templates; /* V_COUNT per unit, built on first use */
  gboolean *unit_moe;   /* per unit: MoE experts spread over a TP group (all-to-alls) */
  CommMemo memo[MM_COLL_COUNT];
  uint32_t last_on[MM_STREAM_COUNT];
  guint first_trained;
  gboolean training;

  GatherItem *gq;
  uint32_t n_gq, gq_emitted, gq_pos;
  uint32_t *gq_op; /* gather op of each item */
} Lower;

/* ---- emitting ---------------------------------------------------------- */

static uint32_t emit(Lower *L, MmStreamId stream, const Deps *d, const MmOpInfo *info, const MmCommCost *coll,
                     int64_t degree, int64_t stride)
{
  uint32_t idx = L->n_ops, nd = d ? d->n : 0, nx = coll ? coll->n_use : 0;
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
    .coll = coll ? idx : MM_NO_COLL, .degree = (uint32_t)degree, .stride = (uint32_t)stride,
    .xfer_first = L->n_xfer, .n_xfer = (uint16_t)nx, .sequential = coll && coll->sequential,
  };
  for (uint32_t i = 0; i < nx; i++) {
    L->xfer_link[L->n_xfer] = coll->link[i];
    L->xfer_bytes[L->n_xfer++] = coll->bytes[i];
  }
  for (uint32_t i = 0; i < nd; i++) {
    g_assert(d->v[i] < idx);
    L->deps[L->n_deps++] = d->v[i];
  }
  L->info[idx] = *info;
  L->n_ops++;
  L->last_on[stream] = idx;
  return idx;
}

double mm_plan_compute_time(const MmHardware *hw, MmDtype dtype, double flops, double bytes)
{
  const MmDevice *d = &hw->device;
  double tc = flops > 0 ? flops / (d->peak_flops[dtype] * d->util_gemm.value) : 0;
  double tm = bytes > 0 ? bytes / (d->hbm_bw_Bps * d->util_hbm.value) : 0;
  return MAX(tc, tm);
}

/* Fraction of a layer's per-sample work one device does, and of its weights it reads. */
static void work_fractions(const Lower *L, const MmLayer *l, double *work, double *weights)
{
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  if (L->m->blocks[l->block].kind == MM_BLOCK_EMBEDDING_BAG) {
    *work = mm_plan_param_fraction(L->s, l->block, l) * (double)bs->degree[MM_STRAT_FSDP];
    *weights = *work;
    return;
  }
  double tp = (double)bs->degree[MM_STRAT_TP];
  *work = l->tp == MM_TP_REPLICATED ? 1.0 : 1.0 / tp;
  *weights = *work;
}

static void part_cost(const Lower *L, uint32_t li, Part part, PartCost *pc)
{
  const MmLayer *l = &L->g->layers[li];
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  const MmCost *c = &l->cost;
  const double n = bs->samples_per_micro;
  double wf, pf;
  work_fractions(L, l, &wf, &pf);
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
    pc->time_s = mm_plan_compute_time(L->hw, bs->compute_dtype, flops, bytes) + L->hw->device.launch_overhead_s;
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

/* Emits @kind over every level of strategy @strat of block @bi, innermost first
 * (AllGather outermost first, with the buffer growing), chained on @d. */
static uint32_t emit_coll(Lower *L, guint bi, MmStrategy strat, MmCollKind kind, MmReason reason, double bytes,
                          const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const MmBlockSetup *bs = &L->s->blocks[bi];
  if (bytes <= 0 || bs->degree[strat] <= 1) return NONE;
  int idx[MM_MAX_LEVELS], n = 0;
  for (guint i = 0; i < bs->n_levels; i++)
    if (bs->levels[i].strategy == strat && bs->levels[i].degree > 1) idx[n++] = (int)i;
  /* AllGather: outer levels first on small shards; ReduceScatter: inner first. */
  double size = bytes;
  if (kind == MM_COLL_ALL_GATHER)
    for (int k = 0; k < n; k++) size /= (double)bs->levels[idx[k]].degree;
  Deps cur = d ? *d : (Deps){.n = 0};
  uint32_t op = NONE;
  for (int k = 0; k < n; k++) {
    int li = kind == MM_COLL_ALL_GATHER ? idx[n - 1 - k] : idx[k];
    const MmLevel *lv = &bs->levels[li];
    if (kind == MM_COLL_ALL_GATHER) size *= (double)lv->degree;
    MmCollective c = {kind, size, lv->degree, bs->stride[li], L->s->cfg->algorithm[kind], 1.0};
    CommMemo *memo = &L->memo[kind];
    if (!memo->valid || !same_coll(&memo->in, &c)) {
      memo->in = c;
      mm_comm_cost(L->hw, &L->links, &c, &memo->out); /* a forced algorithm that does not fit falls back to auto */
      memo->valid = TRUE;
    }
    const MmCommCost *cost = &memo->out;
    MmOpInfo info = {
      .what = MM_OP_COLLECTIVE, .phase = (uint8_t)phase, .coll = (uint8_t)kind, .reason = (uint8_t)reason,
      .unit = unit, .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = size,
      .time_s = cost->time_s, .fixed_s = cost->latency_s, .algorithm = (uint8_t)cost->algorithm,
    };
    MmStreamId st = cost->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
    op = emit(L, st, &cur, &info, cost, lv->degree, bs->stride[li]);
    cur = deps_one(op);
    if (kind == MM_COLL_REDUCE_SCATTER) size /= (double)lv->degree;
  }
  return op;
}

/* ---- per-unit lowering ------------------------------------------------- */

/* MoE under TP: experts are spread over the TP group (expert parallelism inside it, as
 * MAD-Max models it); tokens are dispatched to their experts before the first expert
 * layer and combined after the last, by All2All. A transformer MoE layer does this per
 * layer; an MLP MoE (DLRM) once around the whole expert stack. */
static gboolean moe_split(const Lower *L, const MmLayer *l)
{
  return l->expert && L->s->blocks[l->block].degree[MM_STRAT_TP] > 1;
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

/* Bytes of the MoE dispatch/combine one rank sends: its share of the routed tokens. */
static double moe_bytes(const Lower *L, const MmLayer *l)
{
  const MmBlock *b = &L->m->blocks[l->block];
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  double tokens = b->kind == MM_BLOCK_TRANSFORMER ? (double)b->seq_len : 1.0;
  double width = b->kind == MM_BLOCK_TRANSFORMER ? (double)b->hidden : (double)b->width;
  return bs->samples_per_micro * tokens * width * mm_dtype_bytes(b->dtype) * (double)b->top_k *
         b->capacity_factor / (double)bs->degree[MM_STRAT_TP];
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
  return emit_coll(L, un->block, MM_STRAT_MP, kind, MM_REASON_MP, bytes, d, u, micro, phase);
}

/* ---- unit templates ---------------------------------------------------- *
 * Identical units (80 transformer layers) lower to identical op sequences. Each
 * distinct unit is walked layer by layer once per variant, into a template of
 * compute segments and collectives; every unit then replays its template. */

typedef enum { T_SEG, T_COLL, T_WSEG } TKind;

typedef struct {
  uint8_t kind;   /* TKind */
  uint8_t coll;   /* MmCollKind */
  uint8_t reason; /* MmReason */
  uint8_t strat;  /* MmStrategy */
  double coll_bytes;
  Seg seg;        /* first / last: offsets from the unit's first layer */
} TItem;

typedef struct Template {
  TItem *items;
  uint32_t n, cap;
  gboolean built;
} Template;

enum { V_FWD, V_BWD_IN, V_BWD_NOIN, V_COUNT };

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

static void t_coll(Template *t, Seg *seg, uint32_t first_layer, MmCollKind kind, MmReason reason, double bytes)
{
  t_seg(t, seg, first_layer, T_SEG);
  TItem it = {.kind = T_COLL, .coll = (uint8_t)kind, .reason = (uint8_t)reason, .strat = MM_STRAT_TP,
              .coll_bytes = bytes};
  t_push(t, &it);
}

/* Forward (and recompute) of unit @u: segments split by TP all-reduces and MoE all-to-alls. */
static void record_fwd(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const gboolean tp = bs->degree[MM_STRAT_TP] > 1, moe = L->unit_moe[u];
  const double n = bs->samples_per_micro;
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f; li < f + un->n_layers; li++) {
    const MmLayer *l = &L->g->layers[li];
    if (moe && moe_dispatch_before(L, l)) t_coll(t, &seg, f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_bytes(L, l));
    seg_add(L, &seg, li, PART_FWD);
    if (tp && l->tp == MM_TP_ROW && !l->expert)
      t_coll(t, &seg, f, MM_COLL_ALL_REDUCE, MM_REASON_TP, n * l->cost.out_bytes);
    if (moe && moe_combine_after(L, li)) t_coll(t, &seg, f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_bytes(L, l));
  }
  t_seg(t, &seg, f, T_SEG);
}

/* Backward of unit @u: input gradients in reverse; after a column-parallel op its
 * input-gradient AllReduce, with its weight gradient beside it (a T_WSEG). */
static void record_bwd(Lower *L, uint32_t u, gboolean need_input_grad, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const gboolean tp = bs->degree[MM_STRAT_TP] > 1, moe = L->unit_moe[u], trained = !bs->frozen;
  const double n = bs->samples_per_micro;
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f + un->n_layers; li-- > f;) {
    const MmLayer *l = &L->g->layers[li];
    const gboolean input_grad = li != f || need_input_grad;
    if (moe && moe_combine_after(L, li)) t_coll(t, &seg, f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_bytes(L, l));
    if (input_grad) seg_add(L, &seg, li, PART_BWD_IN);
    if (tp && l->tp == MM_TP_COLUMN && !l->expert && input_grad) {
      t_coll(t, &seg, f, MM_COLL_ALL_REDUCE, MM_REASON_TP, n * l->cost.act_bytes);
      if (trained) {
        seg_add(L, &seg, li, PART_BWD_W);
        t_seg(t, &seg, f, T_WSEG);
      }
    } else if (trained) {
      seg_add(L, &seg, li, PART_BWD_W);
    }
    if (moe && moe_dispatch_before(L, l)) t_coll(t, &seg, f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, moe_bytes(L, l));
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
    else record_bwd(L, cu, variant == V_BWD_IN, t);
    t->built = TRUE;
  }
  return t;
}

/* Emits a template for unit @u. Returns the last op of the chain (the unit's output or
 * input gradient); *last_compute receives the last compute op emitted (or NONE). */
static uint32_t replay(Lower *L, const Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                       uint32_t *last_compute)
{
  const MmUnit *un = &L->g->units[u];
  Deps d = *in, coll_deps = *in;
  uint32_t last = NONE;
  *last_compute = NONE;
  for (uint32_t i = 0; i < t->n; i++) {
    const TItem *it = &t->items[i];
    if (it->kind == T_COLL) {
      uint32_t op = emit_coll(L, un->block, (MmStrategy)it->strat, (MmCollKind)it->coll, (MmReason)it->reason,
                              it->coll_bytes, &d, u, micro, phase);
      if (op != NONE) {
        coll_deps = d;
        last = op;
        d = deps_one(op);
      }
      continue;
    }
    const Seg *sg = &it->seg;
    MmOpInfo info = {
      .what = (uint8_t)sg->what, .phase = (uint8_t)phase, .unit = u, .micro = micro,
      .first_layer = un->first_layer + sg->first, .last_layer = un->first_layer + sg->last, .kernels = sg->kernels,
      .flops = sg->flops, .model_flops = sg->model_flops, .bytes = sg->bytes, .time_s = sg->time_s,
      .fixed_s = sg->time_s,
    };
    if (it->kind == T_WSEG) {
      /* the weight gradient waits for what the all-reduce waited for, not for the all-reduce */
      *last_compute = emit(L, MM_STREAM_COMPUTE, &coll_deps, &info, NULL, 0, 0);
      continue;
    }
    last = *last_compute = emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, 0, 0);
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
  if (L->s->cfg->recompute == MM_RECOMPUTE_FULL) {
    deps_add(&d, replay(L, template_for(L, u, V_FWD), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  }
  uint32_t lc;
  uint32_t out = replay(L, template_for(L, u, need_input_grad ? V_BWD_IN : V_BWD_NOIN), u, micro, MM_PHASE_BWD, &d, &lc);
  *weights_done = lc != NONE ? lc : rec_last;
  return out;
}

/* ---- FSDP gather sequence ---------------------------------------------- */

/* Parameters of a unit on one device after TP (or MP) sharding, before FSDP. */
static double unit_params_unsharded(const Lower *L, uint32_t u)
{
  return L->unit_params[u];
}

static void precompute_units(Lower *L)
{
  const MmGraph *g = L->g;
  L->unit_params = g_new0(double, g->n_units + 1);
  L->unit_moe = g_new0(gboolean, g->n_units + 1);
  for (uint32_t u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const MmBlockSetup *bs = &L->s->blocks[un->block];
    if (u > 0 && g->layers[un->first_layer].canon != un->first_layer) { /* identical to the previous unit */
      L->unit_params[u] = L->unit_params[u - 1];
      L->unit_moe[u] = L->unit_moe[u - 1];
      continue;
    }
    double p = 0;
    for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      p += (double)l->cost.params * mm_plan_param_fraction(L->s, un->block, l) * (double)bs->degree[MM_STRAT_FSDP];
      L->unit_moe[u] |= l->expert && bs->degree[MM_STRAT_TP] > 1;
    }
    L->unit_params[u] = p;
  }
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

/* The order in which FSDP units compute, forward then backward of each micro-step:
 * the order their AllGathers are issued, `fsdp_prefetch` ahead of the compute. */
static void build_gather_queue(Lower *L)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(GatherItem));
  const MmModel *m = L->m;
  for (uint32_t mi = 0; mi < (uint32_t)L->s->micro_steps; mi++) {
    for (uint32_t u = 0; u < L->g->n_units; u++)
      if (fsdp_unit(L, u)) gq_add(a, u, mi, FALSE);
    if (!L->training) continue;
    for (guint b = m->n_blocks; b-- > L->first_trained;)
      for (uint32_t u = L->g->block_first_unit[b] + L->g->block_units[b]; u-- > L->g->block_first_unit[b];)
        if (fsdp_unit(L, u)) gq_add(a, u, mi, TRUE);
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
  double bytes = unit_params_unsharded(L, it->unit) * mm_dtype_bytes(L->m->blocks[un->block].dtype);
  L->gq_op[i] = emit_coll(L, un->block, MM_STRAT_FSDP, MM_COLL_ALL_GATHER, MM_REASON_FSDP, bytes, d, it->unit,
                          it->micro, it->bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
}

/* The gather of the unit about to compute (issued earlier). */
static uint32_t gather_for(Lower *L, uint32_t u, uint32_t micro, gboolean bwd)
{
  g_assert(L->gq_pos < L->gq_emitted);
  const GatherItem *it = &L->gq[L->gq_pos];
  g_assert(it->unit == u && it->micro == micro && it->bwd == bwd);
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

/* ---- the iteration ----------------------------------------------------- */

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

typedef struct {
  uint32_t *fwd_out, *bwd_out, *mp_bwd;
  gboolean *bwd_done;
  double *bucket_bytes;
  uint32_t *bucket_dep;
} IterState;

/* Emits the backward exchange of MP tables once every trained consumer has its input gradient. */
static void hoist_mp_backward(Lower *L, IterState *st, uint32_t micro)
{
  const MmModel *m = L->m;
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
    if (!any) deps_add(&d, st->fwd_out[e]);
    st->mp_bwd[e] = emit_mp_exchange(L, block_last_unit(L, e), micro, MM_PHASE_BWD, &d);
  }
}

static void flush_bucket(Lower *L, IterState *st, guint b, uint32_t micro)
{
  if (st->bucket_bytes[b] <= 0) return;
  Deps d = deps_one(st->bucket_dep[b]);
  emit_coll(L, b, MM_STRAT_DDP, MM_COLL_ALL_REDUCE, MM_REASON_DDP, st->bucket_bytes[b], &d, NONE, micro,
            MM_PHASE_BWD);
  st->bucket_bytes[b] = 0;
}

/* Gradient synchronization of one unit after its backward. */
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

/* The embedding gradient of block @b under uniform random access: rows one rank touches
 * in an iteration, and their union over the ranks (distinct of n draws from R rows:
 * R (1 - e^{-n/R})). */
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
  if (want == MM_GRAD_SYNC_AUTO) mm_comm_sparse_best(L->hw, &L->links, &g, &sc);
  else mm_comm_sparse_cost(L->hw, &L->links, &g, want == MM_GRAD_SYNC_HOST ? MM_SYNC_HOST : MM_SYNC_SPARSE, &sc);
  Deps d = deps_one(weights_done);
  if (sc.method == MM_SYNC_DENSE) {
    emit_coll(L, b, MM_STRAT_DDP, MM_COLL_ALL_REDUCE, MM_REASON_DDP, sc.value_bytes, &d, u, micro, MM_PHASE_BWD);
    return;
  }
  MmAlgorithm algo = sc.method == MM_SYNC_HOST ? MM_ALGO_HOST : MM_ALGO_AUTO;
  MmCollective ag = {MM_COLL_ALL_GATHER, sc.index_bytes, g.degree, g.stride, algo, 1.0};
  MmCollective ar = {MM_COLL_ALL_REDUCE, sc.value_bytes, g.degree, g.stride, algo, 1.0};
  MmCommCost cag, car;
  mm_comm_cost(L->hw, &L->links, &ag, &cag);
  mm_comm_cost(L->hw, &L->links, &ar, &car);
  double dedup = sc.time_s - cag.time_s - car.time_s; /* what the sparse path adds besides its two collectives */
  MmStreamId st = cag.shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  MmOpInfo info = {.what = MM_OP_COLLECTIVE, .phase = MM_PHASE_BWD, .coll = MM_COLL_ALL_GATHER, .reason = MM_REASON_DDP,
                   .unit = u, .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = ag.bytes,
                   .time_s = cag.time_s, .fixed_s = cag.latency_s, .algorithm = (uint8_t)cag.algorithm};
  uint32_t op = emit(L, st, &d, &info, &cag, g.degree, g.stride);
  d = deps_one(op);
  if (sc.method == MM_SYNC_SPARSE && dedup > 0) {
    MmOpInfo di = {.what = MM_OP_COMPUTE, .phase = MM_PHASE_BWD, .unit = u, .micro = micro,
                   .first_layer = L->g->units[u].first_layer, .last_layer = L->g->units[u].first_layer, .kernels = 2,
                   .bytes = dedup * L->hw->device.hbm_bw_Bps * L->hw->device.util_hbm.value, .time_s = dedup, .fixed_s = dedup};
    op = emit(L, MM_STREAM_COMPUTE, &d, &di, NULL, 0, 0);
    d = deps_one(op);
  }
  info.coll = MM_COLL_ALL_REDUCE;
  info.bytes = ar.bytes;
  info.time_s = car.time_s + (sc.method == MM_SYNC_HOST ? dedup : 0);
  info.fixed_s = car.latency_s + (sc.method == MM_SYNC_HOST ? dedup : 0); /* CPU de-duplication, on the host path */
  info.algorithm = (uint8_t)car.algorithm;
  emit(L, st, &d, &info, &car, g.degree, g.stride);
}

static void sync_grads(Lower *L, IterState *st, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmUnit *un = &L->g->units[u];
  const guint b = un->block;
  const MmBlockSetup *bs = &L->s->blocks[b];
  if (bs->frozen || weights_done == NONE || un->cost.params == 0) return;
  const gboolean last_micro = micro + 1 == (uint32_t)L->s->micro_steps;
  double grads = unit_params_unsharded(L, u) * mm_dtype_bytes(bs->grad_dtype);
  if (L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && bs->degree[MM_STRAT_FSDP] <= 1 && bs->degree[MM_STRAT_DDP] <= 1)
    return; /* sharded tables update in place */
  Deps d = deps_one(weights_done);
  if (bs->degree[MM_STRAT_FSDP] > 1) {
    /* FSDP reduce-scatters every micro-step; HSDP then all-reduces the shard across replicas */
    uint32_t rs = emit_coll(L, b, MM_STRAT_FSDP, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, grads, &d, u, micro,
                            MM_PHASE_BWD);
    if (last_micro && bs->degree[MM_STRAT_DDP] > 1) {
      Deps r = deps_one(rs);
      emit_coll(L, b, MM_STRAT_DDP, MM_COLL_ALL_REDUCE, MM_REASON_DDP, grads / (double)bs->degree[MM_STRAT_FSDP], &r,
                u, micro, MM_PHASE_BWD);
    }
  } else if (last_micro && bs->degree[MM_STRAT_DDP] > 1 && sparse_level(L, b) >= 0) {
    emit_sparse_sync(L, b, sparse_level(L, b), u, micro, weights_done);
  } else if (last_micro && bs->degree[MM_STRAT_DDP] > 1) {
    /* DDP accumulates locally (no_sync) and all-reduces buckets during the last backward */
    st->bucket_bytes[b] += grads;
    st->bucket_dep[b] = weights_done;
    if (L->s->cfg->ddp_overlap && st->bucket_bytes[b] >= L->s->cfg->ddp_bucket_bytes) flush_bucket(L, st, b, micro);
  }
}

static void lower_iteration(Lower *L)
{
  const MmModel *m = L->m;
  const guint nb = m->n_blocks;
  IterState st;
  st.fwd_out = g_new(uint32_t, nb);
  st.bwd_out = g_new(uint32_t, nb);
  st.mp_bwd = g_new(uint32_t, nb);
  st.bwd_done = g_new0(gboolean, nb);
  st.bucket_bytes = g_new0(double, nb);
  st.bucket_dep = g_new(uint32_t, nb);

  for (uint32_t i = 0; i < MIN((uint32_t)L->s->cfg->fsdp_prefetch + 1, L->n_gq); i++) emit_gather(L, NULL);

  for (uint32_t mi = 0; mi < (uint32_t)L->s->micro_steps; mi++) {
    /* forward, blocks in order */
    for (guint b = 0; b < nb; b++) {
      const MmBlock *bk = &m->blocks[b];
      Deps in = {.n = 0};
      for (guint i = 0; i < bk->n_inputs; i++) deps_add(&in, st.fwd_out[bk->inputs[i]]);
      uint32_t out = NONE;
      const uint32_t u0 = L->g->block_first_unit[b], u1 = u0 + L->g->block_units[b];
      for (uint32_t u = u0; u < u1; u++) {
        Deps d = out == NONE ? in : deps_one(out);
        if (fsdp_unit(L, u)) deps_add(&d, gather_for(L, u, mi, FALSE));
        out = lower_fwd(L, u, mi, MM_PHASE_FWD, &d);
        if (fsdp_unit(L, u)) gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
      }
      if (mp_block(L, b)) {
        Deps d = deps_one(out);
        out = emit_mp_exchange(L, block_last_unit(L, b), mi, MM_PHASE_FWD, &d);
      }
      st.fwd_out[b] = out;
    }
    if (!L->training) continue;

    /* backward, blocks in reverse */
    for (guint b = 0; b < nb; b++) {
      st.bwd_done[b] = FALSE;
      st.mp_bwd[b] = NONE;
      st.bwd_out[b] = NONE;
    }
    const gboolean last_micro = mi + 1 == (uint32_t)L->s->micro_steps;
    for (guint b = nb; b-- > L->first_trained;) {
      const MmBlock *bk = &m->blocks[b];
      Deps grad = {.n = 0};
      gboolean consumed = FALSE;
      for (guint c = b + 1; c < nb; c++) {
        if (!block_reads(&m->blocks[c], b)) continue;
        consumed = TRUE;
        deps_add(&grad, st.bwd_out[c]);
      }
      if (!consumed) deps_add(&grad, st.fwd_out[b]); /* the loss */
      if (mp_block(L, b)) {
        hoist_mp_backward(L, &st, mi);
        grad = deps_one(st.mp_bwd[b]);
      }
      gboolean need_in = FALSE;
      for (guint i = 0; i < bk->n_inputs; i++) need_in |= bk->inputs[i] >= L->first_trained;
      const uint32_t first_unit = L->g->block_first_unit[b];
      uint32_t out = NONE;
      for (uint32_t u = first_unit + L->g->block_units[b]; u-- > first_unit;) {
        Deps d = out == NONE ? grad : deps_one(out);
        if (fsdp_unit(L, u)) deps_add(&d, gather_for(L, u, mi, TRUE));
        uint32_t wd = NONE;
        out = lower_bwd(L, u, mi, &d, u == first_unit ? need_in : TRUE, &wd);
        if (fsdp_unit(L, u)) gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
        sync_grads(L, &st, u, mi, wd);
      }
      if (last_micro && L->s->cfg->ddp_overlap) flush_bucket(L, &st, b, mi);
      st.bwd_out[b] = out;
      st.bwd_done[b] = TRUE;
      hoist_mp_backward(L, &st, mi);
    }
    if (!L->s->cfg->ddp_overlap && mi + 1 == (uint32_t)L->s->micro_steps) {
      /* gradients all-reduced after the whole backward, in bucket-sized pieces */
      for (guint b = nb; b-- > 0;) {
        double left = st.bucket_bytes[b], size = L->s->cfg->ddp_bucket_bytes;
        st.bucket_dep[b] = L->last_on[MM_STREAM_COMPUTE];
        while (left > 0) {
          st.bucket_bytes[b] = MIN(left, size);
          left -= st.bucket_bytes[b];
          flush_bucket(L, &st, b, mi);
        }
      }
    }
  }
  g_assert(L->gq_pos == L->n_gq);

  if (L->training) {
    /* one optimizer step after every gradient has arrived */
    double bytes = 0;
    MmDtype dtype = MM_DTYPE_FP32;
    uint32_t kernels = 0;
    for (guint b = 0; b < nb; b++) {
      const MmBlock *bk = &m->blocks[b];
      const MmBlockSetup *bs = &L->s->blocks[b];
      if (bs->frozen || bk->kind == MM_BLOCK_EMBEDDING_BAG) continue; /* tables update inside their backward */
      double params = 0;
      for (uint32_t u = L->g->block_first_unit[b]; u < L->g->block_first_unit[b] + L->g->block_units[b]; u++)
        params += L->unit_params[u] / (double)bs->degree[MM_STRAT_FSDP];
      double e = mm_dtype_bytes(bk->dtype), ge = mm_dtype_bytes(bs->grad_dtype);
      bytes += params * (2.0 * e + ge + 2.0 * mm_plan_optimizer_bytes(bs->optimizer, bk));
      kernels++;
    }
    if (kernels > 0) {
      Deps d = {.n = 0};
      for (int st_i = 0; st_i < MM_STREAM_COUNT; st_i++) deps_add(&d, L->last_on[st_i]);
      MmOpInfo info = {
        .what = MM_OP_OPTIMIZER, .phase = MM_PHASE_OPTIMIZER, .unit = MM_NO_UNIT, .micro = 0, .first_layer = NONE,
        .last_layer = NONE, .kernels = kernels, .bytes = bytes,
        .time_s = mm_plan_compute_time(L->hw, dtype, 0, bytes) + kernels * L->hw->device.launch_overhead_s,
      };
      info.fixed_s = info.time_s;
      emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, 0, 0);
    }
  }
  g_free(st.fwd_out);
  g_free(st.bwd_out);
  g_free(st.mp_bwd);
  g_free(st.bwd_done);
  g_free(st.bucket_bytes);
  g_free(st.bucket_dep);
}

void mm_plan_free(MmPlan *p)
{
  if (!p) return;
  g_free(p->ops);
  g_free(p->info);
  g_free(p->deps);
  g_free(p->dur);
  g_free(p->xfer_link);
  g_free(p->xfer_bytes);
  g_free(p->link_bw);
  g_free(p->classes);
  g_free(p->class_count);
  g_free(p);
}

MmPlan *mm_plan_new(const MmScenario *s, const MmGraph *g, const MmPlanOptions *opt, GError **error)
{
  g_return_val_if_fail(s && g && g->model == s->model, NULL);
  (void)error;
  /* a generous size estimate: the arrays rarely grow */
  uint32_t guess = (uint32_t)MIN((gint64)(g->n_layers + 6 * g->n_units + 16) * 3 * s->micro_steps, G_MAXINT / 4);
  Lower L = {
    .s = s, .g = g, .m = s->model, .hw = s->hw,
    .ops = g_new(MmEngineOp, guess), .info = g_new(MmOpInfo, guess), .cap_ops = guess,
    .deps = g_new(uint32_t, 2 * guess), .cap_deps = 2 * guess,
    .training = s->cfg->task != MM_TASK_INFERENCE,
  };
  mm_comm_links(s->hw, &L.links);
  L.parts = g_new(PartCost, 3 * (gsize)g->n_layers + 1);
  for (uint32_t li = 0; li < g->n_layers; li++)
    if (g->layers[li].canon == li)
      for (int part = PART_FWD; part <= PART_BWD_W; part++) part_cost(&L, li, (Part)part, &L.parts[3 * li + part]);
  for (int i = 0; i < MM_STREAM_COUNT; i++) L.last_on[i] = NONE;
  L.first_trained = s->model->n_blocks;
  for (guint b = 0; b < s->model->n_blocks; b++)
    if (!s->blocks[b].frozen) {
      L.first_trained = b;
      break;
    }
  precompute_units(&L);
  L.templates = g_new0(Template, V_COUNT * (gsize)g->n_units + 1);
  build_gather_queue(&L);
  lower_iteration(&L);
  g_free(L.gq);
  g_free(L.gq_op);
  g_free(L.parts);
  for (uint32_t i = 0; i < V_COUNT * g->n_units; i++) g_free(L.templates[i].items);
  g_free(L.templates);
  g_free(L.unit_params);
  g_free(L.unit_moe);

  MmPlan *p = g_new0(MmPlan, 1);
  p->scenario = s;
  p->graph = g;
  p->n_ops = L.n_ops;
  p->ops = L.ops;
  p->info = L.info;
  p->deps = L.deps;
  p->xfer_link = L.xfer_link;
  p->xfer_bytes = L.xfer_bytes;
  p->links = L.links;
  p->link_bw = g_new(double, L.links.n + 1);
  for (uint32_t i = 0; i < L.links.n; i++) p->link_bw[i] = L.links.bw_Bps[i] / MM_PS_PER_S;
  p->dur = g_new(MmTime, p->n_ops + 1);
  for (uint32_t i = 0; i < p->n_ops; i++) p->dur[i] = mm_time_from_s(p->info[i].fixed_s);
  p->program = (MmEngineProgram){p->ops, p->n_ops, p->deps, MM_STREAM_COUNT, p->xfer_link, p->xfer_bytes, L.links.n};

  gboolean per_device = opt && opt->per_device;
  p->n_classes = per_device ? (uint32_t)s->devices : 1;
  p->classes = g_new(MmEngineClass, p->n_classes);
  p->class_count = g_new(int64_t, p->n_classes);
  for (uint32_t c = 0; c < p->n_classes; c++) {
    p->classes[c] = (MmEngineClass){0, p->dur, c, p->link_bw};
    p->class_count[c] = per_device ? 1 : s->devices;
  }

  /* MFU numerator: model FLOPs of the global batch (frozen blocks drop weight gradients;
   * blocks before the first trained one run no backward). */
  double per_sample = 0;
  for (guint b = 0; b < s->model->n_blocks; b++) {
    const MmCost *c = &g->block_cost[b];
    per_sample += c->fwd_flops;
    if (L.training && b >= L.first_trained) per_sample += c->bwd_input_flops;
    if (L.training && !s->blocks[b].frozen) per_sample += c->bwd_weight_flops;
  }
  p->model_flops_per_iteration = per_sample * (double)s->global_batch;
  p->mfu_dtype = s->blocks[s->ref_block].compute_dtype;
  p->peak_flops_per_device = s->hw->device.peak_flops[p->mfu_dtype];
  return p;
}

char *mm_plan_op_name(const MmPlan *p, uint32_t op)
{
  g_return_val_if_fail(op < p->n_ops, NULL);
  const MmOpInfo *in = &p->info[op];
  g_autofree char *unit = in->unit == MM_NO_UNIT ? NULL : mm_graph_unit_name(p->graph, in->unit);
  g_autofree char *micro = p->scenario->micro_steps > 1 ? g_strdup_printf(" mb%u", in->micro) : g_strdup("");
  if (in->what == MM_OP_OPTIMIZER) return g_strdup("optimizer step");
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
