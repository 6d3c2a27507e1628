/* cost: kernel + device model -> time, through a measured efficiency curve or the utilization scalar. */
#include "cost.h"

#include <math.h>

/* The dimensions a compute curve is keyed by, in log2 (every one >= 1). */
#define DIMS 4

static void shape_of(double m, double n, double k, double batch, double out[DIMS])
{
  out[0] = m, out[1] = n, out[2] = k, out[3] = batch;
}

/* Whether kernel @k is eager attention: separate batched GEMMs and softmax, mask and dropout
 * passes, one after another (Megatron-LM 2021), rather than one flash kernel. */
static gboolean eager(const MmKernel *k)
{
  return k->kind == MM_KERNEL_ATTENTION && !k->flash;
}

/* The attention kernel whose points time @k on curve @c: the one the run calls, else the curve's
 * default; none for eager attention and other kinds (their points name none, device.c). */
static int wanted_kernel(const MmEffCurve *c, const MmKernel *k)
{
  if (k->kind != MM_KERNEL_ATTENTION || eager(k)) return MM_ATTN_KERNEL_DEFAULT;
  return k->impl != MM_ATTN_KERNEL_DEFAULT ? (int)k->impl : c->default_kernel;
}

/* Whether point @p describes kernel @k's pass, mask and kind of kernel: attention points name them
 * (an eager kernel takes only eager points, which time its batched GEMMs; a flash kernel only the
 * others, of the implementation @want it runs, wanted_kernel); other kinds are forward, unmasked and
 * not eager (device.c rejects the keys). */
static gboolean point_matches(const MmEffPoint *p, const MmKernel *k, gboolean causal, int want)
{
  return p->eager == eager(k) && p->bwd == k->bwd && p->causal == causal && p->kernel == want;
}

/* The mask whose points time flash kernel @k: its own, or, where the curve has no point of @k's
 * pass under its mask but has some under the other, the other mask's (FlashAttention-3 publishes
 * no causal backward: a causal backward then takes the unmasked backward's measured efficiency, a
 * kernel of its own pass, rather than the GEMM scalar; its FLOPs stay the causal half). */
static gboolean lookup_mask(const MmEffCurve *c, const MmKernel *k)
{
  if (k->kind != MM_KERNEL_ATTENTION || eager(k)) return k->causal;
  const int want = wanted_kernel(c, k);
  gboolean own = FALSE, other = FALSE;
  for (guint i = 0; i < c->n_points; i++) {
    own = own || point_matches(&c->points[i], k, k->causal, want);
    other = other || point_matches(&c->points[i], k, !k->causal, want);
  }
  return own || !other ? k->causal : !k->causal;
}

/* The HBM bytes an eager attention call's batched GEMMs move themselves, which their measured
 * times contain: forward, QK^T writes the scores and AV reads the probabilities (2 passes over the
 * m x n x batch matrix) and they read Q and write O; backward, dP = dO V^T writes dP, dV = P^T dO
 * reads P, dQ = dS K and dK = dS^T Q read dS (3 passes, as graph.c counts them) and they read Q
 * and dO and write dQ. The key/value side (K, V, dK, dV) is not counted: a kernel carries the
 * query heads, not the key/value heads (grouped-query attention) or the value width (MLA) that
 * size it, so those bytes stay with the passes (for multi-head attention at 2,048 tokens and head
 * width 128, an eighth of one score pass). What remains of the call's bytes is the softmax, mask
 * and dropout passes and the key/value side. */
static double eager_gemm_bytes(const MmKernel *k)
{
  const double e = mm_dtype_bytes(k->dtype), scores = k->m * k->n * k->batch * e, q = k->m * k->k * k->batch * e;
  return k->bwd ? 3.0 * scores + 3.0 * q : 2.0 * scores + 2.0 * q;
}

/* Compute curve: covers a kernel whose m, n, k and batch each lie within the range spanned by
 * the points of its pass and mask; then the util of the nearest of those points by squared
 * distance over log2 of the four (the first listed wins a tie). A grid of measured shapes thus
 * answers with its closest measurement, never an extrapolation. An attention kernel whose head
 * width (k) the curve measured takes the nearest point of that width: the head width picks the
 * kernel's tiles, so a point of another width is never nearer than one of its own. @other_mask:
 * the points were the other mask's (lookup_mask). */
