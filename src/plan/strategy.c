/* strategy: one row per parallel strategy (where it applies, its checks, its placement) and a layer's placement. */
#include <math.h>
#include <string.h>

#include "plan.h"

#define MASK MM_STRAT_MASK

static double degree(const MmScenario *s, guint b, MmStrategy st)
{
  return (double)s->blocks[b].degree[st];
}


static void add_coll(MmPlacement *p, const MmPlaceColl *c)
{
  g_assert(p->n_colls < MM_PLACE_MAX_COLLS);
  p->colls[p->n_colls++] = *c;
}

/* Samples of one micro-batch one device holds rows of: its samples over the ranks that
 * split each sequence. */
static double local_samples(const MmScenario *s, guint b, const MmPlacement *p)
{
  return s->blocks[b].samples_per_micro / p->seq_split;
}

/* ---- MoE dispatch and combine (ep, or tp spreading whole experts) -------- */

/* Bytes of the MoE dispatch/combine one rank sends: its share of the routed tokens (TP
 * ranks split the tokens of their group; sequence-splitting ranks hold a slice of each). */
static double moe_bytes(const MmScenario *s, const MmGraph *g, const MmLayer *l, const MmPlacement *p)
{
  const MmBlock *b = &s->model->blocks[l->block];
  const MmBlockSetup *bs = &s->blocks[l->block];
  double tokens = b->kind == MM_BLOCK_TRANSFORMER ? g->tokens_per_sample : 1.0;
  double width = b->kind == MM_BLOCK_TRANSFORMER ? (double)b->hidden : (double)b->width;
  return bs->samples_per_micro * tokens * width * mm_dtype_bytes(b->dtype) * (double)b->top_k * b->capacity_factor /
         (double)bs->degree[MM_STRAT_TP] / p->seq_split;
}

/* Tokens go to their experts' group before the first expert layer of a transformer FFN (or
 * of an MoE MLP stack) and come back after the last. */
gboolean mm_plan_moe_combines(const MmScenario *s, const MmGraph *g, uint32_t li)
{
  const MmLayer *l = &g->layers[li];
  const MmBlock *b = &s->model->blocks[l->block];
  const MmUnit *un = &g->units[l->unit];
  return l->expert && (l->role == MM_ROLE_FFN_DOWN || (b->kind == MM_BLOCK_MLP && un->index == b->count - 1 &&
                                                        li == un->first_layer + un->n_layers - 1));
}

static void moe_colls(const MmScenario *s, const MmGraph *g, uint32_t li, uint32_t mask, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  if (!l->expert || mm_plan_mask_degree(&s->blocks[l->block], mask) <= 1) return;
  const MmBlock *b = &s->model->blocks[l->block];
  const MmUnit *un = &g->units[l->unit];
  const gboolean dispatch = l->role == MM_ROLE_FFN_UP || (l->role == MM_ROLE_MLP_FC && un->index == 0);
  const gboolean combine = mm_plan_moe_combines(s, g, li);
  const double bytes = moe_bytes(s, g, l, p);
  /* FP8 dispatch (DeepSeek-V3 Sec. 3.3.4, DeepEP): the tokens going to the experts move as FP8 in
   * 1 x 128 tiles with an fp32 scale each, 1 + 4/128 bytes per element; so do the output
   * gradients going back to them (the combine's backward); the combine and the dispatch's
   * backward stay in the block's dtype */
  const double fp8 = s->cfg->moe_dispatch_fp8 ? MIN(1.0, (1.0 + 4.0 / 128.0) / mm_dtype_bytes(b->dtype)) : 1.0;
  const MmPlaceColl a2a = {.outer = 1, .fwd = MM_COLL_ALL_TO_ALL, .bwd = MM_COLL_ALL_TO_ALL, .reason = MM_REASON_MOE,
                           .mask = mask, .fwd_bytes = bytes * fp8, .bwd_bytes = bytes};
  if (dispatch) add_coll(p, &a2a);
  if (combine) {
    MmPlaceColl c = a2a;
    c.after = 1;
    c.fwd_bytes = bytes;
    c.bwd_bytes = bytes * fp8;
    add_coll(p, &c);
  }
}

