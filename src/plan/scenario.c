/* scenario: loaded inputs x a point of overrides -> the resolved scenario (degrees, groups on nodes, batch split). */
#include <math.h>
#include <string.h>

#include "config/json.h"
#include "internal.h"

/* ---- scenario ---------------------------------------------------------- */

const char *const mm_scale_names[] = {"compute", "hbm_bw", "hbm_cap", "intra_bw", "inter_bw", "latency", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_scale_names) == MM_SCALE_COUNT + 1);

void mm_scenario_free(MmScenario *s)
{
  if (!s) return;
  g_free(s->blocks);
  g_free(s->view_blocks);
  g_free(s->view_hw_name);
  g_free(s);
}

/* Copies the bytes of @v to @buf + @n and moves @n past them (a key under construction). */
#define KEY_PUT(buf, n, v)               \
  do {                                   \
    memcpy((buf) + (n), &(v), sizeof(v)); \
    (n) += sizeof(v);                    \
  } while (0)

void mm_point_key(const MmPoint *pt, GByteArray *key)
{
  g_return_if_fail(pt && key);
  guint8 buf[256];
  guint n = 0;
  KEY_PUT(buf, n, pt->nodes);
  KEY_PUT(buf, n, pt->global_batch);
  KEY_PUT(buf, n, pt->micro_batch);
  KEY_PUT(buf, n, pt->pipeline_degree);
  KEY_PUT(buf, n, pt->virtual_stages);
  KEY_PUT(buf, n, pt->seq_len);
  KEY_PUT(buf, n, pt->recompute);
  KEY_PUT(buf, n, pt->schedule);
  KEY_PUT(buf, n, pt->algorithm);
  KEY_PUT(buf, n, pt->scale);
  const guint ns = pt->strategies ? pt->n_strategies : G_MAXUINT; /* none (the config's) is not an empty list */
  KEY_PUT(buf, n, ns);
  /* the buffer holds the point's fields, or an entry's level count and one level's fields */
  G_STATIC_ASSERT(sizeof(MmPoint) <= sizeof buf && sizeof(guint) + sizeof(MmLevel) <= sizeof buf);
  for (guint e = 0; pt->strategies && e < pt->n_strategies; e++) {
    const MmStrategyEntry *en = &pt->strategies[e];
    g_byte_array_append(key, buf, n);
    n = 0;
    if (en->key) g_byte_array_append(key, (const guint8 *)en->key, (guint)strlen(en->key) + 1);
    else g_byte_array_append(key, (const guint8 *)"\xff", 1); /* no key: 0xff begins no (checked) UTF-8 key */
    KEY_PUT(buf, n, en->n_levels);
    for (guint i = 0; i < en->n_levels; i++) { /* field by field: a struct's padding bytes are not its value */
      const MmLevel *l = &en->levels[i];
      KEY_PUT(buf, n, l->strategy);
      KEY_PUT(buf, n, l->spec);
      KEY_PUT(buf, n, l->degree);
      KEY_PUT(buf, n, l->sharding);
      KEY_PUT(buf, n, l->grad_sync);
      KEY_PUT(buf, n, l->sequence_parallel);
      KEY_PUT(buf, n, l->experts_sharded);
      KEY_PUT(buf, n, l->zero);
      KEY_PUT(buf, n, l->cp_impl);
      KEY_PUT(buf, n, l->cp_fsdp);
      KEY_PUT(buf, n, l->overlap);
      KEY_PUT(buf, n, l->overlap_min_bytes);
      KEY_PUT(buf, n, l->overlap_chunks);
      g_byte_array_append(key, buf, n);
      n = 0;
    }
  }
  g_byte_array_append(key, buf, n);
}

static double factor(const MmPoint *pt, MmScale k)
{
  return pt->scale[k] > 0 ? pt->scale[k] : 1.0;
}

/* Whether a config's seq_len sets @b's (blocks that process the sequence). */
static inline gboolean seq_block(const MmBlock *b)
{
  return b->kind == MM_BLOCK_TRANSFORMER || b->kind == MM_BLOCK_TOKEN_EMBEDDING || b->kind == MM_BLOCK_LM_HEAD;
}

/* The point's views of the inputs: shallow copies (strings and arrays borrowed) with the
 * overridden fields replaced; what changes inside an array (block seq_len) is copied. */
