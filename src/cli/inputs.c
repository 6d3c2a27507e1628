/* inputs: loading the three input files (and the --nodes override) for every subcommand. */
#include "cli.h"

void mm_cli_inputs_clear(MmCliInputs *in)
{
  g_clear_pointer(&in->scenario, mm_scenario_free);
  g_clear_pointer(&in->config, mm_parallel_free);
  g_clear_pointer(&in->hardware, mm_hardware_free);
  g_clear_pointer(&in->model, mm_model_free);
}

gboolean mm_cli_inputs_load(MmCliInputs *in, const char *model, const char *hardware, const char *config, int64_t nodes,
                        GError **error)
{
  *in = (MmCliInputs){0};
  if (!(in->model = mm_model_load(model, error))) return FALSE;
  if (!hardware) return TRUE;
  if (!(in->hardware = mm_hardware_load(hardware, error))) return FALSE;
  if (!(in->config = mm_parallel_load(config, error))) return FALSE;
  MmPoint pt = {.nodes = nodes};
  if (!(in->scenario = mm_scenario_new(in->model, in->hardware, in->config, &pt, error))) return FALSE;
  return TRUE;
}

void mm_cli_add_input_options(GOptionContext *ctx, MmInputPaths *paths)
{
  GOptionEntry entries[] = {
    {"model", 'm', 0, G_OPTION_ARG_FILENAME, &paths->model, "Model file (models/*.json)", "M"},
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &paths->hardware, "System file (hardware/*.json)", "H"},
    {"config", 'c', 0, G_OPTION_ARG_FILENAME, &paths->config, "Task + parallelism file (configs/*.json)", "C"},
    {"nodes", 'n', 0, G_OPTION_ARG_INT64, &paths->nodes, "Use N nodes of the system's design instead of its node count", "N"},
    G_OPTION_ENTRY_NULL,
  };
  g_option_context_add_main_entries(ctx, entries, NULL); /* GLib copies the table */
}
