/* limits: what a scenario may ask of the lowering and the engine, checked before either runs. */
#include <math.h>

#include "config/json.h"
#include "internal.h"

/* The lowering's estimate of one program's ops: per micro-step, three passes (forward,
 * backward, recompute) over every layer plus the collectives around each unit, divided
 * among the pipeline stages (lower.c sizes its arrays with it; it runs 1.5 to 15 times the
 * real count). An op costs about 230 bytes of plan and engine state, so the limit keeps one
 * program near 1 GiB and a few GiB at the worst. */
double mm__plan_ops_estimate(const MmGraph *g, int64_t micro_steps, int64_t stages)
{
  return (double)(g->n_layers + 6 * g->n_units + 16) * 3.0 * (double)micro_steps / (double)stages + 64.0;
}

/* The serialized compute of the busiest pipeline stage over one pass of @g: every layer
 * part it runs (forward; in training the backward's two parts where they run) at the cost
 * unit's time plus a launch each, times the micro-steps. The hot expert rank's load where
 * routing is skewed. What the lowering costs, without the collectives and the recompute:
 * below the program's serialized time. */
static double busiest_stage_compute_s(const MmScenario *s, const MmGraph *g)
{
  const gboolean training = s->cfg->task != MM_TASK_INFERENCE;
  const guint first_trained = mm_plan_first_trained(s);
  const double load = s->cfg->expert_skew > 0 && s->ep_degree > 1 ? 1.0 + s->cfg->expert_skew : 1.0;
  const double launch = mm_plan_launch_s(s, g);
  g_autofree uint32_t *chunk = mm_pipe_unit_chunks(s, g);
  g_autofree double *per_layer = g_new0(double, g->n_layers + 1);
  g_autofree double *stage_s = g_new0(double, (gsize)s->pp);
  for (uint32_t li = 0; li < g->n_layers; li++) {
    const MmLayer *l = &g->layers[li];
    if (l->canon == li) {
      const MmBlockSetup *bs = &s->blocks[l->block];
      MmPlacement pl;
      mm_plan_place(s, g, li, &pl);
      for (int part = MM_PART_FWD; part < MM_PART_COUNT; part++) {
        if (part == MM_PART_BWD_INPUT && !(training && l->block >= first_trained)) continue;
        if (part == MM_PART_BWD_WEIGHT && !(training && !bs->frozen)) continue;
        MmPartWork w;
        mm_plan_part_work(s, g, li, (MmKernelPart)part, &pl, load, &w, NULL);
        if (w.flops > 0 || w.bytes > 0) per_layer[li] += w.time_s + launch;
      }
    }
    stage_s[chunk[l->unit] % (uint32_t)s->pp] += per_layer[l->canon];
  }
  double worst = 0;
  for (int64_t st = 0; st < s->pp; st++) worst = MAX(worst, stage_s[st]);
  return worst * (double)s->micro_steps;
}

gboolean mm__scenario_check_limits(const MmScenario *s, GError **error)
{
  const MmParallelConfig *c = s->cfg;
  const MmServing *sv = &c->serving;
  MmJsonCtx ctx = {c->path};
  const char *bkey = c->global_batch_tokens > 0 ? "$.global_batch_tokens" : "$.global_batch";

  /* the passes the simulation runs (as mm_simulation_graphs builds them) */
  g_autoptr(MmGraph) g = NULL, decode = NULL;
  if (sv->present) {
    MmGraphPass prefill = {sv->prompt_tokens, sv->prompt_tokens, TRUE, TRUE, FALSE};
    MmGraphPass step = {1, sv->prompt_tokens + sv->output_tokens / 2, TRUE, TRUE, TRUE};
    g = mm_graph_new_pass(s->model, &prefill);
    decode = mm_graph_new_pass(s->model, &step);
  } else {
    g = mm_graph_new(s->model);
  }

  const double ops = mm__plan_ops_estimate(g, s->micro_steps, s->pp);
  if (!(ops <= MM_PLAN_MAX_OPS)) {
    const int64_t local = s->global_batch / s->dp_ref;
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, c->micro_batch > 0 ? "$.micro_batch" : bkey,
                  "%" G_GINT64_FORMAT " samples per data-parallel rank in micro-batches of %" G_GINT64_FORMAT
                  " are %" G_GINT64_FORMAT " micro-steps per iteration: about %.3g ops in one device's program "
                  "(3 x (%u layers + 6 x %u units + 16) x micro-steps / %" G_GINT64_FORMAT " pipeline stages of "
                  "model %s); madmax simulates at most %.3g; use a larger micro_batch or a smaller global batch",
                  local, s->micro_batch, s->micro_steps, ops, g->n_layers, g->n_units, s->pp, s->model->path,
                  (double)MM_PLAN_MAX_OPS);
    return FALSE;
  }

  const MmGraph *passes[2] = {g, decode};
  for (int k = 0; k < 2 && passes[k]; k++) {
    const double t = busiest_stage_compute_s(s, passes[k]);
    if (t <= MM_PLAN_MAX_ITERATION_S) continue;
    const MmBlock *ref = &s->model->blocks[s->ref_block];
    const char *what = !sv->present ? "one iteration" : k == 0 ? "the prefill" : "one decode step";
    const char *jp = sv->present ? "$.inference" : c->seq_len > 0 ? "$.seq_len" : bkey;
    g_autofree char *seq = ref->seq_len > 0 ? g_strdup_printf(" of %" G_GINT64_FORMAT " tokens", ref->seq_len)
                                            : g_strdup("");
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, jp,
                  "%s would take at least %.3g s of simulated time (the compute of the busiest device alone: "
                  "%" G_GINT64_FORMAT " samples%s of model %s in %" G_GINT64_FORMAT " micro-step%s on %" G_GINT64_FORMAT
                  " devices of %s); madmax simulates up to %.3g s (%.1f days): lower the batch or the sequence "
                  "length, or use more devices",
                  what, t, s->global_batch, seq, s->model->path, s->micro_steps, s->micro_steps == 1 ? "" : "s", s->devices,
                  s->hw->path,
                  MM_PLAN_MAX_ITERATION_S, MM_PLAN_MAX_ITERATION_S / 86400.0);
    return FALSE;
  }
  return TRUE;
}
