/* sweep: one complete simulation (load, graph, memory, plan, engine, metrics) as a value. */
#include "sweep.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

void mm_simulation_tune_allocator(void)
{
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's own ceiling for its adaptive threshold (64-bit) */
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void mm_inputs_free(MmInputs *in)
{
  if (!in) return;
  mm_parallel_free(in->config);
  mm_hardware_free(in->hardware);
  mm_model_free(in->model);
  g_free(in);
}

MmInputs *mm_inputs_load(const char *model, const char *hardware, const char *config, GError **error)
{
  g_autoptr(MmInputs) in = g_new0(MmInputs, 1);
  if (!(in->model = mm_model_load(model, error))) return NULL;
  if (!(in->hardware = mm_hardware_load(hardware, error))) return NULL;
  if (!(in->config = mm_parallel_load(config, error))) return NULL;
  return g_steal_pointer(&in);
}

MmInputs *mm_inputs_with_hardware(const MmInputs *in, const char *hardware, GError **error)
{
  MmHardware *hw = mm_hardware_load(hardware, error);
  if (!hw) return NULL;
  MmInputs *out = g_new0(MmInputs, 1);
  out->model = in->model;
  out->config = in->config;
  out->hardware = hw;
  return out;
}

void mm_inputs_free_system(MmInputs *in)
{
  if (!in) return;
  mm_hardware_free(in->hardware);
  g_free(in);
}

uint64_t mm_sweep_systems_index(MmSweepSystem *sys, guint n)
{
  uint64_t first = 0;
  for (guint k = 0; k < n; k++) {
    sys[k].first = first;
    first += sys[k].space->n_points;
  }
  return first;
}

guint mm_sweep_locate(const MmSweepSystem *sys, guint n, uint64_t i, uint64_t *local)
{
  guint k = 0;
  while (k + 1 < n && i >= sys[k + 1].first) k++;
  *local = i - sys[k].first;
  return k;
}

char *mm_sweep_system_label(const MmHardware *hw)
{
  char *s = g_strdup(hw->name);
  for (char *c = s; *c; c++) {
    if (*c == ',') *c = ';';
    else if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
  }
  return s;
}

void mm_sweep_inputs_json(const MmInputs *in, cJSON *obj)
{
  cJSON_AddStringToObject(obj, "model", in->model->name);
  cJSON_AddStringToObject(obj, "hardware", in->hardware->name);
  cJSON_AddStringToObject(obj, "config", in->config->name);
  cJSON_AddStringToObject(obj, "model_path", in->model->path);
  cJSON_AddStringToObject(obj, "hardware_path", in->hardware->path);
  cJSON_AddStringToObject(obj, "config_path", in->config->path);
}

void mm_simulation_free(MmSimulation *sim)
{
  if (!sim) return;
  mm_engine_free(sim->decode_engine);
  mm_plan_free(sim->decode_plan);
  if (!sim->graphs_shared) mm_graph_free(sim->decode_graph);
  mm_engine_free(sim->engine);
  mm_plan_free(sim->plan);
  mm_memory_free(sim->memory);
  if (!sim->graphs_shared) mm_graph_free(sim->graph);
  mm_scenario_free(sim->scenario);
  mm_inputs_free(sim->owned);
  g_free(sim);
}

/* Periods of the micro-batch reduction's first attempt (run_steady). */
static uint32_t steady_first(const MmScenario *s)
{
  return s->pp == 1 ? 5 : 6;
}

/* The steady-state reduction: lowers enough micro-batches for 6 (then 12, 24, 48, 96) whole periods on
 * every stage (the fill of the pipeline, three repeating periods and the last one before the
 * cool-down need 5-6 in most schedules; one stage has no fill: its first attempt is 5, the first
 * micro-step, three that repeat and the last); the first run whose periods repeat exactly stands for
 * the iteration. The first attempt runs when it has at most 3/4 of the iteration's micro-batches (it
 * nearly always succeeds: 102 of 108 pipeline points of the Llama-3-70B bench sweep), the longer
 * ones after a failure at most half. Long transients need the longer ones: when one stage is slower
 * than the next (the first, with the embedding's FSDP gathers), the next drains the lead the warm-up
 * gave it by the difference every period, tens of periods for a 1.5% difference (8 stages of FSDP 8
 * x SP 8, 256 micro-batches: 96 periods). FALSE (nothing kept) when none did or none would be
 * shorter; an engine failure is an error. */
static gboolean run_steady(const MmScenario *s, const MmGraph *g, MmEngineMemo *memo, MmPlan **plan,
                           MmEngine **engine, MmRunMetrics *metrics, uint32_t *micro, GError **error)
{
  const uint32_t first = steady_first(s);
  for (uint32_t periods = first; periods <= 96; periods = periods == first ? 12 : periods * 2) {
    MmPlanOptions opt = {.micro_steps = mm_plan_steady_micro_steps(s, periods)};
    if (opt.micro_steps == 0) return FALSE;
    if (periods == first ? 4 * (uint64_t)opt.micro_steps > 3 * (uint64_t)s->micro_steps
                         : 2 * (uint64_t)opt.micro_steps > (uint64_t)s->micro_steps)
      return FALSE;
    g_autoptr(MmPlan) p = mm_plan_new(s, g, &opt);
    g_autoptr(MmEngine) e =
        mm_engine_memo_run(memo, p->engine_programs, p->n_programs, p->classes, p->n_classes, NULL, error);
    if (!e) return FALSE;
    if (mm_report_run_metrics_steady(p, e, (uint32_t)s->micro_steps, metrics)) {
      *micro = opt.micro_steps;
      *plan = g_steal_pointer(&p);
      *engine = g_steal_pointer(&e);
      return TRUE;
    }
  }
  return FALSE;
}

/* The layer reduction (mm_plan_cut): where the micro-batches are few (no pipeline, gradient
 * accumulation up to 5 x units / 16 micro-steps: beyond it the micro-batch reduction lowers fewer
 * ops), the whole iteration is lowered and each run of identical layer periods shortened to 6,
 * then 12, then 24 periods (a run that settles slowly: FSDP's gathers losing their lead on the
 * compute by a little every layer), each shorter program simulated until one's metrics are the
 * whole iteration's (mm_report_run_metrics_cut). Where none is, the whole program runs unless the
 * micro-batch reduction applies (run_steady). TRUE with the results; FALSE with nothing kept (an
 * engine failure is an error). */
static gboolean run_cut(const MmScenario *s, const MmGraph *g, MmEngineMemo *memo, MmPlan **plan, MmEngine **engine,
                        MmRunMetrics *metrics, GError **error)
{
  if (s->pp != 1 || s->cfg->task == MM_TASK_INFERENCE || 16 * (uint64_t)s->micro_steps > 5 * (uint64_t)g->n_units)
    return FALSE;
  g_autoptr(MmPlan) p = mm_plan_new(s, g, NULL);
  g_autoptr(GArray) runs = mm_plan_runs(p);
  for (uint32_t keep = MM_PLAN_CUT_KEEP; runs && keep <= 4 * MM_PLAN_CUT_KEEP; keep *= 2) {
    g_autoptr(MmPlan) c = mm_plan_cut(p, runs, keep);
    if (!c) break;
    g_autoptr(MmEngine) e =
        mm_engine_memo_run(memo, c->engine_programs, c->n_programs, c->classes, c->n_classes, NULL, error);
    if (!e) return FALSE;
    if (mm_report_run_metrics_cut(c, e, metrics)) {
      *plan = g_steal_pointer(&c);
      *engine = g_steal_pointer(&e);
      return TRUE;
    }
  }
  const uint32_t fewer = mm_plan_steady_micro_steps(s, steady_first(s));
  if (fewer != 0 && 4 * (uint64_t)fewer <= 3 * (uint64_t)s->micro_steps) return FALSE;
  g_autoptr(MmEngine) e =
      mm_engine_memo_run(memo, p->engine_programs, p->n_programs, p->classes, p->n_classes, NULL, error);
  if (!e) return FALSE;
  mm_report_run_metrics(p, e, metrics);
  *plan = g_steal_pointer(&p);
  *engine = g_steal_pointer(&e);
  return TRUE;
}

/* Whether --per-device's classes, one per device, stay within what one engine holds (the ops of
 * all devices together, their streams); else MM_CONFIG_ERROR_RANGE saying how many it would be. */
static gboolean per_device_fits(const MmPlan *p, GError **error)
{
  uint64_t ops = 0, streams = 0;
  for (uint32_t c = 0; c < p->n_classes; c++) {
    ops += mm_plan_class_program(p, c)->program.n_ops;
    streams += mm_plan_class_program(p, c)->program.n_streams;
  }
  if (ops <= MM_PLAN_MAX_PER_DEVICE_OPS && streams <= MM_ENGINE_MAX_STREAMS) return TRUE;
  g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_RANGE,
              "--per-device: %u devices of %s running %" G_GUINT64_FORMAT " ops on %" G_GUINT64_FORMAT
              " streams in all (model %s, config %s); madmax simulates at most %u ops and %u streams with "
              "--per-device: run without it (a device per class, the same answer), or with fewer devices or "
              "micro-steps", p->n_classes, p->scenario->hw->path, ops, streams, p->scenario->model->path,
              p->scenario->cfg->path, (guint)MM_PLAN_MAX_PER_DEVICE_OPS, (guint)MM_ENGINE_MAX_STREAMS);
  return FALSE;
}

