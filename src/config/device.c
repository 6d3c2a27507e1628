/* device: device files (hardware/devices/) -> MmDevice: peaks, memory, utilization scalars and efficiency curves. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

#define BIG MM_INT_MAX

/* ---- device ------------------------------------------------------------ */

typedef struct {
  char *name, *source;
  double hbm_GiB, hbm_bw_GBps, launch_overhead_us, graph_launch_overhead_us;
} DeviceRaw;
#define DEV(f) ((gssize)offsetof(DeviceRaw, f))

static const MmField device_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, DEV(name), NULL, "display name"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, DEV(source), NULL, "datasheet or paper the numbers come from"},
  {"peak_tflops", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, "TFLOP/s",
   "dense peak per dtype: keys among fp32, tf32, fp16, bf16, fp8, int8; omit types the device lacks"},
  {"hbm_GiB", MM_F_NUM, TRUE, 1e-3, 1e6, 0, NULL, DEV(hbm_GiB), "GiB", "device memory capacity"},
  {"hbm_bw_GBps", MM_F_NUM, TRUE, 1e-3, 1e9, 0, NULL, DEV(hbm_bw_GBps), "GB/s", "peak memory bandwidth"},
  {"launch_overhead_us", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, DEV(launch_overhead_us), "us",
   "fixed cost added to every kernel"},
  {"graph_launch_overhead_us", MM_F_NUM, FALSE, 0, 1e6, 0.5, NULL, DEV(graph_launch_overhead_us), "us",
   "the same for kernels replayed from a CUDA/HIP graph (serving \"cuda_graphs\"); default 0.5: NVIDIA's "
   "CUDA Graphs blog ran 2.9-us kernels at 3.4 us each from a graph"},
  {"utilization", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "achievable fractions of peak, each {value, provenance, source}: keys gemm, hbm"},
  {"clock_derate", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "fraction",
   "{value, provenance, source}: the fraction of the datasheet clocks the compute runs at, for devices under a "
   "power cap (some clusters run H100s at 500 W); scales the peak FLOP/s kernel times use (MFU keeps the "
   "datasheet peak). Default 1"},
  {"efficiency", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured efficiency curves by kernel kind; where one covers a kernel it replaces the utilization scalar"},
  {"calibration", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "fitted efficiency models written by `madmax calibrate` (docs/CALIBRATION.md); they take precedence over "
   "curves and scalars for the kernels they fit"},
  {"fused", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "coefficients of fused compute-collective kernels (slice puts, flags, occupancy; docs/FUSED.md)"},
  {"overlap", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "coefficients of decomposed compute-communication overlap (DIL, CIL, DMA engines; docs/FUSED.md)"},
  MM_FIELDS_END,
};

static const MmField util_fields[] = {
  {"value", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, (gssize)offsetof(MmUtil, value), "fraction",
   "achieved / peak"},
  {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(MmUtil, provenance),
   NULL, "kind of evidence behind the value"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(MmUtil, source), NULL,
   "citation or calibration run"},
  MM_FIELDS_END,
};

static const MmField util_table_fields[] = {
  {"gemm", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "compute-bound ops (GEMMs, attention): fraction of peak FLOP/s"},
  {"hbm", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "memory-bound ops (embedding lookups, norms, elementwise): fraction of HBM bandwidth"},
  MM_FIELDS_END,
};

/* ---- efficiency curves (src/cost/cost.h applies them) -------------------- */

static const MmField efficiency_fields[] = {
  {"gemm", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "GEMMs (grouped: batch = experts), keyed by dtype (fp32 .. int8): fraction of peak FLOP/s by shape"},
  {"gemv", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "GEMMs with fewer than 16 rows or columns (decode), keyed by dtype"},
  {"attention", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "fused attention (m queries, n keys, k head width, batch heads x sequences), keyed by dtype"},
  {"interaction", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "DLRM dot interaction (batched X X^T), keyed by dtype"},
  {"elementwise", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "norms, activations, softmax (m rows, n columns), keyed by dtype"},
  {"lookup", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "embedding gathers (m lookups, n row width, batch tables), keyed by dtype"},
  {"hbm", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "memory curves keyed by kernel kind (gemm, gemv, attention, interaction, elementwise, lookup): fraction "
   "of HBM bandwidth by bytes per call"},
  MM_FIELDS_END,
};

typedef struct {
  int provenance;
  char *source;
  int default_kernel;
} CurveRaw;

