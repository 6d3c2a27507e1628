/* template: identical units lower to one recorded sequence of compute segments and collectives, replayed per unit. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Whether layer @l takes the TP collectives of a dense layer: non-expert layers, and expert
 * layers whose experts are sharded over the TP ranks (expert-TP without ep). */
static gboolean tp_collectives(const Lower *L, const MmLayer *l)
{
  const MmBlockSetup *bs = &L->s->blocks[l->block];
  return !l->expert || (bs->experts_sharded && bs->degree[MM_STRAT_EP] <= 1);
}

static gboolean moe_dispatch_before(const Lower *L, const MmLayer *l)
{
  if (!mm__moe_split(L, l)) return FALSE;
  if (l->role == MM_ROLE_FFN_UP) return TRUE;
  return l->role == MM_ROLE_MLP_FC && L->g->units[l->unit].index == 0;
}

static gboolean moe_combine_after(const Lower *L, uint32_t li)
{
  const MmLayer *l = &L->g->layers[li];
  if (!mm__moe_split(L, l)) return FALSE;
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
uint32_t mm__emit_mp_exchange(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *d)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const MmLayer *l = &L->g->layers[un->first_layer];
  MmShardKind sk = MM_SHARD_TABLE;
  for (guint i = 0; i < bs->n_levels; i++)
    if (bs->levels[i].strategy == MM_STRAT_MP) sk = bs->levels[i].sharding;
  double wf, pf;
  mm__work_fractions(L, l, &wf, &pf);
  double full = bs->samples_per_micro * l->cost.out_bytes;
  MmCollKind kind = MM_COLL_ALL_TO_ALL;
  double bytes = full * wf;
  if (sk == MM_SHARD_ROW) {
    kind = phase == MM_PHASE_FWD ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_GATHER;
    bytes = full;
  }
  return mm__emit_coll(L, un->block, MASK(MM_STRAT_MP), kind, MM_REASON_MP, bytes, d, u, micro, phase);
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
    mm__seg_add(L, seg, li, part);
    if (bwd) t_coll(t, seg, f, T_COLL, MM_COLL_REDUCE_SCATTER, MM_REASON_CP, MASK(MM_STRAT_CP), kv * cp);
    return;
  }
  t_seg(t, seg, f, T_SEG);
  mm__seg_add(L, seg, li, part);
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
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, mm__moe_mask(L, l->block), moe_bytes(L, l));
    if (sp && l->tp == MM_TP_COLUMN && tp_collectives(L, l))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.act_bytes);
    if (cp_attention(L, l)) t_attention_cp(L, t, &seg, f, li, PART_FWD);
    else mm__seg_add(L, &seg, li, PART_FWD);
    if (tp && l->tp == MM_TP_ROW && tp_collectives(L, l))
      t_coll(t, &seg, f, T_COLL, sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE, MM_REASON_TP, TPM,
             n * l->cost.out_bytes);
    if (moe && moe_combine_after(L, li))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, mm__moe_mask(L, l->block), moe_bytes(L, l));
  }
  t_seg(t, &seg, f, T_SEG);
}

/* Selective recompute: the attention cores of unit @u again, before its backward. */
static void record_selective(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++)
    if (L->g->layers[li].role == MM_ROLE_ATTN_CORE) mm__seg_add(L, &seg, li, PART_FWD);
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
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, mm__moe_mask(L, l->block), moe_bytes(L, l));
    if (sp && l->tp == MM_TP_ROW && tp_collectives(L, l)) /* the gradient of the reduce-scatter */
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.out_bytes);
    const gboolean column = tp && l->tp == MM_TP_COLUMN && tp_collectives(L, l) && input_grad;
    if (column && sp && trained)
      t_coll(t, &seg, f, T_SIDE, MM_COLL_ALL_GATHER, MM_REASON_TP, TPM, n * l->cost.act_bytes);
    if (input_grad) {
      if (cp_attention(L, l)) t_attention_cp(L, t, &seg, f, li, PART_BWD_IN);
      else mm__seg_add(L, &seg, li, PART_BWD_IN);
    }
    if (column) {
      t_coll(t, &seg, f, T_COLL, sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE, MM_REASON_TP, TPM,
             n * l->cost.act_bytes);
      if (trained) {
        mm__seg_add(L, &seg, li, PART_BWD_W);
        t_seg(t, &seg, f, T_WSEG);
      }
    } else if (trained) {
      mm__seg_add(L, &seg, li, PART_BWD_W);
    }
    if (moe && moe_dispatch_before(L, l))
      t_coll(t, &seg, f, T_COLL, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, mm__moe_mask(L, l->block), moe_bytes(L, l));
  }
  t_seg(t, &seg, f, T_SEG);
}

