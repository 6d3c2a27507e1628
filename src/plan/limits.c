/* limits: what a scenario may ask of the lowering and the engine, checked before either runs. */
#include <math.h>

#include "config/json.h"
#include "internal.h"

/* The lowering's estimate of one program's ops: per micro-step, three passes (forward,
 * backward, recompute) over every layer plus the collectives around each unit, divided
 * among the pipeline stages (lower.c sizes its arrays with it; it runs 1.5 to 15 times the
 * real count). An op costs about 230 bytes of plan and engine state, so the limit keeps one
 * program near 1 GiB and a few GiB at the worst. */
double mm__plan_ops_estimate(double layers, double units, int64_t micro_steps, int64_t stages)
{
  return (layers + 6.0 * units + 16.0) * 3.0 * (double)micro_steps / (double)stages + 64.0;
}

/* @kind of @bytes over the groups of block @b's levels in @mask, each run of consecutive
 * levels a collective of its own (as emit.c issues them), alone on idle links. */
static double coll_s(const MmScenario *s, const MmLinks *links, guint b, uint32_t mask, MmCollKind kind, double bytes)
{
  const MmBlockSetup *bs = &s->blocks[b];
  if (bytes <= 0 || kind >= MM_COLL_COUNT) return 0;
  double t = 0;
  int64_t degree = 1, stride = 1;
  const MmLevel *levels;
  const int64_t *strides;
  const guint n = mm_plan_mask_levels(bs, mask, &levels, &strides);
  for (guint i = 0; i <= n; i++) {
    if (i < n && levels[i].degree <= 1) continue; /* takes no digit */
    if (i < n && (mask & MASK(levels[i].strategy))) {
      if (degree == 1) stride = strides[i];
      degree *= levels[i].degree;
      continue;
    }
    if (degree > 1) { /* a run ends */
      MmCollective c = {.kind = kind, .bytes = bytes, .degree = degree, .stride = stride,
                        .algorithm = s->cfg->algorithm[kind], .skew = 1.0};
      MmCommCost cost;
      mm_comm_cost(s->hw, links, &c, &cost);
      t += cost.time_s;
      degree = 1;
    }
  }
  return t;
}

/* What the busiest pipeline stage does alone in one pass of @g, each side serialized: its
 * compute (every layer part it runs, forward and in training the backward's two parts where
 * they run, at the cost unit's time plus a launch) and its communication (the placements'
 * collectives, FSDP's gathers, the gradient synchronization), with the hot expert rank's load
 * where routing is skewed; @repeat (NULL: 1) counts each unit of @g that many times. What the
 * lowering costs, less the recompute, the pipeline transfers and the embedding exchanges, and
 * with no overlap between collectives: the larger of the two is 0.3 to 1.6 times the
 * simulated iteration of the shipped inputs. */