/* ---- parallel folding: expert layers on their own layout ---------------- */

/* An expert layer of a block with its own expert layout (Megatron-Core parallel folding,
 * docs/MODEL.md): the EP ranks hold experts / EP experts, each split over the ETP ranks. A
 * device routes the tokens it holds after attention (its share of the attention TP group's
 * and of each sequence) to their experts by All2All over EP; under ETP the tokens reaching
 * an ETP group are all-gathered before the expert up-projection and its output
 * reduce-scattered after the down-projection (Megatron-Core's MoEAlltoAllTokenDispatcher), so
 * a device computes as many routed tokens as it holds, on 1 / ETP of each expert. */
static void place_folded(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  const guint bi = l->block;
  const MmBlock *b = &s->model->blocks[bi];
  const MmBlockSetup *bs = &s->blocks[bi];
  const double tp = degree(s, bi, MM_STRAT_TP);
  const double etp = (double)bs->expert_degree[MM_STRAT_TP], ep = (double)bs->expert_degree[MM_STRAT_EP];
  p->param_frac = p->weight_frac = 1.0 / (ep * etp);
  p->work_frac = 1.0 / (tp * p->seq_split);
  /* kept inputs: a column-parallel expert GEMM keeps the ETP group's gathered tokens */
  p->act_frac = (l->tp == MM_TP_COLUMN ? etp : 1.0) / (tp * p->seq_split);
  if (b->kind == MM_BLOCK_TRANSFORMER && tp > 1)
    p->kv_frac = b->kv_lora_rank > 0 ? 1.0 : 1.0 / MIN(tp, (double)b->kv_heads);
  p->load_scaled = ep > 1;
  moe_colls(s, g, li, MM_MASK_EXPERTS | MASK(MM_STRAT_EP), p);
  if (etp <= 1 || (l->tp != MM_TP_COLUMN && l->tp != MM_TP_ROW)) return;
  const double full = moe_bytes(s, g, l, p) * etp; /* the ETP group's routed tokens */
  const uint32_t mask = MM_MASK_EXPERTS | MASK(MM_STRAT_TP);
  if (l->tp == MM_TP_COLUMN) {
    MmPlaceColl c = {.fwd = MM_COLL_ALL_GATHER, .bwd = MM_COLL_REDUCE_SCATTER, .reason = MM_REASON_TP,
                     .input_grad_only = 1, .wgrad_beside = 1, .mask = mask, .fwd_bytes = full, .bwd_bytes = full};
    add_coll(p, &c);
  } else {
    MmPlaceColl c = {.after = 1, .fwd = MM_COLL_REDUCE_SCATTER, .bwd = MM_COLL_ALL_GATHER, .reason = MM_REASON_TP,
                     .mask = mask, .fwd_bytes = full, .bwd_bytes = full};
    add_coll(p, &c);
  }
}

/* ---- the rows ----------------------------------------------------------- */

static void place_fsdp(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  p->param_frac /= degree(s, g->layers[li].block, MM_STRAT_FSDP);
}

/* Megatron tensor parallelism: column- and row-parallel GEMMs; an AllReduce after each
 * row-parallel output and of each column-parallel input gradient; with sequence
 * parallelism an AllGather before the column-parallel and a ReduceScatter after the
 * row-parallel ones, norms and their activations split. */
