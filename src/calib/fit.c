/* fit: measurement rows -> fitted efficiency models, launch costs and overlap ratios -> the
 * "calibration" block of a device file (docs/CALIBRATION.md). */
#include "fit.h"

#include <math.h>
#include <string.h>

#include "config/json.h" /* g_autoptr(cJSON) */
#include "cost/cost.h"

/* ---- which rows feed which fit ----------------------------------------------------- */

static gboolean has_tag(const char *variant, const char *tag)
{
  g_auto(GStrv) tags = g_strsplit(variant, ";", -1);
  for (guint i = 0; tags[i]; i++)
    if (!strcmp(tags[i], tag)) return TRUE;
  return FALSE;
}

/* A row a compute fit of (kind, dtype) uses: the bench of that kind, FLOPs, not the fallback
 * kernel, not an unfused reference, not a backward pass. */
static gboolean compute_row(const MmCalibRow *r, int kind, int dtype)
{
  return mm_name_index(mm_kernel_kind_names, r->kind) == kind && !strcmp(r->bench, mm_kernel_kind_names[kind]) &&
         mm_name_index(mm_dtype_names, r->dtype) == dtype && r->flops > 0 && !has_tag(r->variant, "tiled") &&
         !has_tag(r->variant, "unfused") && !has_tag(r->variant, "bwd");
}

/* A row a memory fit of kind uses: copies by a kernel (not by a DMA engine) for elementwise,
 * embedding-bag pooling for lookup. */
static gboolean memory_row(const MmCalibRow *r, int kind)
{
  if (mm_name_index(mm_kernel_kind_names, r->kind) != kind || r->bytes <= 0) return FALSE;
  if (kind == MM_KERNEL_ELEMENTWISE) return !strcmp(r->bench, "copy") && !has_tag(r->variant, "dma");
  return kind == MM_KERNEL_LOOKUP && !strcmp(r->bench, "lookup");
}

/* ---- the model and its least-squares fit ------------------------------------------------ */

typedef struct {
  double flops, bytes, t; /* per call; t measured, launch included */
} Obs;

typedef struct {
  const MmDevice *dev;
  int dtype;
  gboolean memory;
  double launch_s;
  const Obs *obs;
  guint n;
} Problem;

#define NP 3
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void params(const double x[NP], MmEffFit *f)
{
  f->compute_fraction = sigmoid(x[0]);
  f->memory_fraction = 4.0 * sigmoid(x[1]);
  f->t0_s = exp(x[2]);
}

static double predict(const Problem *p, const MmEffFit *f, const Obs *o)
{
  return p->launch_s + mm_cost_fit_s(p->dev, f, (MmDtype)(p->dtype < 0 ? 0 : p->dtype), o->flops, o->bytes);
}

/* Sum of squared log errors over the observations @use selects (NULL: all). */
static double objective(const Problem *p, const double x[NP], const guint8 *use)
{
  MmEffFit f = {.memory = p->memory};
  params(x, &f);
  double s = 0;
  for (guint i = 0; i < p->n; i++) {
    if (use && !use[i]) continue;
    double e = log(predict(p, &f, &p->obs[i]) / p->obs[i].t);
    s += e * e;
  }
  return s;
}