static const MmField curve_fields[] = {
  {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(CurveRaw, provenance), NULL,
   "kind of evidence behind the points (calibrate writes \"calibration\")"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(CurveRaw, source), NULL,
   "citation or calibration run"},
  {"points", MM_F_ARRAY, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured points, at least one (compute: {m, n, k, batch, util}; hbm: {bytes, util})"},
  {"default_kernel", MM_F_ENUM, FALSE, 0, 0, MM_ATTN_KERNEL_DEFAULT, mm_attn_kernel_names,
   (gssize)offsetof(CurveRaw, default_kernel), NULL,
   "attention curves whose points name their kernel: the kernel whose points time a run whose config names no "
   "attention_kernel (it must have points here); default: the points that name none"},
  MM_FIELDS_END,
};

#define PT(f) ((gssize)offsetof(MmEffPoint, f))
static const MmField compute_point_fields[] = {
  {"m", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(m), "rows", "rows of the output (tokens; queries for attention)"},
  {"n", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(n), "columns", "columns of the output (keys for attention)"},
  {"k", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(k), "elements", "reduction length (head width for attention)"},
  {"batch", MM_F_NUM, FALSE, 1, BIG, 1, NULL, PT(batch), "problems", "independent problems of one call"},
  {"util", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, PT(util), "fraction", "achieved / peak FLOP/s"},
  {"pass", MM_F_ENUM, FALSE, 0, 0, 0, mm_kernel_pass_names, PT(bwd), NULL,
   "attention curves: the pass measured, fwd or bwd (dQ, dK, dV with the scores recomputed); a point times "
   "only kernels of its pass"},
  {"causal", MM_F_BOOL, FALSE, 0, 0, 0, NULL, PT(causal), NULL,
   "attention curves: measured under a causal mask over the whole sequence; a point times only kernels of "
   "its mask (flash kernels of causal blocks with as many queries as keys)"},
  {"eager", MM_F_BOOL, FALSE, 0, 0, 0, NULL, PT(eager), NULL,
   "attention curves: the point times eager attention's batched GEMMs (cuBLAS bmm: QK^T and AV forward; dP, "
   "dV, dQ and dK backward), whose FLOPs it counts as the kernel's (the softmax's included); the softmax, mask "
   "and dropout passes are priced at HBM bandwidth beside them, one after another. A point times only eager "
   "kernels if set, only flash kernels if not; never with causal (eager kernels compute the whole matrix)"},
  {"kernel", MM_F_ENUM, FALSE, 0, 0, MM_ATTN_KERNEL_DEFAULT, mm_attn_kernel_names, PT(kernel), NULL,
   "attention curves, flash points: the implementation measured (fa2, fa3, cudnn); a point times only "
   "kernels of a run calling that one (the config's attention_kernel, else the curve's default_kernel). Default: "
   "unnamed, for the runs that name none on a curve without default_kernel"},
  MM_FIELDS_END,
};

static const MmField memory_point_fields[] = {
  {"bytes", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(bytes), "bytes", "HBM bytes of one call"},
  {"util", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, PT(util), "fraction", "achieved / peak HBM bandwidth"},
  MM_FIELDS_END,
};

/* ---- calibration: fitted models (src/calib writes them, src/cost applies them) ---- */

static const char *const fit_model_names[] = {"roofline_t0", "bandwidth_t0", NULL};

static const MmField calibration_fields[] = {
  {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(CurveRaw, provenance), NULL,
   "kind of evidence (calibrate writes \"calibration\" for its own runs, \"measurement\" for published data)"},
  {"source", MM_F_STR, TRUE, 0, 0, 0, NULL, (gssize)offsetof(CurveRaw, source), NULL,
   "the measurements: file, device, software versions, power limit"},
  {"measured", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "the run's provenance as text: device, platform, arch, driver_version, blas, power_limit, date, ..."},
  {"fits", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "fitted models keyed KIND.DTYPE (compute: gemm.bf16, attention.bf16, ...) or hbm.KIND (memory)"},
  {"collectives", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "latency + bytes / bandwidth per measured series (nccl/rccl-tests, peer copies): {bench, variant, ranks, "
   "latency_us, bus_GBps, points, ...}; figures for the system's network fit (hardware/fits/)"},
  {"overlap", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "decomposition, contention and fusion measurements (DIL, CIL, fused kernels): {bench, variant, m, n, k, "
   "time_ratio} against the unsplit, lone or bulk run; recorded for the fused-kernel and overlap models"},
  MM_FIELDS_END,
};

typedef struct {
  int model;
  double compute_fraction, memory_fraction, t0_us;
  int64_t points, held_out_points;
  double rms, max, held_out_rms, lo, hi;
} FitRaw;
#define FR(f) ((gssize)offsetof(FitRaw, f))

static const MmField fit_fields[] = {
  {"model", MM_F_ENUM, TRUE, 0, 0, 0, fit_model_names, FR(model), NULL,
   "roofline_t0: max(flops / (peak x compute_fraction), bytes / (hbm_bw x memory_fraction)) + t0; "
   "bandwidth_t0: bytes / (hbm_bw x memory_fraction) + t0"},
  {"compute_fraction", MM_F_NUM, FALSE, 1e-6, 1, 0, NULL, FR(compute_fraction), "fraction",
   "of peak FLOP/s for the dtype (roofline_t0)"},
  {"memory_fraction", MM_F_NUM, TRUE, 1e-6, 4, 0, NULL, FR(memory_fraction), "fraction",
   "of peak HBM bandwidth (above 1 where the cache serves operands)"},
  {"t0_us", MM_F_NUM, TRUE, 0, 1e6, 0, NULL, FR(t0_us), "us", "fixed time per call (launch overhead not included)"},
  {"points", MM_F_INT, TRUE, 1, BIG, 0, NULL, FR(points), "calls", "measurements fitted"},
  {"rms_rel_err", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, FR(rms), "fraction", "root-mean-square relative error on them"},
  {"max_rel_err", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, FR(max), "fraction", "largest relative error on them"},
  {"held_out_points", MM_F_INT, FALSE, 0, BIG, 0, NULL, FR(held_out_points), "calls",
   "measurements left out of a second fit and predicted by it"},
  {"held_out_rms_rel_err", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, FR(held_out_rms), "fraction",
   "root-mean-square relative error of those predictions"},
  {"measured_from", MM_F_NUM, TRUE, 0, 1e30, 0, NULL, FR(lo), "FLOPs or bytes", "smallest call measured"},
  {"measured_to", MM_F_NUM, TRUE, 0, 1e30, 0, NULL, FR(hi), "FLOPs or bytes", "largest call measured"},
  MM_FIELDS_END,
};

typedef struct {
  char *bench, *variant;
  double m, n, k, ratio;
} OverlapRaw;
#define OR(f) ((gssize)offsetof(OverlapRaw, f))

static const MmField overlap_fields[] = {
  {"bench", MM_F_STR, TRUE, 0, 0, 0, NULL, OR(bench), NULL,
   "dil_gemm, dil_copy, cil_gemm, cil_copy, fused_gemv_allreduce, ..."},
  {"variant", MM_F_STR, TRUE, 0, 0, 0, NULL, OR(variant), NULL, "split_m=4, dma;split=8, with=dma_copy, ..."},
  {"m", MM_F_NUM, FALSE, 0, BIG, 0, NULL, OR(m), NULL, "shape"},
  {"n", MM_F_NUM, FALSE, 0, BIG, 0, NULL, OR(n), NULL, "shape"},
  {"k", MM_F_NUM, FALSE, 0, BIG, 0, NULL, OR(k), NULL, "shape"},
  {"time_ratio", MM_F_NUM, TRUE, 1e-3, 1e3, 0, NULL, OR(ratio), "x",
   "time against the unsplit call (DIL), the call alone (CIL) or the bulk kernel + collective (fused)"},
  MM_FIELDS_END,
};

typedef struct {
  char *bench, *variant;
  double ranks, latency_us, bus_GBps, rms, max, lo, hi;
  int64_t points;
} CollRaw;
#define CR(f) ((gssize)offsetof(CollRaw, f))

static const MmField collective_fields[] = {
  {"bench", MM_F_STR, TRUE, 0, 0, 0, NULL, CR(bench), NULL, "allreduce, allgather, reducescatter, alltoall, broadcast, peer"},
  {"variant", MM_F_STR, TRUE, 0, 0, 0, NULL, CR(variant), NULL, "the series' tags (out_of_place, published, dma, ...)"},
  {"ranks", MM_F_NUM, TRUE, 1, BIG, 0, NULL, CR(ranks), "GPUs", "ranks of the collective (2 for a peer copy)"},
  {"latency_us", MM_F_NUM, TRUE, 0, 1e9, 0, NULL, CR(latency_us), "us", "fitted time of an empty call"},
  {"bus_GBps", MM_F_NUM, TRUE, 1e-9, 1e9, 0, NULL, CR(bus_GBps), "GB/s", "fitted bus bandwidth (nccl-tests convention)"},
  {"points", MM_F_INT, TRUE, 1, BIG, 0, NULL, CR(points), "sizes", "measurements fitted"},
  {"rms_rel_err", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, CR(rms), "fraction", "root-mean-square relative error on them"},
  {"max_rel_err", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, CR(max), "fraction", "largest relative error on them"},
  {"measured_from", MM_F_NUM, TRUE, 0, 1e30, 0, NULL, CR(lo), "bytes", "smallest message measured"},
  {"measured_to", MM_F_NUM, TRUE, 0, 1e30, 0, NULL, CR(hi), "bytes", "largest message measured"},
  MM_FIELDS_END,
};

static void eff_fit_free(MmEffFit *f)
{
  if (!f) return;
  g_free(f->name);
  g_free(f);
}

static gboolean parse_fit(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, MmEffFit *f, GError **error)
{
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "an object {model, memory_fraction, t0_us, ...}", error))
    return FALSE;
  FitRaw raw = {0};
  guint64 present = 0;
  if (!mm_json_apply(ctx, obj, jp, fit_fields, &raw, &present, error)) return FALSE;
  f->memory = raw.model == 1;
  gboolean has_compute = (present >> mm_json_field_index(fit_fields, "compute_fraction")) & 1;
  if (f->memory == has_compute) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "%s", f->memory
                  ? "compute_fraction given for a bandwidth_t0 model (it has none)"
                  : "expected compute_fraction for a roofline_t0 model");
    return FALSE;
  }
  if (raw.lo > raw.hi) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "measured_from above measured_to");
    return FALSE;
  }
  f->compute_fraction = raw.compute_fraction;
  f->memory_fraction = raw.memory_fraction;
  f->t0_s = raw.t0_us * 1e-6;
  f->points = (guint)raw.points;
  f->held_out_points = (guint)raw.held_out_points;
  f->rms_rel_err = raw.rms, f->max_rel_err = raw.max, f->held_out_rms_rel_err = raw.held_out_rms;
  f->lo = raw.lo, f->hi = raw.hi;
  return TRUE;
}