static void busiest_stage_s(const MmScenario *s, const MmGraph *g, const double *repeat, double *compute_s,
                            double *comm_s, double *grads_s)
{
  const gboolean training = s->cfg->task != MM_TASK_INFERENCE;
  const guint first_trained = mm_plan_first_trained(s);
  const double load = mm_plan_hot_expert_load(s);
  const double launch = mm_plan_launch_s(s, g);
  MmLinks links;
  mm_comm_links(s->hw, &links);
  g_autofree uint32_t *chunk = mm_pipe_unit_chunks(s, g);
  g_autofree double *layer_compute = g_new0(double, g->n_layers + 1), *layer_comm = g_new0(double, g->n_layers + 1);
  g_autofree double *layer_grad = g_new0(double, g->n_layers + 1);
  g_autofree double *stage_compute = g_new0(double, (gsize)s->pp), *stage_comm = g_new0(double, (gsize)s->pp);
  g_autofree double *grad_bytes = g_new0(double, 2 * (gsize)s->model->n_blocks); /* per block: dense, expert */
  for (uint32_t li = 0; li < g->n_layers; li++) {
    const MmLayer *l = &g->layers[li];
    const MmBlockSetup *bs = &s->blocks[l->block];
    const gboolean bwd_in = training && l->block >= first_trained, bwd_w = training && !bs->frozen;
    if (l->canon == li) {
      MmPlacement pl;
      mm_plan_place(s, g, li, &pl);
      for (int part = MM_PART_FWD; part < MM_PART_COUNT; part++) {
        if ((part == MM_PART_BWD_INPUT && !bwd_in) || (part == MM_PART_BWD_WEIGHT && !bwd_w)) continue;
        MmPartWork w;
        mm_plan_part_work(s, g, li, (MmKernelPart)part, &pl, load, &w, NULL);
        if (w.flops > 0 || w.bytes > 0) layer_compute[li] += w.time_s + launch;
      }
      for (uint32_t k = 0; k < pl.n_colls; k++) {
        const MmPlaceColl *c = &pl.colls[k];
        layer_comm[li] += coll_s(s, &links, l->block, c->mask, (MmCollKind)c->fwd, c->fwd_bytes);
        if (bwd_in) layer_comm[li] += coll_s(s, &links, l->block, c->mask, (MmCollKind)c->bwd, c->bwd_bytes);
      }
      const double e = mm_dtype_bytes(s->model->blocks[l->block].dtype);
      const double held = (double)l->cost.params * pl.param_frac;
      const double fsdp = (double)bs->fsdp_shards;
      if (fsdp > 1) /* the weights gathered for the forward, and again for the backward */
        layer_comm[li] += (bwd_in ? 2 : 1) * coll_s(s, &links, l->block, bs->fsdp_mask, MM_COLL_ALL_GATHER,
                                                    held * fsdp * e);
      layer_grad[li] = bwd_w ? held * mm_dtype_bytes(bs->grad_dtype) : 0;
    }
    const uint32_t st = mm_pipe_chunk_stage(s, chunk[l->unit]);
    const double n = repeat ? repeat[l->unit] : 1.0;
    stage_compute[st] += n * layer_compute[l->canon];
    stage_comm[st] += n * layer_comm[l->canon];
    grad_bytes[2 * l->block + (l->expert ? 1 : 0)] += n * layer_grad[l->canon];
  }
  /* gradients: one AllReduce per block and kind of parameters over their replicas, spread
   * over the stages */
  double grads = 0;
  for (guint b = 0; b < s->model->n_blocks; b++)
    for (int ex = 0; ex < 2; ex++)
      grads += coll_s(s, &links, b, mm_plan_grad_replicas(s, b, ex), MM_COLL_ALL_REDUCE, grad_bytes[2 * b + ex]);
  *compute_s = *comm_s = 0;
  *grads_s = grads / (double)s->pp;
  for (int64_t st = 0; st < s->pp; st++) {
    *compute_s = MAX(*compute_s, stage_compute[st] * (double)s->micro_steps);
    *comm_s = MAX(*comm_s, stage_comm[st] * (double)s->micro_steps + grads / (double)s->pp);
  }
}

