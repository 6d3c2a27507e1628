/* lower: one iteration of a scenario -> a program of compute and collective ops per device behaviour. */
#include <math.h>
#include <string.h>

#include "internal.h"

const char *const mm_stream_names[] = {"compute",     "comm_intra",  "comm_inter",  "pp_send_fwd",
                                       "pp_send_bwd", "pp_recv_fwd", "pp_recv_bwd", "offload_d2h",
                                       "offload_h2d", "host", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_stream_names) == MM_STREAM_COUNT + 1);
const char *const mm_phase_names[] = {"fwd", "bwd", "recompute", "optimizer", NULL};
const char *const mm_reason_names[] = {"fsdp", "tp", "ddp", "mp", "moe", "pp", "cp", "zero", "ulysses", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_reason_names) == MM_REASON_COUNT + 1);

/* ---- programs and classes ---------------------------------------------- */

static void lower_free(Lower *L)
{
  g_free(L->gq);
  g_free(L->gq_op);
  g_free(L->memo);
  g_free(L->cx_step);
  g_free(L->cx_link);
  g_free(L->cx_bytes);
  g_free(L->parts);
  g_free(L->parts_rec);
  mm__templates_free(L);
  g_free(L->unit_dense);
  g_free(L->unit_expert);
  g_free(L->unit_gather);
  g_free(L->fsdp_unit);
  mm__unit_tensors_free(L);
  g_free(L->grad_mask);
  g_free(L->place);
  g_free(L->place_of);
  g_free(L->canon_layer);
  g_free(L->chunk_first);
  g_free(L->chunk_end);
  g_free(L->chunk_trained);
  g_free(L->param_gather);
  g_free(L->recompute);
  g_free(L->offload);
  g_free(L->offload_d2h);
}

/* Expert load of the hot ep rank and of the others: (1 + skew) x the mean, and what is left. */
static double behaviour_load(const MmScenario *s, gboolean hot)
{
  const double skew = s->cfg->expert_skew, ep = (double)s->ep_degree;
  if (hot || skew <= 0 || ep <= 1) return mm_plan_hot_expert_load(s);
  return (ep - 1.0 - skew) / (ep - 1.0);
}

static void lower_behaviour(const MmScenario *s, const MmGraph *g, const MmLinks *links, const uint32_t *unit_chunk,
                            uint32_t micro_steps, uint32_t stage, gboolean hot, gboolean no_replay, MmPlanProgram *out)
{
  /* the scenario kept this below MM_PLAN_MAX_OPS; the arrays grow if it falls short */
  const uint32_t guess =
    (uint32_t)MIN(mm__plan_ops_estimate(g->n_layers, g->n_units, micro_steps, s->pp), (double)MM_PLAN_MAX_OPS);
  Lower L = {
    .s = s, .g = g, .m = s->model, .hw = s->hw, .links = links,
    .ops = g_new(MmEngineOp, guess), .info = g_new(MmOpInfo, guess), .dur = g_new(MmTime, guess + 1), .cap_ops = guess,
    .deps = g_new(uint32_t, 2 * guess), .cap_deps = 2 * guess,
    .xfer_link = g_new(uint32_t, guess), .xfer_bytes = g_new(double, guess), .cap_xfer = guess,
    .training = s->cfg->task != MM_TASK_INFERENCE,
    .launch_s = mm_plan_launch_s(s, g),
    .stage = stage, .expert_load = behaviour_load(s, hot), .a2a_skew = MAX(1.0, behaviour_load(s, hot)),
    .unit_chunk = unit_chunk, .p = (uint32_t)s->pp, .v = (uint32_t)s->vstages, .nm = micro_steps,
    .no_replay = no_replay,
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
  mm__places_new(&L);
  L.parts = g_new(PartCost, 3 * (gsize)g->n_layers + 1);
  for (uint32_t i = 0; i < L.n_canon; i++) {
    const uint32_t li = L.canon_layer[i];
    for (int part = PART_FWD; part <= PART_BWD_W; part++) mm__part_cost(&L, li, (Part)part, &L.parts[3 * li + part]);
  }
  for (uint32_t i = 0; i < L.n_canon; i++) {
    const uint32_t li = L.canon_layer[i];
    if (!mm_plan_recompute_differs(s, g, li)) continue;
    if (!L.parts_rec) { /* the forward's costs, those that differ replaced */
      L.parts_rec = g_new(PartCost, (gsize)g->n_layers + 1);
      for (uint32_t k = 0; k < L.n_canon; k++) L.parts_rec[L.canon_layer[k]] = L.parts[3 * L.canon_layer[k] + PART_FWD];
    }
    mm__part_cost(&L, li, PART_RECOMPUTE, &L.parts_rec[li]);
  }
  for (int i = 0; i < MM_STREAM_COUNT; i++) L.last_on[i] = NONE;
  mm__precompute_units(&L);
  L.recompute = mm__recompute_units(s, g, unit_chunk);
  L.offload = mm__offload_units(s, g, unit_chunk);
  if (L.training && s->cfg->offload_num_layers > 0) {
    L.offload_d2h = g_new(uint32_t, (gsize)micro_steps * g->n_units + 1);
    for (gsize i = 0; i < (gsize)micro_steps * g->n_units; i++) L.offload_d2h[i] = NONE;
  }
  if (L.training && s->cfg->overlap_param_gather) {
    L.param_gather = g_new(uint32_t, 2 * (gsize)g->n_units + 1);
    for (gsize i = 0; i < 2 * (gsize)g->n_units; i++) L.param_gather[i] = NONE;
  }
  mm__lower_program(&L);
  lower_free(&L);

  *out = (MmPlanProgram){
    .ops = L.ops, .info = L.info, .deps = L.deps, .n_ops = L.n_ops, .xfer_link = L.xfer_link,
    .xfer_bytes = L.xfer_bytes, .stage = stage, .hot = hot, .pair_first = L.pair_first, .n_pairs = L.n_pairs,
    .replays = L.replays, .n_replays = L.n_replays, .replay_in = L.replay_in,
  };
  out->dur = L.dur; /* set as each op was emitted */
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
    g_free(pr->pair_first);
    g_free(pr->replays);
    g_free(pr->replay_in);
  }
  g_free(p->programs);
  g_free(p->engine_programs);
  g_free(p->link_bw);
  g_free(p->classes);
  g_free(p->class_count);
  g_free(p->unit_chunk);
  g_free(p->runs);
  g_free(p);
}