/* The optional "calibration" object: fits by "KIND.DTYPE" / "hbm.KIND"; provenance text;
 * overlap measurements (validated, kept for the overlap model). */
static gboolean parse_calibration(const MmJsonCtx *ctx, const cJSON *cal, MmDevice *out, GError **error)
{
  if (!mm_json_expect(ctx, cal, "$.calibration", cJSON_Object, "an object {provenance, source, fits, ...}", error))
    return FALSE;
  CurveRaw raw = {0}; /* the same two fields */
  gboolean ok = mm_json_apply(ctx, cal, "$.calibration", calibration_fields, &raw, NULL, error);
  out->calibration_source = raw.source;
  if (!ok) return FALSE;
  const cJSON *measured = cJSON_GetObjectItemCaseSensitive(cal, "measured");
  for (const cJSON *it = measured ? measured->child : NULL; it; it = it->next) {
    g_autofree char *ip = g_strdup_printf("$.calibration.measured.%s", it->string);
    if (!mm_json_expect(ctx, it, ip, cJSON_String, "a string", error)) return FALSE;
  }
  /* the overlap and collective records are validated here; the models that use them read the file */
  static const struct {
    const char *key;
    const MmField *fields;
  } records[] = {{"overlap", overlap_fields}, {"collectives", collective_fields}};
  for (guint r = 0; r < G_N_ELEMENTS(records); r++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cal, records[r].key);
    guint i = 0;
    for (const cJSON *it = arr ? arr->child : NULL; it; it = it->next, i++) {
      g_autofree char *ip = g_strdup_printf("$.calibration.%s[%u]", records[r].key, i);
      if (!mm_json_expect(ctx, it, ip, cJSON_Object, "an object {bench, variant, ...}", error)) return FALSE;
      /* both record types begin with the strings bench and variant */
      union {
        OverlapRaw o;
        CollRaw c;
      } raw2;
      memset(&raw2, 0, sizeof raw2);
      gboolean fine = mm_json_apply(ctx, it, ip, records[r].fields, &raw2, NULL, error);
      g_free(raw2.o.bench), g_free(raw2.o.variant);
      if (!fine) return FALSE;
    }
  }
  const cJSON *fits = cJSON_GetObjectItemCaseSensitive(cal, "fits");
  for (const cJSON *it = fits->child; it; it = it->next) {
    g_autofree char *fp = g_strdup_printf("$.calibration.fits.%s", it->string);
    /* "KIND.DTYPE" or "hbm.KIND" */
    const char *dot = strchr(it->string, '.');
    g_autofree char *head = dot ? g_strndup(it->string, dot - it->string) : NULL;
    gboolean memory = head && !strcmp(head, "hbm");
    int kind = dot ? mm_name_index(mm_kernel_kind_names, memory ? dot + 1 : head) : -1;
    int dtype = dot && !memory ? mm_name_index(mm_dtype_names, dot + 1) : -1;
    if (kind < 0 || (!memory && dtype < 0)) {
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, ctx, fp,
                    "expected a key KIND.DTYPE (gemm.bf16, attention.fp8, ...) or hbm.KIND (hbm.elementwise)");
      return FALSE;
    }
    if (!memory && out->peak_flops[dtype] <= 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, fp,
                    "a fit for %s, which the device lacks (no peak_tflops.%s)", mm_dtype_names[dtype],
                    mm_dtype_names[dtype]);
      return FALSE;
    }
    MmEffFit **slot = memory ? &out->memory_fit[kind] : &out->compute_fit[kind][dtype];
    if (*slot) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, fp, "a second fit for %s", it->string);
      return FALSE;
    }
    MmEffFit *f = *slot = g_new0(MmEffFit, 1);
    f->name = g_strdup(it->string);
    if (!parse_fit(ctx, it, fp, f, error)) return FALSE;
    if (f->memory != memory) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, fp, "expected model %s for a %s fit",
                    memory ? "bandwidth_t0" : "roofline_t0", memory ? "memory (hbm.KIND)" : "compute");
      return FALSE;
    }
  }
  return TRUE;
}

