/* describe: per-layer costs, strategies and per-device memory as JSON and text. */
#include <math.h>
#include <string.h>

#include "report.h"

static const char *const class_names[] = {"gemm", "attention", "elementwise", "lookup", "interaction"};
static const char *const tp_names[] = {"replicated", "column", "row", "sharded"};

static cJSON *cost_json(const MmCost *c)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "params", (double)c->params);
  cJSON_AddNumberToObject(o, "fwd_flops", c->fwd_flops);
  cJSON_AddNumberToObject(o, "bwd_input_flops", c->bwd_input_flops);
  cJSON_AddNumberToObject(o, "bwd_weight_flops", c->bwd_weight_flops);
  cJSON_AddNumberToObject(o, "fwd_exec_flops", c->fwd_exec_flops);
  cJSON_AddNumberToObject(o, "bwd_input_exec_flops", c->bwd_input_exec_flops);
  cJSON_AddNumberToObject(o, "fwd_bytes", c->fwd_bytes);
  cJSON_AddNumberToObject(o, "bwd_input_bytes", c->bwd_input_bytes);
  cJSON_AddNumberToObject(o, "bwd_weight_bytes", c->bwd_weight_bytes);
  cJSON_AddNumberToObject(o, "weight_bytes", c->weight_bytes);
  cJSON_AddNumberToObject(o, "activation_bytes", c->act_bytes);
  cJSON_AddNumberToObject(o, "output_bytes", c->out_bytes);
  return o;
}

static cJSON *parts_json(const MmMemoryParts *p);

cJSON *mm_report_memory_json(const MmMemory *mem, const MmModel *m)
{
  cJSON *mo = cJSON_CreateObject();
  cJSON_AddNumberToObject(mo, "per_device_bytes", mem->per_device_bytes);
  cJSON_AddNumberToObject(mo, "capacity_bytes", mem->capacity_bytes);
  cJSON_AddBoolToObject(mo, "fits", mem->fits);
  cJSON_AddItemToObject(mo, "breakdown", parts_json(&mem->total));
  cJSON_AddNumberToObject(mo, "transient_activation_bytes", mem->transient_activations);
  if (mem->kv_tokens > 0) cJSON_AddNumberToObject(mo, "kv_cache_tokens_per_sequence", mem->kv_tokens);
  if (mem->host_bytes > 0) cJSON_AddNumberToObject(mo, "host_optimizer_bytes_per_device", mem->host_bytes);
  if (mem->n_stages > 1) {
    cJSON_AddNumberToObject(mo, "stage", mem->stage);
    cJSON *st = cJSON_AddArrayToObject(mo, "per_stage");
    for (guint i = 0; i < mem->n_stages; i++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "stage", i);
      cJSON_AddNumberToObject(o, "per_device_bytes", mem->stage_bytes[i]);
      cJSON_AddNumberToObject(o, "micro_batches_in_flight", mem->stage_inflight[i]);
      cJSON_AddItemToArray(st, o);
    }
  }
  cJSON *bb = cJSON_AddArrayToObject(mo, "by_block");
  for (guint i = 0; i < mem->n_blocks; i++) {
    cJSON *o = parts_json(&mem->blocks[i]);
    cJSON_AddItemToObject(o, "block", cJSON_CreateString(m->blocks[i].name));
    cJSON_AddItemToArray(bb, o);
  }
  return mo;
}

static cJSON *parts_json(const MmMemoryParts *p)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "weights", p->weights);
  cJSON_AddNumberToObject(o, "gradients", p->gradients);
  cJSON_AddNumberToObject(o, "optimizer", p->optimizer);
  cJSON_AddNumberToObject(o, "activations", p->activations);
  cJSON_AddNumberToObject(o, "kv_cache", p->kv_cache);
  cJSON_AddNumberToObject(o, "comm_buffers", p->comm_buffers);
  return o;
}

/* Per-token closed form for decoder LLMs: 6N + 12 L s h (attention scores and context);
 * N counts active parameters (MoE: top_k of the experts). */