static gboolean compute_lookup(const MmEffCurve *c, const MmKernel *k, double *util, int *point,
                               gboolean *other_mask, gboolean *longer)
{
  double x[DIMS], lo[DIMS], hi[DIMS];
  const gboolean mask = lookup_mask(c, k);
  const int want = wanted_kernel(c, k);
  *other_mask = mask != k->causal;
  *longer = FALSE;
  shape_of(k->m, k->n, k->k, k->batch, x);
  for (int d = 0; d < DIMS; d++) lo[d] = INFINITY, hi[d] = -INFINITY;
  gboolean own_width = FALSE;
  for (guint i = 0; i < c->n_points; i++) {
    if (!point_matches(&c->points[i], k, mask, want)) continue;
    own_width = own_width || (k->kind == MM_KERNEL_ATTENTION && c->points[i].k == k->k);
    double p[DIMS];
    shape_of(c->points[i].m, c->points[i].n, c->points[i].k, c->points[i].batch, p);
    for (int d = 0; d < DIMS; d++) lo[d] = MIN(lo[d], p[d]), hi[d] = MAX(hi[d], p[d]);
  }
  /* a flash kernel's queries and keys beyond the longest measured sequence take its length: a flash
   * kernel's efficiency saturates with the sequence (each query block streams over more keys of the
   * same work), and the published curves are flat at their long end (FlashAttention-2/3, cuDNN on
   * H100: 8k to 16k tokens within 2.8%); this is the one dimension extended past the points */
  if (k->kind == MM_KERNEL_ATTENTION && !eager(k))
    for (int d = 0; d < 2; d++)
      if (x[d] > hi[d] && hi[d] >= lo[d]) x[d] = hi[d], *longer = TRUE;
  for (int d = 0; d < DIMS; d++)
    if (!(x[d] >= lo[d] && x[d] <= hi[d])) return FALSE;
  double best = INFINITY;
  for (guint i = 0; i < c->n_points; i++) {
    if (!point_matches(&c->points[i], k, mask, want) || (own_width && c->points[i].k != k->k)) continue;
    double p[DIMS], dist = 0;
    shape_of(c->points[i].m, c->points[i].n, c->points[i].k, c->points[i].batch, p);
    for (int d = 0; d < DIMS; d++) {
      double e = log2(x[d]) - log2(p[d]);
      dist += e * e;
    }
    if (dist < best) best = dist, *point = (int)i;
  }
  *util = c->points[*point].util;
  return TRUE;
}

/* Memory curve: covers calls of first.bytes .. last.bytes; linear interpolation in log2
 * bytes between the two points around the call (points are sorted, see hardware.c). */
static gboolean memory_lookup(const MmEffCurve *c, double bytes, double *util, int *point)
{
  const MmEffPoint *p = c->points;
  const guint n = c->n_points;
  if (!(bytes >= p[0].bytes && bytes <= p[n - 1].bytes)) return FALSE;
  guint i = 0;
  while (i + 1 < n && p[i + 1].bytes <= bytes) i++;
  *point = (int)i;
  if (i + 1 == n || bytes == p[i].bytes) {
    *util = p[i].util;
    return TRUE;
  }
  double t = (log2(bytes) - log2(p[i].bytes)) / (log2(p[i + 1].bytes) - log2(p[i].bytes));
  *util = p[i].util + t * (p[i + 1].util - p[i].util);
  return TRUE;
}

double mm_cost_fit_bytes(MmKernelKind kind, MmDtype dtype, double m, double n, double k, double batch)
{
  const double e = mm_dtype_bytes(dtype);
  if (kind == MM_KERNEL_ATTENTION) return e * 2.0 * (m + n) * k * batch;
  return (e * (m * k + k * n) + MAX(e, 2.0) * m * n) * batch;
}

/* The peak FLOP/s kernels of @dtype run against: the datasheet's at the device's clock derate. */
static double peak(const MmDevice *dev, MmDtype dtype)
{
  return dev->peak_flops[dtype] * dev->clock_derate.value;
}

double mm_cost_fit_s(const MmDevice *dev, const MmEffFit *f, MmDtype dtype, double flops, double bytes)
{
  double mem = bytes / (dev->hbm_bw_Bps * f->memory_fraction);
  if (f->memory) return mem + f->t0_s;
  return MAX(flops / (peak(dev, dtype) * f->compute_fraction), mem) + f->t0_s;
}

static void factor(MmCostFactor *f, const MmUtil *scalar, const char *scalar_name, const MmEffCurve *curve,
                   gboolean covered, double util, int point)
{
  f->fit = NULL;
  f->scalar = scalar;
  f->curve = covered ? curve : NULL;
  f->outside = covered ? NULL : curve;
  f->util = covered ? util : scalar->value;
  f->name = covered ? curve->name : scalar_name;
  f->point = covered ? point : -1;
  f->other_mask = FALSE;
  f->longer = FALSE;
}