static void eff_curve_free(MmEffCurve *c)
{
  if (!c) return;
  g_free(c->name);
  g_free(c->source);
  g_free(c->points);
  g_free(c);
}

/* Parses one curve object at @jp into @c (already owned by the device, so that a failure
 * part-way leaves nothing to leak). Compute points must differ in shape; memory points
 * must be sorted by strictly increasing bytes (the cost interpolates between neighbours). */
static gboolean parse_curve(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean compute,
                            MmEffCurve *c, GError **error)
{
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "an object {provenance, source, points}", error)) return FALSE;
  CurveRaw raw = {0};
  gboolean ok = mm_json_apply(ctx, obj, jp, curve_fields, &raw, NULL, error);
  c->source = raw.source;
  if (!ok) return FALSE;
  c->provenance = (MmProvenance)raw.provenance;
  c->default_kernel = raw.default_kernel;
  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(obj, "points");
  g_autofree char *pp = g_strdup_printf("%s.points", jp);
  int n = cJSON_GetArraySize(pts);
  if (n == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, pp, "expected at least one point");
    return FALSE;
  }
  c->points = g_new0(MmEffPoint, n);
  const MmField *fields = compute ? compute_point_fields : memory_point_fields;
  for (const cJSON *it = pts->child; it; it = it->next) {
    g_autofree char *ip = g_strdup_printf("%s[%u]", pp, c->n_points);
    if (!mm_json_expect(ctx, it, ip, cJSON_Object, "an object", error)) return FALSE;
    MmEffPoint *p = &c->points[c->n_points];
    if (!mm_json_apply(ctx, it, ip, fields, p, NULL, error)) return FALSE;
    for (guint j = 0; compute && j < c->n_points; j++) {
      const MmEffPoint *q = &c->points[j];
      if (q->m == p->m && q->n == p->n && q->k == p->k && q->batch == p->batch && q->bwd == p->bwd &&
          q->causal == p->causal && q->eager == p->eager && q->kernel == p->kernel) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip, "the same shape as %s[%u]", pp, j);
        return FALSE;
      }
    }
    if (!compute && c->n_points > 0 && p->bytes <= c->points[c->n_points - 1].bytes) {
      g_autofree char *now = mm_json_fmt_number(p->bytes), *prev = mm_json_fmt_number(c->points[c->n_points - 1].bytes);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip,
                    "bytes %s after %s; expected points sorted by strictly increasing bytes", now, prev);
      return FALSE;
    }
    c->n_points++;
  }
  return TRUE;
}