static double six_n_attention(const MmGraph *g)
{
  double attn = 0;
  for (guint i = 0; i < g->model->n_blocks; i++) {
    const MmBlock *b = &g->model->blocks[i];
    if (b->kind == MM_BLOCK_TRANSFORMER)
      attn += 12.0 * (double)b->count * (double)b->seq_len * (double)b->hidden;
  }
  return 6.0 * g->active_params + attn;
}

/* The strategies of a collective's group; over a block's expert layout (parallel folding) its
 * levels are named etp, ep and edp. */
static cJSON *strategy_mask_json(uint32_t mask)
{
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < MM_STRAT_COUNT; k++) {
    if (!(mask & MM_STRAT_MASK(k))) continue;
    const char *name = mm_strategy_names[k];
    if (mask & MM_MASK_EXPERTS) name = k == MM_STRAT_TP ? "etp" : k == MM_STRAT_DDP ? "edp" : name;
    cJSON_AddItemToArray(a, cJSON_CreateString(name));
  }
  return a;
}

/* The placement of layer @li: what memory and lowering both read. */
static cJSON *placement_json(const MmScenario *s, const MmGraph *g, guint li)
{
  MmPlacement p;
  mm_plan_place(s, g, li, &p);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "param_fraction", p.param_frac);
  cJSON_AddNumberToObject(o, "work_fraction", p.work_frac);
  cJSON_AddNumberToObject(o, "weight_read_fraction", p.weight_frac);
  cJSON_AddNumberToObject(o, "activation_fraction", p.act_frac);
  cJSON_AddNumberToObject(o, "kv_cache_fraction", p.kv_frac);
  cJSON_AddNumberToObject(o, "sequence_split", p.seq_split);
  cJSON_AddBoolToObject(o, "work_follows_expert_load", p.load_scaled);
  cJSON *cs = cJSON_AddArrayToObject(o, "collectives");
  for (uint32_t i = 0; i < p.n_colls; i++) {
    const MmPlaceColl *c = &p.colls[i];
    cJSON *co = cJSON_CreateObject();
    cJSON_AddStringToObject(co, "at", c->after ? "after" : "before");
    cJSON_AddStringToObject(co, "reason", mm_reason_names[c->reason]);
    cJSON_AddItemToObject(co, "group", strategy_mask_json(c->mask));
    cJSON_AddStringToObject(co, "fwd", c->fwd == MM_COLL_NONE ? "none" : mm_coll_names[c->fwd]);
    cJSON_AddNumberToObject(co, "fwd_bytes", c->fwd == MM_COLL_NONE ? 0 : c->fwd_bytes);
    cJSON_AddStringToObject(co, "bwd", c->bwd == MM_COLL_NONE ? "none" : mm_coll_names[c->bwd]);
    cJSON_AddNumberToObject(co, "bwd_bytes", c->bwd == MM_COLL_NONE ? 0 : c->bwd_bytes);
    if (c->regather_bytes > 0) cJSON_AddNumberToObject(co, "regather_bytes", c->regather_bytes);
    cJSON_AddItemToArray(cs, co);
  }
  if (p.ring_mask) {
    cJSON *r = cJSON_AddObjectToObject(o, "ring");
    cJSON_AddItemToObject(r, "group", strategy_mask_json(p.ring_mask));
    cJSON_AddNumberToObject(r, "fwd_bytes_per_step", p.ring_fwd_bytes);
    cJSON_AddNumberToObject(r, "bwd_bytes_per_step", p.ring_bwd_bytes);
  }
  return o;
}

static const char *scope_of(const MmScenario *s, int64_t degree, int64_t stride)
{
  static const char *const scopes[] = {"intra_node", "inter_node", "intra_and_inter_node"};
  if (degree == 1) return "none";
  return scopes[mm_comm_group_shape(s->hw, degree, stride).scope];
}