static void place_tp(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  const guint bi = l->block;
  const MmBlock *b = &s->model->blocks[bi];
  const MmBlockSetup *bs = &s->blocks[bi];
  const double tp = degree(s, bi, MM_STRAT_TP);
  const gboolean sp = mm_plan_seq_parallel(s, bi);
  if (l->tp != MM_TP_REPLICATED) {
    p->param_frac /= tp;
    p->work_frac /= tp;
    p->weight_frac /= tp;
  } else if (sp) {
    p->work_frac /= tp;
  }
  if (l->tp == MM_TP_SHARDED || l->tp == MM_TP_ROW || sp) p->act_frac /= tp;
  /* a row-parallel output is all-reduced: its dropout mask is whole on every rank (Korthikanti et al.
   * 2022 Sec. 4.1: TP alone leaves the masks after attention and the MLP unsplit, 10 + 24/t) */
  if (l->tp == MM_TP_ROW && !sp) p->mask_scale = tp;
  if (b->kind == MM_BLOCK_TRANSFORMER)
    p->kv_frac = b->kv_lora_rank > 0 ? 1.0 : 1.0 / MIN(tp, (double)b->kv_heads); /* MLA's latent is whole */
  if (l->expert && bs->degree[MM_STRAT_EP] <= 1 && !bs->experts_sharded) {
    moe_colls(s, g, li, MASK(MM_STRAT_TP), p); /* MAD-Max: whole experts spread over the TP ranks */
    return;
  }
  if (l->expert && !(bs->experts_sharded && bs->degree[MM_STRAT_EP] <= 1)) return; /* expert-parallel experts */
  const double n = local_samples(s, bi, p);
  /* parallel attention + MLP (PaLM Sec. 2 "Parallel Layers"): attention's row-parallel partial
   * output is added to the MLP's before ffn_down's one all-reduce (SP: reduce-scatter), whose
   * backward all-gather also serves attention; with one shared norm the MLP's up-projection reads
   * qkv's gathered input and its input gradient joins qkv's in one all-reduce (SP: the shared
   * input re-gathered once for both weight gradients, first needed by ffn_up's) */
  const MmParallelBlock pb = b->kind == MM_BLOCK_TRANSFORMER ? b->parallel_block : MM_PARALLEL_BLOCK_NONE;
  const gboolean shared_in = pb == MM_PARALLEL_BLOCK_SHARED_NORM;
  if (l->tp == MM_TP_ROW && pb != MM_PARALLEL_BLOCK_NONE && l->role == MM_ROLE_ATTN_OUT) return;
  if (l->tp == MM_TP_COLUMN && shared_in && l->role == MM_ROLE_FFN_UP) {
    const double in = n * (l->cost.fwd_bytes - l->cost.out_bytes); /* its input, kept by qkv */
    MmPlaceColl c = {.fwd = MM_COLL_NONE, .bwd = MM_COLL_NONE, .reason = MM_REASON_TP, .input_grad_only = 1,
                     .wgrad_beside = 1, .mask = MASK(MM_STRAT_TP), .regather_bytes = sp && !bs->frozen ? in : 0};
    if (c.regather_bytes > 0) add_coll(p, &c);
    return;
  }
  if (l->tp == MM_TP_COLUMN) {
    const double in = n * l->cost.act_bytes;
    const gboolean regather = sp && !bs->frozen && !(shared_in && l->role == MM_ROLE_QKV);
    MmPlaceColl c = {.fwd = sp ? MM_COLL_ALL_GATHER : MM_COLL_NONE, .bwd = sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE,
                     .reason = MM_REASON_TP, .input_grad_only = 1, .wgrad_beside = 1, .mask = MASK(MM_STRAT_TP),
                     .fwd_bytes = in, .bwd_bytes = in, .regather_bytes = regather ? in : 0};
    add_coll(p, &c);
    if (l->role == MM_ROLE_MTP_PROJ) {
      /* Megatron-Core's MTP projection is column-parallel and gathers its output's last dimension
       * for the transformer layer after it (multi_token_prediction.py); backward slices, no comm */
      MmPlaceColl g2 = {.after = 1, .fwd = MM_COLL_ALL_GATHER, .bwd = MM_COLL_NONE, .reason = MM_REASON_TP,
                        .mask = MASK(MM_STRAT_TP), .fwd_bytes = n * l->cost.out_bytes};
      add_coll(p, &g2);
    }
  } else if (l->tp == MM_TP_ROW) {
    const double out = n * l->cost.out_bytes;
    MmPlaceColl c = {.after = 1, .fwd = sp ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE,
                     .bwd = sp ? MM_COLL_ALL_GATHER : MM_COLL_NONE, .reason = MM_REASON_TP, .mask = MASK(MM_STRAT_TP),
                     .fwd_bytes = out, .bwd_bytes = out};
    add_coll(p, &c);
    if (b->kind == MM_BLOCK_MLP && !sp) {
      /* an MLP block's layers are all row-parallel: each takes its slice of the replicated input and
       * computes the gradient of that slice only; the layer before it (or the block feeding it) needs
       * all of it: an AllGather of the input gradient in backward, the weight gradient beside it */
      MmPlaceColl g2 = {.fwd = MM_COLL_NONE, .bwd = MM_COLL_ALL_GATHER, .reason = MM_REASON_TP, .input_grad_only = 1,
                        .wgrad_beside = 1, .mask = MASK(MM_STRAT_TP), .bwd_bytes = n * l->cost.act_bytes};
      add_coll(p, &g2);
    }
  }
}

