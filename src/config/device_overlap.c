/* device_overlap: the device file's "overlap" object, coefficients of decomposed
 * compute-communication overlap (DIL, CIL, DMA engines; docs/FUSED.md): one row each, with its
 * default and the default's source. */
#include <stddef.h>

#include "internal.h"

#define OV(f) ((gssize)offsetof(MmDevice, overlap.f))

static const MmCoeffRow overlap_rows[] = {
  {"mem_unhidden", 0, 1, 1, "fraction", 0.25, MM_PROV_ESTIMATE,
   "estimate following FiCCO Sec. IV-C1 (GEMM DIL grows as op-to-byte falls): a GEMM piece costs "
   "max(compute, memory) + this x min(compute, memory), so pieces nearer the machine's op-to-byte lose more",
   OV(mem_unhidden), "fraction of a GEMM's minimum-traffic memory time (MK + NK + MN) its compute does not hide"},
  {"gemm_tile", 16, 1024, 1, "elements", 256, MM_PROV_ESTIMATE,
   "estimate: 256 x 256 macro tiles of hipBLASLt / CUTLASS large-GEMM kernels; split-K fills the device "
   "when the tiles are fewer than its compute units (fused.compute_units)",
   OV(gemm_tile), "output tile edge for wave quantization of GEMM pieces over the compute units"},
  {"dma_latency_us", 0, 1e4, 1e-6, "us", 10, MM_PROV_ESTIMATE,
   "estimate: hipMemcpyDtoDAsync / cudaMemcpyAsync peer-copy setup of ~10 us; FiCCO Sec. IV-C2 measures "
   "~10% geomean communication DIL at 1/8 transfer size, falling as transfers grow",
   OV(dma_latency_s), "fixed cost of one step's batch of DMA copies"},
  {"dma_contention", 0, 0.9, 1, "fraction", 0.10, MM_PROV_PAPER,
   "FiCCO Sec. IV-D1: 8-way M-sharded GEMMs beside DMA all-gathers slow by 1.11x geomean (GEMM CIL); "
   "1 - 1/1.11 = 0.10 of the compute pipeline while a copy runs, beyond the HBM sharing the engine models",
   OV(dma_contention), "share of the compute pipeline (caches, network on chip) a running DMA copy costs a GEMM"},
  {"cu_comm_sm", 0, 0.9, 1, "fraction", 0.20, MM_PROV_ESTIMATE,
   "estimate: RCCL/NCCL collectives run 16-64 channels (one workgroup each), about a fifth of an "
   "MI300X's or H100's compute units; FiCCO Sec. IV-D1 finds core-driven copies cause far more CIL than DMA",
   OV(cu_comm_sm), "share of the SMs/CUs a compute-unit-driven transfer occupies while it runs"},
  {"collective_slowdown", 0, 10, 1, "fraction", 0.189, MM_PROV_PAPER,
   "Lee et al., 'Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning: "
   "Performance and Power Implications' (arXiv:2507.03114, 2025): compute kernels overlapped with NCCL/RCCL "
   "collectives ran 18.9% slower on average (at most 40%) than with no communication beside them, measured on "
   "A100, H100, MI250 and MI210 with GPT and LLaMA layers",
   OV(collective_slowdown),
   "the lowering's compute kernels take (1 + this) x their time while a collective kernel (all-reduce, "
   "all-gather, reduce-scatter, all-to-all, broadcast) runs beside them on the device; 0: no interference"},
  {"heuristic_low", 0, 1e6, 1, "x", 1, MM_PROV_PAPER,
   "FiCCO Sec. V-C: OTB x MT below the machine's -> uniform-fused-1D", OV(heuristic_low),
   "FiCCO heuristic: uniform-fused-1d below this multiple of the machine's OTB x MT"},
  {"heuristic_high", 0, 1e6, 1, "x", 5, MM_PROV_PAPER,
   "FiCCO Sec. V-C: OTB x MT above 5x the machine's -> hetero-unfused-1D", OV(heuristic_high),
   "FiCCO heuristic: hetero-unfused-1d above this multiple (hetero-fused-1d between)"},
  {"cmm_threshold_MiB", 0, 1e9, 1048576.0, "MiB", 1, MM_PROV_ESTIMATE,
   "estimate: XLA GPU collective matmul is triggered by a size threshold (RFC 'Triggering condition'; "
   "xla_gpu_threshold_for_windowed_einsum_mib), whose default the RFC leaves to experiments",
   OV(cmm_threshold_bytes), "collective matmul applies only when the gathered (or scattered) operand reaches this"},
  MM_COEFF_ROWS_END,
};

/* The heuristic's thresholds in order. */
static gboolean check_overlap(const MmJsonCtx *ctx, const MmDevice *d, GError **error)
{
  if (d->overlap.heuristic_low.value > d->overlap.heuristic_high.value) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.overlap.heuristic_high",
                  "expected at least heuristic_low (%g): the heuristic's upper threshold",
                  d->overlap.heuristic_low.value);
    return FALSE;
  }
  return TRUE;
}

const MmCoeffTable mm__overlap_coeffs = {
  "overlap",
  "Coefficients of decomposed compute-communication overlap, each `{value, provenance, source}`; an absent key "
  "takes the default below.",
  overlap_rows,
  check_overlap,
};