static gboolean run_pass(const MmScenario *s, const MmGraph *g, gboolean per_device, gboolean timeline,
                         MmEngineMemo *memo, MmPlan **plan, MmEngine **engine, MmRunMetrics *metrics, uint32_t *steady,
                         GError **error)
{
  if (per_device) memo = NULL; /* one class per device: rarely met twice, and large to keep */
  if (!per_device && !timeline && steady) {
    if (run_cut(s, g, memo, plan, engine, metrics, error)) return TRUE;
    if (error && *error) return FALSE;
    if (run_steady(s, g, memo, plan, engine, metrics, steady, error)) return TRUE;
    if (error && *error) return FALSE;
  }
  MmPlanOptions opt = {.per_device = per_device};
  *plan = mm_plan_new(s, g, &opt);
  if (per_device && !per_device_fits(*plan, error)) return FALSE;
  *engine =
      mm_engine_memo_run(memo, (*plan)->engine_programs, (*plan)->n_programs, (*plan)->classes, (*plan)->n_classes,
                         NULL, error);
  if (!*engine) return FALSE;
  mm_report_run_metrics(*plan, *engine, metrics);
  return TRUE;
}

MmGraph *mm_simulation_graphs(const MmScenario *s, MmGraph **decode)
{
  MmGraphPass first, step;
  *decode = mm_plan_graph_passes(s, &first, &step) ? mm_graph_new_pass(s->model, &step) : NULL;
  return mm_graph_new_pass(s->model, &first);
}

