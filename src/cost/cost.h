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
  const MmEffFit *fit;      /* (transfer none) the calibration fit it came from (then curve is NULL) */
  const MmEffCurve *curve;  /* (transfer none) the curve it came from; NULL: a fit or the scalar */
  const MmUtil *scalar;     /* (transfer none) the device's scalar (used when curve is NULL) */
  const MmEffCurve *outside; /* (transfer none) a curve for the kernel that does not cover it (then the
                              * scalar applied); NULL otherwise */
  int point;                /* compute: the nearest point; memory: the point at or below the bytes; -1: none */
  gboolean other_mask;      /* attention: the point is of the other mask (the curve has none of the
                             * kernel's own mask for its pass) */
  gboolean longer;          /* flash attention: the kernel's sequence is longer than the longest measured,
                             * whose efficiency it takes (the curves are flat there) */
} MmCostFactor;

/* Why a kernel takes the time it does: both factors, both times, which one bounds it. */
typedef struct {
  MmCostFactor compute, memory;
  double compute_s, memory_s; /* the FLOPs at the compute util; all the bytes at the memory util */
  /* eager attention (an attention kernel not flash): its batched GEMMs, then its softmax, mask and
   * dropout passes, in sequence: time = max(compute_s, gemm_io_s) + passes_s, where gemm_io_s is
   * the bytes the GEMMs move themselves and passes_s the rest, both at the memory util (0 for
   * other kernels, and for an eager call without bytes) */
  gboolean serial;
  double gemm_io_s, passes_s;
  gboolean memory_bound; /* memory_s > compute_s; serial: passes_s > max(compute_s, gemm_io_s) */
} MmCostWhy;

/* The operand bytes a compute fit charges kernel @k (one call): GEMM-like kinds
 * (m x k + k x n) x batch elements of the dtype plus the m x n x batch output (at least 2
 * bytes an element); attention Q, K, V and O: 2 (m + n) k batch elements. calibrate fits
 * with the same function, so the fit and its use agree. */
double mm_cost_fit_bytes(MmKernelKind kind, MmDtype dtype, double m, double n, double k, double batch);

/* Time of one call of a calibration fit @f: roofline_t0 for @flops (> 0) and @bytes,
 * bandwidth_t0 for @bytes. */
double mm_cost_fit_s(const MmDevice *dev, const MmEffFit *f, MmDtype dtype, double flops, double bytes);

/* Time of one call of kernel @k on device @dev: the roofline
 *   max(flops / (peak[dtype] x clock_derate x compute util), bytes / (hbm_bw x memory util))
 * where @flops are the executed FLOPs and @bytes the HBM bytes of the call on one device
 * (0: that side takes no time). Eager attention (an attention kernel with flash FALSE) is
 * separate kernels in sequence, so a sum: max(compute time, io / (hbm_bw x memory util)) +
 * (bytes - io) / (hbm_bw x memory util), io the bytes its batched GEMMs move themselves (the
 * score passes they read or write and the query side, Q and O; at most @bytes), the rest its
 * softmax, mask and dropout passes and the key/value side (MmCostWhy.serial); a calibration fit
 * (fitted to flash kernels) does not apply to it. The compute util is the device's curve for (kind, dtype)
 * where it covers the shape (nearest point in log space, see docs/SCHEMA.md "efficiency"; an
 * attention kernel only among the points of its pass and mask, a flash kernel among the points
 * not eager, an eager kernel among the eager ones), else utilization.gemm; the memory util
 * the device's hbm curve for the kind where it covers @bytes (log-linear interpolation), else
 * utilization.hbm. Without curves, and but for eager attention, this is bit for bit the
 * roofline madmax always used. A calibration fit takes precedence: the
 * compute util is then flops / (peak x fit time of the call) (mm_cost_fit_s over the
 * kernel's operand bytes), its memory side bytes / (hbm_bw x the fit's memory_fraction); a
 * memory fit for the kind (or hbm.elementwise, for kinds without one) gives the memory util
 * bytes / (hbm_bw x its fit time). @why (may be NULL) receives the factors.
 * Launch overheads are not included. Returns seconds. */
double mm_cost_kernel_s(const MmDevice *dev, const MmKernel *k, double flops, double bytes, MmCostWhy *why);

/* "fit gemm.bf16 (calibration): 0.71", "curve gemm.bf16 (calibration) at m=4096 n=4096 k=4096 batch=1: 0.78", "scalar
 * utilization.gemm 0.65 (estimate)", or "outside curve gemm.bf16: scalar ..." when a curve
 * does not cover the kernel. @f from mm_cost_kernel_s. (transfer full) */
char *mm_cost_factor_text(const MmCostFactor *f);

/* "gemm.bf16 (calibration): roofline_t0 0.74 of peak, 0.9 of HBM, t0 4.2 us; rms error 8% over
 * 373 calls, 9% on 93 held out; SOURCE": what a fit is and how well it did. (transfer full) */
char *mm_cost_fit_text(const MmEffFit *f, const char *source);

G_END_DECLS