/* Nelder-Mead over NP parameters (the memory model ignores x[0]); deterministic. */
static void minimize(const Problem *p, double x[NP], const guint8 *use)
{
  double v[NP + 1][NP], fv[NP + 1];
  for (int restart = 0; restart < 3; restart++) {
    for (int i = 0; i <= NP; i++) {
      memcpy(v[i], x, sizeof v[i]);
      if (i > 0) v[i][i - 1] += 1.0;
      fv[i] = objective(p, v[i], use);
    }
    for (int it = 0; it < 3000; it++) {
      int lo = 0, hi = 0, nh = 0;
      for (int i = 1; i <= NP; i++) {
        if (fv[i] < fv[lo]) lo = i;
        if (fv[i] > fv[hi]) hi = i;
      }
      nh = lo;
      for (int i = 0; i <= NP; i++)
        if (i != hi && fv[i] > fv[nh]) nh = i;
      if (fv[hi] - fv[lo] < 1e-12 * (1 + fv[lo])) break;
      double c[NP] = {0}, r[NP], e[NP];
      for (int i = 0; i <= NP; i++)
        for (int d = 0; d < NP && i != hi; d++) c[d] += v[i][d] / NP;
      for (int d = 0; d < NP; d++) r[d] = c[d] + (c[d] - v[hi][d]);
      double fr = objective(p, r, use);
      if (fr < fv[lo]) {
        for (int d = 0; d < NP; d++) e[d] = c[d] + 2 * (c[d] - v[hi][d]);
        double fe = objective(p, e, use);
        if (fe < fr) memcpy(v[hi], e, sizeof e), fv[hi] = fe;
        else memcpy(v[hi], r, sizeof r), fv[hi] = fr;
      } else if (fr < fv[nh]) {
        memcpy(v[hi], r, sizeof r), fv[hi] = fr;
      } else {
        for (int d = 0; d < NP; d++) e[d] = c[d] + 0.5 * (v[hi][d] - c[d]);
        double fc = objective(p, e, use);
        if (fc < fv[hi]) {
          memcpy(v[hi], e, sizeof e), fv[hi] = fc;
        } else {
          for (int i = 0; i <= NP; i++)
            for (int d = 0; d < NP && i != lo; d++) v[i][d] = v[lo][d] + 0.5 * (v[i][d] - v[lo][d]);
          for (int i = 0; i <= NP; i++)
            if (i != lo) fv[i] = objective(p, v[i], use);
        }
      }
    }
    int best = 0;
    for (int i = 1; i <= NP; i++)
      if (fv[i] < fv[best]) best = i;
    memcpy(x, v[best], sizeof v[best]);
  }
}

/* Relative errors of @f on the observations @sel selects (NULL: all): rms and max. */
static guint errors(const Problem *p, const MmEffFit *f, const guint8 *sel, double *rms, double *max)
{
  double s = 0, m = 0;
  guint n = 0;
  for (guint i = 0; i < p->n; i++) {
    if (sel && !sel[i]) continue;
    double e = fabs(predict(p, f, &p->obs[i]) - p->obs[i].t) / p->obs[i].t;
    s += e * e, m = MAX(m, e), n++;
  }
  *rms = n ? sqrt(s / n) : 0, *max = m;
  return n;
}

static int cmp_obs(const void *a, const void *b)
{
  const Obs *x = a, *y = b;
  double kx = x->flops > 0 ? x->flops : x->bytes, ky = y->flops > 0 ? y->flops : y->bytes;
  return kx < ky ? -1 : kx > ky;
}

/* Fits one model to @obs (sorted here by size); fills @f; FALSE when too few calls are
 * above the launch overhead. */
static gboolean fit_one(const MmDevice *dev, int dtype, gboolean memory, double launch_s, Obs *obs, guint n,
                        MmEffFit *f)
{
  /* calls barely above the launch overhead say nothing about the kernel */
  guint kept = 0;
  for (guint i = 0; i < n; i++)
    if (obs[i].t > 1.05 * launch_s) obs[kept++] = obs[i];
  if (kept < 2) return FALSE;
  qsort(obs, kept, sizeof *obs, cmp_obs);
  Problem p = {dev, dtype, memory, launch_s, obs, kept};
  /* start: the best fraction seen, 85% of HBM, 1 us */
  double best = 0.05;
  for (guint i = 0; i < kept && !memory; i++)
    best = MAX(best, obs[i].flops / (dev->peak_flops[dtype] * MAX(obs[i].t - launch_s, 1e-12)));
  best = MIN(best, 0.95);
  double x0[NP] = {log(best / (1 - best)), log(0.85 / (4 - 0.85)), log(1e-6)};
  double x[NP];
  f->memory = memory;
  if (kept >= 8) {
    /* held out: every fourth call by size; fitted on the rest, predicted */
    g_autofree guint8 *fit = g_new(guint8, kept), *held = g_new(guint8, kept);
    for (guint i = 0; i < kept; i++) held[i] = i % 4 == 3, fit[i] = !held[i];
    memcpy(x, x0, sizeof x);
    minimize(&p, x, fit);
    params(x, f);
    double max;
    f->held_out_points = errors(&p, f, held, &f->held_out_rms_rel_err, &max);
  }
  memcpy(x, x0, sizeof x);
  minimize(&p, x, NULL);
  params(x, f);
  f->points = errors(&p, f, NULL, &f->rms_rel_err, &f->max_rel_err);
  /* sorted by size: the ends are the range measured */
  f->lo = memory ? obs[0].bytes : obs[0].flops;
  f->hi = memory ? obs[kept - 1].bytes : obs[kept - 1].flops;
  return TRUE;
}

