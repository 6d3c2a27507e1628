/* fuzz_device: device files (hardware/devices): the loader, then the cost of every kernel kind on what it
 * accepts, and small simulations on a node of eight. */
#include <math.h>

#include <string.h>

#include "cost/cost.h"
#include "fuzz.h"

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
  MmDevice dev;
  if (!mm_device_parse("hardware/devices/fuzz.json", text, size, &dev, &error)) {
    mm_fuzz_require(error && error->domain == MM_CONFIG_ERROR, "rejected without a config error");
    return 0;
  }
  /* every kernel kind and dtype, small and large, through curves and scalars */
  static const double shapes[][4] = {{1, 1, 1, 1}, {16, 4096, 4096, 1}, {8192, 8192, 8192, 8}, {1e9, 1e6, 1e6, 1e3}};
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    for (int d = 0; d < MM_DTYPE_COUNT; d++) {
      if (dev.peak_flops[d] <= 0) continue;
      for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
        MmKernel kern = {.kind = (MmKernelKind)k, .dtype = (MmDtype)d, .m = shapes[i][0], .n = shapes[i][1],
                         .k = shapes[i][2], .batch = shapes[i][3], .flash = i % 2, .bwd = i % 3 == 1, .causal = i >= 2};
        const double flops = 2.0 * kern.m * kern.n * kern.k * kern.batch, bytes = (kern.m * kern.k + kern.n * kern.k) * 2;
        MmCostWhy why;
        double t = mm_cost_kernel_s(&dev, &kern, flops, bytes, &why);
        mm_fuzz_require(isfinite(t) && t >= 0, "kernel %d dtype %d shape %u: time %g", k, d, i, t);
        g_free(mm_cost_factor_text(&why.compute));
        g_free(mm_cost_factor_text(&why.memory));
      }
    }
  }
  mm_device_clear(&dev);
  /* a node of 8 such devices, simulated */
  g_free(mm_fuzz_write("devices/fuzz.json", data, size));
  static const char node[] = "{\"name\":\"n\",\"device\":\"devices/fuzz.json\",\"gpus_per_node\":8,\"nodes\":1,"
                             "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":12,\"link_bw_GBps\":25}}";
  g_autofree char *sys = g_build_filename(mm_fuzz_tmpdir(), "node.json", NULL);
  g_autoptr(MmHardware) hw = mm_hardware_parse(sys, node, strlen(node), &error);
  mm_fuzz_require(hw != NULL, "the node of an accepted device: %s", error ? error->message : "?");
  mm_fuzz_simulate_small(hw, 1);
  return 0;
}