/* A curve's default_kernel: attention curves only, and one with points of that kernel. */
static gboolean curve_default_ok(const MmJsonCtx *ctx, const MmEffCurve *c, int kind, const char *cp, GError **error)
{
  g_autofree char *dp = g_strdup_printf("%s.default_kernel", cp);
  const char *name = mm_attn_kernel_names[c->default_kernel];
  if (kind != MM_KERNEL_ATTENTION) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                  "default_kernel \"%s\" on a %s curve; it names a flash-attention kernel (expected it on an "
                  "attention curve only)", name, kind < 0 ? "memory" : mm_kernel_kind_names[kind]);
    return FALSE;
  }
  gboolean found = FALSE;
  for (guint i = 0; i < c->n_points; i++) {
    const MmEffPoint *p = &c->points[i];
    found = found || p->kernel == c->default_kernel;
    if (!p->eager && p->kernel == MM_ATTN_KERNEL_DEFAULT) {
      g_autofree char *kp = g_strdup_printf("%s.points[%u]", cp, i);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, kp,
                    "a flash point without \"kernel\" on a curve with default_kernel \"%s\": no run would take it "
                    "(expected every flash point to name its kernel: fa2, fa3 or cudnn)", name);
      return FALSE;
    }
  }
  if (found) return TRUE;
  mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                "default_kernel \"%s\", but no point of the curve has kernel \"%s\" (expected a kernel the points "
                "measured)", name, name);
  return FALSE;
}

