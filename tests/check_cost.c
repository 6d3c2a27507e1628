/* check_cost: kernel descriptors, efficiency curves and the one kernel -> time function. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "plan/plan.h"
#include "report/report.h"
#include "testutil.h"

/* A device with bf16 and fp32 peaks (no fp8), the scalars and @efficiency (may be ""). */
static char *device_text(const char *efficiency)
{
  return g_strdup_printf(
    "{\"name\":\"d\",\"peak_tflops\":{\"fp32\":20,\"bf16\":300},\"hbm_GiB\":80,\"hbm_bw_GBps\":2000,"
    "\"utilization\":{\"gemm\":{\"value\":0.7,\"provenance\":\"paper\",\"source\":\"a paper\"},"
    "\"hbm\":{\"value\":0.8,\"provenance\":\"measurement\",\"source\":\"STREAM\"}}%s%s}",
    efficiency[0] ? ",\"efficiency\":" : "", efficiency);
}

#define GEMM_CURVE                                                                                           \
  "\"gemm\":{\"bf16\":{\"provenance\":\"calibration\",\"source\":\"test grid\",\"points\":["                 \
  "{\"m\":1024,\"n\":1024,\"k\":1024,\"util\":0.5},{\"m\":4096,\"n\":4096,\"k\":4096,\"util\":0.8},"         \
  "{\"m\":8192,\"n\":8192,\"k\":8192,\"util\":0.85}]}}"
#define HBM_CURVE                                                                                            \
  "\"hbm\":{\"elementwise\":{\"provenance\":\"measurement\",\"points\":["                                    \
  "{\"bytes\":1e3,\"util\":0.2},{\"bytes\":1e6,\"util\":0.6},{\"bytes\":1e9,\"util\":0.9}]}}"

static void load_device(const char *efficiency, MmDevice *dev)
{
  g_autofree char *text = device_text(efficiency);
  g_autofree char *path = mm_test_write("device.json", text);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_device_load(path, dev, &error), "%s", error ? error->message : "");
}

static MmKernel kern(MmKernelKind kind, MmDtype dtype, double m, double n, double k, double batch)
{
  return (MmKernel){.kind = kind, .dtype = dtype, .m = m, .n = n, .k = k, .batch = batch};
}

/* The roofline madmax used before the cost unit (plan/lower.c, 2026-11): the reference the
 * scalar fallback must reproduce bit for bit. */
static double old_roofline(const MmHardware *hw, MmDtype dtype, double flops, double bytes)
{
  const MmDevice *d = &hw->device;
  double tc = flops > 0 ? flops / (d->peak_flops[dtype] * d->util_gemm.value) : 0;
  double tm = bytes > 0 ? bytes / (d->hbm_bw_Bps * d->util_hbm.value) : 0;
  return MAX(tc, tm);
}

/* Without curves the time is the plan's roofline, to the last bit, for every kind (attention as
 * flash kernels: eager attention is priced as kernels in sequence, test_eager_attention_serial). */
START_TEST(test_scalar_is_the_roofline)
{
  g_autofree char *p = mm_test_src("hardware/dgx-h200-8.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(p, &error);
  ck_assert_ptr_nonnull(hw);
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) /* a device without curves */
    for (int d = 0; d < MM_DTYPE_COUNT; d++) ck_assert_ptr_null(hw->device.compute_eff[k][d]);
  GRand *r = g_rand_new_with_seed(9);
  static const MmDtype dtypes[] = {MM_DTYPE_BF16, MM_DTYPE_FP8, MM_DTYPE_FP32, MM_DTYPE_TF32};
  for (int i = 0; i < 2000; i++) {
    MmKernel k = kern((MmKernelKind)(i % MM_KERNEL_KIND_COUNT), dtypes[i % 4], g_rand_double_range(r, 1, 1e5),
                      g_rand_double_range(r, 1, 1e5), g_rand_double_range(r, 1, 1e5), 1 + i % 3);
    k.flash = k.kind == MM_KERNEL_ATTENTION;
    double flops = i % 7 == 0 ? 0 : pow(10, g_rand_double_range(r, 3, 16));
    double bytes = i % 5 == 0 ? 0 : pow(10, g_rand_double_range(r, 2, 12));
    MmCostWhy why;
    double got = mm_cost_kernel_s(&hw->device, &k, flops, bytes, &why);
    double want = old_roofline(hw, k.dtype, flops, bytes);
    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%.17g != %.17g", got, want);
    ck_assert_ptr_null(why.compute.curve);
    ck_assert_ptr_null(why.compute.outside);
    ck_assert_str_eq(why.compute.name, "utilization.gemm");
    ck_assert_str_eq(why.memory.name, "utilization.hbm");
    ck_assert(why.compute.util == hw->device.util_gemm.value && why.memory.util == hw->device.util_hbm.value);
    ck_assert(got == MAX(why.compute_s, why.memory_s));
    ck_assert(why.memory_bound == (why.memory_s > why.compute_s));
  }
  g_rand_free(r);
  /* and without @why */
  MmKernel k = kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 4096, 4096, 4096, 1);
  double want = old_roofline(hw, MM_DTYPE_BF16, 1.37e12, 3e8);
  ck_assert(mm_cost_kernel_s(&hw->device, &k, 1.37e12, 3e8, NULL) == want);
  g_autofree char *text = NULL;
  MmCostWhy why;
  mm_cost_kernel_s(&hw->device, &k, 1.37e12, 3e8, &why);
  text = mm_cost_factor_text(&why.compute);
  ck_assert_str_eq(text, "scalar utilization.gemm 0.65 (estimate)");
}
END_TEST

START_TEST(test_compute_curve)
{
  MmDevice dev;
  load_device("{" GEMM_CURVE "}", &dev);
  const MmEffCurve *c = dev.compute_eff[MM_KERNEL_GEMM][MM_DTYPE_BF16];
  ck_assert_ptr_nonnull(c);
  ck_assert_str_eq(c->name, "gemm.bf16");
  ck_assert_uint_eq(c->n_points, 3);
  ck_assert_int_eq(c->provenance, MM_PROV_CALIBRATION);

  /* nearest point in log space: (4000, 4100, 4096) -> the 4096 cube */
  MmKernel k = kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 4000, 4100, 4096, 1);
  double flops = 2.0 * 4000 * 4100 * 4096, bytes = 1e6;
  MmCostWhy why;
  double t = mm_cost_kernel_s(&dev, &k, flops, bytes, &why);
  ck_assert(why.compute.curve == c);
  ck_assert_int_eq(why.compute.point, 1);
  ck_assert(why.compute.util == 0.8);
  ck_assert_str_eq(why.compute.name, "gemm.bf16");
  ck_assert(t == flops / (300e12 * 0.8));
  ck_assert(!why.memory_bound);
  g_autofree char *text = mm_cost_factor_text(&why.compute);
  ck_assert_str_eq(text, "curve gemm.bf16 (calibration) at m=4096 n=4096 k=4096 batch=1: 0.8");

  /* a tie (log2 distance 1 from both 1024 and 4096 in m only): the first listed wins */
  k = kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 2048, 2048, 2048, 1);
  mm_cost_kernel_s(&dev, &k, 1e9, 0, &why);
  ck_assert_int_eq(why.compute.point, 0);
  ck_assert(why.compute.util == 0.5);

  /* the corners of the range are covered */
  k = kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 8192, 8192, 8192, 1);
  mm_cost_kernel_s(&dev, &k, 1e9, 0, &why);
  ck_assert(why.compute.util == 0.85);
  mm_device_clear(&dev);
}
END_TEST

/* Outside the curve's range (any dimension), another dtype or another kind: the scalar,
 * bit for bit, and why names the curve that did not cover. */
START_TEST(test_outside_the_curve_falls_back)
{
  MmDevice dev;
  load_device("{" GEMM_CURVE "}", &dev);
  const MmEffCurve *c = dev.compute_eff[MM_KERNEL_GEMM][MM_DTYPE_BF16];
  const MmKernel outside[] = {
    kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 512, 4096, 4096, 1),   /* m below */
    kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 4096, 16384, 4096, 1), /* n above */
    kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 4096, 4096, 4096, 8),  /* batch: the points are all single */
  };
  for (guint i = 0; i < G_N_ELEMENTS(outside); i++) {
    MmCostWhy why;
    double t = mm_cost_kernel_s(&dev, &outside[i], 3e12, 5e7, &why);
    ck_assert(t == MAX(3e12 / (300e12 * 0.7), 5e7 / (2000e9 * 0.8)));
    ck_assert_ptr_null(why.compute.curve);
    ck_assert(why.compute.outside == c);
    ck_assert_int_eq(why.compute.point, -1);
    ck_assert_str_eq(why.compute.name, "utilization.gemm");
    g_autofree char *text = mm_cost_factor_text(&why.compute);
    ck_assert_str_eq(text, "outside curve gemm.bf16: scalar utilization.gemm 0.7 (paper)");
  }
  /* no curve for fp32 gemms or for gemv: plainly the scalar */
  const MmKernel other[] = {kern(MM_KERNEL_GEMM, MM_DTYPE_FP32, 4096, 4096, 4096, 1),
                            kern(MM_KERNEL_GEMV, MM_DTYPE_BF16, 4096, 4096, 4096, 1)};
  for (guint i = 0; i < G_N_ELEMENTS(other); i++) {
    MmCostWhy why;
    mm_cost_kernel_s(&dev, &other[i], 3e12, 5e7, &why);
    ck_assert_ptr_null(why.compute.curve);
    ck_assert_ptr_null(why.compute.outside);
  }
  /* a kernel without FLOPs does not consult the compute curve */
  MmCostWhy why;
  MmKernel k = kern(MM_KERNEL_GEMM, MM_DTYPE_BF16, 4096, 4096, 4096, 1);
  mm_cost_kernel_s(&dev, &k, 0, 5e7, &why);
  ck_assert_ptr_null(why.compute.outside);
  ck_assert(why.compute_s == 0);
  mm_device_clear(&dev);
}
END_TEST

