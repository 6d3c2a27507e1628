/* plot_systems: a sweep of several systems (madmax sweep -H A -H B ...): time against
 * A100-normalized GPU-hours (both per million samples) of each system's own time-vs-GPU-hours
 * front, a colour and point type per system, and the front across all systems connected. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

#define MAX_SYSTEMS 8       /* colours and point types that stay apart */
#define MAX_FRONT 100000    /* points of a front */
#define MAX_SPS 1e18
#define PER 1e6             /* the axes' unit of work: a million samples */
#define LOG_RATIO 10.0      /* times spanning more than this factor: a log axis */

/* A system's colour and point type (Okabe-Ito; filled and open marks alternate). */
static const struct {
  const char *rgb;
  int pt;
} marks[MAX_SYSTEMS] = {{"#0072B2", 7}, {"#D55E00", 5}, {"#009E73", 9}, {"#CC79A7", 11},
                        {"#E69F00", 13}, {"#56B4E9", 6}, {"#000000", 4}, {"#999999", 8}};

typedef struct {
  double gpuh, time_s; /* per million samples */
  guint system;
} Pt;

/* The points of a front array at @jp: each a simulated point with its system (one of @names,
 * or @own when >= 0) and its GPU-hours per sample. */
static gboolean read_front(const MmJsonCtx *ctx, const cJSON *a, const char *jp, GPtrArray *names, int own,
                           GArray *out, GError **error)
{
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > MAX_FRONT) {
    g_autofree char *got = a ? mm_json_describe_value(a) : g_strdup("nothing");
    mm__plot_input_error(error, ctx, jp, "expected an array of at most %d points, got %s", MAX_FRONT, got);
    return FALSE;
  }
  int i = 0;
  for (const cJSON *e = a->child; e; e = e->next, i++) {
    g_autofree char *ep = g_strdup_printf("%s[%d]", jp, i);
    if (!cJSON_IsObject(e)) {
      g_autofree char *got = mm_json_describe_value(e);
      mm__plot_input_error(error, ctx, ep, "expected an object, got %s", got);
      return FALSE;
    }
    double sps = 0, gh = 0;
    const char *sys = NULL;
    if (!mm__plot_number(ctx, e, "samples_per_s", ep, 1e-12, MAX_SPS, &sps, error) ||
        !mm__plot_number(ctx, e, "a100_gpu_hours_per_sample", ep, 0, 1e18, &gh, error) ||
        !mm__plot_opt_string(ctx, e, "system", ep, &sys, error))
      return FALSE;
    Pt p = {gh * PER, PER / sps, 0};
    if (own >= 0) {
      p.system = (guint)own;
    } else {
      guint k = 0;
      while (sys && k < names->len && strcmp(sys, names->pdata[k]) != 0) k++;
      if (!sys || k == names->len) {
        mm__plot_input_error(error, ctx, ep, "its system %s%s%s is not one of $.systems", sys ? "'" : "",
                             sys ? sys : "(none)", sys ? "'" : "");
        return FALSE;
      }
      p.system = k;
    }
    g_array_append_val(out, p);
  }
  return TRUE;
}

static gint by_gpuh(gconstpointer a, gconstpointer b)
{
  const Pt *x = a, *y = b;
  if (x->gpuh != y->gpuh) return x->gpuh < y->gpuh ? -1 : 1;
  return x->time_s < y->time_s ? -1 : x->time_s > y->time_s;
}

/* Seconds in hours, minutes or seconds for values up to @top_s. */
static double time_unit(double top_s, const char **name)
{
  if (top_s >= 2 * 86400.0) return *name = "days", 1.0 / 86400.0;
  if (top_s >= 2 * 3600.0) return *name = "hours", 1.0 / 3600.0;
  if (top_s >= 120.0) return *name = "minutes", 1.0 / 60.0;
  return mm__plot_time_unit(top_s, name);
}