static gboolean derive_views(MmScenario *s, const MmModel *m, const MmHardware *hw, const MmParallelConfig *c,
                             const MmPoint *pt, GError **error)
{
  MmParallelConfig *cv = &s->cfg_view;
  *cv = *c;
  if (pt->global_batch > 0) {
    cv->global_batch = pt->global_batch;
    cv->global_batch_tokens = 0;
  }
  if (pt->micro_batch > 0) cv->micro_batch = pt->micro_batch;
  if (pt->pipeline_degree > 0 && pt->pipeline_degree != c->pipeline.degree) {
    cv->pipeline.degree = pt->pipeline_degree;
    cv->pipeline.layers = NULL; /* sized for the file's degree */
    cv->pipeline.n_layers = 0;
  }
  if (pt->schedule > 0 && (MmPipeSchedule)(pt->schedule - 1) != c->pipeline.schedule) {
    const MmPipeSchedule k = (MmPipeSchedule)(pt->schedule - 1);
    cv->pipeline.schedule = k;
    const int64_t v = mm_pipe_schedule_vstages(k, cv->pipeline.degree, c->pipeline.virtual_stages);
    if (v != cv->pipeline.virtual_stages) {
      cv->pipeline.virtual_stages = v;
      cv->pipeline.layers = NULL; /* sized for the file's chunks */
      cv->pipeline.n_layers = 0;
    }
  }
  if (pt->virtual_stages > 0 && pt->virtual_stages != cv->pipeline.virtual_stages) {
    cv->pipeline.virtual_stages = pt->virtual_stages;
    cv->pipeline.layers = NULL;
    cv->pipeline.n_layers = 0;
  }
  if (pt->seq_len > 0) cv->seq_len = pt->seq_len;
  if (pt->recompute > 0) {
    cv->recompute = (MmRecompute)(pt->recompute - 1);
    if (cv->recompute != MM_RECOMPUTE_NONE) cv->offload_num_layers = 0; /* as the loader: not with recompute */
  }
  for (int k = 0; k < MM_COLL_COUNT; k++)
    if (pt->algorithm[k] != MM_ALGO_AUTO) cv->algorithm[k] = pt->algorithm[k];
  if (pt->strategies) {
    cv->strategies = (MmStrategyEntry *)pt->strategies; /* read only */
    cv->n_strategies = pt->n_strategies;
  }

  /* a config's seq_len sets every sequence block's */
  s->model_view = *m;
  /* multi-token prediction modules train only: inference runs the model without them (DeepSeek-V3
   * report Sec. 2.2: "we can directly discard these MTP modules") */
  if (cv->task == MM_TASK_INFERENCE && m->n_blocks > 1 && m->blocks[m->n_blocks - 1].mtp) s->model_view.n_blocks--;
  gboolean new_seq = cv->seq_len > 0 && cv->seq_len != m->seq_len;
  for (guint i = 0; i < m->n_blocks && cv->seq_len > 0 && !new_seq; i++)
    new_seq = seq_block(&m->blocks[i]) && m->blocks[i].seq_len != cv->seq_len;
  if (new_seq) { /* (a seq_len the model has already leaves it as loaded) */
    s->view_blocks = g_memdup2(m->blocks, sizeof(MmBlock) * m->n_blocks);
    s->model_view.blocks = s->view_blocks;
    s->model_view.seq_len = cv->seq_len;
    for (guint i = 0; i < m->n_blocks; i++)
      if (seq_block(&s->view_blocks[i])) s->view_blocks[i].seq_len = cv->seq_len;
  }

  MmHardware *hv = &s->hw_view;
  *hv = *hw;
  if (pt->nodes > 0 && pt->nodes != hw->nodes) {
    if (!mm_hardware_check_nodes(hw, pt->nodes, error)) return FALSE;
    s->view_hw_name = g_strdup_printf("%s, resized to %" G_GINT64_FORMAT " node%s", hw->name, pt->nodes,
                                      pt->nodes == 1 ? "" : "s");
    hv->name = s->view_hw_name;
    hv->nodes = pt->nodes;
  }
  for (int d = 0; d < MM_DTYPE_COUNT; d++) hv->device.peak_flops[d] *= factor(pt, MM_SCALE_COMPUTE);
  hv->device.hbm_bw_Bps *= factor(pt, MM_SCALE_HBM_BW);
  hv->device.hbm_bytes *= factor(pt, MM_SCALE_HBM_BYTES);
  hv->intra.bw_per_gpu_Bps *= factor(pt, MM_SCALE_INTRA_BW);
  hv->intra.link_bw_Bps *= factor(pt, MM_SCALE_INTRA_BW);
  hv->inter.bw_per_gpu_Bps *= factor(pt, MM_SCALE_INTER_BW);
  hv->inter.link_bw_Bps *= factor(pt, MM_SCALE_INTER_BW);
  const double lat = factor(pt, MM_SCALE_LATENCY);
  MmNetwork *nets[] = {&hv->intra, &hv->inter};
  for (guint n = 0; n < 2 && lat != 1.0; n++) {
    nets[n]->one_shot_latency_s.value *= lat;
    for (int p = 0; p < MM_PROTO_COUNT; p++) {
      nets[n]->protocol[p].latency_s.value *= lat;
      nets[n]->protocol[p].base_latency_s.value *= lat;
    }
  }

  /* a view the point left as loaded: the loaded model itself (graphs built from it can be shared
   * by the points of a study, mm_simulation_prepare_cached) */
  s->model = s->view_blocks || s->model_view.n_blocks != m->n_blocks ? &s->model_view : m;
  s->hw = hv;
  s->cfg = cv;
  return TRUE;
}

