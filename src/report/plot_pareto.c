/* plot_pareto: a sweep's simulated points (madmax sweep --out DIR), memory per device against
 * samples per second: the memory-throughput Pareto front of the summary as a step line, the
 * device's memory capacity, points out of memory marked apart, the FSDP baseline and the best
 * point labelled. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

#define GIB 1073741824.0
#define LOG_RATIO 50.0 /* memory spanning more than this factor: a log axis */

static gint by_memory(gconstpointer a, gconstpointer b, gpointer user)
{
  const MmPlotSweep *sw = user;
  const MmPlotPoint *x = &g_array_index(sw->pts, MmPlotPoint, *(const guint *)a);
  const MmPlotPoint *y = &g_array_index(sw->pts, MmPlotPoint, *(const guint *)b);
  if (x->mem_bytes != y->mem_bytes) return x->mem_bytes < y->mem_bytes ? -1 : 1;
  if (x->sps != y->sps) return x->sps < y->sps ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* A callout's text: "FSDP baseline", "best, 1.76x: fsdp8>ddp* \u00b7 mp(table)*". (transfer full) */
static char *callout(const MmPlotSweep *sw, gboolean base, gboolean best)
{
  GString *g = g_string_new(NULL);
  if (best) g_string_append(g, base ? "best and FSDP baseline" : "best");
  else g_string_append(g, "FSDP baseline");
  if (best && !base && sw->base_sps > 0) {
    g_autofree char *x = mm__plot_speedup(g_array_index(sw->pts, MmPlotPoint, sw->best).sps / sw->base_sps);
    g_string_append_printf(g, ", %s", x);
  }
  if (base && !sw->base_fits) g_string_append(g, " (OOM)");
  if (best) {
    g_autofree char *st = mm__plot_sweep_strategies(sw, (guint)sw->best, FALSE);
    g_string_append_printf(g, ": %s", st);
  }
  return g_string_free(g, FALSE);
}

gboolean mm__plot_pareto(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                         const MmPlotOptions *o, GError **error)
{
  g_assert(n == 1);
  MmPlotSweep sw;
  if (!mm__plot_sweep_read(inputs[0], &sw, error)) {
    mm__plot_sweep_clear(&sw);
    return FALSE;
  }
  /* what is drawn: the simulated points, and a baseline simulated for reference */
  double lo = INFINITY, hi = 0, top = 0;
  gboolean legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  guint drawn = 0;
  for (guint i = 0; i < sw.pts->len; i++) {
    const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, i);
    const double sps = (int)i == sw.base ? sw.base_sps : p->sps;
    if (!isfinite(sps)) continue;
    drawn++;
    lo = MIN(lo, p->mem_bytes);
    hi = MAX(hi, p->mem_bytes);
    top = MAX(top, sps);
    legend[mm__plot_series_key(p->status == MM_PLOT_POINT_OK ? "pt_fits" : "pt_oom")] = TRUE;
  }
  if (drawn == 0) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT,
                "%s: no point was simulated (every one is out of memory); rerun the sweep with --include-oom",
                sw.csv);
    mm__plot_sweep_clear(&sw);
    return FALSE;
  }
  legend[mm__plot_series_key("pt_front")] = sw.front->len > 0;
  const gboolean cap = isfinite(sw.cap_bytes);
  legend[mm__plot_series_key("pt_capacity")] = cap;
  if (cap) lo = MIN(lo, sw.cap_bytes), hi = MAX(hi, sw.cap_bytes);

  const double line_in = mm__plot_line_in(d);
  const double left_in = 0.1 + 1.3 * line_in + mm__plot_text_in(d, 6);
  mm__plot_layout(d, left_in, legend, 1, CLAMP(0.42 * d->w_in, 1.0, 3.2));
  const guint pruned = sw.n[MM_PLOT_POINT_OOM] - (sw.base >= 0 && !isfinite(g_array_index(sw.pts, MmPlotPoint,
                                                                                       sw.base).sps));
  if (pruned) mm__plot_reserve(d, 0, line_in); /* the note on the points not drawn */
  g_autofree char *def_title = sw.title ? g_strdup(sw.title) : g_strdup("Memory and throughput of the sweep's points");
  mm__plot_begin(d, out_name, o->title ? o->title : def_title);
  const char *unit;
  const double f = mm__plot_count_unit(top, &unit);
  const gboolean log_x = lo > 0 && hi / lo > LOG_RATIO;

  const guint pts = mm__plot_block(d, "points: memory per device (GiB), samples/s (the y axis' unit), class (0 "
                                      "fits, 1 out of memory)");
  for (guint i = 0; i < sw.pts->len; i++) {
    const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, i);
    const double sps = (int)i == sw.base ? sw.base_sps : p->sps;
    if (isfinite(sps))
      g_string_append_printf(d->data, "%.9g %.9g %d\n", p->mem_bytes / GIB, sps * f, p->status != MM_PLOT_POINT_OK);
  }
  guint front = 0;
  if (sw.front->len) {
    front = mm__plot_block(d, "front: memory per device (GiB), samples/s, by memory");
    g_autoptr(GArray) by = g_array_copy(sw.front);
    g_array_sort_with_data(by, by_memory, &sw);
    for (guint k = 0; k < by->len; k++) {
      const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, g_array_index(by, guint, k));
      g_string_append_printf(d->data, "%.9g %.9g\n", p->mem_bytes / GIB, p->sps * f);
    }
  }
  /* the callouts, a block each (gnuplot 5.4 fails on a label plot without a point): left of
   * their point in the right half of the plot, else right of it */
  const double plot_in = (d->rm - d->lm) * d->w_in;
  const double xlo = log_x ? lo / GIB / 1.5 : 0, xhi = hi > 0 ? (log_x ? hi * 1.5 : hi * 1.08) / GIB : 1.0;
  guint calls[2] = {0};
  gboolean left[2] = {FALSE};
  const int who[2] = {sw.best, sw.base != sw.best ? sw.base : -1};
  for (guint c = 0; c < 2; c++) {
    if (who[c] < 0) continue;
    calls[c] = mm__plot_block(d, c == 0 ? "callout of the best point: memory (GiB), samples/s, text"
                                        : "callout of the FSDP baseline: memory (GiB), samples/s, text");
    const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, who[c]);
    const double x = p->mem_bytes / GIB;
    left[c] = (log_x ? log(x / xlo) / log(xhi / xlo) : x / xhi) > 0.5;
    g_autofree char *text = callout(&sw, who[c] == sw.base, who[c] == sw.best);
    g_string_append_printf(d->data, "%.9g %.9g ", x, (who[c] == sw.base ? sw.base_sps : p->sps) * f);
    mm__plot_field(d->data, text, (guint)MAX(8.0, mm__plot_chars(d, 0.45 * plot_in)));
    g_string_append_c(d->data, '\n');
  }

  GString *g = d->script;
  g_string_append(g, "set xlabel 'memory per device (GiB)'\n");
  g_string_append_printf(g, "set ylabel 'samples/s%s'\nset yrange [0:%.9g]\nset ytics out nomirror\n", unit,
                         top > 0 ? top * f * 1.15 : 1.0);
  g_string_append(g, "set grid xtics ytics back lt 1 lc rgb '#E8E8E8' lw 0.5\n");
  if (log_x) {
    g_string_append_printf(g, "set logscale x\nset xrange [%.9g:%.9g]\n", xlo, xhi);
  } else {
    g_string_append_printf(g, "set xrange [0:%.9g]\nset xtics %.9g\n", xhi, mm__plot_tic_step(d, xhi, plot_in));
  }
  const MmPlotSeries *s_fit = &mm__plot_series[mm__plot_series_key("pt_fits")];
  const MmPlotSeries *s_oom = &mm__plot_series[mm__plot_series_key("pt_oom")];
  const MmPlotSeries *s_front = &mm__plot_series[mm__plot_series_key("pt_front")];
  const MmPlotSeries *s_cap = &mm__plot_series[mm__plot_series_key("pt_capacity")];
  if (cap) {
    g_string_append_printf(g, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead back lc rgb '%s' lw 1 dt 2\n",
                           sw.cap_bytes / GIB, sw.cap_bytes / GIB, s_cap->rgb);
    g_string_append_printf(g, "set label 1000 '%.3g GiB' at %.9g, graph 1 offset 0.4, -0.8 left tc rgb '%s'\n",
                           sw.cap_bytes / GIB, sw.cap_bytes / GIB, s_cap->rgb);
  }
  if (pruned)
    g_string_append_printf(g, "set label 1001 '%u %s out of memory, not simulated' at screen %.4f, screen %.4f "
                              "right tc rgb '#555555'\n",
                           pruned, pruned == 1 ? "point" : "points", d->rm, (0.08 + 0.5 * line_in) / d->h_in);
  g_string_append(g, "plot ");
  const char *sep = "";
  if (sw.front->len) {
    g_string_append_printf(g, "data index %u using 1:2 with steps lc rgb '%s' lw 2 notitle", front, s_front->rgb);
    sep = ", \\\n  ";
  }
  /* a clause per class drawn (gnuplot 5.4 fails on some plots without a point) */
  for (int cls = 1; cls >= 0; cls--) {
    const MmPlotSeries *se = cls ? s_oom : s_fit;
    if (!legend[se - mm__plot_series]) continue;
    g_string_append_printf(g, "%sdata index %u using 1:($3 == %d ? $2 : NaN) with points pt %d ps %.2f lc rgb '%s' "
                              "notitle",
                           sep, pts, cls, se->pt, MM_PLOT_POINT_SIZE, se->rgb);
    sep = ", \\\n  ";
  }
  /* a ring round each labelled point, its text beside it */
  for (guint c = 0; c < 2; c++) {
    if (who[c] < 0) continue;
    g_string_append_printf(g, ", \\\n  data index %u using 1:2 with points pt 6 ps %.2f lc rgb '#000000' notitle",
                           calls[c], 2.2 * MM_PLOT_POINT_SIZE);
    g_string_append_printf(g, ", \\\n  data index %u using 1:2:(strcol(3)) with labels %s offset %d, 0.6 notitle",
                           calls[c], left[c] ? "right" : "left", left[c] ? -1 : 1);
  }
  g_string_append_c(g, '\n');
  mm__plot_sweep_clear(&sw);
  return TRUE;
}
