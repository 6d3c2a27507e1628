/* fuzz_model: model files: the loader, then the graph and the describe document of what it accepts. */
#include "fuzz.h"
#include "graph/graph.h"
#include "report/report.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *text = mm_fuzz_text(data, size);
  if (!text) return 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_parse("models/fuzz.json", text, size, &error);
  if (!m) {
    mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "rejected without a config error");
    return 0;
  }
  g_autoptr(MmGraph) g = mm_graph_new(m);
  mm_fuzz_require(g->total_params >= 0, "negative parameter count %" G_GINT64_FORMAT, g->total_params);
  g_autoptr(cJSON) doc = mm_report_describe_json(g, NULL, NULL, NULL);
  mm_fuzz_require_finite(doc, "describe");
  return 0;
}
