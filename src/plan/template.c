/* template: identical units lower to one recorded sequence of compute segments and collectives, replayed per unit. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Sharded embedding tables exchange pooled outputs: All2All (table-, column-wise) or
 * ReduceScatter of partial sums (row-wise); backward the reverse. */
uint32_t mm__emit_mp_exchange(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *d)
{
  const guint b = L->g->units[u].block;
  MmCollKind kind;
  const double bytes = mm_plan_mp_exchange(L->s, L->g, b, phase, &kind);
  return mm__emit_coll(L, b, MM_STRAT_MASK(MM_STRAT_MP), kind, MM_REASON_MP, bytes, d, u, micro, phase);
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
  T_FUSED, /* a TP AllGather + GEMM or GEMM + ReduceScatter decomposed per the block's overlap (overlap.c) */
  T_EPPIPE, /* ep pipelined: dispatch All2All, the expert layers, combine All2All in chunks (seg: the experts) */
  T_JOIN, /* compute on the chain that also waits for the last T_SIDE (a weight gradient with no collective of
           * its own whose input was re-gathered: a parallel block's ffn_up under SP) */
} TKind;

typedef struct {
  uint8_t kind;   /* TKind */
  uint8_t coll;   /* MmCollKind */
  uint8_t reason; /* MmReason */
  uint32_t mask;  /* strategies whose levels form the group */
  double coll_bytes;
  Seg seg;        /* first / last: offsets from the unit's first layer */
  /* T_FUSED: the collective first (AllGather + GEMM) or last; the GEMM's pieces, one piece's
   * time (launch included), the time of a closing reduction (async TP's ReduceScatter) */
  uint8_t comm_first;
  uint32_t pieces;
  double piece_s, extra_s;
  double coll2_bytes; /* T_EPPIPE: the second exchange (combine forward, dispatch's gradient backward) */
} TItem;

#define REC_IN 0x80000000u /* a recorded dependency on in->v[j]: REC_IN | j; else the k-th op of the replay */
#define REC_MAX_IN 8       /* inputs a recorded replay takes (no dependency set of it fills up, see mm__deps_add) */

/* The ops one replay of a template emitted, for the later replays with as many input dependencies:
 * the same ops but for their unit, micro-batch, phase, chunk, layers and the indices they depend on
 * (the template's collectives and compute, and how they chain, are the unit's canonical ones).
 * Arrays of the ops' fields, each copied whole by a replay: ops (dep_first / xfer_first into the
 * record's deps and transfers), info (first_layer / last_layer: offsets from the unit's first
 * layer, NONE kept), dur, self (a collective with its own id: op.coll its index). */
struct Rec {
  MmEngineOp *ops;
  MmOpInfo *info;
  MmTime *dur;
  uint8_t *self;
  uint32_t n_ops, cap_ops;
  uint32_t *deps;
  uint32_t n_deps, cap_deps;
  uint32_t *xlink;
  double *xbytes;
  uint32_t n_x, cap_x;
  uint32_t in_n;                          /* the in->n it was recorded with */
  uint32_t last, last_compute, last_side; /* replay results: op offsets, or NONE */
  gboolean valid;
  uint32_t id;    /* Lower.n_recs when it was made: its replays' MmPlanReplay.rec */
  gboolean whole; /* no piece of a fused group among its ops: its replays are logged (MmPlanReplay) */
};

