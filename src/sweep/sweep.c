/* sweep: one complete simulation (load, graph, memory, plan, engine, metrics) as a value. */
#include "sweep.h"

void mm_simulation_free(MmSimulation *sim)
{
  if (!sim) return;
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

gboolean mm_simulation_rerun(MmSimulation *sim, gboolean per_device, GError **error)
{
  g_clear_pointer(&sim->engine, mm_engine_free);
  g_clear_pointer(&sim->plan, mm_plan_free);
  g_clear_pointer(&sim->memory, mm_memory_free);
  sim->memory = mm_memory_new(sim->scenario, sim->graph);
  MmPlanOptions opt = {.per_device = per_device};
  if (!(sim->plan = mm_plan_new(sim->scenario, sim->graph, &opt, error))) return FALSE;
  sim->engine = mm_engine_new(&sim->plan->program, 1, sim->plan->classes, sim->plan->n_classes, error);
  if (!sim->engine || !mm_engine_run(sim->engine, error)) return FALSE;
  mm_report_run_metrics(sim->plan, sim->engine, &sim->metrics);
  return TRUE;
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
  if (opt->global_batch > 0) {
    sim->config->global_batch = opt->global_batch;
    sim->config->global_batch_tokens = 0;
  }
  if (opt->micro_batch > 0) sim->config->micro_batch = opt->micro_batch;
  if (!(sim->scenario = mm_scenario_new(sim->model, sim->hardware, sim->config, error))) return NULL;
  sim->graph = mm_graph_new(sim->model);
  if (!mm_simulation_rerun(sim, opt->per_device, error)) return NULL;
  return g_steal_pointer(&sim);
}