START_TEST(test_memory_curve)
{
  MmDevice dev;
  load_device("{" HBM_CURVE "}", &dev);
  const MmEffCurve *c = dev.memory_eff[MM_KERNEL_ELEMENTWISE];
  ck_assert_ptr_nonnull(c);
  ck_assert_str_eq(c->name, "hbm.elementwise");
  MmKernel k = kern(MM_KERNEL_ELEMENTWISE, MM_DTYPE_BF16, 4096, 8192, 1, 1);
  MmCostWhy why;
  /* at a point: its util */
  double t = mm_cost_kernel_s(&dev, &k, 1e3, 1e6, &why);
  ck_assert(why.memory.curve == c && why.memory.util == 0.6 && why.memory.point == 1);
  ck_assert(t == 1e6 / (2000e9 * 0.6));
  ck_assert(why.memory_bound);
  /* halfway in log2 bytes between 1e6 and 1e9: halfway in util */
  mm_cost_kernel_s(&dev, &k, 0, sqrt(1e6 * 1e9), &why);
  ck_assert_double_eq_tol(why.memory.util, 0.75, 1e-12);
  ck_assert_int_eq(why.memory.point, 1);
  g_autofree char *text = mm_cost_factor_text(&why.memory);
  ck_assert_str_eq(text, "curve hbm.elementwise (measurement) from bytes=1e+06: 0.75");
  /* the ends are covered, beyond them the scalar */
  mm_cost_kernel_s(&dev, &k, 0, 1e3, &why);
  ck_assert(why.memory.util == 0.2);
  mm_cost_kernel_s(&dev, &k, 0, 1e9, &why);
  ck_assert(why.memory.util == 0.9 && why.memory.point == 2);
  t = mm_cost_kernel_s(&dev, &k, 0, 1e10, &why);
  ck_assert(why.memory.outside == c && why.memory.util == 0.8);
  ck_assert(t == 1e10 / (2000e9 * 0.8));
  /* a gemm's bytes: no curve for gemms */
  k.kind = MM_KERNEL_GEMM;
  mm_cost_kernel_s(&dev, &k, 0, 1e6, &why);
  ck_assert_ptr_null(why.memory.curve);
  ck_assert_ptr_null(why.memory.outside);
  mm_device_clear(&dev);
}
END_TEST

/* An attention curve whose points differ only in pass and mask: each point times only kernels
 * of its own pass and mask, coverage counts only those points, and an eager kernel (not flash)
 * takes none of them. */
#define ATTN_CURVE                                                                                           \
  "\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"source\":\"test\",\"points\":["                  \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.6},"                                           \
  "{\"m\":4096,\"n\":4096,\"k\":128,\"batch\":16,\"util\":0.65},"                                          \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.4,\"causal\":true},"                           \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.5,\"pass\":\"bwd\"},"                          \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.3,\"pass\":\"bwd\",\"causal\":true}]}}"

/* 1e12 FLOPs of a 1024 x 1024 x 128, batch 16, bf16 attention kernel of the given kind. */
static double attn_1024_s(const MmDevice *dev, gboolean flash, gboolean bwd, gboolean causal, MmCostWhy *why)
{
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 1024, 1024, 128, 16);
  k.flash = flash, k.bwd = bwd, k.causal = causal;
  return mm_cost_kernel_s(dev, &k, 1e12, 0, why);
}

START_TEST(test_attention_pass_and_mask)
{
  MmDevice dev;
  load_device("{" ATTN_CURVE "}", &dev);
  const MmEffCurve *c = dev.compute_eff[MM_KERNEL_ATTENTION][MM_DTYPE_BF16];
  ck_assert_uint_eq(c->n_points, 5);
  ck_assert(!c->points[0].bwd && !c->points[0].causal && c->points[2].causal && c->points[3].bwd);
  static const struct {
    gboolean bwd, causal;
    double util;
    int point;
  } rows[] = {{FALSE, FALSE, 0.6, 0}, {FALSE, TRUE, 0.4, 2}, {TRUE, FALSE, 0.5, 3}, {TRUE, TRUE, 0.3, 4}};
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
    MmCostWhy why;
    double t = attn_1024_s(&dev, TRUE, rows[i].bwd, rows[i].causal, &why);
    ck_assert(why.compute.curve == c);
    ck_assert_int_eq(why.compute.point, rows[i].point);
    ck_assert(t == 1e12 / (300e12 * rows[i].util));
  }
  /* 2048 queries: inside the forward unmasked points' range (1024..4096), outside the others' (1024 only) */
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 2048, 2048, 128, 16);
  k.flash = TRUE;
  MmCostWhy why;
  mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.curve == c);
  ck_assert(!why.compute.longer);
  k.causal = TRUE; /* the curve has causal forward points: the unmasked ones never stand in for them; 2048
                    * tokens are longer than the causal ones measured, whose longest (1024) it takes */
  double t = mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.curve == c && why.compute.point == 2 && why.compute.longer && !why.compute.other_mask);
  ck_assert(t == 1e12 / (300e12 * 0.4));
  k.m = k.n = 512; /* shorter than measured: never extended, the scalar */
  t = mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.outside == c && t == 1e12 / (300e12 * 0.7) && !why.compute.longer);
  /* an eager kernel of a covered shape: the scalar */
  k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 1024, 1024, 128, 16);
  t = mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.outside == c && t == 1e12 / (300e12 * 0.7));
  /* describe names the pass and mask of the point used */
  k.flash = k.bwd = k.causal = TRUE;
  mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  g_autofree char *text = mm_cost_factor_text(&why.compute);
  ck_assert_str_eq(text, "curve attention.bf16 (paper) at m=1024 n=1024 k=128 batch=16 bwd causal: 0.3");
  mm_device_clear(&dev);
}
END_TEST

/* Eager attention: a curve with an eager and a flash point of each shape. An eager kernel takes only
 * the eager points, a flash kernel only the others; a curve of eager points alone covers no flash
 * kernel and one of flash points alone no eager kernel (the existing test above). */
#define EAGER_CURVE                                                                                          \
  "\"attention\":{\"bf16\":{\"provenance\":\"measurement\",\"source\":\"test\",\"points\":["           \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.6},"                                           \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.25,\"eager\":true},"                          \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.5,\"pass\":\"bwd\"},"                          \
  "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.3,\"pass\":\"bwd\",\"eager\":true}]}}"

START_TEST(test_eager_points_match_eager_kernels)
{
  MmDevice dev;
  load_device("{" EAGER_CURVE "}", &dev);
  const MmEffCurve *c = dev.compute_eff[MM_KERNEL_ATTENTION][MM_DTYPE_BF16];
  ck_assert_uint_eq(c->n_points, 4); /* an eager and a flash point of one shape and pass are no duplicates */
  static const struct {
    gboolean flash, bwd;
    int point;
  } rows[] = {{TRUE, FALSE, 0}, {FALSE, FALSE, 1}, {TRUE, TRUE, 2}, {FALSE, TRUE, 3}};
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
    MmCostWhy why;
    attn_1024_s(&dev, rows[i].flash, rows[i].bwd, FALSE, &why);
    ck_assert_msg(why.compute.curve == c && why.compute.point == rows[i].point, "row %u: point %d", i,
                  why.compute.point);
    ck_assert(c->points[why.compute.point].eager == !rows[i].flash);
    ck_assert(why.serial == !rows[i].flash);
  }
  mm_device_clear(&dev);
  /* eager points alone: a flash kernel of their very shape is outside */
  load_device("{\"attention\":{\"bf16\":{\"provenance\":\"measurement\",\"points\":["
              "{\"m\":1024,\"n\":1024,\"k\":128,\"batch\":16,\"util\":0.25,\"eager\":true}]}}}",
              &dev);
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 1024, 1024, 128, 16);
  k.flash = TRUE;
  MmCostWhy why;
  double t = mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.outside != NULL && t == 1e12 / (300e12 * 0.7));
  k.flash = FALSE;
  mm_cost_kernel_s(&dev, &k, 1e12, 0, &why);
  ck_assert(why.compute.curve != NULL && why.compute.util == 0.25);
  g_autofree char *text = mm_cost_factor_text(&why.compute);
  ck_assert_str_eq(text, "curve attention.bf16 (measurement) at m=1024 n=1024 k=128 batch=16 eager: 0.25");
  mm_device_clear(&dev);
}
END_TEST