struct Template {
  TItem *items;
  uint32_t n, cap;
  gboolean built;
  gboolean simple; /* replayed from a record: collectives, and only kinds a record replays (no ring,
                    * fused or pipelined expert pieces) */
  Rec rec;
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

/* Ring attention: the layer part's compute in pieces while K/V chunks pass around the
 * placement's ring group (a T_RING item). */
static void t_ring(Lower *L, Template *t, Seg *seg, uint32_t f, uint32_t li, Part part, const MmPlacement *p)
{
  t_seg(t, seg, f, T_SEG);
  mm__seg_add(L, seg, li, part);
  if (seg->kernels == 0) return;
  TItem it = {.kind = T_RING, .coll = MM_COLL_PERMUTE, .reason = MM_REASON_CP, .mask = p->ring_mask,
              .coll_bytes = part == PART_FWD ? p->ring_fwd_bytes : p->ring_bwd_bytes, .seg = *seg};
  it.seg.first -= f;
  it.seg.last -= f;
  t_push(t, &it);
  *seg = (Seg){.what = MM_OP_COMPUTE};
}

/* The compute of one layer part: whole, or in ring pieces. */
static void t_compute(Lower *L, Template *t, Seg *seg, uint32_t f, uint32_t li, Part part, const MmPlacement *p)
{
  if (p->ring_mask) t_ring(L, t, seg, f, li, part, p);
  else mm__seg_add(L, seg, li, part);
}

/* Whether the block's TP overlap decomposes placement collective @c (moving @kind of @bytes,
 * in the backward when @bwd) together with part @part of layer @li: a TP AllGather or
 * ReduceScatter at or above the size threshold, next to a GEMM that costs time. Userbuffers
 * leaves the backward ReduceScatter of the input gradient bulk: Transformer Engine overlaps it
 * with the weight-gradient GEMM instead ("bulk" method), as the plan already does. */
static gboolean tp_fusable(const Lower *L, uint32_t li, Part part, const MmPlaceColl *c, uint8_t kind, double bytes,
                           gboolean bwd)
{
  const MmBlockSetup *bs = &L->s->blocks[L->g->layers[li].block];
  if (bs->tp_overlap == MM_OVERLAP_BULK || c->reason != MM_REASON_TP || c->mask != MASK(MM_STRAT_TP)) return FALSE;
  if (kind != MM_COLL_ALL_GATHER && kind != MM_COLL_REDUCE_SCATTER) return FALSE;
  if (bytes <= 0 || bytes < bs->tp_overlap_min_bytes || mm_plan_mask_degree(bs, c->mask) <= 1) return FALSE;
  if (bs->tp_overlap == MM_OVERLAP_USERBUFFERS && bwd && kind == MM_COLL_REDUCE_SCATTER) return FALSE;
  const PartCost *pc = mm__pc(L, li, part);
  return pc->time_s > 0 && !pc->lookup;
}

/* The TP collective @c of layer @li fused with the layer's part @part (a T_FUSED item). */
static void t_fused(Lower *L, Template *t, Seg *seg, uint32_t f, uint32_t li, Part part, const MmPlaceColl *c,
                    uint8_t kind, double bytes, gboolean comm_first)
{
  t_seg(t, seg, f, T_SEG);
  const MmBlockSetup *bs = &L->s->blocks[L->g->layers[li].block];
  const int64_t p = mm_plan_mask_degree(bs, c->mask);
  TItem it = {.kind = T_FUSED, .coll = kind, .reason = MM_REASON_TP, .mask = c->mask, .coll_bytes = bytes,
              .seg = {.what = MM_OP_COMPUTE}, .comm_first = (uint8_t)comm_first};
  mm__seg_add(L, &it.seg, li, part);
  it.seg.first -= f;
  it.seg.last -= f;
  it.pieces = mm__overlap_pieces(bs->tp_overlap, comm_first, p);
  it.piece_s = mm__piece_s(L, li, part, it.pieces);
  if (bs->tp_overlap == MM_OVERLAP_ASYNC_TP && !comm_first) it.extra_s = mm__reduce_s(L, L->g->layers[li].block, bytes / (double)p, p);
  t_push(t, &it);
}

/* ---- ep pipelined: dispatch, experts and combine in chunks ------------- *
 * Tutel (Hwang et al., MLSys 2023) and Megatron-Core's MoE overlap split a MoE layer's tokens
 * into chunks so that one chunk's All2All overlaps another's expert GEMMs. The region is the
 * layers from the one whose placement dispatches (an ep All2All before it) to the one that
 * combines (after it), with no other collective in between. */

/* The dispatch collective of layer @li when the block pipelines its ep exchange (else NULL). */
static const MmPlaceColl *ep_dispatch(const Lower *L, uint32_t li)
{
  const MmBlockSetup *bs = &L->s->blocks[L->g->layers[li].block];
  if (bs->ep_overlap != MM_OVERLAP_PIPELINED) return NULL;
  const MmPlacement *p = mm__place(L, li);
  for (uint32_t i = 0; i < p->n_colls; i++) {
    const MmPlaceColl *c = &p->colls[i];
    if (!c->after && c->reason == MM_REASON_MOE && c->mask == MASK(MM_STRAT_EP) && c->fwd == MM_COLL_ALL_TO_ALL)
      return c;
  }
  return NULL;
}

/* The layer ending the pipelined region that starts at @first (inside unit [.., @end)), *@combine
 * its combine collective; NONE when the region holds other collectives or does not close. */
static uint32_t ep_region_end(const Lower *L, uint32_t first, uint32_t end, const MmPlaceColl **combine)
{
  for (uint32_t li = first; li < end; li++) {
    const MmPlacement *p = mm__place(L, li);
    const MmPlaceColl *comb = NULL;
    uint32_t others = 0;
    if (p->ring_mask) return NONE;
    for (uint32_t i = 0; i < p->n_colls; i++) {
      const MmPlaceColl *c = &p->colls[i];
      if (c->reason == MM_REASON_MOE && c->mask == MASK(MM_STRAT_EP) && c->fwd == MM_COLL_ALL_TO_ALL &&
          (c->after ? TRUE : li == first)) {
        if (c->after) comb = c;
      } else {
        others++;
      }
    }
    if (others) return NONE;
    if (comb) {
      *combine = comb;
      return li;
    }
  }
  return NONE;
}

/* A T_EPPIPE item over layers [@a, @b] of the parts in @parts (bit per Part). */
static void t_eppipe(Lower *L, Template *t, Seg *seg, uint32_t f, uint32_t a, uint32_t b, uint32_t parts,
                     double first_bytes, double second_bytes)
{
  t_seg(t, seg, f, T_SEG);
  const int64_t C = L->s->blocks[L->g->layers[a].block].overlap_chunks;
  TItem it = {.kind = T_EPPIPE, .coll = MM_COLL_ALL_TO_ALL, .reason = MM_REASON_MOE, .mask = MASK(MM_STRAT_EP),
              .coll_bytes = first_bytes, .coll2_bytes = second_bytes, .seg = {.what = MM_OP_COMPUTE},
              .pieces = (uint32_t)C};
  for (uint32_t li = a; li <= b; li++)
    for (int part = PART_FWD; part <= PART_BWD_W; part++)
      if (parts & (1u << part)) {
        const double before = it.seg.time_s;
        mm__seg_add(L, &it.seg, li, (Part)part);
        if (it.seg.time_s > before) it.piece_s += mm__piece_s(L, li, (Part)part, (uint32_t)C);
      }
  it.seg.first -= f;
  it.seg.last -= f;
  if (it.seg.kernels > 0) t_push(t, &it);
}

/* The forward collectives of @p on one side of the compute: before it outermost first,
 * after it innermost first; @skip (may be NULL) is fused with the compute instead. */
static void t_fwd_colls(Template *t, Seg *seg, uint32_t f, const MmPlacement *p, gboolean after,
                        const MmPlaceColl *skip)
{
  for (int pass = 0; pass < 2; pass++) {
    const uint8_t outer = (uint8_t)(after ? pass : 1 - pass);
    for (uint32_t i = 0; i < p->n_colls; i++) {
      const MmPlaceColl *c = &p->colls[i];
      if (c != skip && c->after == after && c->outer == outer && c->fwd != MM_COLL_NONE)
        t_coll(t, seg, f, T_COLL, (MmCollKind)c->fwd, (MmReason)c->reason, c->mask, c->fwd_bytes);
    }
  }
}

/* Forward (and recompute) of unit @u: each layer's placement collectives around its
 * compute (TP all-reduces or SP gathers and reduce-scatters, MoE all-to-alls, CP and
 * Ulysses exchanges). */
static void record_fwd(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f; li < f + un->n_layers; li++) {
    const MmPlacement *p = mm__place(L, li);
    const MmPlaceColl *disp = ep_dispatch(L, li), *comb = NULL;
    const uint32_t last = disp ? ep_region_end(L, li, f + un->n_layers, &comb) : NONE;
    if (last != NONE) {
      t_fwd_colls(t, &seg, f, p, FALSE, disp);
      t_eppipe(L, t, &seg, f, li, last, 1u << PART_FWD, disp->fwd_bytes, comb->fwd_bytes);
      t_fwd_colls(t, &seg, f, mm__place(L, last), TRUE, comb);
      li = last;
      continue;
    }
    const MmPlaceColl *fb = NULL, *fa = NULL; /* a TP AllGather fused with the GEMM, a ReduceScatter after it */
    for (uint32_t i = 0; i < p->n_colls && !p->ring_mask; i++) {
      const MmPlaceColl *c = &p->colls[i];
      if (!tp_fusable(L, li, PART_FWD, c, c->fwd, c->fwd_bytes, FALSE)) continue;
      if (!c->after && c->fwd == MM_COLL_ALL_GATHER) fb = c;
      if (c->after && c->fwd == MM_COLL_REDUCE_SCATTER && !fb) fa = c;
    }
    t_fwd_colls(t, &seg, f, p, FALSE, fb);
    if (fb || fa) {
      const MmPlaceColl *c = fb ? fb : fa;
      t_fused(L, t, &seg, f, li, PART_FWD, c, c->fwd, c->fwd_bytes, fb != NULL);
    } else {
      t_compute(L, t, &seg, f, li, PART_FWD, p);
    }
    t_fwd_colls(t, &seg, f, p, TRUE, fa);
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

/* Per-op selective recompute (torchtitan's op SAC) of unit @u before its backward: each layer's
 * recomputed share (sac.c), with the forward collectives around it that are not in the save list
 * (all-reduces and all-gathers run again; reduce-scatters and all-to-alls are saved). */
static void record_op_selective(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  uint32_t mms = 0;
  for (uint32_t li = f; li < f + un->n_layers; li++) {
    MmSacLayer sl;
    mm__sac_layer(L->s, L->g, li, &mms, &sl);
    if (sl.recompute_frac <= 0) continue;
    const MmPlacement *p = mm__place(L, li);
    for (int after = 0; after < 2; after++) {
      if (after) mm__seg_add_frac(L, &seg, li, PART_FWD, sl.recompute_frac, sl.kernels);
      for (int pass = 0; pass < 2; pass++) {
        const uint8_t outer = (uint8_t)(after ? pass : 1 - pass);
        for (uint32_t i = 0; i < p->n_colls; i++) {
          const MmPlaceColl *c = &p->colls[i];
          if (c->after != after || c->outer != outer || c->fwd == MM_COLL_NONE || c->fwd == MM_COLL_REDUCE_SCATTER ||
              c->fwd == MM_COLL_ALL_TO_ALL)
            continue;
          t_coll(t, &seg, f, T_COLL, (MmCollKind)c->fwd, (MmReason)c->reason, c->mask, c->fwd_bytes);
        }
      }
    }
  }
  t_seg(t, &seg, f, T_SEG);
}

/* Backward of unit @u, layers in reverse. Per layer: the gradients of its "after"
 * collectives (outermost first); the input gradient; the gradients of its "before" ones
 * (innermost first). A collective with the weight gradient beside it (a column-parallel
 * input gradient's AllReduce, SP: ReduceScatter, with the input re-gathered beside it) gets
 * it as a T_WSEG; otherwise the weight gradient follows the input gradient. */
static void record_bwd(Lower *L, uint32_t u, gboolean need_input_grad, gboolean split, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const gboolean trained = !L->s->blocks[un->block].frozen;
  const gboolean wgrad = trained && !split; /* a split backward leaves it to record_wgrad */
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  for (uint32_t li = f + un->n_layers; li-- > f;) {
    const MmPlacement *p = mm__place(L, li);
    const gboolean input_grad = li != f || need_input_grad;
    /* ep pipelined: the region [a, li] ending here, its gradients in chunks between the combine's
     * gradient All2All and the dispatch's */
    uint32_t a = NONE;
    const MmPlaceColl *comb = NULL, *disp = NULL;
    for (uint32_t j = f; j <= li && a == NONE; j++) {
      const MmPlaceColl *d = ep_dispatch(L, j);
      if (d && ep_region_end(L, j, f + un->n_layers, &comb) == li && j > f) a = j, disp = d;
    }
    if (a != NONE) {
      t_eppipe(L, t, &seg, f, a, li, (1u << PART_BWD_IN) | (trained ? 1u << PART_BWD_W : 0u), comb->bwd_bytes,
               disp->bwd_bytes);
      li = a;
      continue;
    }
    /* TP overlap: the output gradient's AllGather fused with the input-gradient GEMM (row-parallel
     * layers), or that GEMM with the ReduceScatter of the input gradient (column-parallel) */
    const MmPlaceColl *fb = NULL, *fa = NULL;
    for (uint32_t i = 0; i < p->n_colls && input_grad && !p->ring_mask; i++) {
      const MmPlaceColl *c = &p->colls[i];
      if (!tp_fusable(L, li, PART_BWD_IN, c, c->bwd, c->bwd_bytes, TRUE)) continue;
      if (c->after && c->bwd == MM_COLL_ALL_GATHER) fb = c;
      if (!c->after && c->bwd == MM_COLL_REDUCE_SCATTER && !fb) fa = c;
    }
    for (int pass = 0; pass < 2; pass++)
      for (uint32_t i = p->n_colls; i-- > 0;) {
        const MmPlaceColl *c = &p->colls[i];
        if (c != fb && c->after && c->outer == 1 - pass && c->bwd != MM_COLL_NONE)
          t_coll(t, &seg, f, T_COLL, (MmCollKind)c->bwd, (MmReason)c->reason, c->mask, c->bwd_bytes);
      }
    for (uint32_t i = 0; i < p->n_colls; i++) {
      const MmPlaceColl *c = &p->colls[i];
      if (!c->after && c->regather_bytes > 0 && input_grad)
        t_coll(t, &seg, f, T_SIDE, MM_COLL_ALL_GATHER, (MmReason)c->reason, c->mask, c->regather_bytes);
    }
    if (fb || fa) {
      const MmPlaceColl *c = fb ? fb : fa;
      t_fused(L, t, &seg, f, li, PART_BWD_IN, c, c->bwd, c->bwd_bytes, fb != NULL);
    } else if (input_grad) {
      t_compute(L, t, &seg, f, li, PART_BWD_IN, p);
    }
    gboolean wgrad_done = !wgrad, regathered = FALSE;
    for (uint32_t i = 0; i < p->n_colls; i++)
      regathered |= !p->colls[i].after && p->colls[i].regather_bytes > 0 && p->colls[i].bwd == MM_COLL_NONE;
    for (int pass = 0; pass < 2; pass++) {
      if (pass == 1 && !wgrad_done && regathered && input_grad) {
        t_seg(t, &seg, f, T_SEG);
        mm__seg_add(L, &seg, li, PART_BWD_W);
        t_seg(t, &seg, f, T_JOIN);
        wgrad_done = TRUE;
      }
      if (pass == 1 && !wgrad_done) {
        mm__seg_add(L, &seg, li, PART_BWD_W);
        wgrad_done = TRUE;
      }
      for (uint32_t i = p->n_colls; i-- > 0;) {
        const MmPlaceColl *c = &p->colls[i];
        if (c->after || c->outer != pass || c->bwd == MM_COLL_NONE || (c->input_grad_only && !input_grad)) continue;
        if (c != fa) t_coll(t, &seg, f, T_COLL, (MmCollKind)c->bwd, (MmReason)c->reason, c->mask, c->bwd_bytes);
        if (c->wgrad_beside && !wgrad_done) {
          mm__seg_add(L, &seg, li, PART_BWD_W);
          t_seg(t, &seg, f, T_WSEG);
          wgrad_done = TRUE;
        }
      }
    }
  }
  t_seg(t, &seg, f, T_SEG);
}

/* zb_h1: the weight gradients of unit @u, layers in reverse, as one segment. A pipelined ep
 * region keeps its weight gradients in its chunks (record_bwd), so they are not here. */
static void record_wgrad(Lower *L, uint32_t u, Template *t)
{
  const MmUnit *un = &L->g->units[u];
  const uint32_t f = un->first_layer;
  Seg seg = {.what = MM_OP_COMPUTE};
  if (L->s->blocks[un->block].frozen) return;
  for (uint32_t li = f + un->n_layers; li-- > f;) {
    uint32_t a = NONE;
    const MmPlaceColl *comb = NULL;
    for (uint32_t j = f + 1; j <= li && a == NONE; j++)
      if (ep_dispatch(L, j) && ep_region_end(L, j, f + un->n_layers, &comb) == li) a = j;
    if (a != NONE) {
      li = a;
      continue;
    }
    mm__seg_add(L, &seg, li, PART_BWD_W);
  }
  t_seg(t, &seg, f, T_SEG);
}

/* template_for's first use of a unit or variant: the slot, the recording. */
static Template *template_build(Lower *L, uint32_t u, int variant)
{
  const MmGraph *g = L->g;
  const uint32_t cu = g->layers[g->layers[g->units[u].first_layer].canon].unit; /* its canonical unit */
  if (!L->tmpl_slot) {
    L->tmpl_slot = g_new(uint32_t, g->n_units + 1);
    for (uint32_t i = 0; i < g->n_units; i++) L->tmpl_slot[i] = NONE;
  }
  if (L->tmpl_slot[u] == NONE) {
    if (L->tmpl_slot[cu] == NONE) {
      /* a group of variants per distinct unit (a few), not per unit */
      if (L->n_tmpl == L->cap_tmpl) {
        L->cap_tmpl = 2 * L->cap_tmpl + 4;
        L->templates = g_renew(Template, L->templates, MM__V_COUNT * (gsize)L->cap_tmpl);
      }
      memset(&L->templates[MM__V_COUNT * (gsize)L->n_tmpl], 0, sizeof(Template) * MM__V_COUNT);
      L->tmpl_slot[cu] = L->n_tmpl++;
    }
    L->tmpl_slot[u] = L->tmpl_slot[cu]; /* its canonical unit's */
  }
  Template *t = &L->templates[MM__V_COUNT * (gsize)L->tmpl_slot[u] + variant];
  if (!t->built) {
    L->rec_mode = variant == MM__V_RECOMPUTE || variant == MM__V_SELECTIVE || variant == MM__V_OP_SELECTIVE;
    if (variant == MM__V_FWD || variant == MM__V_RECOMPUTE) record_fwd(L, cu, t);
    else if (variant == MM__V_SELECTIVE) record_selective(L, cu, t);
    else if (variant == MM__V_OP_SELECTIVE) record_op_selective(L, cu, t);
    else if (variant == MM__V_WGRAD) record_wgrad(L, cu, t);
    else record_bwd(L, cu, variant == MM__V_BWD_IN || variant == MM__V_BWD_IN_B,
                    variant == MM__V_BWD_IN_B || variant == MM__V_BWD_NOIN_B, t);
    L->rec_mode = FALSE;
    t->built = TRUE;
    /* recorded when it has collectives (a lone compute segment emits as fast as it replays) */
    gboolean colls = FALSE, other = FALSE;
    for (uint32_t i = 0; i < t->n; i++) {
      const uint8_t k = t->items[i].kind;
      colls |= k == T_COLL || k == T_SIDE;
      other |= k == T_RING || k == T_FUSED || k == T_EPPIPE;
    }
    t->simple = colls && !other;
  }
  return t;
}

/* The template of variant @variant for unit @u (its canonical unit's), built on first use. */
static inline Template *template_for(Lower *L, uint32_t u, int variant)
{
  if (G_LIKELY(L->tmpl_slot != NULL && L->tmpl_slot[u] != NONE)) {
    Template *t = &L->templates[MM__V_COUNT * (gsize)L->tmpl_slot[u] + variant];
    if (G_LIKELY(t->built)) return t;
  }
  return template_build(L, u, variant);
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

/* ---- recorded replays ---------------------------------------------------- */

void mm__rec_op(Lower *L, uint32_t idx)
{
  Rec *R = L->rec;
  if (L->rec_fail) return;
  const MmEngineOp *o = &L->ops[idx];
  const MmOpInfo *in = &L->info[idx];
  if (in->unit != L->rec_u || in->micro != L->rec_micro || in->phase != (uint8_t)L->rec_phase ||
      (in->first_layer != NONE && in->first_layer < L->rec_first) ||
      (in->last_layer != NONE && in->last_layer < L->rec_first)) {
    L->rec_fail = TRUE;
    return;
  }
  if (R->n_ops == R->cap_ops) {
    R->cap_ops = 2 * R->cap_ops + 8;
    R->ops = g_renew(MmEngineOp, R->ops, R->cap_ops);
    R->info = g_renew(MmOpInfo, R->info, R->cap_ops);
    R->dur = g_renew(MmTime, R->dur, R->cap_ops);
    R->self = g_renew(uint8_t, R->self, R->cap_ops);
  }
  if (R->n_deps + o->n_deps > R->cap_deps) {
    R->cap_deps = 2 * R->cap_deps + o->n_deps + 16;
    R->deps = g_renew(uint32_t, R->deps, R->cap_deps);
  }
  if (R->n_x + o->n_xfer > R->cap_x) {
    R->cap_x = 2 * R->cap_x + o->n_xfer + 16;
    R->xlink = g_renew(uint32_t, R->xlink, R->cap_x);
    R->xbytes = g_renew(double, R->xbytes, R->cap_x);
  }
  const uint32_t k = R->n_ops++;
  MmEngineOp *r = &R->ops[k];
  MmOpInfo *ri = &R->info[k];
  *r = *o;
  R->self[k] = o->coll == idx;
  *ri = *in;
  R->dur[k] = L->dur[idx];
  if (in->first_layer != NONE) ri->first_layer -= L->rec_first;
  if (in->last_layer != NONE) ri->last_layer -= L->rec_first;
  r->dep_first = R->n_deps;
  for (uint32_t i = 0; i < o->n_deps; i++) {
    const uint32_t v = L->deps[o->dep_first + i];
    g_assert(v < idx);
    uint32_t enc = v - L->rec_start;
    if (v < L->rec_start) {
      enc = NONE;
      for (uint32_t j = 0; j < L->rec_in->n; j++)
        if (L->rec_in->v[j] == v) enc = REC_IN | j;
      if (enc == NONE) { /* a dependency from elsewhere: not a function of the inputs */
        L->rec_fail = TRUE;
        return;
      }
    }
    R->deps[R->n_deps++] = enc;
  }
  r->xfer_first = R->n_x;
  for (uint32_t i = 0; i < o->n_xfer; i++) {
    R->xlink[R->n_x] = L->xfer_link[o->xfer_first + i];
    R->xbytes[R->n_x++] = L->xfer_bytes[o->xfer_first + i];
  }
}

/* Notes that ops from @start on replay record @R after @in (MmPlanReplay). */
static void log_replay(Lower *L, const Rec *R, uint32_t start, MmPhase phase, const Deps *in)
{
  if (L->n_replays == L->cap_replays) {
    L->cap_replays = 2 * L->cap_replays + 64;
    L->replays = g_renew(MmPlanReplay, L->replays, L->cap_replays);
  }
  if (L->n_replay_in + in->n > L->cap_replay_in) {
    L->cap_replay_in = 2 * L->cap_replay_in + in->n + 64;
    L->replay_in = g_renew(uint32_t, L->replay_in, L->cap_replay_in);
  }
  L->replays[L->n_replays++] = (MmPlanReplay){.start = start, .n_ops = R->n_ops, .rec = R->id,
                                              .in_first = L->n_replay_in, .in_n = (uint8_t)in->n,
                                              .phase = (uint8_t)phase};
  if (in->n) memcpy(&L->replay_in[L->n_replay_in], in->v, sizeof *in->v * in->n);
  L->n_replay_in += in->n;
}

/* The ops of record @R for unit @u, @micro, @phase after @in: what replay_items would emit. */
static uint32_t replay_rec(Lower *L, const Rec *R, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                           uint32_t *last_compute)
{
  const uint32_t start = L->n_ops, first = L->g->units[u].first_layer, n = R->n_ops;
  mm__emit_reserve(L, n, R->n_deps, R->n_x); /* room for all of it: locals below */
  const uint32_t nd = L->n_deps, nx = L->n_xfer;
  /* the record's arrays whole, then what differs op by op */
  if (n) {
    memcpy(&L->ops[start], R->ops, sizeof *R->ops * n);
    memcpy(&L->info[start], R->info, sizeof *R->info * n);
    memcpy(&L->dur[start], R->dur, sizeof *R->dur * n);
  }
  if (R->n_x) {
    memcpy(&L->xfer_link[nx], R->xlink, sizeof *R->xlink * R->n_x);
    memcpy(&L->xfer_bytes[nx], R->xbytes, sizeof *R->xbytes * R->n_x);
  }
  for (uint32_t j = 0; j < in->n; j++) g_assert(in->v[j] < start); /* the record's own: each op's before it */
  uint32_t *deps = &L->deps[nd];
  for (uint32_t i = 0; i < R->n_deps; i++) {
    const uint32_t enc = R->deps[i];
    deps[i] = enc & REC_IN ? in->v[enc & ~REC_IN] : start + enc;
  }
  const uint16_t chunk = (uint16_t)L->cur_chunk;
  for (uint32_t k = 0; k < n; k++) {
    const uint32_t idx = start + k;
    MmEngineOp *o = &L->ops[idx];
    o->dep_first += nd;
    o->xfer_first += nx;
    if (R->self[k]) o->coll = idx;
    MmOpInfo *info = &L->info[idx];
    info->unit = u;
    info->micro = micro;
    info->phase = (uint8_t)phase;
    if (info->first_layer != NONE) info->first_layer += first;
    if (info->last_layer != NONE) info->last_layer += first;
    info->chunk = chunk;
    L->last_on[o->stream] = idx;
  }
  L->n_ops = start + n;
  L->n_deps = nd + R->n_deps;
  L->n_xfer = nx + R->n_x;
  *last_compute = R->last_compute == NONE ? NONE : start + R->last_compute;
  L->last_side = R->last_side == NONE ? NONE : start + R->last_side;
  if (R->whole && R->n_ops > 0) log_replay(L, R, start, phase, in);
  return R->last == NONE ? NONE : start + R->last;
}

static uint32_t replay_items(Lower *L, const Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                             uint32_t *last_compute);

/* Emits a template for unit @u. Returns the last op of the chain (the unit's output or
 * input gradient); *last_compute receives the last compute op emitted (or NONE). A template of
 * simple items replays from its record of an earlier unit with as many inputs, recording one
 * first. */
static uint32_t replay_memo(Lower *L, Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                            uint32_t *last_compute);

static inline uint32_t replay(Lower *L, Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                              uint32_t *last_compute)
{
  if (L->no_replay || !t->simple || in->n > REC_MAX_IN || L->rec)
    return replay_items(L, t, u, micro, phase, in, last_compute);
  return replay_memo(L, t, u, micro, phase, in, last_compute);
}

static uint32_t replay_memo(Lower *L, Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                            uint32_t *last_compute)
{
  Rec *R = &t->rec;
  if (R->valid && R->in_n == in->n) return replay_rec(L, R, u, micro, phase, in, last_compute);
  for (uint32_t i = 0; i < in->n; i++) /* a record names its inputs by position: they must differ */
    for (uint32_t j = 0; j < i; j++)
      if (in->v[i] == in->v[j]) return replay_items(L, t, u, micro, phase, in, last_compute);
  R->valid = FALSE;
  R->n_ops = R->n_deps = R->n_x = 0;
  L->rec = R;
  L->rec_start = L->n_ops;
  L->rec_u = u;
  L->rec_micro = micro;
  L->rec_phase = phase;
  L->rec_first = L->g->units[u].first_layer;
  L->rec_in = in;
  L->rec_fail = FALSE;
  const uint32_t last = replay_items(L, t, u, micro, phase, in, last_compute);
  L->rec = NULL;
  if (!L->rec_fail) {
    const uint32_t start = L->rec_start;
    R->in_n = in->n;
    R->last = last == NONE ? NONE : last - start;
    R->last_compute = *last_compute == NONE ? NONE : *last_compute - start;
    R->last_side = L->last_side == NONE ? NONE : L->last_side - start;
    R->valid = (last == NONE || last >= start) && (*last_compute == NONE || *last_compute >= start) &&
               (L->last_side == NONE || L->last_side >= start);
    R->id = ++L->n_recs;
    R->whole = TRUE;
    for (uint32_t k = 0; k < R->n_ops; k++) R->whole &= !R->info[k].fused;
  }
  return last;
}

static uint32_t replay_items(Lower *L, const Template *t, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in,
                             uint32_t *last_compute)
{
  const MmUnit *un = &L->g->units[u];
  Deps d = *in, coll_deps = *in;
  uint32_t last = NONE, side = NONE;
  *last_compute = NONE;
  L->last_side = NONE;
  for (uint32_t i = 0; i < t->n; i++) {
    const TItem *it = &t->items[i];
    if (it->kind == T_COLL) {
      uint32_t op = mm__emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d,
                              u, micro, phase);
      if (op != NONE) {
        coll_deps = d;
        last = op;
        mm__deps_set_one(&d, op);
      }
      continue;
    }
    if (it->kind == T_SIDE) {
      side = mm__emit_coll(L, un->block, it->mask, (MmCollKind)it->coll, (MmReason)it->reason, it->coll_bytes, &d, u,
                       micro, phase);
      if (side != NONE) L->last_side = side;
      continue;
    }
    if (it->kind == T_RING) {
      last = *last_compute = replay_ring(L, it, un, u, micro, phase, &d);
      mm__deps_set_one(&d, last);
      continue;
    }
    if (it->kind == T_EPPIPE) {
      MmOpInfo pi = seg_info(&it->seg, un, u, micro, phase, 1.0 / (double)it->pieces);
      pi.time_s = pi.fixed_s = it->piece_s;
      coll_deps = d;
      last = mm__emit_ep_pipelined(L, un->block, it->mask, it->coll_bytes, it->coll2_bytes, &pi, it->pieces, &d, u,
                                   micro, phase);
      *last_compute = L->last_on[MM_STREAM_COMPUTE];
      mm__deps_set_one(&d, last);
      continue;
    }
    if (it->kind == T_FUSED) {
      MmOpInfo pi = seg_info(&it->seg, un, u, micro, phase, 1.0 / (double)it->pieces);
      pi.time_s = pi.fixed_s = it->piece_s;
      pi.kernels = 1;
      coll_deps = d;
      last = mm__emit_tp_overlap(L, un->block, L->s->blocks[un->block].tp_overlap, (MmCollKind)it->coll,
                                 it->comm_first, it->mask, it->coll_bytes, &pi, it->pieces, it->extra_s, &d, u, micro,
                                 phase);
      *last_compute = L->last_on[MM_STREAM_COMPUTE];
      mm__deps_set_one(&d, last);
      continue;
    }
    if (it->kind == T_SEG) { /* the common case: built in place */
      last = *last_compute = mm__emit_start(L, MM_STREAM_COMPUTE, &d, 0, NULL, NULL, FALSE, MM_NO_COLL, 0, 0, 0);
      L->info[last] = seg_info(&it->seg, un, u, micro, phase, 1.0);
      mm__emit_finish(L, MM_STREAM_COMPUTE, last);
      mm__deps_set_one(&d, last);
      continue;
    }
    MmOpInfo info = seg_info(&it->seg, un, u, micro, phase, 1.0);
    if (it->kind == T_JOIN) {
      mm__deps_add(L, &d, side);
      side = NONE;
    }
    if (it->kind == T_WSEG) {
      /* the weight gradient waits for what the all-reduce waited for, not for the all-reduce */
      Deps wd = coll_deps;
      mm__deps_add(L, &wd, side);
      side = NONE;
      *last_compute = mm__emit(L, MM_STREAM_COMPUTE, &wd, &info, NULL, MM_NO_COLL, 0, 0, 0);
      continue;
    }
    last = *last_compute = mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
    mm__deps_set_one(&d, last);
  }
  return last;
}

/* Forward (or recompute) of one unit. Returns the op that produces its output. */
uint32_t mm__lower_fwd(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in)
{
  uint32_t lc;
  return replay(L, template_for(L, u, MM__V_FWD), u, micro, phase, in, &lc);
}

/* The recompute a unit's backward starts with (NONE: none); @d gains what it waits for. */
static uint32_t lower_recompute(Lower *L, uint32_t u, uint32_t micro, const Deps *in, Deps *d)
{
  uint32_t rec_last = NONE;
  if (L->s->cfg->recompute == MM_RECOMPUTE_FULL && L->recompute[u] != MM__RECOMPUTE_NONE)
    mm__deps_add(L, d, replay(L, template_for(L, u, L->parts_rec ? MM__V_RECOMPUTE : MM__V_FWD), u, micro,
                              MM_PHASE_RECOMPUTE, in, &rec_last));
  else if (L->s->cfg->recompute == MM_RECOMPUTE_SELECTIVE)
    mm__deps_add(L, d, replay(L, template_for(L, u, MM__V_SELECTIVE), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  else if (mm__sac_unit(L->s, L->g, u))
    mm__deps_add(L, d, replay(L, template_for(L, u, MM__V_OP_SELECTIVE), u, micro, MM_PHASE_RECOMPUTE, in, &rec_last));
  return rec_last;
}

/* Backward of one unit (after its recompute). Returns the op producing its input
 * gradient; *weights_done receives its last compute op (all its weight gradients
 * exist once it ends: the compute stream is FIFO). */
uint32_t mm__lower_bwd(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                          uint32_t *weights_done)
{
  Deps d = *in;
  const uint32_t rec_last = lower_recompute(L, u, micro, in, &d);
  mm__regather(L, u, micro, rec_last, &d);
  uint32_t lc;
  uint32_t out = replay(L, template_for(L, u, need_input_grad ? MM__V_BWD_IN : MM__V_BWD_NOIN), u, micro, MM_PHASE_BWD, &d, &lc);
  *weights_done = lc != NONE ? lc : rec_last;
  return out;
}

uint32_t mm__lower_bwd_input(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                             uint32_t w_deps[2])
{
  Deps d = *in;
  const uint32_t rec_last = lower_recompute(L, u, micro, in, &d); /* zb_h1 and dualpipev: no full recompute,
                                                                    * so no regather (mm__regather) */
  uint32_t lc;
  uint32_t out = replay(L, template_for(L, u, need_input_grad ? MM__V_BWD_IN_B : MM__V_BWD_NOIN_B), u, micro,
                        MM_PHASE_BWD, &d, &lc);
  /* the weight gradients need the output gradients (the last compute) and, under sequence
   * parallelism, the re-gathered inputs (the last side collective) */
  w_deps[0] = lc != NONE ? lc : rec_last;
  w_deps[1] = L->last_side;
  return out;
}

uint32_t mm__lower_wgrad(Lower *L, uint32_t u, uint32_t micro, const Deps *in)
{
  uint32_t lc;
  replay(L, template_for(L, u, MM__V_WGRAD), u, micro, MM_PHASE_BWD, in, &lc);
  return lc;
}

void mm__templates_free(Lower *L)
{
  for (uint32_t i = 0; i < MM__V_COUNT * L->n_tmpl; i++) {
    Template *t = &L->templates[i];
    g_free(t->items);
    g_free(t->rec.ops);
    g_free(t->rec.info);
    g_free(t->rec.dur);
    g_free(t->rec.self);
    g_free(t->rec.deps);
    g_free(t->rec.xlink);
    g_free(t->rec.xbytes);
  }
  g_clear_pointer(&L->templates, g_free);
  g_clear_pointer(&L->tmpl_slot, g_free);
  L->n_tmpl = L->cap_tmpl = 0;
}