/* Whether block @b's FP8 GEMMs have weights of their own (a tied head's is the embedding table). */
static gboolean fp8_gemm_weights(const MmScenario *s, const MmGraph *g, guint b)
{
  if (!mm_plan_fp8_recipe(s, &s->blocks[b])) return FALSE;
  for (uint32_t li = 0; li < g->n_layers; li++)
    if (g->layers[li].block == b && mm_plan_gemm_weight_elems(s, g, li) > 0) return TRUE;
  return FALSE;
}

/* Whether block @b gathers its parameters: FSDP, or ZeRO's gather of a trained block's update. */
static gboolean gathers_params(const MmScenario *s, guint b)
{
  return s->blocks[b].fsdp_shards > 1 || (mm_plan_zero_gathers(s, b) && mm_plan_zero_shards(s, b, FALSE) > 1);
}

static const char *group_scope(const MmScenario *s, const MmBlockSetup *bs, guint i)
{
  return scope_of(s, bs->levels[i].degree, bs->stride[i]);
}

/* Names of a folded block's expert levels (tp, ep, ddp of its expert layout). */
static const char *const expert_level_names[] = {"etp", "ep", "edp"};

static char *strategy_text(const MmScenario *s, const MmBlockSetup *bs)
{
  GString *str = g_string_new("(");
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    const char *name = l->strategy == MM_STRAT_TP && l->sequence_parallel ? "tp+sp" : mm_strategy_names[l->strategy];
    const char *zero = l->strategy == MM_STRAT_DDP && l->zero > 0 ? (l->zero == 1 ? " zero-1" : " zero-2") : "";
    g_string_append_printf(str, "%s(%s%s %" G_GINT64_FORMAT " %s", i ? ", " : "", name, zero, l->degree,
                           group_scope(s, bs, i));
    if (l->overlap != MM_OVERLAP_BULK) g_string_append_printf(str, ", overlap %s", mm_overlap_names[l->overlap]);
    if (l->strategy == MM_STRAT_CP && l->cp_fsdp && l->degree > 1) g_string_append(str, ", fsdp-sharded");
    g_string_append(str, ")");
  }
  g_string_append(str, ")");
  for (guint i = 0; i < bs->n_expert_levels; i++) /* parallel folding: the expert layers' own levels */
    g_string_append_printf(str, "%s(%s %" G_GINT64_FORMAT " %s)%s", i ? ", " : ", experts (", expert_level_names[i],
                           bs->expert_levels[i].degree, scope_of(s, bs->expert_levels[i].degree, bs->expert_stride[i]),
                           i + 1 == bs->n_expert_levels ? ")" : "");
  return g_string_free(str, FALSE);
}