static gboolean names_block(const MmModel *m, const char *key, gboolean *is_kind)
{
  for (int k = 0; k < MM_BLOCK_KIND_COUNT; k++) {
    if (strcmp(key, mm_block_kind_names[k]) == 0) {
      *is_kind = TRUE;
      return TRUE;
    }
  }
  *is_kind = FALSE;
  for (guint i = 0; i < m->n_blocks; i++)
    if (strcmp(key, m->blocks[i].name) == 0) return TRUE;
  return FALSE;
}

static gboolean block_frozen(const MmParallelConfig *c, const MmBlock *b)
{
  if (c->task == MM_TASK_INFERENCE) return TRUE;
  for (guint i = 0; i < c->n_frozen; i++)
    if (strcmp(c->frozen[i], b->name) == 0 || strcmp(c->frozen[i], mm_block_kind_names[b->kind]) == 0)
      return TRUE;
  return FALSE;
}

/* The JSON path of level @i's @field of strategy entry @e (@field NULL: the entry), for a message:
 * built only for one (a sweep rejects most of its points, and asks no messages). */
static char *entry_path(const MmStrategyEntry *e, guint i, const char *field)
{
  if (!field) return g_strdup_printf("$.parallelism.%s", e->key);
  return g_strdup_printf("$.parallelism.%s[%u].%s", e->key, i, field);
}

