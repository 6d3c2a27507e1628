/* fuzz_hardware: system files (hardware/, device files named relative to it): the loader,
 * then links, parameters, every collective over a node and over the whole system, and small
 * simulations on up to 2 of its nodes. */
#include <math.h>

#include "comm/comm.h"
#include "fuzz.h"
#include "report/report.h"

static char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  path = mm_fuzz_path("hardware/fuzz.json"); /* not read: it locates the device files */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *text = mm_fuzz_text(data, size);
  if (!text) return 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_parse(path, text, size, &error);
  if (!hw) {
    mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "rejected without a config error");
    return 0;
  }
  MmLinks links;
  mm_comm_links(hw, &links);
  g_autoptr(cJSON) doc = cJSON_CreateObject();
  mm_report_hardware_params_json(hw, doc);
  mm_fuzz_require_finite(doc, "hardware_parameters");
  const int64_t groups[][2] = {{hw->gpus_per_node, 1}, {hw->nodes, hw->gpus_per_node}, {mm_hardware_devices(hw), 1}};
  for (guint gi = 0; gi < G_N_ELEMENTS(groups); gi++) {
    if (groups[gi][0] < 2 || !mm_comm_group_even(hw, groups[gi][0], groups[gi][1])) continue;
    for (int k = 0; k < MM_COLL_COUNT; k++) {
      for (int a = 0; a < MM_ALGO_COUNT; a++) {
        MmCollective c = {.kind = (MmCollKind)k, .bytes = 1 << 20, .degree = groups[gi][0], .stride = groups[gi][1],
                          .algorithm = (MmAlgorithm)a, .skew = 1.0, .one_shot = a == 0,
                          .route_top_k = k == MM_COLL_ALL_TO_ALL && a % 2 ? 8 : 0, .route_nodes = a % 4 == 1 ? 4 : 0};
        MmCommCost cost;
        mm_comm_cost(hw, &links, &c, &cost);
        mm_fuzz_require(isfinite(cost.time_s) && cost.time_s >= 0, "%s over %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                        " (%s): %g s", mm_coll_names[k], c.degree, c.stride, mm_algorithm_names[a], cost.time_s);
        for (uint32_t u = 0; u < cost.n_use; u++)
          mm_fuzz_require(cost.link[u] < links.n && isfinite(cost.bytes[u]) && cost.bytes[u] >= 0,
                          "%s: link %u of %u, %g bytes", mm_coll_names[k], cost.link[u], links.n, cost.bytes[u]);
      }
    }
  }
  if (hw->gpus_per_node <= 16) mm_fuzz_simulate_small(hw, 2);
  return 0;
}