static char *check_tp(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                      const char **field)
{
  const int64_t tp = bs->degree[MM_STRAT_TP];
  *field = "degree";
  if (b->kind != MM_BLOCK_TRANSFORMER || tp <= 1) return NULL;
  const char *bad = NULL;
  int64_t v = 0;
  if (b->heads % tp != 0) bad = "heads", v = b->heads;
  else if (b->kv_heads >= tp ? b->kv_heads % tp != 0 : tp % b->kv_heads != 0) bad = "kv_heads", v = b->kv_heads;
  else if (b->ffn % tp != 0) bad = "ffn", v = b->ffn;
  if (bad)
    return g_strdup_printf("tp degree %" G_GINT64_FORMAT " does not divide %s %" G_GINT64_FORMAT " of block \"%s\" (%s)",
                           tp, bad, v, b->name, s->model->path);
  /* sequence parallelism splits each cp (ulysses) rank's part of a sequence over the TP ranks outside
   * attention and the MLP (Megatron-Core's scatter along the sequence dimension asserts it divides);
   * checked at the sp level (a tp level beside it is not the one to change) */
  const int64_t split = tp * bs->degree[MM_STRAT_CP] * bs->degree[MM_STRAT_ULYSSES];
  if (!bs->sp || !l->sequence_parallel || l->degree <= 1 || s->cfg->serving.present || b->seq_len % split == 0)
    return NULL;
  g_autofree char *over = split == tp ? g_strdup_printf("the %" G_GINT64_FORMAT " TP ranks", tp)
                                      : g_strdup_printf("tp x cp x ulysses = %" G_GINT64_FORMAT " ranks", split);
  return g_strdup_printf("sequence parallelism splits each sequence over %s, which does not divide seq_len %"
                         G_GINT64_FORMAT " of block \"%s\" (use tp without sequence parallelism, or another degree)",
                         over, b->seq_len, b->name);
}

/* Expert parallelism: each rank holds experts / degree whole experts and computes its
 * routed tokens; data parallel for the rest of the block. */
static void place_ep(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  if (!l->expert) return;
  const double ep = degree(s, l->block, MM_STRAT_EP);
  p->param_frac /= ep;
  p->weight_frac /= ep;
  p->load_scaled = TRUE;
  moe_colls(s, g, li, MASK(MM_STRAT_EP), p);
}

static char *check_ep(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                      const char **field)
{
  (void)bs;
  *field = "strategy";
  if (b->experts == 0)
    return g_strdup_printf("ep shards experts; block \"%s\" has none (experts = 0 in %s)", b->name, s->model->path);
  *field = "degree";
  if (l->degree > 1 && b->experts % l->degree != 0)
    return g_strdup_printf("ep degree %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                           " experts of block \"%s\"", l->degree, b->experts, b->name);
  return NULL;
}

/* Sharded embedding tables: the busiest device holds ceil(pieces / degree) of the pieces,
 * looks them up, and exchanges the pooled outputs (mm_plan_mp_exchange). */