/* ---- the calibration block -------------------------------------------------------------- */

/* @v to 4 significant digits: the fits are not known better, and the files stay readable. */
static double sig4(double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_strtod(g_ascii_formatd(buf, sizeof buf, "%.4g", v), NULL);
}

static cJSON *fit_json(const MmEffFit *f)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", f->memory ? "bandwidth_t0" : "roofline_t0");
  if (!f->memory) cJSON_AddNumberToObject(o, "compute_fraction", sig4(f->compute_fraction));
  cJSON_AddNumberToObject(o, "memory_fraction", sig4(f->memory_fraction));
  cJSON_AddNumberToObject(o, "t0_us", sig4(f->t0_s * 1e6));
  cJSON_AddNumberToObject(o, "points", f->points);
  cJSON_AddNumberToObject(o, "rms_rel_err", sig4(f->rms_rel_err));
  cJSON_AddNumberToObject(o, "max_rel_err", sig4(f->max_rel_err));
  cJSON_AddNumberToObject(o, "held_out_points", f->held_out_points);
  cJSON_AddNumberToObject(o, "held_out_rms_rel_err", sig4(f->held_out_rms_rel_err));
  cJSON_AddNumberToObject(o, "measured_from", sig4(f->lo));
  cJSON_AddNumberToObject(o, "measured_to", sig4(f->hi));
  return o;
}

static int cmp_double(gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of the medians of rows of @bench (0: none). */
static double bench_median(const MmCalibTable *t, const char *bench)
{
  g_autoptr(GArray) v = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!strcmp(r->bench, bench)) g_array_append_val(v, r->median_s);
  }
  if (v->len == 0) return 0;
  g_array_sort(v, cmp_double);
  return g_array_index(v, double, v->len / 2);
}

static gboolean same_shape(const MmCalibRow *a, const MmCalibRow *b)
{
  return a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch && !strcmp(a->dtype, b->dtype);
}

/* The tag of @variant that starts with @prefix ("ranks=8"), or "" (transfer full). */
static char *tag_with(const char *variant, const char *prefix)
{
  g_auto(GStrv) tags = g_strsplit(variant, ";", -1);
  for (guint i = 0; tags[i]; i++)
    if (g_str_has_prefix(tags[i], prefix)) return g_strdup(tags[i]);
  return g_strdup("");
}

/* A row other rows of its bench are measured against: the unsplit call, the call alone, the
 * bulk (unfused) pair. */
static gboolean is_reference(const char *variant)
{
  return has_tag(variant, "alone") || has_tag(variant, "split_m=1") || has_tag(variant, "split=1") ||
         has_tag(variant, "bulk");
}

/* The reference of a DIL, CIL or fused row: of the same bench, shape, copier ("kernel"/"dma")
 * and ranks, the nearest before it. */
static const MmCalibRow *overlap_reference(const MmCalibTable *t, guint at)
{
  const MmCalibRow *r = t->rows->pdata[at];
  gboolean dma = has_tag(r->variant, "dma"), kernel = has_tag(r->variant, "kernel");
  g_autofree char *ranks = tag_with(r->variant, "ranks=");
  for (guint j = at; j-- > 0;) {
    const MmCalibRow *q = t->rows->pdata[j];
    if (strcmp(q->bench, r->bench) || !same_shape(q, r) || !is_reference(q->variant)) continue;
    if (has_tag(q->variant, "dma") != dma || has_tag(q->variant, "kernel") != kernel) continue;
    g_autofree char *qr = tag_with(q->variant, "ranks=");
    if (!strcmp(qr, ranks)) return q;
  }
  return NULL;
}

