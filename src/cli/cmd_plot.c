/* cmd_plot: `madmax plot`: gnuplot figures of a run's trace (timeline), run results (breakdown),
 * a sweep's folder (ranking, pareto; systems for a sweep of several) or a what-if study (whatif). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "report/report.h"

/* "A:B" milliseconds -> seconds. */
static gboolean parse_window(const char *s, MmPlotOptions *o)
{
  char *end = NULL;
  double a = g_ascii_strtod(s, &end);
  if (end == s || *end != ':') return FALSE;
  const char *b_s = end + 1;
  double b = g_ascii_strtod(b_s, &end);
  if (end == b_s || *end != '\0' || !(a >= 0) || !(b > a)) return FALSE;
  o->from_s = a * 1e-3;
  o->to_s = b * 1e-3;
  return TRUE;
}

/* INPUT.json -> INPUT-KIND.png; a directory -> DIR/KIND.png. */
static char *default_out(const char *input, const char *kind)
{
  if (g_file_test(input, G_FILE_TEST_IS_DIR)) {
    g_autofree char *name = g_strdup_printf("%s.png", kind);
    return g_build_filename(input, name, NULL);
  }
  g_autofree char *stem = g_strdup(input);
  if (g_str_has_suffix(stem, ".json")) stem[strlen(stem) - 5] = '\0';
  return g_strdup_printf("%s-%s.png", stem, kind);
}