gboolean mm__plot_systems(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                          const MmPlotOptions *o, GError **error)
{
  g_assert(n == 1);
  /* the summary of a sweep's folder, or the file itself */
  g_autofree char *path = g_file_test(inputs[0], G_FILE_TEST_IS_DIR) ? g_build_filename(inputs[0], "summary.json", NULL)
                                                                      : g_strdup(inputs[0]);
  g_autoptr(cJSON) root = mm__plot_load(path, error);
  if (!root) return FALSE;
  MmJsonCtx ctx = {path};
  const cJSON *systems = cJSON_GetObjectItemCaseSensitive(root, "systems");
  const int ns = cJSON_IsArray(systems) ? cJSON_GetArraySize(systems) : 0;
  if (ns < 2 || ns > MAX_SYSTEMS) {
    mm__plot_input_error(error, &ctx, "$.systems",
                         "expected an array of 2 to %d systems (a sweep of several: madmax sweep -H A -H B ...)",
                         MAX_SYSTEMS);
    return FALSE;
  }
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  g_autoptr(GArray) own = g_array_new(FALSE, FALSE, sizeof(Pt));
  int i = 0;
  for (const cJSON *e = systems->child; e; e = e->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.systems[%d]", i);
    const char *name = NULL;
    if (!cJSON_IsObject(e) || !mm__plot_opt_string(&ctx, e, "name", jp, &name, error) || !name) {
      if (error && !*error) mm__plot_input_error(error, &ctx, jp, "expected an object with the system's name");
      return FALSE;
    }
    g_ptr_array_add(names, (gpointer)name);
    g_autofree char *fp = g_strdup_printf("%s.pareto_time_gpu_hours", jp);
    if (!read_front(&ctx, cJSON_GetObjectItemCaseSensitive(e, "pareto_time_gpu_hours"), fp, names, i, own, error))
      return FALSE;
  }
  g_autoptr(GArray) front = g_array_new(FALSE, FALSE, sizeof(Pt));
  if (!read_front(&ctx, cJSON_GetObjectItemCaseSensitive(root, "pareto_time_gpu_hours"), "$.pareto_time_gpu_hours",
                  names, -1, front, error))
    return FALSE;
  if (own->len == 0) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: no point fits on any system; nothing to draw", path);
    return FALSE;
  }
  g_array_sort(front, by_gpuh);
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  for (guint k = 0; k < own->len; k++) {
    xmin = MIN(xmin, g_array_index(own, Pt, k).gpuh);
    xmax = MAX(xmax, g_array_index(own, Pt, k).gpuh);
    ymin = MIN(ymin, g_array_index(own, Pt, k).time_s);
    ymax = MAX(ymax, g_array_index(own, Pt, k).time_s);
  }
  const char *unit;
  const double f = time_unit(ymax, &unit);

  /* the layout: the front's entry in madmax's legend, a row per system under it */
  gboolean legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  legend[mm__plot_series_key("sys_front")] = front->len > 0;
  const double line_in = mm__plot_line_in(d);
  const double left_in = 0.1 + 1.3 * line_in + mm__plot_text_in(d, 7);
  mm__plot_layout(d, left_in, legend, 1, CLAMP(0.42 * d->w_in, 1.0, 3.2));
  const double legend_top_in = (1.0 - d->tm) * d->h_in; /* the title and madmax's legend */
  mm__plot_reserve(d, ns * line_in, 0);
  g_autofree char *def_title = NULL;
  if (!mm__plot_study_title(&ctx, root, "", &def_title, error)) return FALSE;
  mm__plot_begin(d, out_name, o->title ? o->title : def_title ? def_title : "Time and GPU-hours across systems");

  const guint name_b = mm__plot_block(d, "systems: index, name");
  const guint name_ch = (guint)MAX(8.0, mm__plot_chars(d, d->w_in - 0.6));
  for (guint k = 0; k < (guint)ns; k++) {
    g_string_append_printf(d->data, "%u ", k);
    mm__plot_field(d->data, names->pdata[k], name_ch);
    g_string_append_c(d->data, '\n');
  }
  guint blocks[MAX_SYSTEMS] = {0};
  for (guint k = 0; k < (guint)ns; k++) {
    g_autofree char *what = g_strdup_printf("system %u's front: A100 GPU-hours per 1M samples, time (the axis' unit)", k);
    blocks[k] = mm__plot_block(d, what);
    for (guint j = 0; j < own->len; j++) {
      const Pt *p = &g_array_index(own, Pt, j);
      if (p->system == k) g_string_append_printf(d->data, "%.9g %.9g\n", p->gpuh, p->time_s * f);
    }
  }
  guint fb = 0;
  if (front->len) {
    fb = mm__plot_block(d, "front across systems, by GPU-hours: GPU-hours, time, system");
    for (guint j = 0; j < front->len; j++) {
      const Pt *p = &g_array_index(front, Pt, j);
      g_string_append_printf(d->data, "%.9g %.9g %u\n", p->gpuh, p->time_s * f, p->system);
    }
  }

  GString *g = d->script;
  const double plot_w = (d->rm - d->lm) * d->w_in, plot_h = (d->tm - d->bm) * d->h_in;
  /* GPU-hours: the span of the points (they differ by tens of percent, not from zero); time:
   * a log axis when it spans more than LOG_RATIO (node counts double along a front) */
  const double pad = xmax > xmin ? 0.08 * (xmax - xmin) : 0.05 * MAX(xmax, 1e-9);
  const double xlo = MAX(0.0, xmin - pad), xhi = xmax + pad;
  g_string_append(g, "set xlabel 'A100-normalized GPU-hours per million samples'\n");
  g_string_append_printf(g, "set ylabel 'time per million samples (%s)'\n", unit);
  g_string_append_printf(g, "set xrange [%.9g:%.9g]\nset xtics %.9g out nomirror\n", xlo, xhi,
                         mm__plot_tic_step(d, xhi - xlo, plot_w));
  if (ymin > 0 && ymax / ymin > LOG_RATIO) {
    g_string_append_printf(g, "set logscale y\nset yrange [%.9g:%.9g]\nset ytics out nomirror\n", ymin * f / 1.5,
                           ymax * f * 1.5);
  } else {
    const double yhi = ymax > 0 ? ymax * f * 1.15 : 1.0;
    g_string_append_printf(g, "set yrange [0:%.9g]\nset ytics %.9g out nomirror\n", yhi,
                           mm__plot_tic_step(d, yhi, plot_h));
  }
  g_string_append(g, "set grid xtics ytics back lt 1 lc rgb '#E8E8E8' lw 0.5\n");
  /* a legend row per system under madmax's: its mark and its name (read from the data) */
  mm__plot_read_labels(d, "sys", name_b, (guint)ns, 2, 1);
  const double line = line_in / d->h_in;
  for (guint k = 0; k < (guint)ns; k++) {
    const double y = 1.0 - legend_top_in / d->h_in - (0.5 + k) * line;
    const double x = 0.5 - 0.5 * mm__plot_text_in(d, 40) / d->w_in;
    g_string_append_printf(g, "set label %u '' at screen %.4f, screen %.4f point pt %d ps %.2f lc rgb '%s'\n",
                           1100 + k, x, y, marks[k].pt, MM_PLOT_POINT_SIZE * 1.3, marks[k].rgb);
    g_string_append_printf(g, "set label %u sys[%u] at screen %.4f, screen %.4f left noenhanced\n", 1200 + k, k + 1,
                           x + mm__plot_text_in(d, 2) / d->w_in, y);
  }
  g_string_append(g, "plot ");
  const char *sep = "";
  if (front->len) {
    const MmPlotSeries *se = &mm__plot_series[mm__plot_series_key("sys_front")];
    g_string_append_printf(g, "data index %u using 1:2 with lines lc rgb '%s' lw 2 notitle, \\\n  "
                              "data index %u using 1:2 with points pt 6 ps %.2f lc rgb '#000000' notitle",
                           fb, se->rgb, fb, 2.2 * MM_PLOT_POINT_SIZE);
    sep = ", \\\n  ";
  }
  for (guint k = 0; k < (guint)ns; k++) {
    g_string_append_printf(g, "%sdata index %u using 1:2 with points pt %d ps %.2f lc rgb '%s' notitle", sep, blocks[k],
                           marks[k].pt, MM_PLOT_POINT_SIZE * 1.3, marks[k].rgb);
    sep = ", \\\n  ";
  }
  g_string_append_c(g, '\n');
  return TRUE;
}
