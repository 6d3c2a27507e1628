/* cost: a kernel on a device model -> time; the one place compute and HBM efficiency enter. */
#pragma once

#include "config/config.h"
#include "graph/graph.h"

G_BEGIN_DECLS

/* One efficiency factor a kernel's time used, and where it came from. */
typedef struct {
  double util;              /* the fraction of peak applied */
  const char *name;         /* (transfer none) the curve's name ("gemm.bf16", "hbm.lookup"), or the
                             * scalar's ("utilization.gemm", "utilization.hbm") */
  const MmEffCurve *curve;  /* (transfer none) the curve it came from; NULL: the scalar */
  const MmUtil *scalar;     /* (transfer none) the device's scalar (used when curve is NULL) */
  const MmEffCurve *outside; /* (transfer none) a curve for the kernel that does not cover it (then the
                              * scalar applied); NULL otherwise */
  int point;                /* compute: the nearest point; memory: the point at or below the bytes; -1: none */
} MmCostFactor;

/* Why a kernel takes the time it does: both factors, both times, which one bounds it. */
typedef struct {
  MmCostFactor compute, memory;
  double compute_s, memory_s;
  gboolean memory_bound; /* memory_s > compute_s */
} MmCostWhy;

/* Time of one call of kernel @k on device @dev: the roofline
 *   max(flops / (peak[dtype] x compute util), bytes / (hbm_bw x memory util))
 * where @flops are the executed FLOPs and @bytes the HBM bytes of the call on one device
 * (0: that side takes no time). The compute util is the device's curve for (kind, dtype)
 * where it covers the shape (nearest point in log space, see docs/SCHEMA.md "efficiency"),
 * else utilization.gemm; the memory util the device's hbm curve for the kind where it
 * covers @bytes (log-linear interpolation), else utilization.hbm. Without curves this is
 * bit for bit the roofline madmax always used. @why (may be NULL) receives the factors.
 * Launch overheads are not included. Returns seconds. */
double mm_cost_kernel_s(const MmDevice *dev, const MmKernel *k, double flops, double bytes, MmCostWhy *why);

/* "curve gemm.bf16 (calibration) at m=4096 n=4096 k=4096 batch=1: 0.78", "scalar
 * utilization.gemm 0.65 (estimate)", or "outside curve gemm.bf16: scalar ..." when a curve
 * does not cover the kernel. @f from mm_cost_kernel_s. (transfer full) */
char *mm_cost_factor_text(const MmCostFactor *f);

G_END_DECLS