/* An eager call is its batched GEMMs, then its memory passes: time = the GEMMs' time + the bytes
 * the GEMMs do not move themselves at HBM bandwidth. The GEMMs move, forward, the scores (QK^T
 * writes them) and probabilities (AV reads them), 2 passes over the m x n x batch matrix, and Q,
 * K, V, O; backward 3 passes (dP written, P and dS read) and Q, K, V, O-sized operands twice. Here
 * 1024 queries and keys, head width 128, 16 heads, bf16 (2 bytes), as attention() in graph.c
 * counts them: 4 score passes forward (6 backward) + 2 dropout passes and a 1-byte mask. */
START_TEST(test_eager_attention_serial)
{
  MmDevice dev;
  load_device("{" EAGER_CURVE "}", &dev);
  const double s = 1024, d = 128, a = 16, e = 2, scores = a * s * s * e, mask = a * s * s;
  const double qkvo = 4 * s * a * d * e;
  const double bw = 2000e9 * 0.8; /* hbm_bw x utilization.hbm of the test device */
  for (int bwd = 0; bwd < 2; bwd++) {
    MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, s, s, d, a);
    k.bwd = bwd;
    const double mm = 4 * s * s * d * a, sm = 5 * s * s * a;
    const double flops = bwd ? 2 * mm + 2 * sm : mm + sm;
    const double bytes = bwd ? 2 * qkvo + 6 * scores + 2 * scores + mask : qkvo + 4 * scores + 2 * scores + mask;
    const double io = bwd ? 3 * scores + 3 * qkvo / 4 : 2 * scores + qkvo / 2; /* scores; Q, O (dO, dQ) */
    const double gemm_s = flops / (300e12 * (bwd ? 0.3 : 0.25)); /* the eager point */
    ck_assert(gemm_s > io / bw);                                 /* the GEMMs are compute-bound */
    const double want = gemm_s + (bytes - io) / bw;
    MmCostWhy why;
    const double t = mm_cost_kernel_s(&dev, &k, flops, bytes, &why);
    ck_assert_msg(fabs(t / want - 1) < 1e-12, "%s: %.17g s, expected %.17g s", bwd ? "bwd" : "fwd", t, want);
    ck_assert(why.serial && why.passes_s > 0);
    ck_assert(t > MAX(gemm_s, bytes / bw)); /* more than the roofline of one kernel */
    /* a flash kernel of the same shape and work: the roofline, at the flash point */
    k.flash = TRUE;
    const double tf = mm_cost_kernel_s(&dev, &k, flops, bytes, &why);
    ck_assert(!why.serial && tf == MAX(flops / (300e12 * (bwd ? 0.5 : 0.6)), bytes / bw));
  }
  mm_device_clear(&dev);
  /* no curve: the scalar prices the GEMMs, whose own bytes may then bound them (head width 64:
   * 4 d s^2 FLOPs against 2 s^2 x 2 bytes of scores per head) */
  load_device("", &dev);
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, s, s, 64, a);
  const double flops = 4 * s * s * 64 * a + 5 * s * s * a, q = 4 * s * a * 64 * e;
  const double bytes = q + 4 * scores, io = 2 * scores + q / 2;
  const double gemm_s = MAX(flops / (300e12 * 0.7), io / bw);
  ck_assert(io / bw > flops / (300e12 * 0.7));
  MmCostWhy why;
  const double t = mm_cost_kernel_s(&dev, &k, flops, bytes, &why);
  ck_assert_double_eq_tol(t / (gemm_s + (bytes - io) / bw), 1.0, 1e-12);
  ck_assert(why.serial && why.compute.curve == NULL);
  /* no bytes: the GEMMs' compute time alone */
  ck_assert(mm_cost_kernel_s(&dev, &k, flops, 0, &why) == flops / (300e12 * 0.7));
  mm_device_clear(&dev);
}
END_TEST

/* Eager attention where the kernel cannot size the key/value side: one query over 32,768 cached
 * keys of grouped-query attention (32 query heads, 8 key/value heads). The GEMMs' own bytes are the
 * score passes and the query side only, so the softmax passes and the K/V reads stay priced (they
 * were dropped when K and V were counted at the query heads: the GEMMs' bytes then exceeded the
 * call's). And a calibration fit of the attention kernel (fitted to flash kernels) prices flash
 * calls, not eager ones. */
START_TEST(test_eager_attention_decode_and_fits)
{
  const double n = 32768, d = 128, a = 32, kv = 8, e = 2, bw = 2000e9 * 0.8;
  const double scores = a * n * e, q = a * d * e, kvb = 2 * n * kv * d * e;
  const double flops = 4 * n * d * a + 5 * n * a, bytes = q + kvb + q + 4 * scores;
  MmDevice dev;
  load_device("", &dev);
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 1, n, d, a);
  MmCostWhy why;
  const double t = mm_cost_kernel_s(&dev, &k, flops, bytes, &why);
  ck_assert(why.serial);
  ck_assert_double_eq_tol(why.passes_s * bw / (kvb + 2 * scores), 1.0, 1e-12); /* K, V and 2 score passes */
  ck_assert_double_eq_tol(t / (MAX(why.compute_s, (2 * scores + 2 * q) / bw) + why.passes_s), 1.0, 1e-12);
  ck_assert(t >= bytes / bw * (1 - 1e-12));
  mm_device_clear(&dev);
  g_autofree char *path = mm_test_write(
    "device-fit.json",
    "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":300},\"hbm_GiB\":80,\"hbm_bw_GBps\":2000,"
    "\"utilization\":{\"gemm\":{\"value\":0.7,\"provenance\":\"paper\",\"source\":\"a paper\"},"
    "\"hbm\":{\"value\":0.8,\"provenance\":\"measurement\",\"source\":\"STREAM\"}},"
    "\"calibration\":{\"provenance\":\"calibration\",\"source\":\"test\",\"fits\":{\"attention.bf16\":{"
    "\"model\":\"roofline_t0\",\"compute_fraction\":0.5,\"memory_fraction\":0.9,\"t0_us\":1,\"points\":3,"
    "\"measured_from\":1,\"measured_to\":2}}}}");
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_device_load(path, &dev, &error), "%s", error ? error->message : "");
  MmKernel big = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 2048, 2048, 128, 16);
  mm_cost_kernel_s(&dev, &big, 1e12, 1e9, &why);
  ck_assert(why.serial && why.compute.fit == NULL && why.compute.util == 0.7);
  big.flash = TRUE;
  mm_cost_kernel_s(&dev, &big, 1e12, 1e9, &why);
  ck_assert(!why.serial && why.compute.fit != NULL);
  mm_device_clear(&dev);
}
END_TEST

/* The shipped A100 (hardware/devices/a100-80gb.json, torch.bmm measurements of Anthony et al.
 * 2024): a Megatron-LM-like eager kernel, 2048 tokens, head width 128, 192 heads x sequences, fp16,
 * is timed by the eager points of its pass, below the GEMM scalar, and takes longer than the one
 * roofline kernel madmax priced it as before; bf16 (no points) takes the scalar. */
START_TEST(test_a100_eager_attention)
{
  g_autofree char *p = mm_test_src("hardware/dgx-a100-2048.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(p, &error);
  ck_assert_msg(hw != NULL, "%s", error ? error->message : "");
  const MmDevice *dev = &hw->device;
  const double s = 2048, d = 128, b = 192, e = 2, scores = b * s * s * e, qkvo = 4 * s * b * d * e;
  for (int dt = 0; dt < 2; dt++)
    for (int bwd = 0; bwd < 2; bwd++) {
      MmKernel k = kern(MM_KERNEL_ATTENTION, dt ? MM_DTYPE_BF16 : MM_DTYPE_FP16, s, s, d, b);
      k.bwd = bwd;
      if (dt) { /* measured in fp16 and given for fp16 only: bf16 takes the scalar, still serial */
        MmCostWhy why;
        mm_cost_kernel_s(dev, &k, 1e12, 1e9, &why);
        ck_assert(why.compute.curve == NULL && why.compute.util == dev->util_gemm.value && why.serial);
        continue;
      }
      const double mm = 4 * s * s * d * b, sm = 5 * s * s * b;
      const double flops = bwd ? 2 * mm + 2 * sm : mm + sm;
      const double bytes = (bwd ? 2 * qkvo + 8 * scores : qkvo + 6 * scores) + b * s * s;
      MmCostWhy why;
      const double t = mm_cost_kernel_s(dev, &k, flops, bytes, &why);
      ck_assert_msg(why.compute.curve != NULL, "%s %s: not covered", mm_dtype_names[k.dtype], bwd ? "bwd" : "fwd");
      const MmEffPoint *pt = &why.compute.curve->points[why.compute.point];
      ck_assert(pt->eager && pt->bwd == k.bwd && pt->k == d && pt->m == s);
      ck_assert(why.compute.util < dev->util_gemm.value);
      ck_assert(why.serial);
      const double before = old_roofline(hw, k.dtype, flops, bytes);
      ck_assert_msg(t > before, "%.6g s, before %.6g s", t, before);
    }
  /* describe: Megatron-LM 7.5B at TP 4 on 16 nodes (8 heads x 16 sequences per call) names the eager
   * point and a serial bound, forward and backward */
  g_autofree char *mp = mm_test_src("models/megatron-gpt-7.5b.json");
  g_autofree char *cp = mm_test_src("configs/validation/megatron-tp4.json");
  g_autoptr(MmModel) m = mm_model_load(mp, &error);
  g_autoptr(MmParallelConfig) c = mm_parallel_load(cp, &error);
  ck_assert(m && c && mm_hardware_set_nodes(hw, 16, &error));
  g_autoptr(MmScenario) sc = mm_scenario_new(m, hw, c, NULL, &error);
  ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  g_autoptr(cJSON) doc = mm_report_describe_json(g, NULL, sc, NULL);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(doc, "layers");
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(layers, 1), "ops");
  const cJSON *core = NULL;
  for (const cJSON *op = ops ? ops->child : NULL; op && !core; op = op->next)
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "role")), "attn_core") == 0) core = op;
  ck_assert_ptr_nonnull(core);
  static const char *const parts[] = {"kernel_per_device", "kernel_per_device_bwd"};
  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    const cJSON *kp = cJSON_GetObjectItemCaseSensitive(core, parts[i]);
    ck_assert_msg(kp != NULL, "no %s", parts[i]);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kp, "bound")), "serial");
    const cJSON *ce = cJSON_GetObjectItemCaseSensitive(kp, "compute_efficiency");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(ce, "point");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "eager")));
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(kp, "serial");
    ck_assert(cJSON_GetObjectItemCaseSensitive(se, "gemm_s")->valuedouble > 0 &&
              cJSON_GetObjectItemCaseSensitive(se, "passes_s")->valuedouble > 0);
  }
}
END_TEST

