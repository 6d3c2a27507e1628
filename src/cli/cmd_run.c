/* cmd_run: `madmax run`: simulate one iteration and report time, throughput, MFU, communication, memory. */
#include <stdio.h>

#include "cli.h"
#include "engine/engine.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "report/report.h"

int mm_cmd_run(int argc, char **argv)
{
  g_autofree char *json_path = NULL, *trace_path = NULL;
  gboolean per_device = FALSE;
  MmInputPaths paths = {0};
  GOptionEntry entries[] = {
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write the result document to OUT ('-' = stdout, replaces the text)", "OUT"},
    {"trace", 't', 0, G_OPTION_ARG_FILENAME, &trace_path, "Write a Chrome trace (open in ui.perfetto.dev)", "T.json"},
    {"per-device", 0, 0, G_OPTION_ARG_NONE, &per_device, "Simulate every device, not one per device class", NULL},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- simulate one training or inference iteration");
  mm_cli_add_input_options(ctx, &paths);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Lowers the model under the config's task and per-block parallel strategy into per-device\n"
    "streams of compute ops (roofline: FLOPs at peak x utilization, bytes at HBM bandwidth x\n"
    "utilization) and collectives (alpha-beta on the network the group spans), runs them through\n"
    "the event engine (one compute and two communication streams per device, overlapping where\n"
    "dependencies allow) and reports iteration time, throughput, MFU, serialized and exposed\n"
    "communication and per-device memory. Devices that behave identically are simulated once;\n"
    "--per-device simulates each (same answer, slower; for checking and asymmetric studies).");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax run -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-tp-fsdp.json\n"
    "  madmax run -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json \\\n"
    "      --json results/dlrm-a.json --trace results/dlrm-a-trace.json\n"
    "  madmax run -m models/gpt3-175b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json --nodes 48\n"
    "\nJSON keys: iteration_time_s, throughput.{samples_per_s,tokens_per_s}, mfu, serialized.{compute_s,\n"
    "embedding_s, comm_s, comm_by_kind}, exposed_comm_s, exposed_comm_fraction, overlap.hidden_comm_s,\n"
    "memory.{per_device_bytes, capacity_bytes, fits, breakdown} (docs/MODEL.md defines each).\n");
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
  MmInputs in;
  if (!mm_inputs_load(&in, model_path, hw_path, cfg_path, paths.nodes, &error)) {
    mm_inputs_clear(&in);
    return mm_cli_fail(error);
  }
  int rc = MM_EXIT_OK;
  g_autoptr(MmGraph) graph = mm_graph_new(in.model);
  g_autoptr(MmMemory) mem = mm_memory_new(in.scenario, graph);
  MmPlanOptions opt = {.per_device = per_device};
  g_autoptr(MmPlan) plan = mm_plan_new(in.scenario, graph, &opt, &error);
  g_autoptr(MmEngine) engine = plan ? mm_engine_new(&plan->program, 1, plan->classes, plan->n_classes, &error) : NULL;
  if (!engine || !mm_engine_run(engine, &error)) {
    rc = mm_cli_fail(error);
    goto out;
  }
  MmRunMetrics r;
  mm_report_run_metrics(plan, engine, &r);
  if (json_path) {
    g_autoptr(cJSON) doc = mm_report_run_json(plan, &r, mem);
    if (!mm_report_write_json(doc, json_path, &error)) {
      rc = mm_cli_fail(error);
      goto out;
    }
  }
  if (trace_path && !mm_report_write_trace(plan, engine, trace_path, &error)) {
    rc = mm_cli_fail(error);
    goto out;
  }
  if (!json_path || g_strcmp0(json_path, "-") != 0) mm_report_run_text(stdout, plan, &r, mem);
  if (!mem->fits) {
    g_autofree char *need = mm_fmt_bytes(mem->per_device_bytes);
    g_autofree char *cap = mm_fmt_bytes(mem->capacity_bytes);
    fprintf(stderr, "madmax: warning: OUT OF MEMORY: %s per device needed, %s available (\"fits\": false)\n", need, cap);
  }
out:
  mm_inputs_clear(&in);
  return rc;
}