static cJSON *overlap_json(const MmCalibTable *t)
{
  cJSON *arr = cJSON_CreateArray();
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!g_str_has_prefix(r->bench, "dil_") && !g_str_has_prefix(r->bench, "cil_") &&
        !g_str_has_prefix(r->bench, "fused_"))
      continue;
    if (is_reference(r->variant)) continue;
    const MmCalibRow *ref = overlap_reference(t, i);
    if (!ref) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "bench", r->bench);
    cJSON_AddStringToObject(o, "variant", r->variant);
    cJSON_AddNumberToObject(o, "m", r->m);
    cJSON_AddNumberToObject(o, "n", r->n);
    cJSON_AddNumberToObject(o, "k", r->k);
    cJSON_AddNumberToObject(o, "time_ratio", sig4(r->median_s / ref->median_s));
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* ---- collectives and peer copies: latency + bytes / bandwidth per series ---- */

static const char *const collective_benches[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
                                                 "peer", NULL};

/* nccl-tests' bus bandwidth over algorithm bandwidth on @ranks ranks. */
static double bus_factor(const char *bench, double ranks)
{
  if (!strcmp(bench, "allreduce")) return 2.0 * (ranks - 1) / ranks;
  if (!strcmp(bench, "broadcast") || !strcmp(bench, "peer")) return 1.0;
  return (ranks - 1) / ranks;
}

/* The ranks a row ran on: collectives keep them in m, a peer copy is two. */
static double row_ranks(const MmCalibRow *r) { return !strcmp(r->bench, "peer") ? 2 : r->m; }

/* Whether @r belongs to the series @first starts: same bench, variant and ranks, with bytes. */
static gboolean in_series(const MmCalibRow *r, const MmCalibRow *first)
{
  return !strcmp(r->bench, first->bench) && !strcmp(r->variant, first->variant) && row_ranks(r) == row_ranks(first) &&
         r->bytes > 0;
}

/* Fits t = latency + bytes / bandwidth to one series (bench, ranks, variant) by least squares
 * on relative error (closed form; the latency clamped at 0), and reports the bus bandwidth. */
static cJSON *collective_fit(const MmCalibTable *t, const MmCalibRow *first, GString *rep)
{
  double S = 0, Sx = 0, Sxx = 0, St = 0, Sxt = 0, lo = INFINITY, hi = 0;
  guint n = 0;
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!in_series(r, first)) continue;
    double w = 1.0 / (r->median_s * r->median_s), x = r->bytes;
    S += w, Sx += w * x, Sxx += w * x * x, St += w * r->median_s, Sxt += w * x * r->median_s;
    lo = MIN(lo, x), hi = MAX(hi, x), n++;
  }
  double det = S * Sxx - Sx * Sx;
  double a = n >= 2 && det > 0 ? (St * Sxx - Sx * Sxt) / det : 0, b = n >= 2 && det > 0 ? (S * Sxt - Sx * St) / det : 0;
  if (a < 0 || n < 2 || det <= 0) a = 0, b = Sxt / Sxx;
  if (!(b > 0)) return NULL;
  double s2 = 0, mx = 0;
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!in_series(r, first)) continue;
    double e = fabs(a + r->bytes * b - r->median_s) / r->median_s;
    s2 += e * e, mx = MAX(mx, e);
  }
  const double ranks = row_ranks(first), bus = bus_factor(first->bench, ranks) / b;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "bench", first->bench);
  cJSON_AddStringToObject(o, "variant", first->variant);
  cJSON_AddNumberToObject(o, "ranks", ranks);
  cJSON_AddNumberToObject(o, "latency_us", sig4(a * 1e6));
  cJSON_AddNumberToObject(o, "bus_GBps", sig4(bus / 1e9));
  cJSON_AddNumberToObject(o, "points", n);
  cJSON_AddNumberToObject(o, "rms_rel_err", sig4(sqrt(s2 / n)));
  cJSON_AddNumberToObject(o, "max_rel_err", sig4(mx));
  cJSON_AddNumberToObject(o, "measured_from", lo);
  cJSON_AddNumberToObject(o, "measured_to", hi);
  g_string_append_printf(rep, "  %-14s %3.0f ranks %-22s latency %7.3g us  bus %7.4g GB/s  %3u sizes  rms %5.1f%%\n",
                         first->bench, ranks, first->variant, a * 1e6, bus / 1e9, n, sqrt(s2 / n) * 100);
  return o;
}

