/* cmd_whatif: `madmax whatif`: scale hardware components singly and jointly, re-optimize the
 * strategy on each scaled system, report the speedups and what shrank. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "report/report.h"
#include "sweep/sweep.h"

/* The factors --scale accepts: a millionfold either way (further, every point of a study takes
 * longer than madmax simulates, and the study would say "nothing fits" of a slowdown). */
#define SCALE_MIN 1e-6
#define SCALE_MAX 1e6

/* "compute=10,hbm_bw=1.5" -> factors; FALSE with a message naming the bad item. */
static gboolean parse_scales(const char *text, double factor[MM_SCALE_COUNT])
{
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (guint i = 0; items[i]; i++) {
    g_auto(GStrv) kv = g_strsplit(items[i], "=", 2);
    int k = -1;
    for (int j = 0; kv[0] && mm_scale_names[j]; j++)
      if (strcmp(kv[0], mm_scale_names[j]) == 0) k = j;
    char *end = NULL;
    double v = kv[0] && kv[1] ? g_ascii_strtod(kv[1], &end) : 0;
    if (k < 0 || !end || *end || !(v >= SCALE_MIN && v <= SCALE_MAX)) {
      g_autofree char *names = g_strjoinv(", ", (char **)mm_scale_names);
      fprintf(stderr, "madmax: --scale %s: expected NAME=FACTOR with FACTOR from %g to %g and NAME one of %s\n",
              items[i], SCALE_MIN, SCALE_MAX, names);
      return FALSE;
    }
    if (factor[k] > 0) {
      fprintf(stderr, "madmax: --scale %s: %s is given twice; expected each component once\n", text, kv[0]);
      return FALSE;
    }
    factor[k] = v;
  }
  return TRUE;
}

int mm_cmd_whatif(int argc, char **argv)
{
  g_autofree char *scale_text = NULL, *space_path = NULL, *json_path = NULL;
  gint jobs = 0;
  MmInputPaths paths = {0};
  GOptionEntry entries[] = {
    {"scale", 'S', 0, G_OPTION_ARG_STRING, &scale_text, "Components and factors, e.g. compute=10,inter_bw=10 (default: each x10, latency x0.1)", "LIST"},
    {"space", 's', 0, G_OPTION_ARG_FILENAME, &space_path, "Sweep space the strategy is re-optimized over (as madmax sweep)", "S"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write the table as JSON to OUT ('-' = stdout, replaces the text)", "OUT"},
    {"jobs", 'J', 0, G_OPTION_ARG_INT, &jobs, "Threads (default: all cores)", "N"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- how much faster with better hardware, strategy re-optimized");
  mm_cli_add_input_options(ctx, &paths);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Scales hardware components one at a time and all together (compute: peak FLOP/s; hbm_bw;\n"
    "hbm_cap: HBM capacity; intra_bw: scale-up links; inter_bw: NICs; latency: every network\n"
    "latency), and for each scaled system finds the best strategy over the sweep space (more\n"
    "memory can unlock strategies that did not fit). Prints per system the best strategy, its\n"
    "throughput, the speedup over the best on the system as loaded, and the time terms that shrank\n"
    "(serialized compute and collectives by kind); then whether joint scaling is super-linear\n"
    "(its speedup over the product of the single ones). MAD-Max's hardware scaling study.");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax whatif -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json\n"
    "  madmax whatif -m models/gpt3-175b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json --scale inter_bw=10,hbm_cap=2\n");
  gboolean parsed = mm_cli_parse(ctx, &argc, &argv);
  g_autofree char *model_path = paths.model, *hw_path = paths.hardware, *cfg_path = paths.config;
  if (!parsed) return MM_EXIT_INPUT;
  if (argc > 1 || !model_path || !hw_path || !cfg_path) {
    fprintf(stderr, "madmax: whatif needs --model, --hardware and --config\nTry 'madmax whatif --help'.\n");
    return MM_EXIT_INPUT;
  }
  if (jobs < 0 || jobs > 4096) {
    fprintf(stderr, "madmax: --jobs %d: expected 1 to 4096 (0: all cores)\n", jobs);
    return MM_EXIT_INPUT;
  }
  double factor[MM_SCALE_COUNT] = {0};
  if (scale_text) {
    if (!parse_scales(scale_text, factor)) return MM_EXIT_INPUT;
  } else {
    for (int k = 0; k < MM_SCALE_COUNT; k++) factor[k] = k == MM_SCALE_LATENCY ? 0.1 : 10.0;
  }
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--model", model_path}, {"--hardware", hw_path}, {"--config", cfg_path},
                              {"--space", space_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  g_autoptr(MmInputs) in = NULL;
  g_autoptr(MmSweepSpace) sp = NULL;
  paths.model = model_path, paths.hardware = hw_path, paths.config = cfg_path;
  if (!mm_cli_study_load(&paths, space_path, &in, &sp, &error)) return mm_cli_fail(error);
  g_autoptr(MmWhatif) w = mm_whatif_run(in, sp, factor, (guint)jobs);
  if (json_path) {
    g_autoptr(cJSON) doc = mm_whatif_json(w);
    if (!mm_report_write_json(doc, json_path, &error)) return mm_cli_fail(error);
  }
  if (!json_path || strcmp(json_path, "-") != 0) {
    printf("what-if  %s on %s (%s); the strategy re-optimized over %" G_GUINT64_FORMAT " points per system\n",
           in->model->name, in->hardware->name, in->config->name, sp->n_points);
    mm_whatif_text(stdout, w);
  }
  return MM_EXIT_OK;
}