/* Resolves one block's levels; errors point into $.parallelism.<key>. */
static gboolean resolve_block(const MmJsonCtx *ctx, const MmScenario *s, const MmBlock *b,
                              MmBlockSetup *bs, GError **error)
{
  const MmHardware *hw = s->hw;
  const int64_t n = s->stage_devices, g = hw->gpus_per_node;
  const MmStrategyEntry *e = bs->entry;
  int64_t prod = 1;
  int all_at = -1;
  bs->n_levels = e->n_levels;
  for (guint i = 0; i < e->n_levels; i++) {
    MmLevel l = e->levels[i];
    switch (l.spec) {
    case MM_DEG_NUMBER: break;
    case MM_DEG_NODE: l.degree = g; break;
    case MM_DEG_NODES: l.degree = hw->nodes; break;
    case MM_DEG_ALL: all_at = (int)i; l.degree = 1; break;
    }
    bs->levels[i] = l;
    prod *= l.degree;
    if (prod > n) break;
  }
  if (all_at >= 0) {
    if (prod > n || n % prod != 0) {
      g_autofree char *dp = entry_path(e, (guint)all_at, "degree");
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                    "\"all\" must fill %" G_GINT64_FORMAT " devices of %s%s, but the other levels multiply "
                    "to %" G_GINT64_FORMAT ", which does not divide it",
                    n, hw->path, s->pp > 1 ? " (one pipeline stage)" : "", prod);
      return FALSE;
    }
    bs->levels[all_at].degree = n / prod;
    prod = n;
  }
  if (prod != n) {
    g_autofree char *jp = entry_path(e, 0, NULL);
    if (s->pp > 1)
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "degrees multiply to %s%" G_GINT64_FORMAT " but one of the %" G_GINT64_FORMAT
                    " pipeline stages of %s has %" G_GINT64_FORMAT " devices; the product must equal it",
                    prod > n ? "more than " : "", prod > n ? n : prod, s->pp, hw->path, n);
    else
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "degrees multiply to %s%" G_GINT64_FORMAT " but %s has %" G_GINT64_FORMAT
                    " devices (%" G_GINT64_FORMAT " nodes x %" G_GINT64_FORMAT "); the product must equal it",
                    prod > n ? "more than " : "", prod > n ? n : prod, hw->path, n, hw->nodes, g);
    return FALSE;
  }
  int64_t stride = 1;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    bs->stride[i] = stride;
    int64_t span = stride * l->degree;
    if (!mm_comm_group_even(hw, l->degree, stride)) {
      g_autofree char *dp = entry_path(e, i, "degree");
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                    "a %s group of %" G_GINT64_FORMAT " devices with stride %" G_GINT64_FORMAT
                    " straddles node boundaries of %" G_GINT64_FORMAT "-GPU nodes unevenly; degrees must "
                    "divide the node or be multiples of it",
                    mm_strategy_names[l->strategy], l->degree, stride, g);
      return FALSE;
    }
    bs->degree[l->strategy] *= l->degree;
    stride = span;
  }
  bs->dp = 1;
  for (int k = 0; k < MM_STRAT_COUNT; k++)
    if (mm_plan_data_parallel((MmStrategy)k)) bs->dp *= bs->degree[k];
  bs->zero = -1;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    if (l->strategy == MM_STRAT_TP && l->degree > 1) bs->sp |= l->sequence_parallel;
    if (l->strategy == MM_STRAT_TP && l->degree > 1) bs->experts_sharded |= l->experts_sharded;
    if (l->strategy == MM_STRAT_CP) bs->cp_impl = l->cp_impl;
    if (l->degree > 1 && l->overlap != MM_OVERLAP_BULK &&
        (l->strategy == MM_STRAT_TP || l->strategy == MM_STRAT_EP || l->strategy == MM_STRAT_MP)) {
      MmOverlap *o = l->strategy == MM_STRAT_TP ? &bs->tp_overlap : l->strategy == MM_STRAT_EP ? &bs->ep_overlap
                                                                                                  : &bs->mp_overlap;
      if (*o != MM_OVERLAP_BULK && *o != l->overlap) {
        g_autofree char *op = entry_path(e, i, "overlap");
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, op,
                      "every %s level of a list must use the same overlap (\"%s\" here, \"%s\" before)",
                      mm_strategy_names[l->strategy], mm_overlap_names[l->overlap], mm_overlap_names[*o]);
        return FALSE;
      }
      *o = l->overlap;
      if (l->strategy == MM_STRAT_TP) bs->tp_overlap_min_bytes = MAX(bs->tp_overlap_min_bytes, l->overlap_min_bytes);
      else bs->overlap_chunks = l->overlap_chunks;
    }
    if (l->strategy != MM_STRAT_DDP) continue;
    if (bs->zero >= 0 && bs->zero != l->zero) {
      g_autofree char *zp = entry_path(e, i, "zero");
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, zp,
                    "every ddp level of a list must use the same ZeRO stage (%d here, %d before)", l->zero, bs->zero);
      return FALSE;
    }
    bs->zero = l->zero;
  }
  /* FSDP's group: its own levels, and the cp levels that shard with it (torchtitan's dp_shard_cp) */
  bs->fsdp_mask = MM_STRAT_MASK(MM_STRAT_FSDP);
  int cp_fsdp = -1;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    if (l->strategy != MM_STRAT_CP || l->degree <= 1) continue;
    if (cp_fsdp >= 0 && cp_fsdp != l->cp_fsdp) {
      g_autofree char *fp = entry_path(e, i, "fsdp");
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, fp,
                    "every cp level of a list must say the same fsdp (%s here, %s before): the cp ranks shard with "
                    "FSDP or all hold replicas", l->cp_fsdp ? "true" : "false", cp_fsdp ? "true" : "false");
      return FALSE;
    }
    cp_fsdp = l->cp_fsdp;
    if (l->cp_fsdp) bs->fsdp_mask |= MM_STRAT_MASK(MM_STRAT_CP);
  }
  bs->fsdp_shards = mm_plan_mask_degree(bs, bs->fsdp_mask);
  if (s->cfg->fp8_param_gather && s->cfg->fsdp_collectives == MM_FSDP_COLL_PER_TENSOR_LIST && bs->fsdp_shards > 1) {
    /* only FSDP's gathers take per_tensor_list: ZeRO-1/2's parameter all-gathers still gather FP8 */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.precision.fp8_param_gather",
                  "expected false with fsdp_collectives \"per_tensor_list\" where a block is FSDP-sharded (\"%s\" "
                  "is, over %" G_GINT64_FORMAT " ranks): DeepSpeed ZeRO-3's per-tensor calls gather the parameters in "
                  "their own dtype", b->name, bs->fsdp_shards);
    return FALSE;
  }
  /* ZeRO shards over the gradient replicas: ddp, ep and the cp ranks outside FSDP's group */
  const int64_t cp_replicas = bs->fsdp_mask & MM_STRAT_MASK(MM_STRAT_CP) ? 1 : bs->degree[MM_STRAT_CP];
  if (bs->zero < 0 || bs->degree[MM_STRAT_DDP] * bs->degree[MM_STRAT_EP] * cp_replicas <= 1) bs->zero = 0;

  /* Each level's strategy row: the block kinds it applies to, then its own checks. */
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    const MmStrategyRow *row = mm_strategy_row(l->strategy);
    g_assert(row); /* pp and sp are not levels: the parser rejects or maps them */
    if (l->grad_sync != MM_GRAD_SYNC_DENSE && b->kind != MM_BLOCK_EMBEDDING_BAG && b->kind != MM_BLOCK_TOKEN_EMBEDDING) {
      g_autofree char *gp = entry_path(e, i, "grad_sync");
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, gp,
                    "sparse gradient synchronization applies to embedding blocks; \"%s\" is a %s", b->name,
                    mm_block_kind_names[b->kind]);
      return FALSE;
    }
    const char *field = "strategy";
    g_autofree char *why = NULL;
    if (!(row->kinds & MM_KIND(b->kind)))
      why = g_strdup_printf("%s does not apply to block \"%s\", a %s%s%s%s", mm_strategy_names[l->strategy], b->name,
                            mm_block_kind_names[b->kind], row->kinds_hint ? " (" : "",
                            row->kinds_hint ? row->kinds_hint : "", row->kinds_hint ? ")" : "");
    else if (row->check)
      why = row->check(s, b, bs, l, &field);
    if (why) {
      g_autofree char *lp = entry_path(e, i, field);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp, "%s", why);
      mm_json_note_rule(why); /* the check's own reason, not "%s" */
      return FALSE;
    }
  }
  bs->mp_fraction = 1.0;
  if (b->kind == MM_BLOCK_EMBEDDING_BAG && bs->degree[MM_STRAT_MP] > 1) {
    const int64_t mp = bs->degree[MM_STRAT_MP];
    MmShardKind sk = MM_SHARD_TABLE;
    for (guint i = 0; i < bs->n_levels; i++)
      if (bs->levels[i].strategy == MM_STRAT_MP) sk = bs->levels[i].sharding;
    const int64_t have = mm_plan_mp_pieces(b, sk);
    /* the busiest device holds ceil(n / mp) of the n pieces */
    bs->mp_fraction = (double)((have + mp - 1) / mp) / (double)have;
  }
  return TRUE;
}