/* One fit per series, in the order the series first appear. */
static cJSON *collectives_json(const MmCalibTable *t, GString *rep)
{
  cJSON *arr = cJSON_CreateArray();
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (mm_name_index(collective_benches, r->bench) < 0 || r->bytes <= 0) continue;
    gboolean seen = FALSE;
    for (guint j = 0; j < i && !seen; j++) seen = in_series(t->rows->pdata[j], r);
    cJSON *o = seen ? NULL : collective_fit(t, r, rep);
    if (o) cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

void mm_calib_result_clear(MmCalibResult *r)
{
  if (!r) return;
  cJSON_Delete(r->calibration);
  if (r->report) g_string_free(r->report, TRUE);
  memset(r, 0, sizeof *r);
}

gboolean mm_calib_fit(const MmCalibTable *t, const MmDevice *dev, const char *what, MmCalibResult *out,
                      GError **error)
{
  g_return_val_if_fail(t != NULL && dev != NULL && out != NULL, FALSE);
  memset(out, 0, sizeof *out);
  out->launch_us = bench_median(t, "launch") * 1e6;
  out->graph_launch_us = bench_median(t, "graph_launch") * 1e6;
  const double launch_s = out->launch_us > 0 ? out->launch_us * 1e-6 : dev->launch_overhead_s;
  const char *platform = mm_calib_table_meta(t, "platform");
  const gboolean published = platform && !strcmp(platform, "published");

  cJSON *cal = out->calibration = cJSON_CreateObject();
  GString *rep = out->report = g_string_new(NULL);
  cJSON_AddStringToObject(cal, "provenance", published ? "measurement" : "calibration");
  const char *device = mm_calib_table_meta(t, "device");
  g_autoptr(GString) src = g_string_new(NULL);
  g_string_append_printf(src, "madmax calibrate from %s: %s", what, device ? device : "device not named");
  static const char *const cite[] = {"platform", "arch", "blas", "driver_version", "runtime_version", "power_limit",
                                     "source"};
  for (guint i = 0; i < G_N_ELEMENTS(cite); i++) {
    const char *v = mm_calib_table_meta(t, cite[i]);
    if (v) g_string_append_printf(src, "; %s %s", cite[i], v);
  }
  g_string_append_printf(src, "; %u measurements", t->rows->len);
  cJSON_AddStringToObject(cal, "source", src->str);
  cJSON *measured = cJSON_AddObjectToObject(cal, "measured");
  for (guint i = 0; i < t->keys->len; i++)
    if (!cJSON_GetObjectItemCaseSensitive(measured, t->keys->pdata[i]))
      cJSON_AddStringToObject(measured, t->keys->pdata[i], t->values->pdata[i]);
  cJSON *fits = cJSON_AddObjectToObject(cal, "fits");

  g_string_append_printf(rep, "calibration of %s (%s) from %s: %u measurements\n", dev->name,
                         device ? device : "device not named", what, t->rows->len);
  if (out->launch_us > 0) g_string_append_printf(rep, "  launch overhead %.3g us per kernel (measured)\n", out->launch_us);
  else g_string_append_printf(rep, "  launch overhead %.3g us per kernel (the device file's; none measured)\n",
                              dev->launch_overhead_s * 1e6);
  if (out->graph_launch_us > 0)
    g_string_append_printf(rep, "  graph replay %.3g us per kernel (measured)\n", out->graph_launch_us);
  g_string_append_printf(rep, "  %-18s %-12s %6s %9s %8s %8s %8s %9s %9s\n", "fit", "model", "calls", "compute",
                         "HBM", "t0_us", "rms_err", "max_err", "held_out");
  g_autoptr(GArray) obs = g_array_new(FALSE, FALSE, sizeof(Obs));
  guint n_fits = 0;
  for (int kind = 0; kind < MM_KERNEL_KIND_COUNT; kind++)
    for (int dtype = -1; dtype < MM_DTYPE_COUNT; dtype++) {
      gboolean memory = dtype < 0;
      if (memory && kind != MM_KERNEL_ELEMENTWISE && kind != MM_KERNEL_LOOKUP) continue;
      if (!memory && (kind == MM_KERNEL_ELEMENTWISE || kind == MM_KERNEL_LOOKUP)) continue;
      g_array_set_size(obs, 0);
      for (guint i = 0; i < t->rows->len; i++) {
        const MmCalibRow *r = t->rows->pdata[i];
        if (memory ? !memory_row(r, kind) : !compute_row(r, kind, dtype)) continue;
        Obs o = {memory ? 0 : r->flops,
                 memory ? r->bytes : mm_cost_fit_bytes((MmKernelKind)kind, (MmDtype)dtype, r->m, r->n, r->k, r->batch),
                 r->median_s};
        g_array_append_val(obs, o);
      }
      if (obs->len == 0) continue;
      g_autofree char *name = memory ? g_strdup_printf("hbm.%s", mm_kernel_kind_names[kind])
                                     : g_strdup_printf("%s.%s", mm_kernel_kind_names[kind], mm_dtype_names[dtype]);
      if (!memory && dev->peak_flops[dtype] <= 0) {
        g_string_append_printf(rep, "  %-18s skipped: the device file has no peak_tflops.%s\n", name,
                               mm_dtype_names[dtype]);
        continue;
      }
      MmEffFit f = {0};
      if (!fit_one(dev, dtype, memory, launch_s, (Obs *)(void *)obs->data, obs->len, &f)) {
        g_string_append_printf(rep, "  %-18s skipped: %u calls, fewer than 2 above the launch overhead\n", name,
                               obs->len);
        continue;
      }
      cJSON_AddItemToObject(fits, name, fit_json(&f));
      n_fits++;
      g_autofree char *cf = memory ? g_strdup("-") : g_strdup_printf("%.3f", f.compute_fraction);
      g_autofree char *ho = f.held_out_points ? g_strdup_printf("%.1f%%/%u", f.held_out_rms_rel_err * 100,
                                                                f.held_out_points)
                                              : g_strdup("-");
      g_string_append_printf(rep, "  %-18s %-12s %6u %9s %8.3f %8.3g %7.1f%% %8.1f%% %9s\n", name,
                             memory ? "bandwidth_t0" : "roofline_t0", f.points, cf, f.memory_fraction, f.t0_s * 1e6,
                             f.rms_rel_err * 100, f.max_rel_err * 100, ho);
    }
  cJSON *coll = collectives_json(t, rep);
  if (cJSON_GetArraySize(coll) > 0) cJSON_AddItemToObject(cal, "collectives", coll);
  else cJSON_Delete(coll);
  cJSON *ov = overlap_json(t);
  if (cJSON_GetArraySize(ov) > 0) {
    cJSON_AddItemToObject(cal, "overlap", ov);
    g_string_append_printf(rep, "  overlap: %d DIL, CIL and fused/bulk ratios recorded (calibration.overlap)\n", cJSON_GetArraySize(ov));
  } else {
    cJSON_Delete(ov);
  }
  if (n_fits == 0 && !cJSON_GetObjectItemCaseSensitive(cal, "collectives")) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_FIT,
                "%s: nothing could be fitted: expected rows of gemm, gemv, attention, copy or lookup benches with "
                "times above the launch overhead, or collective sizes (docs/CALIBRATION.md)", what);
    mm_calib_result_clear(out);
    return FALSE;
  }
  return TRUE;
}