cJSON *mm_report_describe_json(const MmGraph *g, const MmGraph *decode, const MmScenario *s, const MmMemory *mem)
{
  const MmModel *m = g->model;
  cJSON *root = cJSON_CreateObject();
  if (s) {
    mm_report_inputs_json(s, root);
  } else {
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "name", m->name);
    cJSON_AddStringToObject(model, "path", m->path);
  }
  cJSON_AddNumberToObject(root, "total_params", (double)g->total_params);
  cJSON_AddNumberToObject(root, "active_params", g->active_params);
  cJSON_AddNumberToObject(root, "tokens_per_sample", g->tokens_per_sample);
  cJSON_AddStringToObject(root, "cost_basis", decode ? "per sequence, the prefill of its prompt; bytes are HBM traffic"
                                                     : "per sample (one sequence for sequence models); bytes are HBM traffic");
  if (decode) {
    cJSON *d = cJSON_AddObjectToObject(root, "decode_step");
    cJSON_AddNumberToObject(d, "context_tokens", (double)decode->pass.context);
    cJSON_AddStringToObject(d, "cost_basis", "per sequence, one generated token; weight_bytes are read once per step "
                                             "for the whole batch, fwd_bytes (K/V cache, activations) per sequence");
    cJSON_AddItemToObject(d, "cost_per_sequence", cost_json(&decode->total));
  }
  cJSON *totals = cJSON_AddObjectToObject(root, "per_sample");
  cJSON_AddItemToObject(totals, "cost", cost_json(&g->total));
  cJSON_AddNumberToObject(totals, "training_flops", mm_graph_train_flops_per_sample(g));
  if (m->seq_len > 0) {
    cJSON *pt = cJSON_AddObjectToObject(root, "per_token");
    cJSON_AddNumberToObject(pt, "training_flops", mm_graph_train_flops_per_sample(g) / g->tokens_per_sample);
    cJSON_AddNumberToObject(pt, "six_n_plus_attention_flops", six_n_attention(g));
    cJSON_AddNumberToObject(pt, "forward_flops", g->total.fwd_flops / g->tokens_per_sample);
  }

  cJSON *blocks = cJSON_AddArrayToObject(root, "blocks");
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", b->name);
    cJSON_AddStringToObject(o, "kind", mm_block_kind_names[b->kind]);
    cJSON_AddNumberToObject(o, "count", (double)b->count);
    cJSON_AddStringToObject(o, "dtype", mm_dtype_name(b->dtype));
    cJSON_AddStringToObject(o, "compute_dtype", mm_dtype_name(b->compute_dtype));
    cJSON_AddItemToObject(o, "cost_per_sample", cost_json(&g->block_cost[i]));
    cJSON_AddItemToArray(blocks, o);
  }

  cJSON *layers = cJSON_AddArrayToObject(root, "layers");
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    cJSON *o = cJSON_CreateObject();
    g_autofree char *name = mm_graph_unit_name(g, u);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "block", m->blocks[un->block].name);
    cJSON_AddStringToObject(o, "kind", mm_block_kind_names[m->blocks[un->block].kind]);
    cJSON_AddItemToObject(o, "cost_per_sample", cost_json(&un->cost));
    cJSON *subs = cJSON_AddArrayToObject(o, "ops");
    for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      cJSON *so = cJSON_CreateObject();
      cJSON_AddStringToObject(so, "role", mm_role_names[l->role]);
      cJSON_AddStringToObject(so, "class", class_names[l->cls]);
      cJSON_AddStringToObject(so, "tp_split", tp_names[l->tp]);
      cJSON_AddItemToObject(so, "cost_per_sample", cost_json(&l->cost));
      mm_report_kernel_json(so, g, li, s);
      if (s) cJSON_AddItemToObject(so, "placement", placement_json(s, g, li));
      cJSON_AddItemToArray(subs, so);
    }
    cJSON_AddItemToArray(layers, o);
  }
  if (!s) return root;

  cJSON *st = cJSON_AddArrayToObject(root, "strategies");
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlockSetup *bs = &s->blocks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "block", m->blocks[i].name);
    cJSON_AddStringToObject(o, "config_key", bs->entry->key);
    /* "grad_accumulation": "separate": HBM bytes per local parameter after every micro-batch's backward */
    cJSON_AddNumberToObject(o, "grad_accumulation_bytes_per_param", mm_plan_grad_accum_bytes(s, i));
    cJSON *lv = cJSON_AddArrayToObject(o, "levels");
    for (guint k = 0; k < bs->n_levels; k++) {
      cJSON *lo = cJSON_CreateObject();
      cJSON_AddStringToObject(lo, "strategy", mm_strategy_names[bs->levels[k].strategy]);
      cJSON_AddNumberToObject(lo, "degree", (double)bs->levels[k].degree);
      cJSON_AddNumberToObject(lo, "stride", (double)bs->stride[k]);
      cJSON_AddStringToObject(lo, "scope", group_scope(s, bs, k));
      if (bs->levels[k].strategy == MM_STRAT_MP)
        cJSON_AddStringToObject(lo, "sharding", mm_shard_names[bs->levels[k].sharding]);
      if (bs->levels[k].strategy == MM_STRAT_TP) cJSON_AddBoolToObject(lo, "sequence_parallel", bs->levels[k].sequence_parallel);
      if (bs->levels[k].strategy == MM_STRAT_DDP) cJSON_AddNumberToObject(lo, "zero", bs->levels[k].zero);
      if (bs->levels[k].strategy == MM_STRAT_CP) {
        cJSON_AddStringToObject(lo, "kv_exchange", mm_cp_impl_names[bs->levels[k].cp_impl]);
        cJSON_AddBoolToObject(lo, "fsdp", bs->levels[k].cp_fsdp);
      }
      if (bs->levels[k].overlap != MM_OVERLAP_BULK) {
        cJSON_AddStringToObject(lo, "overlap", mm_overlap_names[bs->levels[k].overlap]);
        if (bs->levels[k].strategy == MM_STRAT_TP)
          cJSON_AddNumberToObject(lo, "overlap_min_bytes", bs->levels[k].overlap_min_bytes);
        else
          cJSON_AddNumberToObject(lo, "overlap_chunks", (double)bs->levels[k].overlap_chunks);
      }
      cJSON_AddItemToArray(lv, lo);
    }
    if (mm_plan_folded(bs)) { /* parallel folding: the expert layers' own levels */
      cJSON *el = cJSON_AddArrayToObject(o, "expert_levels");
      for (guint k = 0; k < bs->n_expert_levels; k++) {
        cJSON *lo = cJSON_CreateObject();
        const int64_t d = bs->expert_levels[k].degree, es = bs->expert_stride[k];
        cJSON_AddStringToObject(lo, "strategy", expert_level_names[k]);
        cJSON_AddNumberToObject(lo, "degree", (double)d);
        cJSON_AddNumberToObject(lo, "stride", (double)es);
        cJSON_AddStringToObject(lo, "scope", scope_of(s, d, es));
        cJSON_AddItemToArray(el, lo);
      }
    }
    cJSON *fg = cJSON_AddObjectToObject(o, "fsdp_group");
    cJSON_AddItemToObject(fg, "strategies", strategy_mask_json(bs->fsdp_mask));
    cJSON_AddNumberToObject(fg, "shards", (double)bs->fsdp_shards);
    cJSON_AddStringToObject(fg, "collectives", mm_fsdp_coll_names[s->cfg->fsdp_collectives]);
    if (s->cfg->fsdp_collectives == MM_FSDP_COLL_PER_TENSOR_LIST)
      cJSON_AddNumberToObject(fg, "persistence_threshold_elements", (double)s->cfg->fsdp_persistence_threshold);
    cJSON_AddBoolToObject(fg, "regather_recompute", bs->fsdp_shards > 1 && mm_plan_regathers(s));
    cJSON *gr = cJSON_AddObjectToObject(o, "gradient_replicas");
    cJSON_AddItemToObject(gr, "dense", strategy_mask_json(mm_plan_grad_replicas(s, i, FALSE)));
    cJSON_AddItemToObject(gr, "expert", strategy_mask_json(mm_plan_grad_replicas(s, i, TRUE)));
    cJSON_AddBoolToObject(o, "frozen", bs->frozen);
    cJSON_AddStringToObject(o, "compute_dtype", mm_dtype_name(bs->compute_dtype));
    if (mm_plan_fp8_recipe(s, bs)) { /* training GEMMs under an FP8 recipe */
      cJSON_AddStringToObject(o, "fp8_recipe", mm_fp8_recipe_names[s->cfg->fp8_recipe]);
      cJSON_AddBoolToObject(o, "fp8_param_gather",
                            s->cfg->fp8_param_gather && gathers_params(s, i) && fp8_gemm_weights(s, g, i));
    }
    cJSON_AddNumberToObject(o, "samples_per_device_per_micro_step", bs->samples_per_micro);
    cJSON_AddItemToArray(st, o);
  }
  if (s->pp > 1) {
    cJSON *pp = cJSON_AddObjectToObject(root, "pipeline");
    cJSON_AddNumberToObject(pp, "stages", (double)s->pp);
    cJSON_AddNumberToObject(pp, "devices_per_stage", (double)s->stage_devices);
    cJSON_AddStringToObject(pp, "schedule", mm_pipe_schedule_names[s->cfg->pipeline.schedule]);
    cJSON_AddNumberToObject(pp, "virtual_stages", (double)s->vstages);
    cJSON_AddNumberToObject(pp, "micro_batches", (double)s->micro_steps);
    cJSON_AddBoolToObject(pp, "overlap_p2p", s->cfg->pipeline.overlap_p2p);
  }
  mm_report_hardware_params_json(s->hw, root);
  if (mem) cJSON_AddItemToObject(root, "memory", mm_report_memory_json(mem, m));
  mm_report_efficiency_json(root, s);
  return root;
}