static void place_mp(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const double f = s->blocks[g->layers[li].block].mp_fraction;
  p->param_frac *= f;
  p->work_frac *= f;
  p->weight_frac *= f;
  p->act_frac *= f;
}

static char *check_mp(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                      const char **field)
{
  *field = "strategy";
  if (s->pp > 1) return g_strdup("mp (sharded embedding tables) is not modelled with pipeline stages");
  const int64_t mp = bs->degree[MM_STRAT_MP], have = mm_plan_mp_pieces(b, l->sharding);
  *field = "degree";
  if (have < mp)
    return g_strdup_printf("%s-wise sharding over %" G_GINT64_FORMAT " devices needs at least that many %s; block "
                           "\"%s\" has %" G_GINT64_FORMAT,
                           mm_shard_names[l->sharding], mp,
                           l->sharding == MM_SHARD_TABLE ? "tables" : l->sharding == MM_SHARD_ROW ? "rows" : "columns",
                           b->name, have);
  return NULL;
}

/* Context parallelism: the sequence split over the group; attention gets the other chunks'
 * K/V by a ring of collective-permutes overlapped with its pieces, or by an AllGather. */
static void place_cp(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  const guint bi = l->block;
  const MmBlock *b = &s->model->blocks[bi];
  const MmBlockSetup *bs = &s->blocks[bi];
  const double cp = degree(s, bi, MM_STRAT_CP), tp = degree(s, bi, MM_STRAT_TP);
  p->work_frac /= cp;
  p->act_frac /= cp;
  if (bs->fsdp_mask & MASK(MM_STRAT_CP)) p->param_frac /= cp; /* FSDP shards over the cp ranks too */
  if (l->role != MM_ROLE_ATTN_CORE) return;
  /* per exchange step, the K and V chunk one rank holds (its share of the kv heads under TP) */
  const double width = b->kv_lora_rank > 0 ? (double)b->heads * (double)(b->head_dim + b->v_head_dim) / tp
                                           : (double)b->kv_heads * (double)(b->head_dim + b->v_head_dim) /
                                                 MIN(tp, (double)b->kv_heads);
  const double kv = bs->samples_per_micro * (double)b->seq_len / cp * width * mm_dtype_bytes(b->dtype);
  if (bs->cp_impl == MM_CP_ALL_GATHER) {
    MmPlaceColl c = {.fwd = MM_COLL_ALL_GATHER, .bwd = MM_COLL_REDUCE_SCATTER, .reason = MM_REASON_CP,
                     .mask = MASK(MM_STRAT_CP), .fwd_bytes = kv * cp, .bwd_bytes = kv * cp};
    add_coll(p, &c);
    return;
  }
  p->ring_mask = MASK(MM_STRAT_CP);
  p->ring_fwd_bytes = kv;
  p->ring_bwd_bytes = 2.0 * kv; /* K/V and their gradients */
}

static char *check_sequence_split(const MmScenario *s, const MmBlock *b, const MmLevel *l, const char **field)
{
  *field = "degree";
  if (l->degree <= 1) return NULL;
  if (s->cfg->serving.present)
    return g_strdup_printf("%s is not modelled for prefill/decode serving", mm_strategy_names[l->strategy]);
  if (b->seq_len % l->degree != 0)
    return g_strdup_printf("%s degree %" G_GINT64_FORMAT " does not divide seq_len %" G_GINT64_FORMAT
                           " of block \"%s\"", mm_strategy_names[l->strategy], l->degree, b->seq_len, b->name);
  return NULL;
}

static char *check_cp(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                      const char **field)
{
  (void)bs;
  return check_sequence_split(s, b, l, field);
}

/* DeepSpeed-Ulysses (Jacobs et al. 2023): the sequence split over the group everywhere
 * but in attention, where an All2All before it trades the sequence split for a heads split
 * (q, k, v of every token, heads / degree per rank) and one after it trades back. */