MmPlan *mm_plan_new(const MmScenario *s, const MmGraph *g, const MmPlanOptions *opt)
{
  g_return_val_if_fail(s && g && g->model == s->model, NULL);
  MmPlan *p = g_new0(MmPlan, 1);
  p->scenario = s;
  p->graph = g;
  mm_comm_links(s->hw, &p->links);
  p->link_bw = g_new(double, p->links.n + 1);
  for (uint32_t i = 0; i < p->links.n; i++) p->link_bw[i] = p->links.bw_Bps[i] / MM_PS_PER_S;
  p->unit_chunk = mm_pipe_unit_chunks(s, g);
  p->micro_steps = opt && opt->micro_steps > 0 ? opt->micro_steps : (uint32_t)s->micro_steps;
  mm__pipe_period(s, &p->period_pairs, &p->period_micro);

  /* behaviours: a program per stage, two when one ep rank gets more tokens than the others */
  const gboolean skewed = s->cfg->expert_skew > 0 && s->ep_degree > 1;
  const uint32_t per_stage = skewed ? 2 : 1;
  p->n_programs = (uint32_t)s->pp * per_stage;
  p->programs = g_new0(MmPlanProgram, p->n_programs);
  p->engine_programs = g_new(MmEngineProgram, p->n_programs);
  for (uint32_t st = 0; st < (uint32_t)s->pp; st++) {
    for (uint32_t h = 0; h < per_stage; h++) {
      MmPlanProgram *pr = &p->programs[st * per_stage + h];
      lower_behaviour(s, g, &p->links, p->unit_chunk, p->micro_steps, st, skewed && h == 0, opt && opt->no_replay, pr);
      const int64_t hot_devices = s->stage_devices / s->ep_degree;
      pr->devices = !skewed ? s->stage_devices : h == 0 ? hot_devices : s->stage_devices - hot_devices;
      pr->rep_device = (uint32_t)(st * s->stage_devices + (h == 1 ? s->ep_stride : 0));
      p->engine_programs[st * per_stage + h] = pr->program;
    }
  }

  const gboolean per_device = p->per_device = opt && opt->per_device;
  /* compute beside a collective kernel: 1 / (1 + the device's collective_slowdown) of its pace */
  const double slow_pace = 1.0 / (1.0 + s->hw->device.overlap.collective_slowdown.value);
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
    p->classes[c] = (MmEngineClass){prog, pr->dur, per_device ? c : pr->rep_device, p->link_bw, slow_pace};
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
  if (in->what == MM_OP_COPY)
    return g_strdup_printf("%s activations %s%s", in->phase == MM_PHASE_FWD ? "offload" : "reload", unit, micro);
  if (in->what == MM_OP_HOST_STEP) return g_strdup("optimizer step (cpu)");
  if (in->what == MM_OP_GRAD_ACCUM) return g_strdup_printf("accumulate gradients %s%s", unit, micro);
  if (in->what == MM_OP_HOST_COPY && in->phase == MM_PHASE_OPTIMIZER) return g_strdup("weights to device");
  if (in->what == MM_OP_HOST_COPY) return g_strdup_printf("gradients to host%s%s", unit ? " " : "", unit ? unit : "");
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