/* ---- text -------------------------------------------------------------- */

static char *bytes_or_dash(double v) { return v > 0 ? mm_fmt_bytes(v) : g_strdup("-"); }
static char *flops_or_dash(double v) { return v > 0 ? mm_fmt_flops(v) : g_strdup("-"); }
static char *count_or_dash(double v) { return v > 0 ? mm_fmt_count(v) : g_strdup("-"); }

void mm_report_describe_text(FILE *out, const MmGraph *g, const MmGraph *decode, const MmScenario *s,
                             const MmMemory *mem)
{
  const MmModel *m = g->model;
  g_autofree char *params = mm_fmt_count((double)g->total_params);
  fprintf(out, "model    %s (%s)\n", m->name, m->path);
  fprintf(out, "params   %s (%" G_GINT64_FORMAT ")\n", params, g->total_params);
  g_autofree char *fwd = mm_fmt_flops(g->total.fwd_flops);
  if (decode) {
    g_autofree char *df = mm_fmt_flops(decode->total.fwd_flops);
    g_autofree char *dw = mm_fmt_bytes(decode->total.weight_bytes);
    g_autofree char *db = mm_fmt_bytes(decode->total.fwd_bytes);
    fprintf(out, "serving: costs below are per sequence for the prefill of its %.0f-token prompt (forward %s)\n",
            g->tokens_per_sample, fwd);
    fprintf(out, "decode step, per sequence at %" G_GINT64_FORMAT " tokens of context: forward %s; HBM: %s of K/V "
            "cache and activations,\n  plus the %s of weights, read once per step for the whole batch\n\n",
            decode->pass.context, df, db, dw);
  } else {
    g_autofree char *train = mm_fmt_flops(mm_graph_train_flops_per_sample(g));
    fprintf(out, "per sample: forward %s, training (fwd + bwd) %s", fwd, train);
    if (m->seq_len > 0) {
      g_autofree char *tok = mm_fmt_flops(mm_graph_train_flops_per_sample(g) / g->tokens_per_sample);
      g_autofree char *closed = mm_fmt_flops(six_n_attention(g));
      fprintf(out, "\nper token:  training %s (closed form 6N + 12·L·s·h with N active = %s)", tok, closed);
    }
    fprintf(out, "\n\n");
  }

  static const char *const bh[] = {"<block", "<kind", "layers", "params", "fwd/sample", "bwd/sample",
                                   "act/sample"};
  g_autoptr(MmTable) bt = mm_table_new(7, bh);
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    const MmCost *c = &g->block_cost[i];
    char *cells[7] = {g_strdup(b->name), g_strdup(mm_block_kind_names[b->kind]),
                      g_strdup_printf("%" G_GINT64_FORMAT, b->count), count_or_dash((double)c->params),
                      flops_or_dash(c->fwd_flops), flops_or_dash(c->bwd_input_flops + c->bwd_weight_flops),
                      bytes_or_dash(c->act_bytes)};
    mm_table_addv(bt, cells);
  }
  mm_table_print(bt, out, "");

  /* One layer of each block in detail: its ops. */
  fprintf(out, "\nper layer (one of each block's repeated layers), per sample:\n");
  static const char *const lh[] = {"<layer", "<op", "<class", "params", "fwd", "bwd input", "bwd weight",
                                   "HBM fwd", "act kept"};
  g_autoptr(MmTable) lt = mm_table_new(9, lh);
  guint last_block = G_MAXUINT;
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    if (un->block == last_block) continue;
    last_block = un->block;
    const MmBlock *b = &m->blocks[un->block];
    g_autofree char *uname = b->count > 1 ? g_strdup_printf("%s.[0-%" G_GINT64_FORMAT "]", b->name, b->count - 1)
                                          : g_strdup(b->name);
    for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      char *cells[9] = {g_strdup(li == un->first_layer ? uname : ""), g_strdup(mm_role_names[l->role]),
                        g_strdup(class_names[l->cls]), count_or_dash((double)l->cost.params),
                        flops_or_dash(l->cost.fwd_flops), flops_or_dash(l->cost.bwd_input_flops),
                        flops_or_dash(l->cost.bwd_weight_flops), bytes_or_dash(l->cost.fwd_bytes),
                        bytes_or_dash(l->cost.act_bytes)};
      mm_table_addv(lt, cells);
    }
  }
  mm_table_print(lt, out, "  ");
  for (guint b = 0; b < m->n_blocks; b++)
    if (m->blocks[b].kind == MM_BLOCK_TRANSFORMER) {
      fprintf(out, "  (a transformer layer's residual adds are in the HBM bytes of its last norm: norm_ffn, or a "
                   "shared-norm parallel block's norm_attn; docs/MODEL.md)\n");
      break;
    }
  mm_report_kernels_text(out, g, s);
  if (!s) return;

  const MmHardware *hw = s->hw;
  fprintf(out, "\nsystem   %s (%s): %" G_GINT64_FORMAT " x %s (%" G_GINT64_FORMAT " nodes x %" G_GINT64_FORMAT ")\n",
          hw->name, hw->path, s->devices, hw->device.name, hw->nodes, hw->gpus_per_node);
  mm_report_hardware_params_text(out, hw);
  fprintf(out, "config   %s (%s): %s, global batch %" G_GINT64_FORMAT " samples, micro-batch %" G_GINT64_FORMAT
          " x %" G_GINT64_FORMAT " steps, recompute %s\n",
          s->cfg->name, s->cfg->path, mm_task_names[s->cfg->task], s->global_batch, s->micro_batch,
          s->micro_steps, mm_recompute_names[s->cfg->recompute]);
  g_autoptr(GString) accum = g_string_new(NULL);
  for (guint i = 0; i < m->n_blocks; i++)
    if (mm_plan_grad_accum_bytes(s, i) > 0)
      g_string_append_printf(accum, "%s%g of %s", accum->len ? ", " : "", mm_plan_grad_accum_bytes(s, i), m->blocks[i].name);
  if (accum->len)
    fprintf(out, "gradients accumulated by a separate pass after every micro-batch's backward (grad_accumulation "
                 "separate): bytes per local parameter %s\n", accum->str);
  gboolean fsdp = FALSE, fp8 = FALSE, fp8_gather = FALSE;
  for (guint i = 0; i < m->n_blocks; i++) {
    const gboolean f8 = mm_plan_fp8_recipe(s, &s->blocks[i]);
    fsdp |= s->blocks[i].fsdp_shards > 1;
    fp8 |= f8;
    fp8_gather |= f8 && s->cfg->fp8_param_gather && gathers_params(s, i) && fp8_gemm_weights(s, g, i);
  }
  if (fp8)
    fprintf(out, "fp8 recipe %s: the linear layers' GEMMs in FP8 with the recipe's casts, the rest in bf16%s\n",
            mm_fp8_recipe_names[s->cfg->fp8_recipe],
            fp8_gather ? "; FSDP and ZeRO parameter all-gathers carry those GEMMs' weights in FP8 "
                         "(fp8_param_gather: each shard cast before its gather, the gathered weight "
                         "transposed for the input gradient)"
                       : "");
  if (fsdp && s->cfg->fsdp_collectives == MM_FSDP_COLL_PER_TENSOR_LIST)
    fprintf(out, "fsdp collectives per_tensor_list: one all-gather per parameter tensor of %" G_GINT64_FORMAT
                 " or more elements (smaller ones held whole) and one reduce-scatter per gradient, on lists of "
                 "per-rank views: each call pays its collective latency and one copy kernel per rank (%.3g us)\n",
            s->cfg->fsdp_persistence_threshold, hw->device.launch_overhead_s * 1e6);
  if (fsdp && mm_plan_regathers(s))
    fprintf(out, "fsdp regather recompute: a recomputed layer gathers its parameters for the recompute, frees them, "
                 "and gathers them again for its backward\n");
  if (s->pp > 1)
    fprintf(out, "pipeline %" G_GINT64_FORMAT " stages of %" G_GINT64_FORMAT " devices (outermost), %s, %" G_GINT64_FORMAT
            " chunk%s per stage, %" G_GINT64_FORMAT " micro-batches\n",
            s->pp, s->stage_devices, mm_pipe_schedule_names[s->cfg->pipeline.schedule], s->vstages,
            s->vstages > 1 ? "s" : "", s->micro_steps);
  static const char *const sh[] = {"<block", "<strategy (innermost first)", "samples/device/step", "<trained"};
  g_autoptr(MmTable) stt = mm_table_new(4, sh);
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlockSetup *bs = &s->blocks[i];
    char *cells[4] = {g_strdup(m->blocks[i].name), strategy_text(s, bs),
                      g_strdup_printf("%.6g", bs->samples_per_micro), g_strdup(bs->frozen ? "frozen" : "yes")};
    mm_table_addv(stt, cells);
  }
  mm_table_print(stt, out, "  ");
  if (!mem) return;

  fprintf(out, "\nmemory per device (busiest device):\n");
  static const char *const mh[] = {"<block", "weights", "gradients", "optimizer", "activations"};
  g_autoptr(MmTable) mt = mm_table_new(5, mh);
  for (guint i = 0; i < mem->n_blocks; i++) {
    const MmMemoryParts *p = &mem->blocks[i];
    char *cells[5] = {g_strdup(m->blocks[i].name), bytes_or_dash(p->weights), bytes_or_dash(p->gradients),
                      bytes_or_dash(p->optimizer), bytes_or_dash(p->activations)};
    mm_table_addv(mt, cells);
  }
  if (mem->transient_activations > 0) {
    const char *what = s->cfg->task == MM_TASK_INFERENCE ? "working set"
                       : s->cfg->offload_num_layers > 0    ? "offload buffer"
                                                           : "recomputed layer";
    char *tr[5] = {g_strdup(what),
                   g_strdup("-"), g_strdup("-"), g_strdup("-"), mm_fmt_bytes(mem->transient_activations)};
    mm_table_addv(mt, tr);
  }
  const MmMemoryParts *t = &mem->total;
  char *cells[5] = {g_strdup("total"), bytes_or_dash(t->weights), bytes_or_dash(t->gradients),
                    bytes_or_dash(t->optimizer), bytes_or_dash(t->activations)};
  mm_table_addv(mt, cells);
  mm_table_print(mt, out, "  ");
  g_autofree char *cb = mm_fmt_bytes(t->comm_buffers);
  g_autofree char *tot = mm_fmt_bytes(mem->per_device_bytes);
  g_autofree char *cap = mm_fmt_bytes(mem->capacity_bytes);
  fprintf(out, "  communication buffers %s (FSDP gathered layers, DDP buckets, TP/All2All staging)\n", cb);
  if (t->kv_cache > 0) {
    g_autofree char *kv = mm_fmt_bytes(t->kv_cache);
    fprintf(out, "  KV cache %s (%.0f tokens per sequence)\n", kv, mem->kv_tokens);
  }
  if (mem->n_stages > 1)
    fprintf(out, "  pipeline stage %u of %u needs the most (its first chunk holds %.0f micro-batches' activations)\n",
            mem->stage, mem->n_stages, mem->stage_inflight[mem->stage]);
  fprintf(out, "  total %s of %s: %s\n", tot, cap,
          mem->fits ? "fits" : "DOES NOT FIT (out of memory)");
}
