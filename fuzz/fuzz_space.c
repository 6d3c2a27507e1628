/* fuzz_space: sweep space files (madmax sweep --space, configs/sweeps/): the loader against a
 * fixed model, system and config, then the first, middle and last points of what it accepts:
 * each resolves or is rejected as a config error, and the first that resolves simulates. */
#include "fuzz.h"
#include "sweep/sweep.h"

static MmInputs *inputs;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  g_autofree char *m = mm_fuzz_path("models/mixtral-8x7b.json"), *h = mm_fuzz_path("hardware/dgx-h200-8.json");
  g_autofree char *c = mm_fuzz_path("configs/mixtral-pretrain-ep.json");
  g_autoptr(GError) error = NULL;
  inputs = mm_inputs_load(m, h, c, &error);
  mm_fuzz_require(inputs != NULL, "%s", error ? error->message : "?");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *file = mm_fuzz_write("space.json", data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSweepSpace) sp = mm_sweep_space_new(inputs, file, &error);
  if (!sp) {
    mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "rejected without a config error: %s",
                    error ? error->message : "?");
    return 0;
  }
  mm_fuzz_require(sp->n_points > 0, "an accepted space of no points");
  const uint64_t picks[] = {0, sp->n_points / 2, sp->n_points - 1};
  gboolean simulated = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS(picks); i++) {
    MmSweepPoint p;
    mm_sweep_space_point(sp, inputs->model, picks[i], &p);
    g_autoptr(MmScenario) s = mm_scenario_new(inputs->model, inputs->hardware, inputs->config, &p.point, &error);
    if (!s) {
      mm_fuzz_require(error->domain == MM_CONFIG_ERROR, "point %" G_GUINT64_FORMAT ": %s", picks[i], error->message);
      g_clear_error(&error);
      continue;
    }
    g_autofree char *text = mm_sweep_entry_text(&p.entries[0]);
    if (simulated || s->micro_steps / s->pp > 64) continue;
    g_autoptr(MmSimulation) sim = mm_simulation_new_point(inputs, &p.point, FALSE, &error);
    mm_fuzz_require(sim != NULL, "point %" G_GUINT64_FORMAT " (%s): %s", picks[i], text, error ? error->message : "?");
    simulated = TRUE;
  }
  return 0;
}