#define GRAPH_CACHE_SLOTS 4

struct MmGraphCache {
  GMutex lock;
  struct {
    const MmModel *model;
    MmGraphPass pass;
    MmGraph *graph;
  } e[GRAPH_CACHE_SLOTS];
  guint n;
};

MmGraphCache *mm_graph_cache_new(void)
{
  MmGraphCache *c = g_new0(MmGraphCache, 1);
  g_mutex_init(&c->lock);
  return c;
}

void mm_graph_cache_free(MmGraphCache *c)
{
  if (!c) return;
  for (guint i = 0; i < c->n; i++) mm_graph_free(c->e[i].graph);
  g_mutex_clear(&c->lock);
  g_free(c);
}

static gboolean same_pass(const MmGraphPass *a, const MmGraphPass *b)
{
  return a->tokens == b->tokens && a->context == b->context && !a->kv_cache == !b->kv_cache &&
         !a->last_logits == !b->last_logits && !a->decode == !b->decode && !a->inference == !b->inference &&
         !a->loss_inplace == !b->loss_inplace;
}

/* @model's graph of @pass from @c, built on first use (under the lock: the other threads wait for
 * it rather than build it too); NULL when the cache is full. */
static MmGraph *cached_graph(MmGraphCache *c, const MmModel *model, const MmGraphPass *pass)
{
  MmGraph *g = NULL;
  g_mutex_lock(&c->lock);
  for (guint i = 0; i < c->n && !g; i++)
    if (c->e[i].model == model && same_pass(&c->e[i].pass, pass)) g = c->e[i].graph;
  if (!g && c->n < GRAPH_CACHE_SLOTS) {
    g = mm_graph_new_pass(model, pass);
    c->e[c->n].model = model;
    c->e[c->n].pass = *pass;
    c->e[c->n++].graph = g;
  }
  g_mutex_unlock(&c->lock);
  return g;
}