/* The graph marks flash, causal and the backward pass on attention kernels: a causal flash
 * block over a whole sequence, its backward part, and not an eager block or a decode step. */
START_TEST(test_attention_descriptor_flags)
{
  g_autofree char *mp = mm_test_src("models/llama2-70b.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(mp, &error);
  ck_assert_ptr_nonnull(m);
  ck_assert(m->blocks[1].causal && m->blocks[1].attention == MM_ATTN_FLASH);
  g_autoptr(MmGraph) g = mm_graph_new(m);
  const MmLayer *attn = NULL;
  for (guint i = 0; i < g->n_layers && !attn; i++)
    if (g->layers[i].role == MM_ROLE_ATTN_CORE) attn = &g->layers[i];
  ck_assert_ptr_nonnull(attn);
  ck_assert(attn->kernel.flash && attn->kernel.causal && !attn->kernel.bwd);
  const MmKernelShare share = {.samples = 1, .work = 1, .split = 1, .groups = 1};
  MmKernel k;
  mm_kernel_for_part(attn, MM_PART_BWD_INPUT, &share, MM_DTYPE_BF16, &k);
  ck_assert(k.bwd && k.causal && k.flash);
  mm_kernel_for_part(attn, MM_PART_FWD, &share, MM_DTYPE_BF16, &k);
  ck_assert(!k.bwd);
  /* a decode step: one query against the cache, no causal halving */
  const MmGraphPass decode = {.tokens = 1, .context = 2048, .kv_cache = TRUE, .decode = TRUE};
  g_autoptr(MmGraph) gd = mm_graph_new_pass(m, &decode);
  for (guint i = 0; i < gd->n_layers; i++)
    if (gd->layers[i].role == MM_ROLE_ATTN_CORE) ck_assert(gd->layers[i].kernel.flash && !gd->layers[i].kernel.causal);
  /* GEMMs carry none of the flags in any part */
  for (guint i = 0; i < g->n_layers; i++) {
    if (g->layers[i].kernel.kind != MM_KERNEL_GEMM) continue;
    for (int p = 0; p < MM_PART_COUNT; p++) {
      mm_kernel_for_part(&g->layers[i], (MmKernelPart)p, &share, MM_DTYPE_BF16, &k);
      ck_assert(!k.flash && !k.bwd && !k.causal);
    }
  }
}
END_TEST

/* H100's attention curve (hardware/devices/h100-sxm.json) reproduces FlashAttention-3's published
 * kernel times (Shah et al. 2024, arXiv:2407.08608, Figures 5 and 6; benchmark: batch x seqlen =
 * 16k tokens, hidden 2048, so 16 heads at head dim 128 and 32 at 64). The paper counts 4 s^2 d per
 * head forward, half of it causal, and 2.5x that backward; madmax executes 4 s^2 d + 5 s^2 per
 * head forward (the softmax), half of it causal, and 10 s^2 d + 10 s^2 backward (five matmuls and
 * the softmax twice). Expected times are the paper's FLOPs over the paper's TFLOPs/s. */
static double h100_kernel_s(const MmDevice *dev, double s, double d, double seqs, gboolean bwd, gboolean causal,
                            MmAttnKernel impl, MmCostWhy *why)
{
  const double heads = 2048.0 / d, c = causal ? 0.5 : 1.0;
  MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, s, s, d, heads * seqs);
  k.flash = TRUE, k.bwd = bwd, k.causal = causal, k.impl = impl;
  const double per_head = bwd ? 10.0 * s * s * d + 10.0 * s * s : 4.0 * s * s * d + 5.0 * s * s;
  return mm_cost_kernel_s(dev, &k, c * per_head * heads * seqs, 0, why);
}

static double h100_attention_s(const MmDevice *dev, double s, double d, double seqs, gboolean bwd, gboolean causal,
                               MmCostWhy *why)
{
  return h100_kernel_s(dev, s, d, seqs, bwd, causal, MM_ATTN_KERNEL_DEFAULT, why);
}

/* hardware/dgx-h100-2048.json, loaded (transfer full) */
static MmHardware *h100(void)
{
  g_autofree char *p = mm_test_src("hardware/dgx-h100-2048.json");
  g_autoptr(GError) error = NULL;
  MmHardware *hw = mm_hardware_load(p, &error);
  ck_assert_msg(hw != NULL, "%s", error ? error->message : "");
  return hw;
}

START_TEST(test_h100_attention_published)
{
  g_autoptr(MmHardware) hw = h100();
  const MmDevice *dev = &hw->device;
  ck_assert_ptr_nonnull(dev->compute_eff[MM_KERNEL_ATTENTION][MM_DTYPE_BF16]);
  static const struct {
    double s, d;
    gboolean bwd, causal;
    double tflops; /* the FlashAttention-3 bar */
  } rows[] = {
    {1024, 64, FALSE, FALSE, 392},   /* Figure 5(a) */
    {4096, 64, FALSE, TRUE, 420},    /* Figure 5(b) */
    {4096, 128, FALSE, FALSE, 638},  /* Figure 5(c) */
    {4096, 128, FALSE, TRUE, 579},   /* Figure 5(d): causal, half the FLOPs in both counts */
    {512, 64, TRUE, FALSE, 272},     /* Figure 6(a) */
    {16384, 128, TRUE, FALSE, 561},  /* Figure 6(b) */
  };
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
    const double s = rows[i].s, d = rows[i].d, seqs = 16384.0 / s, heads = 2048.0 / d;
    const double fa_flops = (rows[i].bwd ? 2.5 : 1.0) * 4.0 * s * s * d * heads * seqs * (rows[i].causal ? 0.5 : 1.0);
    const double want = fa_flops / (rows[i].tflops * 1e12);
    MmCostWhy why;
    const double got = h100_attention_s(dev, s, d, seqs, rows[i].bwd, rows[i].causal, &why);
    ck_assert_msg(why.compute.curve != NULL, "row %u: not on the curve", i);
    ck_assert_msg(fabs(got / want - 1.0) < 5e-6, "row %u: %.9g s, published %.9g s", i, got, want);
  }
  /* the mask matters: 4k tokens, head dim 128 forward, 638 TFLOP/s unmasked, 579 causal (of half the FLOPs) */
  MmCostWhy a, b;
  const double open = h100_attention_s(dev, 4096, 128, 4, FALSE, FALSE, &a);
  const double causal = h100_attention_s(dev, 4096, 128, 4, FALSE, TRUE, &b);
  ck_assert_double_eq_tol(causal / open, 0.5 * 638.0 / 579.0, 1e-5);
  ck_assert(a.compute.util > b.compute.util);

  /* the paper measures no causal backward: a causal backward takes the unmasked backward's point
   * of its shape (Figure 6(b), 4k tokens, head dim 128), never the GEMM scalar, and says so */
  MmCostWhy ub, cb;
  const double ubs = h100_attention_s(dev, 4096, 128, 4, TRUE, FALSE, &ub);
  const double cbs = h100_attention_s(dev, 4096, 128, 4, TRUE, TRUE, &cb);
  ck_assert(cb.compute.curve != NULL && cb.compute.other_mask && !ub.compute.other_mask);
  ck_assert(!cb.compute.curve->points[cb.compute.point].causal && cb.compute.curve->points[cb.compute.point].bwd);
  ck_assert(cb.compute.util == ub.compute.util && cb.compute.util != dev->util_gemm.value);
  ck_assert_double_eq_tol(cbs / ubs, 0.5, 1e-12);
  g_autofree char *cbt = mm_cost_factor_text(&cb.compute);
  ck_assert_msg(strstr(cbt, "bwd fa3 (no causal point of this pass)") != NULL, "%s", cbt);

  /* longer than measured: 32k queries and 128k keys (a context-parallel chunk) take the 16k point of
   * their pass and mask (Figure 5(d): 616 TFLOP/s), flagged; the head width and batch still bound */
  MmKernel lk = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 32768, 131072, 128, 16);
  lk.flash = lk.causal = TRUE;
  MmCostWhy lw;
  mm_cost_kernel_s(dev, &lk, 1e12, 0, &lw);
  ck_assert(lw.compute.curve != NULL && lw.compute.longer && !lw.compute.other_mask);
  ck_assert(lw.compute.curve->points[lw.compute.point].m == 16384 && lw.compute.curve->points[lw.compute.point].causal);
  ck_assert_double_eq_tol(lw.compute.util, 616.0 / 989.4 * 517.0 / 512.0, 1e-6);
  g_autofree char *lt = mm_cost_factor_text(&lw.compute);
  ck_assert_msg(strstr(lt, "longer than the longest sequence measured") != NULL, "%s", lt);
  /* head width 128 at 32 heads x sequences: the 16k points are d 64 at batch 32 and d 128 at batch 16; the
   * kernel's own width answers (Figure 5(d), 616), never the other width's point of its batch */
  lk.batch = 32;
  mm_cost_kernel_s(dev, &lk, 1e12, 0, &lw);
  ck_assert(lw.compute.curve->points[lw.compute.point].k == 128 && lw.compute.longer);
  ck_assert_double_eq_tol(lw.compute.util, 616.0 / 989.4 * 517.0 / 512.0, 1e-6);
  /* within the curve too: 2k tokens, head width 128, batch 256 (d 64's point at 2k has batch 256, one
   * log2 step away in k; d 128's has 128, one step away in batch: a tie the first listed, d 64, won)
   * takes d 128's (Figure 5(c): 625) */
  MmKernel wk = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 2048, 2048, 128, 256);
  wk.flash = TRUE;
  mm_cost_kernel_s(dev, &wk, 1e12, 0, &lw);
  ck_assert(lw.compute.curve != NULL && lw.compute.curve->points[lw.compute.point].k == 128);
  ck_assert_double_eq_tol(lw.compute.util, 625.0 / 989.4 * 517.0 / 512.0, 1e-6);
  MmCostWhy sw; /* within the curve: not flagged */
  h100_attention_s(dev, 16384, 128, 1, FALSE, TRUE, &sw);
  ck_assert(sw.compute.curve != NULL && !sw.compute.longer);

  /* outside: head dim 256 (above 128), 4 heads x sequences (below 16), 256 tokens (below 512),
   * eager attention (32k tokens: eager points are never extended): the scalar utilization.gemm */
  const double scalar = dev->util_gemm.value;
  MmKernel out[] = {kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 256, 256, 128, 64),
                    kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 4096, 4096, 256, 64),
                    kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 4096, 4096, 128, 4),
                    kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 32768, 32768, 128, 64)};
  for (guint i = 0; i < G_N_ELEMENTS(out); i++) out[i].flash = i != 3;
  for (guint i = 0; i < G_N_ELEMENTS(out); i++) {
    MmCostWhy why;
    const double t = mm_cost_kernel_s(dev, &out[i], 1e12, 0, &why);
    ck_assert_msg(why.compute.curve == NULL && why.compute.outside != NULL, "kernel %u is covered", i);
    ck_assert(t == 1e12 / (dev->peak_flops[MM_DTYPE_BF16] * scalar));
  }
}
END_TEST

