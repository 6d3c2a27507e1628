/* cmd_describe: `madmax describe`: per-layer costs; with hardware + config, strategies and memory. */
#include <stdio.h>

#include "cli.h"
#include "config/config.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "report/report.h"

int mm_cmd_describe(int argc, char **argv)
{
  g_autofree char *model_path = NULL, *hw_path = NULL, *cfg_path = NULL, *json_path = NULL;
  GOptionEntry entries[] = {
    {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model file (models/*.json)", "M"},
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &hw_path, "System file (hardware/*.json)", "H"},
    {"config", 'c', 0, G_OPTION_ARG_FILENAME, &cfg_path, "Task + parallelism file (configs/*.json)", "C"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Also write the JSON document to OUT ('-' = stdout, replaces the text)", "OUT"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- per-layer costs, strategies and per-device memory");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Prints every block of the model with its parameters, FLOPs (forward, backward input-gradient,\n"
    "backward weight-gradient) and activation bytes per sample, then each op of one layer per block.\n"
    "With --hardware and --config it resolves the parallel strategy of every block against the\n"
    "system and prints per-device memory by category and whether it fits in HBM. Not fitting is a\n"
    "result (exit 0, \"fits\": false), not an error.");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax describe -m models/gpt3-175b.json\n"
    "  madmax describe -m models/llama2-70b.json -H hardware/dgx-a100-2048.json \\\n"
    "      -c configs/llm-pretrain-tp-fsdp.json --json results/llama2-describe.json\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry 'madmax describe --help'.\n", argv[1]);
    return MM_EXIT_INPUT;
  }
  if (!model_path) {
    fprintf(stderr, "madmax: --model is required\nTry 'madmax describe --help'.\n");
    return MM_EXIT_INPUT;
  }
  if ((hw_path == NULL) != (cfg_path == NULL)) {
    fprintf(stderr, "madmax: --hardware and --config go together (memory needs both)\nTry 'madmax describe --help'.\n");
    return MM_EXIT_INPUT;
  }

  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) model = mm_model_load(model_path, &error);
  if (!model) return mm_cli_fail(error);
  g_autoptr(MmHardware) hw = NULL;
  g_autoptr(MmParallelConfig) cfg = NULL;
  g_autoptr(MmScenario) scenario = NULL;
  if (hw_path) {
    if (!(hw = mm_hardware_load(hw_path, &error))) return mm_cli_fail(error);
    if (!(cfg = mm_parallel_load(cfg_path, &error))) return mm_cli_fail(error);
    if (!(scenario = mm_scenario_new(model, hw, cfg, &error))) return mm_cli_fail(error);
  }
  g_autoptr(MmGraph) graph = mm_graph_new(model);
  g_autoptr(MmMemory) mem = scenario ? mm_memory_new(scenario, graph) : NULL;

  if (json_path) {
    g_autoptr(cJSON) doc = mm_report_describe_json(graph, scenario, mem);
    if (!mm_report_write_json(doc, json_path, &error)) return mm_cli_fail(error);
  }
  if (!json_path || g_strcmp0(json_path, "-") != 0) mm_report_describe_text(stdout, graph, scenario, mem);
  return MM_EXIT_OK;
}
