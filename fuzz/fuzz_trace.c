/* fuzz_trace: what `madmax plot` reads, through the script builder (no gnuplot): a Chrome trace
 * (timeline), run results (breakdown) and a what-if document (whatif) from the input as one
 * file; and a sweep's folder (ranking, pareto) when the input is points.csv, a NUL byte, then
 * summary.json. Plot reads files, so the input is written to files. */
#include <string.h>

#include "fuzz.h"
#include "report/report.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  return 0;
}

static void plot(MmPlotKind kind, const char *input)
{
  const char *inputs[] = {input};
  MmPlotOptions o = {0};
  g_autoptr(GError) error = NULL;
  g_autofree char *dat = NULL;
  g_autofree char *script = mm_plot_script(kind, inputs, 1, "fuzz.png", &o, &dat, &error);
  mm_fuzz_require(script || (error && error->domain == MM_REPORT_ERROR), "%s: rejected without a report error",
                  mm_plot_kind_names[kind]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const uint8_t *nul = memchr(data, 0, size);
  if (!nul) {
    g_autofree char *file = mm_fuzz_write("input.json", data, size);
    plot(MM_PLOT_TIMELINE, file);
    plot(MM_PLOT_BREAKDOWN, file);
    plot(MM_PLOT_WHATIF, file);
    return 0;
  }
  const size_t csv = (size_t)(nul - data);
  g_free(mm_fuzz_write("study/points.csv", data, csv));
  g_free(mm_fuzz_write("study/summary.json", nul + 1, size - csv - 1));
  g_autofree char *dir = g_build_filename(mm_fuzz_tmpdir(), "study", NULL);
  plot(MM_PLOT_RANKING, dir);
  plot(MM_PLOT_PARETO, dir);
  return 0;
}