int mm_cmd_plot(int argc, char **argv)
{
  g_autofree char *kind_s = NULL, *out = NULL, *script_path = NULL, *window = NULL, *title = NULL, *size = NULL;
  GOptionEntry entries[] = {
    {"kind", 'k', 0, G_OPTION_ARG_STRING, &kind_s,
     "timeline (a trace), breakdown (results), ranking or pareto (a sweep's folder), systems (a sweep of several "
     "systems' folder), whatif (whatif --json)",
     "KIND"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Figure to write: .png, .svg or .pdf (default: INPUT-KIND.png)", "F"},
    {"script", 's', 0, G_OPTION_ARG_FILENAME, &script_path,
     "Also write the gnuplot script to F.gp and the data it reads to F.dat; alone, writes only those", "F.gp"},
    {"window", 'w', 0, G_OPTION_ARG_STRING, &window, "timeline: only this span, in ms (e.g. 1200:1500)", "A:B"},
    {"size", 0, 0, G_OPTION_ARG_STRING, &size,
     "column (3.5x2.4 in, 7 pt text), page (7x3.5 in, 8 pt), slide (10x5.6 in, 16 pt) or WxH in inches "
     "(default: page width, the height the rows need)", "SIZE"},
    {"title", 0, 0, G_OPTION_ARG_STRING, &title,
     "Figure title (default: the run's or the study's model, system and config)", "T"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("INPUT... - draw a figure of madmax's outputs with gnuplot");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "timeline: one trace written by `madmax run --trace T.json`. A row per device class and\n"
    "stream (compute, intra- and inter-node communication, the pipeline's send/receive as one),\n"
    "spans coloured by what fills them (forward, backward, optimizer, each collective kind):\n"
    "pipeline bubbles, exposed communication and overlap show as they happen. Ops thinner than\n"
    "a point merge into solid spans of what fills most of them.\n"
    "breakdown: results written by `madmax run --json R.json` (files, or directories of them):\n"
    "a stacked bar per result splitting the iteration (serving: the prefill and the decode step)\n"
    "into forward, backward, recompute and optimizer compute (embedding lookups inside them),\n"
    "exposed communication and idle time; the parts sum to the iteration time at the bar's end.\n"
    "ranking: a folder written by `madmax sweep --out DIR` (points.csv, summary.json): the\n"
    "20 points with the most samples/s (as many as fit with --size), each a row of its rank,\n"
    "strategies and the dimensions that differ, and a bar labelled with its speedup over the\n"
    "FSDP baseline; the baseline and the best point that fits always shown, points out of memory\n"
    "hatched (simulated with --include-oom) or listed without a bar, the nearest to fitting first.\n"
    "pareto: the same folder: memory per device against samples/s of every simulated point, the\n"
    "summary's memory-throughput Pareto front as a step line, the device's memory capacity,\n"
    "points out of memory as crosses, the baseline and the best point labelled.\n"
    "systems: the folder of a sweep of several systems (madmax sweep -H A -H B ...): time against\n"
    "A100-normalized GPU-hours, both per million samples, of each system's own time-vs-GPU-hours\n"
    "Pareto front (a colour and point type per system, up to 8), and the summary's front across\n"
    "all the systems connected and ringed.\n"
    "whatif: the JSON of `madmax whatif --json W.json`: a bar per system (the baseline, each\n"
    "component scaled alone, all together) of its speedup with the strategy re-optimized, the\n"
    "best strategy under it, a line at 1, and how the joint speedup compares with the single ones.\n"
    "Titles and labels come from the names (model, system, config) the runs and studies carry\n"
    "(a long config name: its headline). The figure's extension picks the format: .png (slides, 150 pixels per\n"
    "inch), .svg, .pdf (papers); --size its size and text size. --script keeps the gnuplot\n"
    "script and its data file, to restyle by hand.");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax run -m models/llama3-70b.json -H hardware/dgx-h100-2048.json -c configs/llama3-70b-pretrain.json \\\n"
    "      --nodes 64 --trace results/pp.trace.json --json results/pp.json\n"
    "  madmax plot results/pp.trace.json --kind timeline --size column --out results/pp-timeline.pdf\n"
    "  madmax plot results/pp.trace.json --kind timeline --window 0:800 --out results/warmup.png\n"
    "  madmax plot results/ --kind breakdown --out results/breakdown.svg   # every result in the directory\n"
    "  madmax sweep -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json \\\n"
    "      --out results/dlrm-a\n"
    "  madmax plot results/dlrm-a --kind ranking --out results/dlrm-a-ranking.pdf\n"
    "  madmax plot results/dlrm-a --kind pareto --size column --out results/dlrm-a-pareto.pdf\n"
    "  madmax sweep -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -H hardware/dgx-h100-2048.json \\\n"
    "      -c configs/llm-pretrain-fsdp.json --space configs/sweeps/llama2-70b-nodes.json --out results/a100-h100\n"
    "  madmax plot results/a100-h100 --kind systems --out results/a100-h100-systems.png\n"
    "  madmax whatif -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json \\\n"
    "      --json results/dlrm-a-whatif.json\n"
    "  madmax plot results/dlrm-a-whatif.json --kind whatif --out results/dlrm-a-whatif.png\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  int kind = -1;
  for (int k = 0; kind_s && k < MM_PLOT_COUNT; k++)
    if (strcmp(kind_s, mm_plot_kind_names[k]) == 0) kind = k;
  if (kind < 0) {
    fprintf(stderr,
            "madmax: plot needs --kind timeline, breakdown, ranking, pareto, systems or whatif%s%s%s\n"
            "Try 'madmax plot --help'.\n",
            kind_s ? " (got '" : "", kind_s ? kind_s : "", kind_s ? "')" : "");
    return MM_EXIT_INPUT;
  }
  if (argc < 2) {
    fprintf(stderr, "madmax: plot needs an INPUT (a trace for timeline, results for breakdown, a sweep's folder for "
                    "ranking, pareto and systems, whatif --json's file for whatif)\nTry 'madmax plot --help'.\n");
    return MM_EXIT_INPUT;
  }
  MmPlotOptions opt = {.title = title};
  if (size && !mm_plot_parse_size(size, &opt)) {
    fprintf(stderr, "madmax: --size: expected column, page, slide or WxH in inches from 1 to 40 (got '%s')\n"
                    "Try 'madmax plot --help'.\n", size);
    return MM_EXIT_INPUT;
  }
  if (script_path && (!*script_path || strcmp(script_path, "-") == 0)) {
    fprintf(stderr, "madmax: --script: expected a file name F.gp (the script reads its data from F.dat beside it)\n"
                    "Try 'madmax plot --help'.\n");
    return MM_EXIT_INPUT;
  }
  if (window && (kind != MM_PLOT_TIMELINE || !parse_window(window, &opt))) {
    fprintf(stderr, "madmax: --window: expected A:B in milliseconds with 0 <= A < B, for --kind timeline (got '%s')\n",
            window);
    return MM_EXIT_INPUT;
  }
  const char *const *inputs = (const char *const *)argv + 1;
  const guint n = (guint)argc - 1;
  g_autoptr(GError) error = NULL;
  const gboolean draw = out || !script_path;
  if (!out) out = default_out(inputs[0], mm_plot_kind_names[kind]);
  {
    /* never over what it reads: the figure, the script or its data file naming an INPUT (a missing
     * INPUT is reported as such, by the reading below) */
    g_autofree char *data_path = script_path ? mm_plot_data_path(script_path) : NULL;
    const MmPathArg outputs[] = {{"--out", draw ? out : NULL}, {"--script", script_path}, {"--script", data_path},
                                 {NULL, NULL}};
    g_autoptr(GArray) ins = g_array_new(TRUE, TRUE, sizeof(MmPathArg));
    gboolean all_there = TRUE;
    for (guint i = 0; i < n; i++) {
      g_array_append_val(ins, ((MmPathArg){"INPUT", inputs[i]}));
      all_there &= g_file_test(inputs[i], G_FILE_TEST_EXISTS);
    }
    if (all_there && !mm_outputs_check(outputs, (const MmPathArg *)(void *)ins->data, &error))
      return mm_cli_fail(error);
  }
  if (script_path) {
    g_autofree char *data = NULL;
    g_autofree char *script = mm_plot_script((MmPlotKind)kind, inputs, n, out, &opt, &data, &error);
    if (!script) return mm_cli_fail(error);
    g_autofree char *data_path = mm_plot_data_path(script_path);
    if (!mm_plot_write_file(data_path, data, strlen(data), &error) ||
        !mm_plot_write_file(script_path, script, strlen(script), &error))
      return mm_cli_fail(error);
  }
  if (draw) {
    if (!mm_plot_render((MmPlotKind)kind, inputs, n, out, &opt, &error)) return mm_cli_fail(error);
    printf("%s\n", out);
  }
  return MM_EXIT_OK;
}