static void place_ulysses(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmLayer *l = &g->layers[li];
  const guint bi = l->block;
  const MmBlock *b = &s->model->blocks[bi];
  const double u = degree(s, bi, MM_STRAT_ULYSSES), tp = degree(s, bi, MM_STRAT_TP);
  p->work_frac /= u;
  p->act_frac /= u;
  if (l->role != MM_ROLE_ATTN_CORE) return;
  const double tokens = local_samples(s, bi, p) * (double)b->seq_len, e = mm_dtype_bytes(b->dtype);
  const double qkv = (double)b->heads * (double)b->head_dim + (double)b->kv_heads * (double)(b->head_dim + b->v_head_dim);
  const double out = (double)b->heads * (double)b->v_head_dim;
  MmPlaceColl in = {.fwd = MM_COLL_ALL_TO_ALL, .bwd = MM_COLL_ALL_TO_ALL, .reason = MM_REASON_ULYSSES,
                    .mask = MASK(MM_STRAT_ULYSSES), .fwd_bytes = tokens * qkv / tp * e, .bwd_bytes = tokens * qkv / tp * e};
  MmPlaceColl back = in;
  back.after = 1;
  back.fwd_bytes = back.bwd_bytes = tokens * out / tp * e;
  add_coll(p, &in);
  add_coll(p, &back);
}

static char *check_ulysses(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                           const char **field)
{
  char *why = check_sequence_split(s, b, l, field);
  if (why || b->kind != MM_BLOCK_TRANSFORMER || l->degree <= 1) return why;
  const int64_t split = bs->degree[MM_STRAT_TP] * bs->degree[MM_STRAT_ULYSSES];
  *field = "strategy";
  if (bs->degree[MM_STRAT_CP] > 1)
    return g_strdup_printf("ulysses and cp on one block are not modelled together (block \"%s\")", b->name);
  if (b->kv_lora_rank > 0)
    return g_strdup_printf("ulysses is not modelled with multi-head latent attention (block \"%s\")", b->name);
  *field = "degree";
  if (b->heads % split != 0 || (b->kv_heads >= split ? b->kv_heads % split != 0 : split % b->kv_heads != 0))
    return g_strdup_printf("ulysses x tp = %" G_GINT64_FORMAT " must divide the %" G_GINT64_FORMAT
                           " heads and the %" G_GINT64_FORMAT " kv_heads of block \"%s\" (or be a multiple of "
                           "kv_heads)", split, b->heads, b->kv_heads, b->name);
  return NULL;
}

/* Placement order is row order (the floating-point order of the shares). */
static const MmStrategyRow rows[] = {
  {MM_STRAT_MP, MM_KIND(MM_BLOCK_EMBEDDING_BAG), "use tp or fsdp", FALSE, FALSE, MM_REPLICAS_NONE, check_mp, place_mp},
  {MM_STRAT_FSDP, MM_KINDS_ALL, NULL, TRUE, FALSE, MM_REPLICAS_NONE, NULL, place_fsdp},
  {MM_STRAT_TP, MM_KINDS_ALL & ~MM_KIND(MM_BLOCK_EMBEDDING_BAG), "use mp with sharding \"column\"", FALSE, FALSE,
   MM_REPLICAS_NONE, check_tp, place_tp},
  {MM_STRAT_EP, MM_KIND(MM_BLOCK_TRANSFORMER) | MM_KIND(MM_BLOCK_MLP), "only blocks with experts", TRUE, FALSE,
   MM_REPLICAS_DENSE, check_ep, place_ep},
  {MM_STRAT_CP, MM_KINDS_SEQUENCE, "cp splits sequences: it applies to transformer, token_embedding and lm_head blocks", FALSE, TRUE,
   MM_REPLICAS_ALL, check_cp, place_cp},
  {MM_STRAT_ULYSSES, MM_KINDS_SEQUENCE, "ulysses splits sequences: it applies to transformer, token_embedding and lm_head blocks", FALSE,
   TRUE, MM_REPLICAS_ALL, check_ulysses, place_ulysses},
  {MM_STRAT_DDP, MM_KINDS_ALL, NULL, TRUE, FALSE, MM_REPLICAS_ALL, NULL, NULL},
};
/* every level strategy has a row (pp and sp are not levels) */
G_STATIC_ASSERT(G_N_ELEMENTS(rows) == MM_STRAT_COUNT - 2);