/* The run's attention kernel picks its own points of H100's curve: FlashAttention-2's and cuDNN's
 * bars of the same figures (FlashAttention-3 paper, Figures 5 and 6), FlashAttention-3's when the run
 * names none (the curve's default_kernel) or fa3; a device whose curve names no kernels (A100's eager
 * points) times a flash kernel of any name with its scalar, as before. */
START_TEST(test_h100_attention_kernels)
{
  g_autoptr(MmHardware) hw = h100();
  const MmDevice *dev = &hw->device;
  static const struct {
    MmAttnKernel impl;
    double s, d;
    gboolean bwd, causal;
    double tflops; /* the bar of that kernel */
  } rows[] = {
    {MM_ATTN_KERNEL_FA2, 1024, 64, FALSE, FALSE, 306},    /* Figure 5(a) */
    {MM_ATTN_KERNEL_FA2, 8192, 128, FALSE, TRUE, 333},    /* Figure 5(d) */
    {MM_ATTN_KERNEL_FA2, 8192, 128, TRUE, FALSE, 318},    /* Figure 6(b) */
    {MM_ATTN_KERNEL_CUDNN, 2048, 128, FALSE, FALSE, 617}, /* Figure 5(c) */
    {MM_ATTN_KERNEL_CUDNN, 4096, 64, FALSE, TRUE, 363},   /* Figure 5(b) */
    {MM_ATTN_KERNEL_CUDNN, 512, 64, TRUE, FALSE, 266},    /* Figure 6(a) */
    {MM_ATTN_KERNEL_FA3, 8192, 128, FALSE, TRUE, 602},    /* Figure 5(d), named */
    {MM_ATTN_KERNEL_DEFAULT, 8192, 128, FALSE, TRUE, 602}, /* the same, by default */
  };
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
    const double s = rows[i].s, d = rows[i].d, seqs = 16384.0 / s, heads = 2048.0 / d, c = rows[i].causal ? 0.5 : 1.0;
    MmCostWhy why;
    const double got = h100_kernel_s(dev, s, d, seqs, rows[i].bwd, rows[i].causal, rows[i].impl, &why);
    const double want = (rows[i].bwd ? 2.5 : 1.0) * 4.0 * s * s * d * heads * seqs * c / (rows[i].tflops * 1e12);
    ck_assert_msg(why.compute.curve != NULL, "row %u: not on the curve", i);
    ck_assert_msg(fabs(got / want - 1.0) < 5e-6, "row %u: %.9g s, published %.9g s", i, got, want);
    const int named = rows[i].impl ? (int)rows[i].impl : MM_ATTN_KERNEL_FA3;
    ck_assert_int_eq(why.compute.curve->points[why.compute.point].kernel, named);
    g_autofree char *text = mm_cost_factor_text(&why.compute);
    ck_assert_msg(strstr(text, mm_attn_kernel_names[named]) != NULL, "%s", text);
  }
  /* a causal FlashAttention-2 backward takes FlashAttention-2's unmasked backward, not FA3's */
  MmKernel cb = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 4096, 4096, 128, 64);
  cb.flash = cb.bwd = cb.causal = TRUE, cb.impl = MM_ATTN_KERNEL_FA2;
  MmCostWhy w;
  mm_cost_kernel_s(dev, &cb, 1e12, 0, &w);
  ck_assert(w.compute.other_mask && w.compute.curve->points[w.compute.point].kernel == MM_ATTN_KERNEL_FA2);
  ck_assert_double_eq_tol(w.compute.util, 310.0 / 989.4 * 129.0 / 128.0, 1e-6);

  /* A100: eager points only, no kernel names: a flash kernel of any name takes the scalar */
  g_autofree char *ap = mm_test_src("hardware/dgx-a100-2048.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) a100 = mm_hardware_load(ap, &error);
  ck_assert_ptr_nonnull(a100);
  for (int impl = 0; impl < MM_ATTN_KERNEL_COUNT; impl++) {
    MmKernel k = kern(MM_KERNEL_ATTENTION, MM_DTYPE_BF16, 2048, 2048, 128, 64);
    k.flash = TRUE, k.impl = (MmAttnKernel)impl;
    const double t = mm_cost_kernel_s(&a100->device, &k, 1e12, 0, &w);
    ck_assert(w.compute.curve == NULL && t == 1e12 / (a100->device.peak_flops[MM_DTYPE_BF16] * a100->device.util_gemm.value));
  }
}
END_TEST

static const cJSON *item(const cJSON *o, const char *key);

/* On H100 (an attention curve) describe also shows the attention core's backward call: LLaMA-2-70B
 * causal, 4096 tokens, head dim 128, 64 heads / TP 8 x 8 sequences per device. The forward takes
 * the causal forward point at 4k tokens (Figure 5(d): 579 TFLOP/s); the paper measures no causal
 * backward, so the backward takes the unmasked backward's point at 4k tokens and says so. */
