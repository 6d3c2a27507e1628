/* device_fused: the device file's "fused" object, coefficients of fused compute-collective
 * kernels (docs/FUSED.md): one row each, with its default and the default's source. */
#include <stddef.h>

#include "internal.h"

#define FZ(f) ((gssize)offsetof(MmDevice, fused.f))

static const MmCoeffRow fused_rows[] = {
  {"compute_units", 1, 1e6, 1, "CUs/SMs", 104, MM_PROV_DATASHEET, "AMD Instinct MI210 datasheet: 104 compute units",
   FZ(compute_units), "compute units (AMD) or streaming multiprocessors (NVIDIA) a persistent kernel spreads over"},
  {"occupancy_loss", 0, 0.99, 1, "fraction", 0.125, MM_PROV_PAPER,
   "Fused computation-collective paper (AMD), Sec. III: the fused embedding + All-to-All kernel runs at 12.5% lower "
   "occupancy than the embedding kernel (ROC_SHMEM registers)",
   FZ(occupancy_loss), "occupancy a fused kernel loses to the communication API's registers"},
  {"put_latency_us", 0, 1e4, 1e-6, "us", 2, MM_PROV_ESTIMATE,
   "estimate: GPU-initiated put issue cost of a few microseconds (the paper names the API latency without a figure)",
   FZ(put_latency_s), "issuing one non-blocking put from a workgroup"},
  {"flag_us", 0, 1e4, 1e-6, "us", 1, MM_PROV_ESTIMATE,
   "estimate: a remote fence and a flag put per slice (the paper names the book-keeping without a figure)",
   FZ(flag_s), "per slice: WG_Done book-keeping, the remote fence and the flag put"},
  {"waves_per_cu", 1, 1024, 1, "waves", 32, MM_PROV_DATASHEET,
   "AMD CDNA2 ISA / white paper: a CU has 4 SIMDs of up to 8 resident waves each (32 waves per CU)",
   FZ(waves_per_cu), "resident waves (AMD) or warps (NVIDIA) per CU/SM at full occupancy"},
  {"wave_lanes", 1, 1024, 1, "threads", 64, MM_PROV_DATASHEET,
   "AMD CDNA2 ISA: a wavefront is 64 work-items (NVIDIA: a warp is 32 threads)",
   FZ(wave_lanes), "threads per wave (AMD) or warp (NVIDIA)"},
  {"mem_latency_ns", 1, 1e5, 1e-9, "ns", 600, MM_PROV_ESTIMATE,
   "estimate: pointer-chase microbenchmarks of HBM GPUs (CDNA2, Ampere, Hopper) put a load that misses the caches "
   "at roughly 500-700 ns; the middle is taken",
   FZ(mem_latency_s), "latency of an HBM load a wave waits on: with Little's law, the waves needed to keep HBM busy"},
  {"contention", 0, 0.95, 1, "fraction", 0.5, MM_PROV_ESTIMATE,
   "estimate: DRAM row-buffer conflicts when more independent access streams are in flight than HBM serves; "
   "a conflicting access costs about a row cycle (tRC) instead of a burst, so up to about half of the "
   "bandwidth is lost as conflicts approach every access (HBM2e timing: JEDEC JESD235)",
   FZ(contention), "fraction of HBM efficiency lost when demand far exceeds the achievable bandwidth (memory "
   "contention: the occupancy trade-off)"},
  MM_COEFF_ROWS_END,
};

const MmCoeffTable mm__fused_coeffs = {
  "fused",
  "Coefficients of fused compute-collective kernels, each `{value, provenance, source}`; an absent key takes the "
  "default below.",
  fused_rows,
  NULL,
};
