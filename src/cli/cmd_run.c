/* cmd_run: `madmax run`: simulate one iteration and report time, throughput, MFU, communication, memory. */
#include <stdio.h>

#include "cli.h"
#include "engine/engine.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "report/report.h"
#include "sweep/sweep.h"

int mm_cmd_run(int argc, char **argv)
{
  g_autofree char *json_path = NULL, *trace_path = NULL;
  gboolean per_device = FALSE;
  MmInputPaths paths = {0};
  GOptionEntry entries[] = {
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write the result document to OUT ('-' = stdout, replaces the text)", "OUT"},
    {"trace", 't', 0, G_OPTION_ARG_FILENAME, &trace_path, "Write a Chrome trace ('-' = stdout; open in ui.perfetto.dev; serving: the prefill, then one decode step)", "T.json"},
    {"per-device", 0, 0, G_OPTION_ARG_NONE, &per_device, "Simulate every device, not one per device class", NULL},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- simulate one training or inference iteration");
  mm_cli_add_input_options(ctx, &paths);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Lowers the model under the config's task and per-block parallel strategy (FSDP, TP/SP, DDP\n"
    "with ZeRO-1/2, MP, EP, CP levels; pipeline stages with their schedule) into per-device streams\n"
    "of compute ops (roofline: FLOPs at peak x utilization, bytes at HBM bandwidth x utilization)\n"
    "and collectives (alpha-beta on the network the group spans, links shared by concurrent\n"
    "transfers), runs them through the event engine (a compute stream, intra- and inter-node\n"
    "communication streams and four pipeline channels per device, overlapping where dependencies\n"
    "allow) and reports iteration time, throughput, MFU, serialized and exposed communication,\n"
    "idle time (pipeline bubbles) and per-device memory. With an \"inference\" object in the config\n"
    "it simulates a prefill and a decode step: time to first token, time per output token,\n"
    "tokens/s, KV cache. Devices that behave identically (a pipeline stage) are simulated once;\n"
    "--per-device simulates each (same answer, slower; for checking and asymmetric studies).");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax run -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-tp-fsdp.json\n"
    "  madmax run -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json \\\n"
    "      --json results/dlrm-a.json --trace results/dlrm-a-trace.json\n"
    "  madmax run -m models/gpt3-175b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json --nodes 48\n"
    "  madmax run -m models/llama3-405b.json -H hardware/dgx-h100-2048.json -c configs/llama3-405b-pretrain.json --nodes 2048\n"
    "  madmax run -m models/llama3-70b.json -H hardware/dgx-h100-2048.json -c configs/llama3-70b-serving-tp8.json --nodes 1\n"
    "\nJSON keys: iteration_time_s, throughput.{samples_per_s,tokens_per_s}, mfu, serialized.{compute_s,\n"
    "embedding_s, comm_s, comm_by_kind}, exposed_comm_s, exposed_comm_fraction, overlap.hidden_comm_s,\n"
    "idle_s, behaviours[] (per pipeline stage / skewed expert rank), pipeline.*, serving.*, offload.*,\n"
    "memory.{per_device_bytes, capacity_bytes, fits, breakdown, per_stage} (docs/MODEL.md defines each).\n");
  gboolean parsed = mm_cli_parse(ctx, &argc, &argv);
  g_autofree char *model_path = paths.model, *hw_path = paths.hardware, *cfg_path = paths.config;
  if (!parsed) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry 'madmax run --help'.\n", argv[1]);
    return MM_EXIT_INPUT;
  }
  if (!model_path || !hw_path || !cfg_path) {
    fprintf(stderr, "madmax: run needs --model, --hardware and --config\nTry 'madmax run --help'.\n");
    return MM_EXIT_INPUT;
  }

  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {"--trace", trace_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--model", model_path}, {"--hardware", hw_path}, {"--config", cfg_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  MmSimOptions sopt = {.nodes = paths.nodes, .per_device = per_device, .timeline = TRUE};
  g_autoptr(MmSimulation) sim = mm_simulation_new(model_path, hw_path, cfg_path, &sopt, &error);
  if (!sim) return mm_cli_fail(error);
  const MmMemory *mem = sim->memory;
  const gboolean serving = sim->decode_plan != NULL;
  /* the result and the trace are written together, or neither */
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  if (json_path) {
    g_autoptr(cJSON) doc = mm_report_run_json(sim->plan, sim->engine, &sim->metrics, mem);
    if (serving) {
      cJSON_AddItemToObject(doc, "serving", mm_report_serving_json(&sim->serving));
      cJSON *dec = mm_report_run_json(sim->decode_plan, sim->decode_engine, &sim->decode_metrics, NULL);
      cJSON_DeleteItemFromObject(dec, "model");
      cJSON_DeleteItemFromObject(dec, "hardware");
      cJSON_DeleteItemFromObject(dec, "config");
      cJSON_AddItemToObject(doc, "decode_step", dec);
    }
    mm_outputs_add_json(outs, "--json", json_path, doc);
  }
  if (trace_path) {
    gsize len = 0;
    char *trace = mm_report_trace(sim->plan, sim->engine, sim->decode_plan, sim->decode_engine, &len);
    mm_outputs_add(outs, "--trace", trace_path, trace, len);
  }
  if (!mm_outputs_commit(outs, &error)) return mm_cli_fail(error);
  if (g_strcmp0(json_path, "-") != 0 && g_strcmp0(trace_path, "-") != 0) { /* stdout holds a document */
    if (serving) printf("prefill (one forward pass over the prompts):\n");
    mm_report_run_text(stdout, sim->plan, &sim->metrics, mem);
    if (serving) mm_report_serving_text(stdout, &sim->serving);
  }
  if (!mem->fits) {
    g_autofree char *need = mm_fmt_bytes(mem->per_device_bytes);
    g_autofree char *cap = mm_fmt_bytes(mem->capacity_bytes);
    fprintf(stderr, "madmax: warning: OUT OF MEMORY: %s per device needed, %s available (\"fits\": false)\n", need, cap);
  }
  return MM_EXIT_OK;
}