const MmStrategyRow *mm_strategy_row(MmStrategy st)
{
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
    if (rows[i].id == st) return &rows[i];
  return NULL;
}

int64_t mm_plan_mp_pieces(const MmBlock *b, MmShardKind sk)
{
  return sk == MM_SHARD_TABLE ? b->tables : sk == MM_SHARD_ROW ? b->rows : b->dim;
}

void mm_plan_place(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p)
{
  const MmBlockSetup *bs = &s->blocks[g->layers[li].block];
  p->param_frac = p->work_frac = p->weight_frac = p->act_frac = p->kv_frac = 1.0;
  p->mask_scale = 1.0;
  p->seq_split = 1.0;
  p->load_scaled = FALSE;
  p->n_colls = 0;
  p->ring_mask = 0;
  p->ring_fwd_bytes = p->ring_bwd_bytes = 0;
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
    if (rows[i].splits_sequence) p->seq_split *= (double)bs->degree[rows[i].id];
  if (g->layers[li].expert && mm_plan_folded(bs)) {
    place_folded(s, g, li, p);
    return;
  }
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
    if (rows[i].place && bs->degree[rows[i].id] > 1) rows[i].place(s, g, li, p);
}

double mm_plan_kept_bytes(const MmLayer *l, const MmPlacement *p)
{
  g_return_val_if_fail(l && p, 0);
  return (l->cost.act_bytes + l->cost.mask_bytes * (p->mask_scale - 1.0)) * p->act_frac;
}

uint32_t mm_plan_grad_replicas(const MmScenario *s, guint b, gboolean expert)
{
  /* cp ranks sharding with FSDP reduce-scatter their gradients in its group: not replicas */
  const uint32_t sharded = s->blocks[b].fsdp_mask & ~MASK(MM_STRAT_FSDP);
  if (expert && mm_plan_folded(&s->blocks[b])) return MM_MASK_EXPERTS | MASK(MM_STRAT_DDP); /* EDP */
  static gsize once = 0;
  static uint32_t masks[2]; /* dense, expert: fixed by the rows */
  if (g_once_init_enter(&once)) {
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
      if (rows[i].replicas == MM_REPLICAS_ALL) masks[0] |= MASK(rows[i].id), masks[1] |= MASK(rows[i].id);
      if (rows[i].replicas == MM_REPLICAS_DENSE) masks[0] |= MASK(rows[i].id);
    }
    g_once_init_leave(&once, 1);
  }
  return masks[expert ? 1 : 0] & ~sharded;
}

gboolean mm_plan_data_parallel(MmStrategy st)
{
  const MmStrategyRow *r = mm_strategy_row(st);
  return r && r->data_parallel;
}

double mm_plan_mp_exchange(const MmScenario *s, const MmGraph *g, guint b, MmPhase phase, MmCollKind *kind)
{
  const MmBlockSetup *bs = &s->blocks[b];
  const MmLayer *l = &g->layers[g->units[g->block_first_unit[b]].first_layer];
  MmShardKind sk = MM_SHARD_TABLE;
  for (guint i = 0; i < bs->n_levels; i++)
    if (bs->levels[i].strategy == MM_STRAT_MP) sk = bs->levels[i].sharding;
  MmPlacement p;
  mm_plan_place(s, g, (uint32_t)(l - g->layers), &p);
  const double full = bs->samples_per_micro * l->cost.out_bytes;
  /* table- and column-wise: an All2All of the pieces' pooled outputs; row-wise: partial sums
   * of every output, reduce-scattered (backward: the gradients all-gathered) */
  if (sk == MM_SHARD_ROW) {
    *kind = phase == MM_PHASE_FWD ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_GATHER;
    return full;
  }
  *kind = MM_COLL_ALL_TO_ALL;
  return full * p.work_frac;
}