static const Template *template_for(Lower *L, uint32_t u, int variant)
{
  const MmGraph *g = L->g;
  uint32_t cu = g->layers[g->layers[g->units[u].first_layer].canon].unit;
  if (!L->templates) L->templates = g_new0(Template, MM__V_COUNT * (gsize)g->n_units + 1);
  Template *t = &L->templates[MM__V_COUNT * cu + variant];
  if (!t->built) {
    if (variant == MM__V_FWD) record_fwd(L, cu, t);
    else if (variant == MM__V_SELECTIVE) record_selective(L, cu, t);
    else record_bwd(L, cu, variant == MM__V_BWD_IN, t);
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
      Deps pd = perm == NONE ? *d : mm__deps_one(perm);
      next = mm__emit_coll(L, un->block, it->mask, MM_COLL_PERMUTE, MM_REASON_CP, it->coll_bytes, &pd, u, micro, phase);
    }
    Deps cd = comp == NONE ? *d : mm__deps_one(comp);
    mm__deps_add(L, &cd, perm);
    comp = mm__emit(L, MM_STREAM_COMPUTE, &cd, &info, NULL, MM_NO_COLL, 0, 0, 0);
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
      uint32_t op = mm__emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d,
                              u, micro, phase);
      if (op != NONE) {
        coll_deps = d;
        last = op;
        d = mm__deps_one(op);
      }
      continue;
    }
    if (it->kind == T_SIDE) {
      side = mm__emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d, u,
                       micro, phase);
      continue;
    }
    if (it->kind == T_RING) {
      last = *last_compute = replay_ring(L, it, un, u, micro, phase, &d);
      d = mm__deps_one(last);
      continue;
    }
    MmOpInfo info = seg_info(&it->seg, un, u, micro, phase, 1.0);
    if (it->kind == T_WSEG) {
      /* the weight gradient waits for what the all-reduce waited for, not for the all-reduce */
      Deps wd = coll_deps;
      mm__deps_add(L, &wd, side);
      side = NONE;
      *last_compute = mm__emit(L, MM_STREAM_COMPUTE, &wd, &info, NULL, MM_NO_COLL, 0, 0, 0);
      continue;
    }
    last = *last_compute = mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
    d = mm__deps_one(last);
  }
  return last;
}

/* Forward (or recompute) of one unit. Returns the op that produces its output. */
uint32_t mm__lower_fwd(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in)
{
  uint32_t lc;
  return replay(L, template_for(L, u, MM__V_FWD), u, micro, phase, in, &lc);
}

/* Backward of one unit (after its recompute). Returns the op producing its input
 * gradient; *weights_done receives its last compute op (all its weight gradients
 * exist once it ends: the compute stream is FIFO). */
uint32_t mm__lower_bwd(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                          uint32_t *weights_done)
{
  Deps d = *in;
  uint32_t rec_last = NONE;
  if (L->s->cfg->recompute == MM_RECOMPUTE_FULL)
    mm__deps_add(L, &d, replay(L, template_for(L, u, MM__V_FWD), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  else if (L->s->cfg->recompute == MM_RECOMPUTE_SELECTIVE)
    mm__deps_add(L, &d, replay(L, template_for(L, u, MM__V_SELECTIVE), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  uint32_t lc;
  uint32_t out = replay(L, template_for(L, u, need_input_grad ? MM__V_BWD_IN : MM__V_BWD_NOIN), u, micro, MM_PHASE_BWD, &d, &lc);
  *weights_done = lc != NONE ? lc : rec_last;
  return out;
}


void mm__templates_free(Lower *L)
{
  for (uint32_t i = 0; L->templates && i < MM__V_COUNT * L->g->n_units; i++) g_free(L->templates[i].items);
  g_clear_pointer(&L->templates, g_free);
}