double mm_cost_kernel_s(const MmDevice *dev, const MmKernel *k, double flops, double bytes, MmCostWhy *why)
{
  g_return_val_if_fail(dev != NULL && k != NULL && k->kind < MM_KERNEL_KIND_COUNT && k->dtype < MM_DTYPE_COUNT, 0);
  MmCostWhy w;
  double cu = 0, mu = 0;
  int cp = -1, mp = -1;
  const MmEffCurve *cc = dev->compute_eff[k->kind][k->dtype], *mc = dev->memory_eff[k->kind];
  gboolean other = FALSE, longer = FALSE;
  gboolean c_ok = flops > 0 && cc && compute_lookup(cc, k, &cu, &cp, &other, &longer);
  gboolean m_ok = bytes > 0 && mc && memory_lookup(mc, bytes, &mu, &mp);
  factor(&w.compute, &dev->util_gemm, "utilization.gemm", flops > 0 ? cc : NULL, c_ok, cu, cp);
  w.compute.other_mask = c_ok && other;
  w.compute.longer = c_ok && longer;
  factor(&w.memory, &dev->util_hbm, "utilization.hbm", bytes > 0 ? mc : NULL, m_ok, mu, mp);
  /* calibration fits, where the device has them, replace both */
  const MmEffFit *cf = dev->compute_fit[k->kind][k->dtype];
  const MmEffFit *mf = dev->memory_fit[k->kind] ? dev->memory_fit[k->kind] : dev->memory_fit[MM_KERNEL_ELEMENTWISE];
  if (flops > 0 && cf && !eager(k)) { /* fits time flash kernels: eager attention keeps its own split */
    double t = mm_cost_fit_s(dev, cf, k->dtype, flops, mm_cost_fit_bytes(k->kind, k->dtype, k->m, k->n, k->k, k->batch));
    w.compute = (MmCostFactor){.util = flops / (peak(dev, k->dtype) * t), .name = cf->name, .fit = cf,
                               .scalar = &dev->util_gemm, .point = -1};
    if (bytes > 0)
      w.memory = (MmCostFactor){.util = cf->memory_fraction, .name = cf->name, .fit = cf, .scalar = &dev->util_hbm,
                                .point = -1};
  } else if (bytes > 0 && mf) {
    w.memory = (MmCostFactor){.util = bytes / (dev->hbm_bw_Bps * mm_cost_fit_s(dev, mf, k->dtype, 0, bytes)),
                              .name = mf->name, .fit = mf, .scalar = &dev->util_hbm, .point = -1};
  }
  /* the operation order of madmax's roofline since the start: results stay bit-identical */
  w.compute_s = flops > 0 ? flops / (peak(dev, k->dtype) * w.compute.util) : 0;
  w.memory_s = bytes > 0 ? bytes / (dev->hbm_bw_Bps * w.memory.util) : 0;
  w.memory_bound = w.memory_s > w.compute_s;
  w.serial = eager(k);
  w.gemm_io_s = w.passes_s = 0;
  double t = MAX(w.compute_s, w.memory_s);
  if (w.serial && bytes > 0) {
    /* eager attention: the GEMMs (their roofline over the bytes they move themselves), then the
     * softmax, mask and dropout passes over the rest; kernels in sequence add up */
    const double io = MIN(bytes, eager_gemm_bytes(k));
    w.gemm_io_s = io / (dev->hbm_bw_Bps * w.memory.util);
    w.passes_s = (bytes - io) / (dev->hbm_bw_Bps * w.memory.util);
    w.memory_bound = w.passes_s > MAX(w.compute_s, w.gemm_io_s);
    t = MAX(w.compute_s, w.gemm_io_s) + w.passes_s;
  }
  if (why) *why = w;
  return t;
}

char *mm_cost_factor_text(const MmCostFactor *f)
{
  g_return_val_if_fail(f != NULL && f->name != NULL, NULL);
  if (f->fit) return g_strdup_printf("fit %s (calibration): %.4g", f->fit->name, f->util);
  if (f->curve) {
    const MmEffPoint *p = &f->curve->points[f->point];
    g_autofree char *at = p->bytes > 0 ? g_strdup_printf("bytes=%.6g", p->bytes)
                                       : g_strdup_printf("m=%.6g n=%.6g k=%.6g batch=%.6g%s%s%s%s%s", p->m, p->n, p->k,
                                                         p->batch, p->bwd ? " bwd" : "", p->causal ? " causal" : "",
                                                         p->eager ? " eager" : "", p->kernel ? " " : "",
                                                         p->kernel ? mm_attn_kernel_names[p->kernel] : "");
    return g_strdup_printf("curve %s (%s) %s %s%s%s: %.4g", f->name, mm_provenance_names[f->curve->provenance],
                           p->bytes > 0 ? "from" : "at", at,
                           f->other_mask ? (p->causal ? " (no unmasked point of this pass)" : " (no causal point of this pass)")
                                         : "",
                           f->longer ? " (longer than the longest sequence measured)" : "", f->util);
  }
  g_autofree char *outside = f->outside ? g_strdup_printf("outside curve %s: ", f->outside->name) : g_strdup("");
  return g_strdup_printf("%sscalar %s %.4g (%s)", outside, f->name, f->util,
                         mm_provenance_names[f->scalar->provenance]);
}

char *mm_cost_fit_text(const MmEffFit *f, const char *source)
{
  g_return_val_if_fail(f != NULL, NULL);
  g_autofree char *cf = f->memory ? g_strdup("") : g_strdup_printf("%.3g of peak, ", f->compute_fraction);
  g_autofree char *held = f->held_out_points > 0
                            ? g_strdup_printf(", %.0f%% on %u held out", f->held_out_rms_rel_err * 100, f->held_out_points)
                            : g_strdup("");
  return g_strdup_printf("%s (calibration): %s %s%.3g of HBM, t0 %.3g us; rms error %.0f%% over %u calls%s; %s",
                         f->name, f->memory ? "bandwidth_t0" : "roofline_t0", cf, f->memory_fraction, f->t0_s * 1e6,
                         f->rms_rel_err * 100, f->points, held, source ? source : "no source given");
}