/* Parallel folding: the expert layout of transformer block @b with experts (the config's
 * "experts"): ETP innermost, then EP, then EDP over the stage's devices, as Megatron-Core's
 * expert RankGenerator orders them (megatron/core/parallel_state.py: tp=ETP, ep, dp=EDP,
 * order "tp-cp-ep-dp-pp" with cp 1). Errors point into $.experts or the block's levels. */
static gboolean resolve_experts(const MmJsonCtx *ctx, const MmScenario *s, const MmBlock *b, MmBlockSetup *bs,
                                GError **error)
{
  const MmParallelConfig *c = s->cfg;
  const int64_t n = s->stage_devices;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    const char *field = "strategy", *why = NULL;
    if (l->degree <= 1) continue;
    if (l->strategy == MM_STRAT_EP)
      why = "an ep level and the top-level \"experts\" both lay out the experts; give one (with \"experts\", the "
            "levels place attention and the dense layers only)";
    else if (l->strategy == MM_STRAT_FSDP)
      why = "fsdp levels are not modelled with parallel folding (\"experts\"); use ddp with \"zero\"";
    else if (l->strategy == MM_STRAT_CP && l->cp_fsdp)
      why = "cp levels sharding with fsdp (\"fsdp\": true) are not modelled with parallel folding (\"experts\")",
      field = "fsdp";
    else if (l->strategy == MM_STRAT_TP && l->experts_sharded)
      why = "with the top-level \"experts\" the expert layout is its etp; remove \"experts\": \"sharded\"",
      field = "experts";
    if (why) {
      g_autofree char *lp = g_strdup_printf("$.parallelism.%s[%u].%s", bs->entry->key, i, field);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp, "block \"%s\": %s", b->name, why);
      mm_json_note_rule(why);
      return FALSE;
    }
  }
  if (b->kind != MM_BLOCK_TRANSFORMER) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.experts",
                  "parallel folding is modelled for transformer blocks; block \"%s\" of %s is a %s with experts",
                  b->name, s->model->path, mm_block_kind_names[b->kind]);
    return FALSE;
  }
  const int64_t ep = c->experts_ep, etp = c->experts_etp > 0 ? c->experts_etp : bs->degree[MM_STRAT_TP];
  const char *etp_from = c->experts_etp > 0 ? "" : " (etp defaults to the block's tp degree)";
  if (ep * etp > n || n % (ep * etp) != 0) {
    g_autofree char *where = s->pp > 1 ? g_strdup_printf("one of the %" G_GINT64_FORMAT " pipeline stages of %s", s->pp,
                                                         s->hw->path)
                                       : g_strdup(s->hw->path);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.experts",
                  "ep x etp = %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT "%s must divide the %" G_GINT64_FORMAT
                  " devices of %s (the devices left, devices / (ep x etp), are the expert data-parallel degree)",
                  ep, etp, etp_from, n, where);
    return FALSE;
  }
  if (b->experts % ep != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.experts.ep",
                  "ep %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT " experts of block \"%s\" (%s)", ep,
                  b->experts, b->name, s->model->path);
    return FALSE;
  }
  if (b->ffn % etp != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, c->experts_etp > 0 ? "$.experts.etp" : "$.experts",
                  "etp %" G_GINT64_FORMAT "%s does not divide the ffn %" G_GINT64_FORMAT
                  " (each expert's width) of block \"%s\" (%s)",
                  etp, etp_from, b->ffn, b->name, s->model->path);
    return FALSE;
  }
  static const MmStrategy order[] = {MM_STRAT_TP, MM_STRAT_EP, MM_STRAT_DDP};
  static const char *const keys[] = {"$.experts.etp", "$.experts.ep", "$.experts"};
  const int64_t deg[] = {etp, ep, n / (ep * etp)};
  for (int k = 0; k < MM_STRAT_COUNT; k++) bs->expert_degree[k] = 1;
  int64_t stride = 1;
  for (guint i = 0; i < G_N_ELEMENTS(order); i++) {
    if (!mm_comm_group_even(s->hw, deg[i], stride)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, keys[i],
                    "an expert %s group of %" G_GINT64_FORMAT " devices with stride %" G_GINT64_FORMAT
                    " straddles node boundaries of %" G_GINT64_FORMAT "-GPU nodes unevenly; degrees must divide the "
                    "node or be multiples of it",
                    i == 0 ? "tp" : i == 1 ? "ep" : "data-parallel", deg[i], stride, s->hw->gpus_per_node);
      return FALSE;
    }
    bs->expert_levels[i] = (MmLevel){.strategy = order[i], .spec = MM_DEG_NUMBER, .degree = deg[i],
                                     .zero = order[i] == MM_STRAT_DDP ? bs->zero : 0};
    bs->expert_stride[i] = stride;
    bs->expert_degree[order[i]] = deg[i];
    stride *= deg[i];
  }
  bs->n_expert_levels = G_N_ELEMENTS(order);
  return TRUE;
}

