/* fuzz_config: parallelism + task files (configs/): the loader, then, against a few fixed models and
 * systems, the scenario and (when small) the whole simulation: an accepted config must simulate
 * without an internal error, and its documents must hold only finite numbers. */
#include "fuzz.h"
#include "sweep/sweep.h"

/* Fixed inputs the config is resolved against; nodes > 0 resizes the system. */
static const struct {
  const char *model, *hardware;
  int64_t nodes;
} pairs[] = {
  {"models/llama3-8b.json", "hardware/dgx-h200-8.json", 0},
  {"models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", 0},
  {"models/dlrm-a.json", "hardware/zionex-a100-128.json", 2},
  {"models/deepseek-v3.json", "hardware/dgx-h100-2048.json", 2},
};
#define N_PAIRS G_N_ELEMENTS(pairs)

static MmModel *models[N_PAIRS];
static MmHardware *systems[N_PAIRS];
static char *path;

/* Micro-steps per stage above which a point is only resolved, not simulated (the fuzzer's pace). */
#define SIMULATE_MAX_STEPS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  for (guint i = 0; i < N_PAIRS; i++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *m = mm_fuzz_path(pairs[i].model), *h = mm_fuzz_path(pairs[i].hardware);
    models[i] = mm_model_load(m, &error);
    if (models[i]) systems[i] = mm_hardware_load(h, &error);
    mm_fuzz_require(models[i] && systems[i], "%s", error ? error->message : "?");
  }
  path = mm_fuzz_path("configs/fuzz.json");
  return 0;
}

static void simulate(const MmInputs *in, const MmPoint *pt)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) sim = mm_simulation_new_point(in, pt, FALSE, &error);
  /* the scenario accepted it: what follows must not fail (exit 2) */
  mm_fuzz_require(sim != NULL, "%s / %s: %s", in->model->path, in->hardware->path, error ? error->message : "?");
  g_autoptr(cJSON) run = mm_report_run_json(sim->plan, sim->engine, &sim->metrics, sim->memory);
  mm_fuzz_require_finite(run, "run");
  if (sim->decode_plan) {
    g_autoptr(cJSON) serving = mm_report_serving_json(&sim->serving);
    mm_fuzz_require_finite(serving, "serving");
  }
  g_autoptr(cJSON) describe = mm_report_describe_json(sim->graph, sim->decode_graph, sim->scenario, sim->memory);
  mm_fuzz_require_finite(describe, "describe");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *text = mm_fuzz_text(data, size);
  if (!text) return 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(MmParallelConfig) c = mm_parallel_parse(path, text, size, &error);
  if (!c) {
    mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "rejected without a config error");
    return 0;
  }
  for (guint i = 0; i < N_PAIRS; i++) {
    MmPoint pt = {.nodes = pairs[i].nodes};
    g_autoptr(MmScenario) s = mm_scenario_new(models[i], systems[i], c, &pt, &error);
    if (!s) {
      mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "scenario rejected without a config error");
      g_clear_error(&error);
      continue;
    }
    if (s->micro_steps / s->pp > SIMULATE_MAX_STEPS) continue;
    MmInputs in = {models[i], systems[i], c};
    simulate(&in, &pt);
  }
  return 0;
}
