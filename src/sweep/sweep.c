/* sweep: one complete simulation (load, graph, memory, plan, engine, metrics) as a value. */
#include "sweep.h"

void mm_simulation_free(MmSimulation *sim)
{
  if (!sim) return;
  mm_engine_free(sim->decode_engine);
  mm_plan_free(sim->decode_plan);
  mm_graph_free(sim->decode_graph);
  mm_engine_free(sim->engine);
  mm_plan_free(sim->plan);
  mm_memory_free(sim->memory);
  mm_graph_free(sim->graph);
  mm_scenario_free(sim->scenario);
  mm_parallel_free(sim->config);
  mm_hardware_free(sim->hardware);
  mm_model_free(sim->model);
  g_free(sim);
}

static gboolean run_pass(const MmScenario *s, const MmGraph *g, gboolean per_device, MmPlan **plan, MmEngine **engine,
                         MmRunMetrics *metrics, GError **error)
{
  MmPlanOptions opt = {.per_device = per_device};
  if (!(*plan = mm_plan_new(s, g, &opt, error))) return FALSE;
  *engine = mm_engine_new((*plan)->engine_programs, (*plan)->n_programs, (*plan)->classes, (*plan)->n_classes, error);
  if (!*engine || !mm_engine_run(*engine, error)) return FALSE;
  mm_report_run_metrics(*plan, *engine, metrics);
  return TRUE;
}

gboolean mm_simulation_rerun(MmSimulation *sim, gboolean per_device, GError **error)
{
  g_clear_pointer(&sim->engine, mm_engine_free);
  g_clear_pointer(&sim->plan, mm_plan_free);
  g_clear_pointer(&sim->decode_engine, mm_engine_free);
  g_clear_pointer(&sim->decode_plan, mm_plan_free);
  g_clear_pointer(&sim->memory, mm_memory_free);
  sim->memory = mm_memory_new(sim->scenario, sim->graph);
  if (!run_pass(sim->scenario, sim->graph, per_device, &sim->plan, &sim->engine, &sim->metrics, error)) return FALSE;
  if (!sim->decode_graph) return TRUE;
  if (!run_pass(sim->scenario, sim->decode_graph, per_device, &sim->decode_plan, &sim->decode_engine,
                &sim->decode_metrics, error))
    return FALSE;
  mm_report_serving_metrics(sim->plan, &sim->metrics, sim->decode_plan, &sim->decode_metrics,
                            sim->memory, &sim->serving);
  return TRUE;
}

MmGraph *mm_simulation_graphs(const MmModel *model, const MmParallelConfig *config, MmGraph **decode)
{
  const MmServing *sv = &config->serving;
  *decode = NULL;
  if (!sv->present) return mm_graph_new(model);
  /* the prefill writes the prompt's K/V; each decode step reads the context so far (on
   * average prompt + output / 2 tokens) and appends one token */
  MmGraphPass prefill = {sv->prompt_tokens, sv->prompt_tokens, TRUE, TRUE, FALSE};
  MmGraphPass step = {1, sv->prompt_tokens + sv->output_tokens / 2, TRUE, TRUE, TRUE};
  *decode = mm_graph_new_pass(model, &step);
  return mm_graph_new_pass(model, &prefill);
}

gboolean mm_simulation_run(MmSimulation *sim, gboolean per_device, GError **error)
{
  g_clear_pointer(&sim->graph, mm_graph_free);
  g_clear_pointer(&sim->decode_graph, mm_graph_free);
  sim->graph = mm_simulation_graphs(sim->model, sim->config, &sim->decode_graph);
  return mm_simulation_rerun(sim, per_device, error);
}

MmSimulation *mm_simulation_new(const char *model, const char *hardware, const char *config, const MmSimOptions *opt,
                                GError **error)
{
  MmSimOptions none = {0};
  if (!opt) opt = &none;
  g_autoptr(MmSimulation) sim = g_new0(MmSimulation, 1);
  if (!(sim->model = mm_model_load(model, error))) return NULL;
  if (!(sim->hardware = mm_hardware_load(hardware, error))) return NULL;
  if (opt->nodes > 0 && !mm_hardware_set_nodes(sim->hardware, opt->nodes, error)) return NULL;
  if (!(sim->config = mm_parallel_load(config, error))) return NULL;
  if (sim->config->seq_len > 0) mm_model_set_seq_len(sim->model, sim->config->seq_len);
  if (opt->global_batch > 0) {
    sim->config->global_batch = opt->global_batch;
    sim->config->global_batch_tokens = 0;
  }
  if (opt->micro_batch > 0) sim->config->micro_batch = opt->micro_batch;
  if (opt->pipeline_degree > 0) {
    sim->config->pipeline.degree = opt->pipeline_degree;
    g_clear_pointer(&sim->config->pipeline.layers, g_free); /* sized for the file's degree */
    sim->config->pipeline.n_layers = 0;
  }
  if (!(sim->scenario = mm_scenario_new(sim->model, sim->hardware, sim->config, error))) return NULL;
  if (!mm_simulation_run(sim, opt->per_device, error)) return NULL;
  return g_steal_pointer(&sim);
}