char *mm_calib_device_text(const char *base_path, const cJSON *base_root, const MmCalibResult *r,
                           const char *out_path, GError **error)
{
  g_autoptr(cJSON) root = cJSON_Duplicate(base_root, TRUE);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "calibration");
  cJSON_AddItemToObject(root, "calibration", cJSON_Duplicate(r->calibration, TRUE));
  if (r->launch_us > 0) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "launch_overhead_us");
    cJSON_AddNumberToObject(root, "launch_overhead_us", sig4(r->launch_us));
  }
  if (r->graph_launch_us > 0) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "graph_launch_overhead_us");
    cJSON_AddNumberToObject(root, "graph_launch_overhead_us", sig4(r->graph_launch_us));
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  if (cJSON_IsString(name) && !strstr(name->valuestring, "(calibrated)")) {
    g_autofree char *nn = g_strdup_printf("%s (calibrated)", name->valuestring);
    cJSON_ReplaceItemInObjectCaseSensitive(root, "name", cJSON_CreateString(nn));
  }
  g_autofree char *text = cJSON_Print(root);
  char *with_nl = g_strconcat(text, "\n", NULL);
  /* what is written must load: check before it lands */
  MmDevice check;
  if (!mm_device_parse(out_path, with_nl, strlen(with_nl), &check, error)) {
    g_prefix_error(error, "calibrating %s: ", base_path);
    g_free(with_nl);
    return NULL;
  }
  mm_device_clear(&check);
  return with_nl;
}
