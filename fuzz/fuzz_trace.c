/* fuzz_trace: what `madmax plot` reads: a Chrome trace (--kind timeline) and run results (--kind
 * breakdown), through the script builder (no gnuplot). The input is written to a file, as plot
 * reads files. */
#include "fuzz.h"
#include "report/report.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *file = mm_fuzz_write("input.json", data, size);
  const char *inputs[] = {file};
  for (int k = 0; k < MM_PLOT_COUNT; k++) {
    MmPlotOptions o = {0};
    g_autoptr(GError) error = NULL;
    g_autofree char *dat = NULL;
    g_autofree char *script = mm_plot_script((MmPlotKind)k, inputs, 1, "fuzz.png", &o, &dat, &error);
    mm_fuzz_require(script || (error && error->domain == MM_REPORT_ERROR), "%s: rejected without a report error",
                    mm_plot_kind_names[k]);
  }
  return 0;
}