MmSimulation *mm_simulation_prepare_cached(const MmInputs *in, const MmPoint *pt, MmGraphCache *cache,
                                           GError **error)
{
  g_return_val_if_fail(in, NULL);
  g_autoptr(MmSimulation) sim = g_new0(MmSimulation, 1);
  sim->inputs = in;
  if (pt) sim->point = *pt;
  if (!(sim->scenario = mm_scenario_new(in->model, in->hardware, in->config, &sim->point, error))) return NULL;
  const MmScenario *s = sim->scenario;
  sim->model = s->model;
  sim->hardware = s->hw;
  sim->config = s->cfg;
  if (cache && s->model == in->model) { /* the loaded model: its graphs are every such point's */
    MmGraphPass first, step;
    const gboolean serving = mm_plan_graph_passes(s, &first, &step);
    MmGraph *g = cached_graph(cache, s->model, &first), *d = serving ? cached_graph(cache, s->model, &step) : NULL;
    if (g && (d || !serving)) {
      sim->graph = g;
      sim->decode_graph = d;
      sim->graphs_shared = TRUE;
    }
  }
  if (!sim->graphs_shared) sim->graph = mm_simulation_graphs(s, &sim->decode_graph);
  sim->memory = mm_memory_new(s, sim->graph);
  return g_steal_pointer(&sim);
}

MmSimulation *mm_simulation_prepare(const MmInputs *in, const MmPoint *pt, GError **error)
{
  return mm_simulation_prepare_cached(in, pt, NULL, error);
}

gboolean mm_simulation_run(MmSimulation *sim, gboolean per_device, GError **error)
{
  const MmScenario *s = sim->scenario;
  if (!run_pass(s, sim->graph, per_device, sim->timeline, sim->memo, &sim->plan, &sim->engine, &sim->metrics,
                &sim->steady_micro_steps, error))
    return FALSE;
  if (sim->decode_graph) {
    if (!run_pass(s, sim->decode_graph, per_device, sim->timeline, sim->memo, &sim->decode_plan,
                  &sim->decode_engine, &sim->decode_metrics, NULL, error))
      return FALSE;
    mm_report_serving_metrics(sim->plan, &sim->metrics, sim->decode_plan, &sim->decode_metrics, sim->memory,
                              &sim->serving);
  }
  return TRUE;
}

static MmSimulation *new_point(const MmInputs *in, const MmPoint *pt, gboolean per_device, gboolean timeline,
                               GError **error)
{
  g_autoptr(MmSimulation) sim = mm_simulation_prepare(in, pt, error);
  if (!sim) return NULL;
  sim->timeline = timeline;
  if (!mm_simulation_run(sim, per_device, error)) return NULL;
  return g_steal_pointer(&sim);
}

MmSimulation *mm_simulation_new_point(const MmInputs *in, const MmPoint *pt, gboolean per_device, GError **error)
{
  return new_point(in, pt, per_device, FALSE, error);
}

MmSimulation *mm_simulation_new(const char *model, const char *hardware, const char *config, const MmSimOptions *opt,
                                GError **error)
{
  static const MmSimOptions none = {0};
  if (!opt) opt = &none;
  g_autoptr(MmInputs) in = mm_inputs_load(model, hardware, config, error);
  if (!in) return NULL;
  gboolean used = FALSE;
  if (opt->calibrated && !mm_hardware_use_calibrated(in->hardware, &used, error)) return NULL;
  MmPoint pt = {.nodes = opt->nodes, .global_batch = opt->global_batch, .micro_batch = opt->micro_batch,
                .pipeline_degree = opt->pipeline_degree};
  MmSimulation *sim = new_point(in, &pt, opt->per_device, opt->timeline, error);
  if (sim) sim->owned = g_steal_pointer(&in);
  return sim;
}
