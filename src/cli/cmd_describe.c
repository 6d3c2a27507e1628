/* cmd_describe: `madmax describe`: per-layer costs; with hardware + config, strategies and memory. */
#include <stdio.h>

#include "cli.h"
#include "config/config.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "report/report.h"
#include "sweep/sweep.h"

int mm_cmd_describe(int argc, char **argv)
{
  g_autofree char *json_path = NULL;
  MmInputPaths paths = {0};
  GOptionEntry entries[] = {
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Also write the JSON document to OUT ('-' = stdout, replaces the text)", "OUT"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- per-layer costs, strategies and per-device memory");
  mm_cli_add_input_options(ctx, &paths);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Prints every block of the model with its parameters, FLOPs (forward, backward input-gradient,\n"
    "backward weight-gradient) and activation bytes per sample, then each op of one layer per block.\n"
    "With --hardware and --config it resolves the parallel strategy of every block against the\n"
    "system and prints per-device memory by category and whether it fits in HBM. Not fitting is a\n"
    "result (exit 0, \"fits\": false), not an error. For a serving config (\"inference\") the costs\n"
    "are those of the prefill run simulates, and the decode step's per sequence: FLOPs, K/V cache\n"
    "and activation bytes, and the weights one step reads for the whole batch.");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax describe -m models/gpt3-175b.json\n"
    "  madmax describe -m models/llama2-70b.json -H hardware/dgx-a100-2048.json \\\n"
    "      -c configs/llm-pretrain-tp-fsdp.json --json results/llama2-describe.json\n");
  gboolean parsed = mm_cli_parse(ctx, &argc, &argv);
  g_autofree char *model_path = paths.model, *hw_path = paths.hardware, *cfg_path = paths.config;
  const gint64 nodes = paths.nodes;
  if (!parsed) return MM_EXIT_INPUT;
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
  const MmPathArg outputs[] = {{"--json", json_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--model", model_path}, {"--hardware", hw_path}, {"--config", cfg_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  MmCliInputs in;
  if (!mm_cli_inputs_load(&in, model_path, hw_path, cfg_path, nodes, &error)) {
    mm_cli_inputs_clear(&in);
    return mm_cli_fail(error);
  }
  MmScenario *scenario = in.scenario;
  /* the graph run would simulate: a serving config's prefill (and its decode step) */
  g_autoptr(MmGraph) decode = NULL;
  g_autoptr(MmGraph) graph = scenario ? mm_simulation_graphs(scenario, &decode) : mm_graph_new(in.model);
  g_autoptr(MmMemory) mem = scenario ? mm_memory_new(scenario, graph) : NULL;

  if (json_path) {
    g_autoptr(cJSON) doc = mm_report_describe_json(graph, decode, scenario, mem);
    g_autoptr(MmOutputs) outs = mm_outputs_new();
    mm_outputs_add_json(outs, "--json", json_path, doc);
    if (!mm_outputs_commit(outs, &error)) {
      mm_cli_inputs_clear(&in);
      return mm_cli_fail(error);
    }
  }
  if (!json_path || g_strcmp0(json_path, "-") != 0) mm_report_describe_text(stdout, graph, decode, scenario, mem);
  g_clear_pointer(&mem, mm_memory_free);
  g_clear_pointer(&graph, mm_graph_free);
  g_clear_pointer(&decode, mm_graph_free);
  mm_cli_inputs_clear(&in);
  return MM_EXIT_OK;
}