START_TEST(test_describe_attention_backward)
{
  g_autofree char *mp = mm_test_src("models/llama2-70b.json");
  g_autofree char *hp = mm_test_src("hardware/dgx-h100-2048.json");
  g_autofree char *cp = mm_test_src("configs/llm-pretrain-tp-fsdp.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(mp, &error);
  g_autoptr(MmHardware) hw = mm_hardware_load(hp, &error);
  g_autoptr(MmParallelConfig) c = mm_parallel_load(cp, &error);
  ck_assert(m && hw && c);
  g_autoptr(MmScenario) s = mm_scenario_new(m, hw, c, NULL, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  g_autoptr(cJSON) doc = mm_report_describe_json(g, NULL, s, NULL);
  const cJSON *core = cJSON_GetArrayItem(item(cJSON_GetArrayItem(item(doc, "layers"), 1), "ops"), 2);
  ck_assert_str_eq(item(core, "role")->valuestring, "attn_core");
  const cJSON *fwd = item(core, "kernel_per_device"), *bwd = item(core, "kernel_per_device_bwd");
  ck_assert(item(fwd, "m")->valuedouble == 4096 && item(fwd, "k")->valuedouble == 128 &&
            item(fwd, "batch")->valuedouble == 64);
  const cJSON *fe = item(fwd, "compute_efficiency");
  ck_assert_str_eq(item(fe, "kind")->valuestring, "curve");
  ck_assert(cJSON_IsTrue(item(item(fe, "point"), "causal")));
  ck_assert_double_eq_tol(item(fe, "value")->valuedouble, 579.0 / 989.4 * 517.0 / 512.0, 1e-6);
  ck_assert_str_eq(item(bwd, "part")->valuestring, "bwd_input");
  ck_assert(item(bwd, "flops")->valuedouble > 2 * item(fwd, "flops")->valuedouble);
  const cJSON *be = item(bwd, "compute_efficiency");
  ck_assert_str_eq(item(be, "from")->valuestring, "attention.bf16");
  ck_assert_str_eq(item(be, "kind")->valuestring, "curve");
  ck_assert(cJSON_IsTrue(item(be, "other_mask")) && !cJSON_GetObjectItem(item(be, "point"), "causal"));
  ck_assert_str_eq(item(item(be, "point"), "pass")->valuestring, "bwd");
  ck_assert(item(item(be, "point"), "m")->valuedouble == 4096 && !cJSON_GetObjectItem(be, "outside_curve"));
}
END_TEST

/* ---- invalid efficiency objects ----------------------------------------- */

typedef struct {
  const char *what;
  const char *efficiency;
  MmConfigError code;
  const char *where;
} BadCurve;

#define PTS "\"points\":[{\"m\":64,\"n\":64,\"k\":64,\"util\":0.5}]"
static const BadCurve bad_curves[] = {
  {"not an object", "[1]", MM_CONFIG_ERROR_TYPE, "$.efficiency"},
  {"unknown kernel kind", "{\"gemmm\":{}}", MM_CONFIG_ERROR_UNKNOWN_KEY, "$.efficiency"},
  {"unknown dtype", "{\"gemm\":{\"bf17\":{\"provenance\":\"paper\"," PTS "}}}", MM_CONFIG_ERROR_UNKNOWN_KEY,
   "$.efficiency.gemm"},
  {"a dtype the device lacks", "{\"gemm\":{\"fp8\":{\"provenance\":\"paper\"," PTS "}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemm.fp8"},
  {"curve is a number", "{\"gemm\":{\"bf16\":0.7}}", MM_CONFIG_ERROR_TYPE, "$.efficiency.gemm.bf16"},
  {"no provenance", "{\"gemm\":{\"bf16\":{" PTS "}}}", MM_CONFIG_ERROR_MISSING_KEY, "$.efficiency.gemm.bf16"},
  {"unknown provenance", "{\"gemm\":{\"bf16\":{\"provenance\":\"hunch\"," PTS "}}}", MM_CONFIG_ERROR_UNKNOWN_VALUE,
   "$.efficiency.gemm.bf16.provenance"},
  {"no points", "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[]}}}", MM_CONFIG_ERROR_RANGE,
   "$.efficiency.gemm.bf16.points"},
  {"point is a number", "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[3]}}}", MM_CONFIG_ERROR_TYPE,
   "$.efficiency.gemm.bf16.points[0]"},
  {"util above 1", "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":1,\"n\":1,\"k\":1,\"util\":1.5}]}}}",
   MM_CONFIG_ERROR_RANGE, "$.efficiency.gemm.bf16.points[0].util"},
  {"zero rows", "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":0,\"n\":1,\"k\":1,\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_RANGE, "$.efficiency.gemm.bf16.points[0].m"},
  {"missing k", "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_MISSING_KEY, "$.efficiency.gemm.bf16.points[0]"},
  {"bytes in a compute point",
   "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"bytes\":2,\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_UNKNOWN_KEY, "$.efficiency.gemm.bf16.points[0]"},
  {"the same shape twice",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5},"
   "{\"m\":2,\"n\":1,\"k\":1,\"batch\":1,\"util\":0.6}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[1]"},
  {"a pass on a gemm point",
   "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"pass\":\"bwd\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemm.bf16.points[0]"},
  {"a causal gemv point",
   "{\"gemv\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5},"
   "{\"m\":4,\"n\":1,\"k\":1,\"util\":0.5,\"causal\":true}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemv.bf16.points[1]"},
  {"an unknown pass",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"pass\":\"backward\"}]}}}",
   MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.efficiency.attention.bf16.points[0].pass"},
  {"causal not a boolean",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"causal\":1}]}}}",
   MM_CONFIG_ERROR_TYPE, "$.efficiency.attention.bf16.points[0].causal"},
  {"the same shape, pass and mask twice",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"pass\":\"bwd\",\"causal\":true},{\"m\":2,\"n\":1,\"k\":1,\"util\":0.6,\"causal\":true,\"pass\":\"bwd\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[1]"},
  {"eager and causal",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5},"
   "{\"m\":2,\"n\":2,\"k\":1,\"util\":0.5,\"eager\":true,\"causal\":true}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[1]"},
  {"an eager gemm point",
   "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"eager\":true}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemm.bf16.points[0]"},
  {"eager not a boolean",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"eager\":\"yes\"}]}}}",
   MM_CONFIG_ERROR_TYPE, "$.efficiency.attention.bf16.points[0].eager"},
  {"the same eager shape and pass twice",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"eager\":true},{\"m\":2,\"n\":1,\"k\":1,\"util\":0.6},{\"m\":2,\"n\":1,\"k\":1,\"util\":0.6,\"eager\":true}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[2]"},
  {"a kernel on a gemm point",
   "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"kernel\":\"fa2\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemm.bf16.points[0]"},
  {"eager and kernel",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"eager\":true,\"kernel\":\"cudnn\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[0]"},
  {"an unknown kernel",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"kernel\":\"fa4\"}]}}}",
   MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.efficiency.attention.bf16.points[0].kernel"},
  {"a default_kernel no point measured",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"default_kernel\":\"fa3\",\"points\":[{\"m\":2,"
   "\"n\":1,\"k\":1,\"util\":0.5,\"kernel\":\"fa2\"},{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,\"kernel\":\"cudnn\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.default_kernel"},
  {"a default_kernel on a gemm curve",
   "{\"gemm\":{\"bf16\":{\"provenance\":\"paper\",\"default_kernel\":\"fa2\"," PTS "}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.gemm.bf16.default_kernel"},
  {"a default_kernel on a memory curve",
   "{\"hbm\":{\"lookup\":{\"provenance\":\"paper\",\"default_kernel\":\"cudnn\",\"points\":[{\"bytes\":1e3,"
   "\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.hbm.lookup.default_kernel"},
  {"an unnamed flash point on a curve with default_kernel",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"default_kernel\":\"fa3\",\"points\":[{\"m\":2,"
   "\"n\":1,\"k\":1,\"util\":0.5,\"kernel\":\"fa3\"},{\"m\":4,\"n\":1,\"k\":1,\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[1]"},
  {"a point of kernel default",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"kernel\":\"default\"}]}}}",
   MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.efficiency.attention.bf16.points[0].kernel"},
  {"default_kernel default",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"default_kernel\":\"default\"," PTS "}}}",
   MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.efficiency.attention.bf16.default_kernel"},
  {"default_kernel default on a memory curve",
   "{\"hbm\":{\"lookup\":{\"provenance\":\"paper\",\"default_kernel\":\"default\",\"points\":[{\"bytes\":1e3,"
   "\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.hbm.lookup.default_kernel"},
  {"the same shape and kernel twice",
   "{\"attention\":{\"bf16\":{\"provenance\":\"paper\",\"points\":[{\"m\":2,\"n\":1,\"k\":1,\"util\":0.5,"
   "\"kernel\":\"fa2\"},{\"m\":2,\"n\":1,\"k\":1,\"util\":0.6,\"kernel\":\"fa3\"},{\"m\":2,\"n\":1,\"k\":1,"
   "\"util\":0.6,\"kernel\":\"fa2\"}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.attention.bf16.points[2]"},
  {"unknown memory kind", "{\"hbm\":{\"norm\":{}}}", MM_CONFIG_ERROR_UNKNOWN_KEY, "$.efficiency.hbm"},
  {"memory points out of order",
   "{\"hbm\":{\"lookup\":{\"provenance\":\"paper\",\"points\":[{\"bytes\":1e6,\"util\":0.5},{\"bytes\":1e3,\"util\":0.3}]}}}",
   MM_CONFIG_ERROR_INCONSISTENT, "$.efficiency.hbm.lookup.points[1]"},
  {"shape in a memory point", "{\"hbm\":{\"lookup\":{\"provenance\":\"paper\"," PTS "}}}",
   MM_CONFIG_ERROR_UNKNOWN_KEY, "$.efficiency.hbm.lookup.points[0]"},
  {"negative bytes", "{\"hbm\":{\"gemv\":{\"provenance\":\"paper\",\"points\":[{\"bytes\":-1,\"util\":0.5}]}}}",
   MM_CONFIG_ERROR_RANGE, "$.efficiency.hbm.gemv.points[0].bytes"},
};

START_TEST(test_bad_efficiency)
{
  const BadCurve *bc = &bad_curves[_i];
  g_autofree char *text = device_text(bc->efficiency);
  g_autofree char *name = g_strdup_printf("bad-device-%02d.json", _i);
  g_autofree char *path = mm_test_write(name, text);
  g_autoptr(GError) error = NULL;
  MmDevice dev;
  gboolean ok = mm_device_load(path, &dev, &error);
  ck_assert_msg(!ok, "case '%s' was accepted", bc->what);
  ck_assert(error->domain == MM_CONFIG_ERROR);
  ck_assert_msg((MmConfigError)error->code == bc->code, "case '%s': code %d, expected %d (%s)", bc->what,
                error->code, bc->code, error->message);
  g_autofree char *where = g_strdup_printf("%s: %s", path, bc->where);
  ck_assert_msg(g_str_has_prefix(error->message, where), "case '%s': message lacks '%s': %s", bc->what, where,
                error->message);
}
END_TEST

START_TEST(test_every_curve_slot_parses)
{
  MmDevice dev;
  GString *eff = g_string_new("{");
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    g_string_append_printf(eff, "\"%s\":{\"bf16\":{\"provenance\":\"calibration\"," PTS "},"
                                "\"fp32\":{\"provenance\":\"paper\"," PTS "}},",
                           mm_kernel_kind_names[k]);
  g_string_append(eff, "\"hbm\":{");
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    g_string_append_printf(eff, "%s\"%s\":{\"provenance\":\"measurement\",\"points\":[{\"bytes\":1,\"util\":0.5}]}",
                           k ? "," : "", mm_kernel_kind_names[k]);
  g_string_append(eff, "}}");
  g_autofree char *e = g_string_free(eff, FALSE);
  load_device(e, &dev);
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    ck_assert_ptr_nonnull(dev.compute_eff[k][MM_DTYPE_BF16]);
    ck_assert_ptr_nonnull(dev.compute_eff[k][MM_DTYPE_FP32]);
    ck_assert_ptr_null(dev.compute_eff[k][MM_DTYPE_FP16]);
    ck_assert_ptr_nonnull(dev.memory_eff[k]);
    ck_assert(dev.compute_eff[k][MM_DTYPE_BF16]->points[0].batch == 1); /* the default */
  }
  mm_device_clear(&dev);
}
END_TEST

/* ---- kernel descriptors -------------------------------------------------- */

static MmModel *load_model(const char *rel)
{
  g_autofree char *p = mm_test_src(rel);
  g_autoptr(GError) error = NULL;
  MmModel *m = mm_model_load(p, &error);
  ck_assert_msg(m != NULL, "%s", error ? error->message : "");
  return m;
}

static void assert_kernel(const MmKernel *k, MmKernelKind kind, double m, double n, double kk, double batch)
{
  ck_assert_msg(k->kind == kind && k->m == m && k->n == n && k->k == kk && k->batch == batch,
                "got %s (%.17g, %.17g, %.17g) x %.17g, expected %s (%.17g, %.17g, %.17g) x %.17g",
                mm_kernel_kind_names[k->kind], k->m, k->n, k->k, k->batch, mm_kernel_kind_names[kind], m, n, kk,
                batch);
}

/* LLaMA-2-70B (models/llama2-70b.json): s 4096, h 8192, 64 heads of 128, GQA with 8 KV heads,
 * SwiGLU FFN 28672. QKV: x[4096 x 8192] W[8192 x (64 + 2 x 8) x 128 = 10240]. */
START_TEST(test_llama2_descriptors)
{
  g_autoptr(MmModel) m = load_model("models/llama2-70b.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  const MmLayer *qkv = mm_test_layer(g, 1, MM_ROLE_QKV);
  assert_kernel(&qkv->kernel, MM_KERNEL_GEMM, 4096, 10240, 8192, 1);
  ck_assert_int_eq(qkv->kernel.dtype, MM_DTYPE_BF16);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_ATTN_CORE)->kernel, MM_KERNEL_ATTENTION, 4096, 4096, 128, 64);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_ATTN_OUT)->kernel, MM_KERNEL_GEMM, 4096, 8192, 8192, 1);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_FFN_UP)->kernel, MM_KERNEL_GEMM, 4096, 2 * 28672, 8192, 1);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_FFN_ACT)->kernel, MM_KERNEL_ELEMENTWISE, 4096, 28672, 1, 1);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_FFN_DOWN)->kernel, MM_KERNEL_GEMM, 4096, 8192, 28672, 1);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_NORM_ATTN)->kernel, MM_KERNEL_ELEMENTWISE, 4096, 8192, 1, 1);
  assert_kernel(&mm_test_layer(g, 0, MM_ROLE_TOKEN_LOOKUP)->kernel, MM_KERNEL_LOOKUP, 4096, 8192, 1, 1);
  assert_kernel(&mm_test_layer(g, 81, MM_ROLE_LOGITS)->kernel, MM_KERNEL_GEMM, 4096, 32000, 8192, 1);

  /* one device of TP 8 with 8 sequences: column split takes n, the samples stack rows */
  MmKernelShare sh = {.samples = 8, .work = 1.0 / 8, .split = 1.0 / 8, .groups = 1};
  MmKernel k;
  mm_kernel_for_part(qkv, MM_PART_FWD, &sh, MM_DTYPE_FP8, &k);
  assert_kernel(&k, MM_KERNEL_GEMM, 32768, 1280, 8192, 1);
  ck_assert_int_eq(k.dtype, MM_DTYPE_FP8);
  mm_kernel_for_part(qkv, MM_PART_BWD_INPUT, &sh, MM_DTYPE_BF16, &k); /* dx = dy W^T */
  assert_kernel(&k, MM_KERNEL_GEMM, 32768, 8192, 1280, 1);
  mm_kernel_for_part(qkv, MM_PART_BWD_WEIGHT, &sh, MM_DTYPE_BF16, &k); /* dW = x^T dy */
  assert_kernel(&k, MM_KERNEL_GEMM, 8192, 1280, 32768, 1);
  /* row split takes k; context parallelism (work 1/16 of which TP 1/8) halves the rows */
  MmKernelShare cp = {.samples = 1, .work = 1.0 / 16, .split = 1.0 / 8, .groups = 1};
  mm_kernel_for_part(mm_test_layer(g, 1, MM_ROLE_ATTN_OUT), MM_PART_FWD, &cp, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_GEMM, 2048, 8192, 1024, 1);
  /* sharded attention: TP takes heads, the sequences are separate problems */
  mm_kernel_for_part(mm_test_layer(g, 1, MM_ROLE_ATTN_CORE), MM_PART_FWD, &sh, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_ATTENTION, 4096, 4096, 128, 64);
  /* sequence-parallel norm: a replicated layer whose rows TP splits */
  MmKernelShare sp = {.samples = 8, .work = 1.0 / 8, .split = 1, .groups = 1};
  mm_kernel_for_part(mm_test_layer(g, 1, MM_ROLE_NORM_FFN), MM_PART_BWD_INPUT, &sp, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_ELEMENTWISE, 4096, 8192, 1, 1);
}
END_TEST