/* "default" is what a config says for "the device's kernel"; a measured point or a curve's default names
 * an implementation: reject it there (the enum table shares the name). */
static gboolean named_kernels_ok(const MmJsonCtx *ctx, const cJSON *cj, const MmEffCurve *c, const char *cp,
                                 GError **error)
{
  const cJSON *dk = cJSON_GetObjectItemCaseSensitive(cj, "default_kernel");
  g_autofree char *dp = g_strdup_printf("%s.default_kernel", cp);
  const char *what = "\"default\" names no implementation (expected fa2, fa3 or cudnn)";
  if (dk && c->default_kernel == MM_ATTN_KERNEL_DEFAULT) {
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, dp, "%s", what);
    return FALSE;
  }
  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(cj, "points");
  guint i = 0;
  for (const cJSON *it = pts ? pts->child : NULL; it && i < c->n_points; it = it->next, i++) {
    if (cJSON_GetObjectItemCaseSensitive(it, "kernel") && c->points[i].kernel == MM_ATTN_KERNEL_DEFAULT) {
      g_autofree char *kp = g_strdup_printf("%s.points[%u].kernel", cp, i);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, kp, "%s; omit the key for an unnamed point", what);
      return FALSE;
    }
  }
  return TRUE;
}

/* The optional "efficiency" object: compute curves by kind and dtype, memory curves by kind. */
static gboolean parse_efficiency(const MmJsonCtx *ctx, const cJSON *eff, MmDevice *out, GError **error)
{
  if (!mm_json_apply(ctx, eff, "$.efficiency", efficiency_fields, NULL, NULL, error)) return FALSE;
  MmField df[MM_DTYPE_COUNT + 1], kf[MM_KERNEL_KIND_COUNT + 1];
  for (int d = 0; d < MM_DTYPE_COUNT; d++)
    df[d] = (MmField){mm_dtype_names[d], MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, NULL};
  df[MM_DTYPE_COUNT] = (MmField)MM_FIELDS_END;
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    kf[k] = (MmField){mm_kernel_kind_names[k], MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, NULL};
  kf[MM_KERNEL_KIND_COUNT] = (MmField)MM_FIELDS_END;

  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    const cJSON *byd = cJSON_GetObjectItemCaseSensitive(eff, mm_kernel_kind_names[k]);
    if (!byd) continue;
    g_autofree char *kp = g_strdup_printf("$.efficiency.%s", mm_kernel_kind_names[k]);
    if (!mm_json_apply(ctx, byd, kp, df, NULL, NULL, error)) return FALSE;
    for (int d = 0; d < MM_DTYPE_COUNT; d++) {
      const cJSON *cj = cJSON_GetObjectItemCaseSensitive(byd, mm_dtype_names[d]);
      if (!cj) continue;
      g_autofree char *cp = g_strdup_printf("%s.%s", kp, mm_dtype_names[d]);
      if (out->peak_flops[d] <= 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, cp,
                      "a curve for %s, which the device lacks (no peak_tflops.%s)", mm_dtype_names[d],
                      mm_dtype_names[d]);
        return FALSE;
      }
      MmEffCurve *c = out->compute_eff[k][d] = g_new0(MmEffCurve, 1);
      c->name = g_strdup_printf("%s.%s", mm_kernel_kind_names[k], mm_dtype_names[d]);
      if (!parse_curve(ctx, cj, cp, TRUE, c, error)) return FALSE;
      for (guint i = 0; i < c->n_points; i++) {
        const MmEffPoint *p = &c->points[i];
        g_autofree char *ip = g_strdup_printf("%s.points[%u]", cp, i);
        if (k != MM_KERNEL_ATTENTION && (p->bwd || p->causal || p->eager || p->kernel)) {
          mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip,
                        "pass, causal, eager and kernel describe attention kernels only; a %s point is forward, "
                        "unmasked and of no named attention kernel",
                        mm_kernel_kind_names[k]);
          return FALSE;
        }
        if (p->eager && p->kernel) {
          mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip,
                        "eager and kernel together; kernel names a flash-attention implementation, and an eager "
                        "point times cuBLAS batched GEMMs (expected one of the two)");
          return FALSE;
        }
        if (p->eager && p->causal) {
          mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip,
                        "eager and causal together; eager attention computes the whole score matrix and masks "
                        "it, so an eager point carries no causal (expected one of the two)");
          return FALSE;
        }
      }
      if (!named_kernels_ok(ctx, cj, c, cp, error)) return FALSE;
      if (c->default_kernel && !curve_default_ok(ctx, c, k, cp, error)) return FALSE;
    }
  }
  const cJSON *hbm = cJSON_GetObjectItemCaseSensitive(eff, "hbm");
  if (!hbm) return TRUE;
  if (!mm_json_apply(ctx, hbm, "$.efficiency.hbm", kf, NULL, NULL, error)) return FALSE;
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(hbm, mm_kernel_kind_names[k]);
    if (!cj) continue;
    g_autofree char *cp = g_strdup_printf("$.efficiency.hbm.%s", mm_kernel_kind_names[k]);
    MmEffCurve *c = out->memory_eff[k] = g_new0(MmEffCurve, 1);
    c->name = g_strdup_printf("hbm.%s", mm_kernel_kind_names[k]);
    if (!parse_curve(ctx, cj, cp, FALSE, c, error)) return FALSE;
    if ((c->default_kernel || cJSON_GetObjectItemCaseSensitive(cj, "default_kernel")) &&
        !curve_default_ok(ctx, c, -1, cp, error))
      return FALSE;
  }
  return TRUE;
}