gboolean mm_level_intra_node(const MmScenario *s, const MmBlockSetup *b, guint level)
{
  g_return_val_if_fail(level < b->n_levels, FALSE);
  return mm_comm_group_shape(s->hw, b->levels[level].degree, b->stride[level]).scope == MM_SCOPE_INTRA;
}

/* Pipeline stages: the outermost digit; checks the model can be cut into chunks. */
static gboolean resolve_pipeline(const MmJsonCtx *ctx, MmScenario *s, GError **error)
{
  const MmPipeline *p = &s->cfg->pipeline;
  const MmModel *m = s->model;
  const int64_t g = s->hw->gpus_per_node;
  s->pp = p->degree;
  s->vstages = p->degree > 1 ? p->virtual_stages : 1; /* chunks interleave stages: one stage has one chunk */
  s->stage_devices = s->devices / s->pp;
  for (guint i = 0; i < m->n_blocks; i++)
    if (mm_block_is_layers(&m->blocks[i])) s->layer_units += m->blocks[i].count;
  if (s->pp == 1) return TRUE;
  if (p->schedule == MM_PIPE_DUALPIPEV && s->vstages != 2) { /* a point's virtual stages */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.virtual_stages",
                  "dualpipev holds two chunks per stage; expected 2, got %" G_GINT64_FORMAT, s->vstages);
    return FALSE;
  }
  if (p->schedule == MM_PIPE_DUALPIPEV && s->cfg->task == MM_TASK_INFERENCE) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.schedule",
                  "dualpipev is a training schedule; inference runs gpipe, 1f1b or interleaved_1f1b");
    return FALSE;
  }
  if (s->devices % s->pp != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.degree",
                  "%" G_GINT64_FORMAT " stages do not divide the %" G_GINT64_FORMAT " devices of %s", s->pp,
                  s->devices, s->hw->path);
    return FALSE;
  }
  const int64_t st = s->stage_devices;
  if (!mm_comm_group_even(s->hw, s->pp, st)) { /* the stages form a group of stride st */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.degree",
                  "stages of %" G_GINT64_FORMAT " devices straddle the %" G_GINT64_FORMAT
                  "-GPU nodes of %s unevenly; a stage must fill whole nodes or divide one",
                  st, g, s->hw->path);
    return FALSE;
  }
  const int64_t chunks = s->pp * s->vstages;
  if (s->layer_units < chunks) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline",
                  "%" G_GINT64_FORMAT " chunks (degree x virtual_stages) but model %s has only %" G_GINT64_FORMAT
                  " transformer/mlp layers to split",
                  chunks, m->path, s->layer_units);
    return FALSE;
  }
  if (p->layers) {
    int64_t sum = 0;
    for (guint i = 0; i < p->n_layers; i++) sum += p->layers[i];
    if (sum != s->layer_units) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.layers",
                    "the chunks hold %" G_GINT64_FORMAT " layers but model %s has %" G_GINT64_FORMAT, sum, m->path,
                    s->layer_units);
      return FALSE;
    }
  }
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    gboolean chain = i == 0 ? b->n_inputs == 0 : b->n_inputs == 1 && b->inputs[0] == i - 1;
    if (!chain) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline",
                    "pipeline stages need a chain of blocks; block \"%s\" of %s reads other blocks than the one "
                    "before it",
                    b->name, m->path);
      return FALSE;
    }
  }
  return TRUE;
}

/* The block micro_batch refers to: the first transformer, else the first mlp, else block 0. */
static guint main_block(const MmModel *m)
{
  static const MmBlockKind order[] = {MM_BLOCK_TRANSFORMER, MM_BLOCK_MLP};
  for (guint k = 0; k < G_N_ELEMENTS(order); k++)
    for (guint i = 0; i < m->n_blocks; i++)
      if (m->blocks[i].kind == order[k]) return i;
  return 0;
}