/* Decode: one token per sequence; a few sequences make the projections GEMVs. */
START_TEST(test_decode_gemv)
{
  g_autoptr(MmModel) m = load_model("models/llama2-70b.json");
  MmGraphPass pass = {.tokens = 1, .context = 1024, .kv_cache = TRUE, .last_logits = TRUE, .decode = TRUE};
  g_autoptr(MmGraph) g = mm_graph_new_pass(m, &pass);
  const MmLayer *qkv = mm_test_layer(g, 1, MM_ROLE_QKV);
  assert_kernel(&qkv->kernel, MM_KERNEL_GEMM, 1, 10240, 8192, 1);
  assert_kernel(&mm_test_layer(g, 1, MM_ROLE_ATTN_CORE)->kernel, MM_KERNEL_ATTENTION, 1, 1024, 128, 64);
  MmKernel k;
  MmKernelShare sh = {.samples = 8, .work = 1, .split = 1, .groups = 1};
  mm_kernel_for_part(qkv, MM_PART_FWD, &sh, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_GEMV, 8, 10240, 8192, 1);
  sh.samples = 16;
  mm_kernel_for_part(qkv, MM_PART_FWD, &sh, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_GEMM, 16, 10240, 8192, 1);
}
END_TEST

/* GEMM-like descriptors carry the layer's forward FLOPs: 2 m n k batch, per sample, across
 * dense, GQA, MoE (grouped experts), MLA and DLRM models; per device, times samples x work. */