void mm_device_clear(MmDevice *d)
{
  if (!d) return;
  g_free(d->path);
  g_free(d->name);
  g_free(d->source);
  g_free(d->util_gemm.source);
  g_free(d->util_hbm.source);
  g_free(d->clock_derate.source);
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    for (int t = 0; t < MM_DTYPE_COUNT; t++) eff_curve_free(d->compute_eff[k][t]), eff_fit_free(d->compute_fit[k][t]);
    eff_curve_free(d->memory_eff[k]);
    eff_fit_free(d->memory_fit[k]);
  }
  g_free(d->calibration_source);
  mm__device_coeffs_clear(d);
  memset(d, 0, sizeof *d);
}

static gboolean device_from_json(const char *path, const cJSON *root, MmDevice *out, GError **error)
{
  MmJsonCtx ctx = {path};
  DeviceRaw raw = {0};
  memset(out, 0, sizeof *out);
  out->path = g_strdup(path);
  gboolean ok = mm_json_apply(&ctx, root, "$", device_fields, &raw, NULL, error);
  out->name = raw.name;
  out->source = raw.source;
  if (!ok) return FALSE;
  out->hbm_bytes = raw.hbm_GiB * 1024.0 * 1024.0 * 1024.0;
  out->hbm_bw_Bps = raw.hbm_bw_GBps * 1e9;
  out->launch_overhead_s = raw.launch_overhead_us * 1e-6;
  out->graph_launch_overhead_s = raw.graph_launch_overhead_us * 1e-6;

  const cJSON *peak = cJSON_GetObjectItemCaseSensitive(root, "peak_tflops");
  MmField pf[MM_DTYPE_COUNT + 1];
  for (int d = 0; d < MM_DTYPE_COUNT; d++) {
    pf[d] = (MmField){mm_dtype_names[d], MM_F_NUM, FALSE, 0, 1e7, 0, NULL,
                      (gssize)(d * (int)sizeof(double)), "TFLOP/s", NULL};
  }
  pf[MM_DTYPE_COUNT] = (MmField)MM_FIELDS_END;
  if (!mm_json_apply(&ctx, peak, "$.peak_tflops", pf, out->peak_flops, NULL, error)) return FALSE;
  gboolean any = FALSE;
  for (int d = 0; d < MM_DTYPE_COUNT; d++) {
    out->peak_flops[d] *= 1e12;
    any |= out->peak_flops[d] > 0;
  }
  if (!any) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.peak_tflops",
                  "expected at least one dtype with a positive peak");
    return FALSE;
  }

  const cJSON *util = cJSON_GetObjectItemCaseSensitive(root, "utilization");
  if (!mm_json_apply(&ctx, util, "$.utilization", util_table_fields, NULL, NULL, error)) return FALSE;
  if (!mm_json_apply(&ctx, cJSON_GetObjectItemCaseSensitive(util, "gemm"), "$.utilization.gemm",
                     util_fields, &out->util_gemm, NULL, error))
    return FALSE;
  if (!mm_json_apply(&ctx, cJSON_GetObjectItemCaseSensitive(util, "hbm"), "$.utilization.hbm",
                     util_fields, &out->util_hbm, NULL, error))
    return FALSE;
  const cJSON *derate = cJSON_GetObjectItemCaseSensitive(root, "clock_derate");
  out->clock_derate = (MmUtil){1.0, MM_PROV_DATASHEET, NULL};
  if (derate && !mm_json_apply(&ctx, derate, "$.clock_derate", util_fields, &out->clock_derate, NULL, error))
    return FALSE;
  const cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "efficiency");
  if (eff && !parse_efficiency(&ctx, eff, out, error)) return FALSE;
  const cJSON *cal = cJSON_GetObjectItemCaseSensitive(root, "calibration");
  if (cal && !parse_calibration(&ctx, cal, out, error)) return FALSE;
  return mm__device_parse_coeffs(&ctx, root, out, error);
}