gboolean mm__scenario_check_limits(const MmScenario *s, GError **error)
{
  const MmParallelConfig *c = s->cfg;
  const MmServing *sv = &c->serving;
  MmJsonCtx ctx = {c->path};
  const char *bkey = c->global_batch_tokens > 0 ? "$.global_batch_tokens" : "$.global_batch";

  /* The passes the simulation runs (as mm_simulation_graphs builds them). Without pipeline
   * stages the layers of a transformer block are all alike and all on one device: a graph
   * with one of each, counted count times, costs the same for a fraction of the building
   * (a sweep derives a scenario per point). */
  const MmModel *m = s->model;
  MmModel one_each = *m;
  g_autofree MmBlock *blocks = NULL;
  if (s->pp == 1) {
    blocks = g_memdup2(m->blocks, sizeof(MmBlock) * m->n_blocks);
    for (guint b = 0; b < m->n_blocks; b++)
      if (blocks[b].kind == MM_BLOCK_TRANSFORMER) blocks[b].count = 1;
    one_each.blocks = blocks;
  }
  MmGraphPass first, step;
  const gboolean serving = mm_plan_graph_passes(s, &first, &step);
  g_autoptr(MmGraph) g = mm_graph_new_pass(&one_each, &first);
  g_autoptr(MmGraph) decode = serving ? mm_graph_new_pass(&one_each, &step) : NULL;
  g_autofree double *repeat = g_new(double, g->n_units + 1);
  double layers = 0, units = 0, params = 0;
  for (uint32_t u = 0; u < g->n_units; u++) {
    repeat[u] = blocks ? (double)m->blocks[g->units[u].block].count / (double)blocks[g->units[u].block].count : 1.0;
    layers += repeat[u] * (double)g->units[u].n_layers;
    units += repeat[u];
    params += repeat[u] * (double)g->units[u].cost.params;
    /* ring attention splits the attention core into a piece and a K/V pass per cp rank: ops as layers */
    for (uint32_t li = g->units[u].first_layer; li < g->units[u].first_layer + g->units[u].n_layers; li++) {
      if (g->layers[li].role != MM_ROLE_ATTN_CORE) continue;
      MmPlacement pl;
      mm_plan_place(s, g, li, &pl);
      if (pl.ring_mask)
        layers += repeat[u] * 2.0 * (double)mm_plan_mask_degree(&s->blocks[g->units[u].block], pl.ring_mask);
    }
  }

  const double ops = mm__plan_ops_estimate(layers, units, s->micro_steps, s->pp);
  if (!(ops <= MM_PLAN_MAX_OPS)) {
    const int64_t local = s->global_batch / s->dp_ref;
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, c->micro_batch > 0 ? "$.micro_batch" : bkey,
                  "%" G_GINT64_FORMAT " samples per data-parallel rank in micro-batches of %" G_GINT64_FORMAT
                  " are %" G_GINT64_FORMAT " micro-steps per iteration: about %.3g ops in one device's program "
                  "(3 x (%u layers (ring attention: 2 per cp rank) + 6 x %u units + 16) x micro-steps / %"
                  G_GINT64_FORMAT " pipeline stages of "
                  "model %s); madmax simulates at most %.3g; use a larger micro_batch or a smaller global batch",
                  local, s->micro_batch, s->micro_steps, ops, (guint)layers, (guint)units, s->pp, s->model->path,
                  (double)MM_PLAN_MAX_OPS);
    return FALSE;
  }
  if (!(ops * (double)s->pp <= MM_PLAN_MAX_TOTAL_OPS)) {
    const int64_t local = s->global_batch / s->dp_ref;
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, c->micro_batch > 0 ? "$.micro_batch" : bkey,
                  "%" G_GINT64_FORMAT " samples per data-parallel rank in micro-batches of %" G_GINT64_FORMAT
                  " are %" G_GINT64_FORMAT " micro-steps per iteration: about %.3g ops in each of %" G_GINT64_FORMAT
                  " pipeline stages' programs, %.3g in all, which madmax holds at once (model %s); it simulates at "
                  "most %.3g: use a larger micro_batch or a smaller global batch",
                  local, s->micro_batch, s->micro_steps, ops, s->pp, ops * (double)s->pp, s->model->path,
                  (double)MM_PLAN_MAX_TOTAL_OPS);
    return FALSE;
  }

  const MmGraph *passes[2] = {g, decode};
  for (int k = 0; k < 2 && passes[k]; k++) {
    double compute, comm, grads;
    busiest_stage_s(s, passes[k], repeat, &compute, &comm, &grads);
    const double t = MAX(compute, comm);
    if (t <= MM_PLAN_MAX_ITERATION_S) continue;
    const MmBlock *ref = &s->model->blocks[s->ref_block];
    const char *what = !sv->present ? "one iteration" : k == 0 ? "the prefill" : "one decode step";
    const gboolean by_grads = comm > compute && grads >= comm / 2;
    const char *jp = by_grads ? "$.parallelism" : sv->present ? "$.inference" : c->seq_len > 0 ? "$.seq_len" : bkey;
    g_autofree char *seq = ref->seq_len > 0 ? g_strdup_printf(" of %" G_GINT64_FORMAT " tokens", ref->seq_len)
                                            : g_strdup("");
    g_autofree char *why =
      by_grads ? g_strdup_printf("the gradient synchronization of the busiest device alone: %.3g parameters of model %s "
                                 "on %" G_GINT64_FORMAT " devices of %s); madmax simulates up to %.3g s (%.1f days): "
                                 "shard the parameters further or use faster links",
                                 params, s->model->path, s->devices, s->hw->path,
                                 MM_PLAN_MAX_ITERATION_S, MM_PLAN_MAX_ITERATION_S / 86400.0)
               : g_strdup_printf("the %s of the busiest device alone: %" G_GINT64_FORMAT " samples%s of model %s in %"
                                 G_GINT64_FORMAT " micro-step%s on %" G_GINT64_FORMAT " devices of %s); madmax simulates "
                                 "up to %.3g s (%.1f days): lower the batch or the sequence length, or use more devices%s",
                                 compute >= comm ? "compute" : "communication", s->global_batch, seq, s->model->path,
                                 s->micro_steps, s->micro_steps == 1 ? "" : "s", s->devices, s->hw->path,
                                 MM_PLAN_MAX_ITERATION_S, MM_PLAN_MAX_ITERATION_S / 86400.0,
                                 compute >= comm ? "" : " or faster links");
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, jp, "%s would take about %.3g s of simulated time (%s", what, t,
                  why);
    return FALSE;
  }
  return TRUE;
}