START_TEST(test_descriptor_flops)
{
  static const char *const models[] = {"models/llama2-70b.json", "models/gpt3-175b.json", "models/mixtral-8x7b.json",
                                       "models/deepseek-v3.json", "models/dlrm-a.json", "models/dlrm-a-moe.json"};
  for (guint i = 0; i < G_N_ELEMENTS(models); i++) {
    g_autoptr(MmModel) m = load_model(models[i]);
    g_autoptr(MmGraph) g = mm_graph_new(m);
    guint gemms = 0;
    for (guint li = 0; li < g->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      const MmKernel *k = &l->kernel;
      ck_assert_msg(k->m > 0 && k->n >= 1 && k->k >= 1 && k->batch >= 1, "%s layer %u", models[i], li);
      if (k->kind != MM_KERNEL_GEMM && k->kind != MM_KERNEL_INTERACTION) continue;
      gemms++;
      double f = 2.0 * k->m * k->n * k->k * k->batch;
      ck_assert_msg(fabs(f / l->cost.fwd_flops - 1) < 1e-12, "%s %s: %.17g vs %.17g", models[i],
                    mm_role_names[l->role], f, l->cost.fwd_flops);
      MmKernelShare sh = {.samples = 16, .work = 0.25, .split = l->tp == MM_TP_REPLICATED ? 1 : 0.5,
                          .groups = l->expert ? 0.5 : 1};
      MmKernel d;
      for (int part = 0; part < MM_PART_COUNT; part++) {
        mm_kernel_for_part(l, (MmKernelPart)part, &sh, MM_DTYPE_BF16, &d);
        double fd = 2.0 * d.m * d.n * d.k * d.batch;
        if (d.m > 1 && d.n > 1 && d.k > 1) /* nothing clamped */
          ck_assert_msg(fabs(fd / (f * 16 * 0.25) - 1) < 1e-12, "%s %s part %d", models[i], mm_role_names[l->role],
                        part);
      }
    }
    ck_assert_uint_gt(gemms, 0);
  }
  /* Mixtral: 8 experts, top 2 at capacity 1: every expert's up projection gets s x 2 / 8 rows */
  g_autoptr(MmModel) mx = load_model("models/mixtral-8x7b.json");
  g_autoptr(MmGraph) g = mm_graph_new(mx);
  const MmLayer *up = mm_test_layer(g, 1, MM_ROLE_FFN_UP);
  const MmBlock *b = &mx->blocks[up->block];
  double rows = (double)b->seq_len * 2 * b->capacity_factor / 8;
  assert_kernel(&up->kernel, MM_KERNEL_GEMM, rows, 2 * 14336, 4096, 8);
  /* expert parallelism 8: one expert per device, all ranks' tokens for it */
  MmKernelShare ep = {.samples = 2, .work = 1, .split = 1, .groups = 1.0 / 8};
  MmKernel k;
  mm_kernel_for_part(up, MM_PART_FWD, &ep, MM_DTYPE_BF16, &k);
  assert_kernel(&k, MM_KERNEL_GEMM, rows * 2 * 8, 2 * 14336, 4096, 1);
}
END_TEST

/* ---- describe ------------------------------------------------------------ */

static const cJSON *item(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  ck_assert_msg(v != NULL, "missing %s", key);
  return v;
}

/* describe --json shows each op's kernel and the factors its time uses: with a curve that
 * covers the QKV projection, that curve; the rest, the scalars. */
START_TEST(test_describe_shows_factors)
{
  /* the A100 device with (only) a bf16 GEMM curve around the QKV projection of one device of TP 8 */
  g_autofree char *devsrc = mm_test_src("hardware/devices/a100-80gb.json");
  g_autofree char *devtext = NULL;
  ck_assert(g_file_get_contents(devsrc, &devtext, NULL, NULL));
  g_autoptr(cJSON) dj = cJSON_Parse(devtext);
  cJSON *eff = cJSON_Parse("{\"gemm\":{\"bf16\":{\"provenance\":\"calibration\",\"source\":\"test\",\"points\":["
                           "{\"m\":16384,\"n\":1024,\"k\":8192,\"util\":0.61},"
                           "{\"m\":65536,\"n\":2048,\"k\":8192,\"util\":0.66}]}}}");
  cJSON_DeleteItemFromObjectCaseSensitive(dj, "efficiency"); /* the shipped eager attention curves: not here */
  cJSON_AddItemToObject(dj, "efficiency", eff);
  g_autofree char *devout = cJSON_Print(dj);
  g_autofree char *devpath = mm_test_write("a100-curves.json", devout);
  g_autofree char *syssrc = mm_test_src("hardware/dgx-a100-2048.json");
  g_autofree char *systext = NULL;
  ck_assert(g_file_get_contents(syssrc, &systext, NULL, NULL));
  g_autoptr(cJSON) sj = cJSON_Parse(systext);
  cJSON_ReplaceItemInObjectCaseSensitive(sj, "device", cJSON_CreateString(devpath));
  static const char *const nets[] = {"intra_node", "inter_node"};
  for (guint i = 0; i < G_N_ELEMENTS(nets); i++) { /* shared fits: from the source tree */
    cJSON *net = cJSON_GetObjectItemCaseSensitive(sj, nets[i]);
    const cJSON *fit = net ? cJSON_GetObjectItemCaseSensitive(net, "fit") : NULL;
    if (!cJSON_IsString(fit)) continue;
    g_autofree char *rel = g_build_filename("hardware", fit->valuestring, NULL);
    g_autofree char *abs = mm_test_src(rel);
    cJSON_ReplaceItemInObjectCaseSensitive(net, "fit", cJSON_CreateString(abs));
  }
  g_autofree char *sysout = cJSON_Print(sj);
  g_autofree char *syspath = mm_test_write("dgx-curves.json", sysout);

  g_autofree char *mp = mm_test_src("models/llama2-70b.json");
  g_autofree char *cp = mm_test_src("configs/llm-pretrain-tp-fsdp.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(mp, &error);
  g_autoptr(MmHardware) hw = mm_hardware_load(syspath, &error);
  ck_assert_msg(hw != NULL, "%s", error ? error->message : "");
  g_autoptr(MmParallelConfig) c = mm_parallel_load(cp, &error);
  g_autoptr(MmScenario) s = mm_scenario_new(m, hw, c, NULL, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  g_autoptr(cJSON) doc = mm_report_describe_json(g, NULL, s, NULL);

  const cJSON *ops = item(cJSON_GetArrayItem(item(doc, "layers"), 1), "ops");
  const cJSON *qkv = cJSON_GetArrayItem(ops, 1);
  ck_assert_str_eq(item(qkv, "role")->valuestring, "qkv");
  const cJSON *k = item(qkv, "kernel");
  ck_assert_str_eq(item(k, "kind")->valuestring, "gemm");
  ck_assert(item(k, "m")->valuedouble == 4096 && item(k, "n")->valuedouble == 10240 && item(k, "k")->valuedouble == 8192);
  /* 8 sequences per device (2048 over 256 FSDP ranks), TP 8: (32768, 1280, 8192), nearest the first point */
  const cJSON *d = item(qkv, "kernel_per_device");
  ck_assert(item(d, "m")->valuedouble == 32768 && item(d, "n")->valuedouble == 1280);
  const cJSON *ce = item(d, "compute_efficiency");
  ck_assert_str_eq(item(ce, "kind")->valuestring, "curve");
  ck_assert_str_eq(item(ce, "from")->valuestring, "gemm.bf16");
  ck_assert(item(ce, "value")->valuedouble == 0.61);
  ck_assert_str_eq(item(item(d, "memory_efficiency"), "from")->valuestring, "utilization.hbm");
  /* the FFN down projection (k = 28672 / 8 = 3584) is outside the curve's k */
  const cJSON *down = cJSON_GetArrayItem(ops, 7);
  ck_assert_str_eq(item(down, "role")->valuestring, "ffn_down");
  const cJSON *de = item(item(down, "kernel_per_device"), "compute_efficiency");
  ck_assert_str_eq(item(de, "from")->valuestring, "utilization.gemm");
  ck_assert_str_eq(item(de, "outside_curve")->valuestring, "gemm.bf16");
  ck_assert(item(de, "value")->valuedouble == 0.705);
  const cJSON *ef = item(doc, "efficiency");
  ck_assert_int_eq(cJSON_GetArraySize(item(ef, "curves")), 1);
  /* no attention curve: the attention core shows its forward call only, as before */
  const cJSON *core = cJSON_GetArrayItem(ops, 2);
  ck_assert_str_eq(item(core, "role")->valuestring, "attn_core");
  ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(core, "kernel_per_device_bwd"));

  /* the text names the factor of each kernel and where it comes from */
  g_autofree char *tp = g_build_filename(mm_test_tmpdir(), "describe.txt", NULL);
  FILE *f = fopen(tp, "w");
  ck_assert_ptr_nonnull(f);
  mm_report_describe_text(f, g, NULL, s, NULL);
  fclose(f);
  g_autofree char *buf = NULL;
  ck_assert(g_file_get_contents(tp, &buf, NULL, NULL));
  ck_assert_msg(strstr(buf, "curve gemm.bf16 (calibration) at m=16384 n=1024 k=8192 batch=1: 0.61") != NULL, "%s", buf);
  ck_assert(strstr(buf, "outside curve gemm.bf16: scalar utilization.gemm 0.705 (paper)") != NULL);
  ck_assert(strstr(buf, "gemm.bf16 (calibration): test") != NULL);
}
END_TEST

static Suite *cost_suite(void)
{
  Suite *s = suite_create("cost");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_scalar_is_the_roofline);
  tcase_add_test(tc, test_compute_curve);
  tcase_add_test(tc, test_outside_the_curve_falls_back);
  tcase_add_test(tc, test_memory_curve);
  tcase_add_test(tc, test_attention_pass_and_mask);
  tcase_add_test(tc, test_eager_points_match_eager_kernels);
  tcase_add_test(tc, test_eager_attention_serial);
  tcase_add_test(tc, test_eager_attention_decode_and_fits);
  tcase_add_test(tc, test_a100_eager_attention);
  tcase_add_test(tc, test_attention_descriptor_flags);
  tcase_add_test(tc, test_h100_attention_published);
  tcase_add_test(tc, test_h100_attention_kernels);
  tcase_add_test(tc, test_describe_attention_backward);
  tcase_add_loop_test(tc, test_bad_efficiency, 0, G_N_ELEMENTS(bad_curves));
  tcase_add_test(tc, test_every_curve_slot_parses);
  tcase_add_test(tc, test_llama2_descriptors);
  tcase_add_test(tc, test_decode_gemv);
  tcase_add_test(tc, test_descriptor_flops);
  tcase_add_test(tc, test_describe_shows_factors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(cost_suite());
}