static gboolean device_from_root(const char *path, const cJSON *root, MmDevice *out, GError **error)
{
  if (!root) {
    memset(out, 0, sizeof *out);
    return FALSE;
  }
  if (!device_from_json(path, root, out, error)) {
    mm_device_clear(out);
    return FALSE;
  }
  return TRUE;
}

gboolean mm_device_load(const char *path, MmDevice *out, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  return device_from_root(path, root, out, error);
}

gboolean mm_device_parse(const char *path, const char *text, gsize len, MmDevice *out, GError **error)
{
  g_autoptr(cJSON) root = mm_json_parse_text(path, text, len, error);
  return device_from_root(path, root, out, error);
}


void mm__device_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Device file (`hardware/devices/*.json`)",
                       "One accelerator: peak FLOP/s per dtype, memory, and the utilization factors "
                       "the cost model applies, each with its provenance.",
                       device_fields);
  mm_json_write_schema(out, "`utilization`", "", util_table_fields);
  mm_json_write_schema(out, "`utilization.gemm` / `utilization.hbm`", "", util_fields);
  mm_json_write_schema(out, "`efficiency`",
                       "Optional measured curves (a calibration run writes them). A compute curve "
                       "(`efficiency.KIND.DTYPE`) applies to kernels of that kind and dtype whose m, n, k and "
                       "batch each lie within the range its points span (a flash attention kernel longer than the longest "
                       "sequence measured takes that length: its m and n, and only those, are extended past the points): "
                       "the utilization of the nearest point (for attention, of the kernel's own head width k where the "
                       "curve measured it) "
                       "in log space (squared distance over log2 m, n, k, batch; the first listed wins a tie). "
                       "Attention points also name their pass (`fwd`, `bwd`), mask (`causal`) and kind of kernel "
                       "(`eager`: separate batched GEMMs, else a flash kernel): only points of a kernel's own "
                       "pass, mask and kind count, for coverage and for the nearest, except that a flash kernel whose "
                       "pass has points only under the other mask takes those (FlashAttention-3 publishes no causal "
                       "backward; describe says so). An eager kernel's time is "
                       "its GEMMs' (the point's, or the scalar's roofline) plus its softmax, mask and dropout "
                       "passes at HBM bandwidth, one after another (docs/MODEL.md). "
                       "A memory curve (`efficiency.hbm.KIND`) applies to calls whose HBM bytes lie within its "
                       "points: linear interpolation in log2 bytes. Outside a curve, or without one, the "
                       "`utilization` scalar applies. `madmax describe` shows which each kernel used.",
                       efficiency_fields);
  mm_json_write_schema(out, "`efficiency.KIND.DTYPE` / `efficiency.hbm.KIND`", "", curve_fields);
  mm_json_write_schema(out, "`points[]` of a compute curve", "One call measured: its shape and the fraction of peak FLOP/s it reached.",
                       compute_point_fields);
  mm_json_write_schema(out, "`points[]` of an `hbm` curve", "One call measured: its HBM bytes and the fraction of bandwidth it reached.",
                       memory_point_fields);
  mm_json_write_schema(out, "`calibration`",
                       "Written by `madmax calibrate` (docs/CALIBRATION.md). A compute fit (`fits.KIND.DTYPE`) "
                       "times every kernel of that kind and dtype, a memory fit (`fits.hbm.KIND`) the HBM side of "
                       "kernels of that kind (`hbm.elementwise` also stands for kinds without their own); both "
                       "take precedence over `efficiency` curves and `utilization` scalars. `madmax describe` "
                       "shows per kernel which fit, curve or scalar it used.",
                       calibration_fields);
  mm_json_write_schema(out, "`calibration.fits.*`", "", fit_fields);
  mm_json_write_schema(out, "`calibration.collectives[]`", "", collective_fields);
  mm_json_write_schema(out, "`calibration.overlap[]`", "", overlap_fields);
  mm__device_coeffs_schema(out);
}