MmScenario *mm_scenario_new(const MmModel *m0, const MmHardware *hw0, const MmParallelConfig *c0, const MmPoint *pt,
                            GError **error)
{
  g_return_val_if_fail(m0 && hw0 && c0, NULL);
  static const MmPoint none = {0};
  g_autoptr(MmScenario) s = g_new0(MmScenario, 1);
  if (!derive_views(s, m0, hw0, c0, pt ? pt : &none, error)) return NULL;
  const MmModel *m = s->model;
  const MmHardware *hw = s->hw;
  const MmParallelConfig *c = s->cfg;
  MmJsonCtx ctx = {c->path};
  s->devices = mm_hardware_devices(hw);
  s->blocks = g_new0(MmBlockSetup, m->n_blocks);
  if (!resolve_pipeline(&ctx, s, error)) return NULL;

  for (guint i = 0; i < c->n_strategies; i++) {
    gboolean is_kind;
    if (strcmp(c->strategies[i].key, "default") != 0 && !names_block(m, c->strategies[i].key, &is_kind)) {
      g_autofree char *jp = g_strdup_printf("$.parallelism.%s", c->strategies[i].key);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, &ctx, jp,
                    "\"%s\" is neither a block kind, a block name of %s, nor \"default\"",
                    c->strategies[i].key, m->path);
      return NULL;
    }
  }
  for (guint i = 0; i < c->n_frozen; i++) {
    gboolean is_kind;
    if (!names_block(m, c->frozen[i], &is_kind)) {
      g_autofree char *jp = g_strdup_printf("$.frozen[%u]", i);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, &ctx, jp,
                    "\"%s\" is neither a block kind nor a block name of %s", c->frozen[i], m->path);
      return NULL;
    }
  }

  gboolean any_trained = FALSE, any_folded = FALSE;
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    MmBlockSetup *bs = &s->blocks[i];
    for (int k = 0; k < MM_STRAT_COUNT; k++) bs->degree[k] = 1;
    bs->entry = mm_parallel_strategy_for(c, b);
    if (b->mtp && (!bs->entry || strcmp(bs->entry->key, b->name) != 0)) /* unnamed MTP modules: as their layers' block */
      bs->entry = mm_parallel_strategy_for(c, &m->blocks[b->mtp_source]);
    if (!bs->entry) {
      mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$.parallelism",
                    "no strategy for block \"%s\" (kind %s); add an entry keyed \"%s\", \"%s\" or \"default\"",
                    b->name, mm_block_kind_names[b->kind], b->name, mm_block_kind_names[b->kind]);
      return NULL;
    }
    if (!resolve_block(&ctx, s, b, bs, error)) return NULL;
    if (c->experts_ep > 0 && b->experts > 0) {
      if (!resolve_experts(&ctx, s, b, bs, error)) return NULL;
      any_folded = TRUE;
    }
    bs->frozen = block_frozen(c, b) || (b->mtp && block_frozen(c, &m->blocks[b->mtp_source]));
    any_trained |= !bs->frozen;
    bs->compute_dtype = c->compute_set ? c->compute_dtype : b->compute_dtype;
    bs->grad_dtype = c->grads_set ? c->grad_dtype : b->dtype;
    bs->optimizer = b->kind == MM_BLOCK_EMBEDDING_BAG ? &c->sparse_optimizer : &c->optimizer;
    if (hw->device.peak_flops[bs->compute_dtype] <= 0) {
      g_autofree char *jp = g_strdup_printf("$.blocks[%u]", i);
      MmJsonCtx mctx = {m->path};
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, c->compute_set ? &ctx : &mctx,
                    c->compute_set ? "$.precision.compute" : jp,
                    "compute dtype %s of block \"%s\" has no peak in device file %s",
                    mm_dtype_name(bs->compute_dtype), b->name, hw->device.path);
      return NULL;
    }
  }
  if (c->experts_ep > 0 && !any_folded) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.experts",
                  "lays out expert layers, but no block of %s has experts", m->path);
    return NULL;
  }
  if (c->task == MM_TASK_FINETUNE && !any_trained) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.frozen",
                  "every block is frozen; finetune needs at least one trained block");
    return NULL;
  }

  /* Batch split: micro_batch counts samples per data-parallel rank of main_block(). */
  if (c->global_batch_tokens > 0) {
    if (m->seq_len == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.global_batch_tokens",
                    "model %s has no seq_len; give \"global_batch\" in samples", m->path);
      return NULL;
    }
    if (c->global_batch_tokens % m->seq_len != 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.global_batch_tokens",
                    "%" G_GINT64_FORMAT " tokens is not a whole number of %" G_GINT64_FORMAT "-token sequences",
                    c->global_batch_tokens, m->seq_len);
      return NULL;
    }
    s->global_batch = c->global_batch_tokens / m->seq_len;
  } else {
    s->global_batch = c->global_batch;
  }
  s->ref_block = main_block(m);
  s->dp_ref = s->blocks[s->ref_block].dp;
  const char *bkey = c->global_batch_tokens > 0 ? "$.global_batch_tokens" : "$.global_batch";
  if (s->global_batch % s->dp_ref != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, bkey,
                  "%" G_GINT64_FORMAT " samples do not split evenly over the %" G_GINT64_FORMAT
                  " data-parallel ranks of block \"%s\"",
                  s->global_batch, s->dp_ref, m->blocks[s->ref_block].name);
    return NULL;
  }
  int64_t local = s->global_batch / s->dp_ref;
  s->micro_batch = c->micro_batch > 0 ? c->micro_batch : local;
  if (local % s->micro_batch != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.micro_batch",
                  "micro_batch %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                  " samples each data-parallel rank of block \"%s\" gets",
                  s->micro_batch, local, m->blocks[s->ref_block].name);
    return NULL;
  }
  s->micro_steps = local / s->micro_batch;
  double global_micro = (double)s->micro_batch * (double)s->dp_ref;
  for (guint i = 0; i < m->n_blocks; i++)
    s->blocks[i].samples_per_micro = global_micro / (double)s->blocks[i].dp;
  if (s->pp > 1 && c->pipeline.schedule == MM_PIPE_DUALPIPEV && s->micro_steps < 2 * s->pp) {
    /* deepseek-ai/DualPipe, dualpipev.py: num_chunks >= 2 x pp_size */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.micro_batch",
                  "dualpipev needs at least 2 x %" G_GINT64_FORMAT " stages = %" G_GINT64_FORMAT
                  " micro-batches per iteration; this config gives %" G_GINT64_FORMAT,
                  s->pp, 2 * s->pp, s->micro_steps);
    return NULL;
  }
  if (s->pp > 1 && c->pipeline.schedule == MM_PIPE_INTERLEAVED && s->vstages > 1 && s->micro_steps % s->pp != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.micro_batch",
                  "the interleaved schedule needs the micro-batches per iteration (%" G_GINT64_FORMAT
                  ") to be a multiple of the %" G_GINT64_FORMAT " pipeline stages",
                  s->micro_steps, s->pp);
    return NULL;
  }
  /* expert parallelism: the group of the first block that has one */
  s->ep_degree = 1;
  s->ep_stride = 1;
  for (guint i = 0; i < m->n_blocks && s->ep_degree == 1; i++) {
    const MmBlockSetup *bs = &s->blocks[i];
    if (mm_plan_folded(bs) && bs->expert_degree[MM_STRAT_EP] > 1) {
      s->ep_degree = bs->expert_degree[MM_STRAT_EP];
      s->ep_stride = bs->expert_stride[1];
      break;
    }
    for (guint k = 0; k < bs->n_levels; k++) {
      if (bs->levels[k].strategy == MM_STRAT_EP && bs->levels[k].degree > 1) {
        s->ep_degree = bs->levels[k].degree;
        s->ep_stride = bs->stride[k];
        break;
      }
    }
  }
  if (c->expert_skew > 0 && (s->ep_degree == 1 || c->expert_skew > (double)(s->ep_degree - 1))) {
    if (s->ep_degree == 1)
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.expert_skew",
                    "routing skew needs an ep level (experts sharded over a group) on a MoE block, or "
                    "\"experts\" with ep > 1");
    else
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.expert_skew",
                    "%g is more than the %" G_GINT64_FORMAT " other ranks of the ep group can give up; expected at "
                    "most ep degree - 1 = %" G_GINT64_FORMAT,
                    c->expert_skew, s->ep_degree - 1, s->ep_degree - 1);
    return NULL;
  }
  if ((c->pipeline.schedule == MM_PIPE_ZB_H1 || (c->pipeline.schedule == MM_PIPE_DUALPIPEV && s->pp > 1)) &&
      c->task != MM_TASK_INFERENCE && (c->recompute != MM_RECOMPUTE_NONE || c->offload_num_layers > 0)) {
    /* a deferred weight gradient keeps its GEMMs' inputs and output gradients until it runs;
     * recomputed or reloaded activations would stay on the device that long, which the memory
     * model does not count */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.pipeline.schedule",
                  "%s needs \"recompute\": \"none\" and no offload_num_layers (recompute is \"%s\", "
                  "offload_num_layers %" G_GINT64_FORMAT "): the memory its deferred weight gradients hold "
                  "then is not modelled",
                  mm_pipe_schedule_names[c->pipeline.schedule], mm_recompute_names[c->recompute],
                  c->offload_num_layers);
    return NULL;
  }
  if (c->attention_kernel != MM_ATTN_KERNEL_DEFAULT) {
    gboolean flash = FALSE;
    for (guint b = 0; b < s->model->n_blocks; b++)
      flash = flash || (s->model->blocks[b].kind == MM_BLOCK_TRANSFORMER && s->model->blocks[b].attention == MM_ATTN_FLASH);
    if (!flash) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.attention_kernel",
                    "\"%s\" names a flash-attention kernel, but %s (%s) has no flash attention (its transformer "
                    "blocks say \"attention\": \"eager\", or it has none); remove the key",
                    mm_attn_kernel_names[c->attention_kernel], s->model->name, s->model->path);
      return NULL;
    }
  }
  if (!mm__scenario_check_limits(s, error)) return NULL;
  return g_steal_pointer(&s);
}

gboolean mm_plan_graph_passes(const MmScenario *s, MmGraphPass *first, MmGraphPass *decode)
{
  const MmServing *sv = &s->cfg->serving;
  if (!sv->present) {
    *first = (MmGraphPass){.inference = s->cfg->task == MM_TASK_INFERENCE,
                           .loss_inplace = s->cfg->cross_entropy == MM_XENT_INPLACE};
    return FALSE;
  }
  /* the prefill writes the prompt's K/V; each decode step reads the context so far (on
   * average prompt + output / 2 tokens) and appends one token */
  *first = (MmGraphPass){sv->prompt_tokens, sv->prompt_tokens, TRUE, TRUE, FALSE, TRUE, FALSE};
  *decode = (MmGraphPass){1, sv->prompt_tokens + sv->output_tokens / 2, TRUE, TRUE, TRUE, TRUE, FALSE};
  return TRUE;
}
