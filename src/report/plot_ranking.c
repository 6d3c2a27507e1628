/* plot_ranking: a sweep's points ranked by samples per second (madmax sweep --out DIR): a
 * table of each point's rank, strategies and the dimensions that differ, and a horizontal
 * bar of its throughput labelled with its speedup over the FSDP baseline; the baseline always
 * shown and marked, points out of memory hatched (simulated) or listed without a bar. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

#define TOP_N 20      /* points ranked, without --size */
#define OOM_LISTED 3  /* pruned points out of memory listed, the ones nearest to fitting */
#define MAX_ROWS 60   /* with --size: as many as fit, at most this many */
#define ROW_LINES 1.25 /* a row's height, in lines of text */
#define GIB 1073741824.0
/* gnuplot label tags: the columns' headers from 1000, column c's cells from 2000 + c * 128 */
#define HEAD_TAG 1000
#define CELL_TAG 2000
#define CELL_TAGS 128
G_STATIC_ASSERT(MAX_ROWS < CELL_TAGS);

/* A row: a point's bar, or a pruned point listed without one. */
typedef enum { R_BAR, R_LISTED } RowKind;
typedef struct {
  RowKind kind;
  guint pt;   /* index into sw->pts */
  guint rank; /* among the points with a time, from 1; 0: none */
  double sps;
  gboolean rule; /* a rule above it: the rows before are not its neighbours in rank */
} Row;

static double sps_of(const MmPlotSweep *sw, guint i)
{
  /* a baseline pruned as out of memory was simulated for the summary, for reference */
  return (int)i == sw->base ? sw->base_sps : g_array_index(sw->pts, MmPlotPoint, i).sps;
}

static gint by_sps(gconstpointer a, gconstpointer b, gpointer user)
{
  const MmPlotSweep *sw = user;
  const guint x = *(const guint *)a, y = *(const guint *)b;
  const double sx = sps_of(sw, x), sy = sps_of(sw, y);
  if (sx != sy) return sx > sy ? -1 : 1;
  const gint64 ix = g_array_index(sw->pts, MmPlotPoint, x).id, iy = g_array_index(sw->pts, MmPlotPoint, y).id;
  return ix < iy ? -1 : ix > iy;
}

static gint by_memory(gconstpointer a, gconstpointer b, gpointer user)
{
  const MmPlotSweep *sw = user;
  const MmPlotPoint *x = &g_array_index(sw->pts, MmPlotPoint, *(const guint *)a);
  const MmPlotPoint *y = &g_array_index(sw->pts, MmPlotPoint, *(const guint *)b);
  if (x->mem_bytes != y->mem_bytes) return x->mem_bytes < y->mem_bytes ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether @sw's point @i has a time: simulated, or the baseline simulated for reference. */
static gboolean has_time(const MmPlotSweep *sw, guint i)
{
  return g_array_index(sw->pts, MmPlotPoint, i).status != MM_PLOT_POINT_OOM || (int)i == sw->base;
}

/* The rows: the @top best, then the best point that fits and the baseline when they are not
 * among them, then up to @listed pruned points, those nearest to fitting. */
static GArray *make_rows(const MmPlotSweep *sw, guint top, guint listed)
{
  g_autoptr(GArray) ranked = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GArray) pruned = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < sw->pts->len; i++) g_array_append_val(has_time(sw, i) ? ranked : pruned, i);
  g_array_sort_with_data(ranked, by_sps, (gpointer)sw);
  g_array_sort_with_data(pruned, by_memory, (gpointer)sw);
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(Row));
  gboolean shown_best = FALSE;
  guint last = 0;
  for (guint r = 0; r < ranked->len; r++) {
    const guint i = g_array_index(ranked, guint, r);
    const gboolean best = g_array_index(sw->pts, MmPlotPoint, i).status == MM_PLOT_POINT_OK && !shown_best;
    const gboolean base = (int)i == sw->base;
    if (r >= top && !(best || base)) continue;
    shown_best |= best;
    Row row = {R_BAR, i, r + 1, sps_of(sw, i), rows->len > 0 && r != last + 1};
    g_array_append_val(rows, row);
    last = r;
  }
  guint n_listed = 0;
  for (guint r = 0; r < pruned->len && n_listed < listed; r++) {
    const guint i = g_array_index(pruned, guint, r);
    Row row = {R_LISTED, i, 0, NAN, n_listed == 0 && rows->len > 0};
    g_array_append_val(rows, row);
    n_listed++;
  }
  return rows;
}

/* The table's columns: the rank, a column per varied kind, one per dimension that differs
 * between the rows. */
typedef struct {
  char *head;
  int kind; /* index into sw->kinds, or -1 - dim, or -1 - MM_PLOT_N_DIMS for the rank */
  guint width; /* characters */
} Col;

static void col_clear(gpointer p)
{
  g_free(((Col *)p)->head);
}

/* Row @r's text in column @c. (transfer full) */
static char *cell(const MmPlotSweep *sw, const Row *r, const Col *c)
{
  const MmPlotPoint *p = &g_array_index(sw->pts, MmPlotPoint, r->pt);
  if (c->kind >= 0) return g_strdup(p->strategy[c->kind]);
  const int dim = -1 - c->kind;
  if (dim == MM_PLOT_N_DIMS) return r->rank ? g_strdup_printf("%u", r->rank) : g_strdup("\u2013");
  return g_strdup(p->dim[dim]);
}

static GArray *make_cols(const MmPlotDoc *d, const MmPlotSweep *sw, const GArray *rows)
{
  GArray *cols = g_array_new(FALSE, TRUE, sizeof(Col));
  g_array_set_clear_func(cols, col_clear);
  Col rank = {g_strdup("#"), -1 - MM_PLOT_N_DIMS, 0};
  g_array_append_val(cols, rank);
  for (guint k = 0; k < sw->kinds->len; k++) {
    Col c = {mm__plot_clean(sw->kinds->pdata[k]), (int)k, 0};
    g_array_append_val(cols, c);
  }
  for (int k = 0; k < MM_PLOT_N_DIMS; k++) {
    const char *first = NULL;
    gboolean differ = FALSE;
    for (guint r = 0; r < rows->len; r++) {
      const char *v = g_array_index(sw->pts, MmPlotPoint, g_array_index(rows, Row, r).pt).dim[k];
      if (!first) first = v;
      differ |= g_strcmp0(first, v) != 0;
    }
    if (!differ) continue;
    Col c = {g_strdup(mm__plot_dims[k].head), -1 - k, 0};
    g_array_append_val(cols, c);
  }
  /* widths: the widest text, the widest cut down one character at a time until the table
   * takes at most about half the figure */
  guint total = 0;
  for (guint c = 0; c < cols->len; c++) {
    Col *col = &g_array_index(cols, Col, c);
    col->width = (guint)g_utf8_strlen(col->head, -1);
    for (guint r = 0; r < rows->len; r++) {
      g_autofree char *t = cell(sw, &g_array_index(rows, Row, r), col);
      g_autofree char *clean = mm__plot_clean(t);
      col->width = MAX(col->width, (guint)g_utf8_strlen(clean, -1));
    }
    col->width = MAX(col->width, 1u);
    total += col->width + 2;
  }
  const guint most = (guint)MAX(12.0, mm__plot_chars(d, (d->w_in < 5.0 ? 0.6 : 0.5) * d->w_in));
  while (total > most) {
    Col *wide = NULL;
    for (guint c = 0; c < cols->len; c++) {
      Col *col = &g_array_index(cols, Col, c);
      if (!wide || col->width > wide->width) wide = col;
    }
    if (wide->width <= 4) break;
    wide->width--;
    total--;
  }
  return cols;
}

gboolean mm__plot_ranking(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                          const MmPlotOptions *o, GError **error)
{
  g_assert(n == 1);
  MmPlotSweep sw;
  if (!mm__plot_sweep_read(inputs[0], &sw, error)) {
    mm__plot_sweep_clear(&sw);
    return FALSE;
  }
  const double line_in = mm__plot_line_in(d), row_in = ROW_LINES * line_in;
  /* with --size: the rows that fit under the title, the legend and the table's header */
  guint top = TOP_N, listed = OOM_LISTED;
  if (!d->auto_height) {
    gboolean all[64] = {FALSE}; /* the legend at its largest */
    all[mm__plot_series_key("rank_fits")] = all[mm__plot_series_key("rank_baseline")] =
      all[mm__plot_series_key("rank_oom")] = TRUE;
    mm__plot_layout(d, 1.0, all, 1, row_in);
    const guint fit = (guint)CLAMP(floor(((d->tm - d->bm) * d->h_in - 1.2 * line_in) / row_in), 3, MAX_ROWS);
    listed = MIN(listed, MAX(1u, fit / 5));
    top = MAX(fit - MIN(fit, 2 + listed), 1u); /* room for the best and the baseline */
  }
  g_autoptr(GArray) rows = make_rows(&sw, top, listed);
  g_autoptr(GArray) cols = make_cols(d, &sw, rows);
  const guint nr = rows->len, nc = cols->len;

  /* the legend: what the bars are */
  gboolean legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  double top_sps = 0;
  for (guint r = 0; r < nr; r++) {
    const Row *row = &g_array_index(rows, Row, r);
    if (row->kind != R_BAR) continue;
    const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, row->pt);
    legend[mm__plot_series_key("rank_fits")] |= p->status == MM_PLOT_POINT_OK && (int)row->pt != sw.base;
    legend[mm__plot_series_key("rank_baseline")] |= (int)row->pt == sw.base;
    legend[mm__plot_series_key("rank_oom")] |= p->status != MM_PLOT_POINT_OK;
    top_sps = MAX(top_sps, row->sps);
  }
  guint table_ch = 0;
  for (guint c = 0; c < nc; c++) table_ch += g_array_index(cols, Col, c).width + 2;
  const double left_in = 0.1 + mm__plot_text_in(d, table_ch);
  mm__plot_layout(d, left_in, legend, nr, row_in);
  /* the pruned points not listed: a note under the table */
  guint listed_n = 0;
  for (guint r = 0; r < nr; r++) listed_n += g_array_index(rows, Row, r).kind == R_LISTED;
  const guint more = sw.n[MM_PLOT_POINT_OOM] - listed_n -
                     (sw.base >= 0 && g_array_index(sw.pts, MmPlotPoint, sw.base).status == MM_PLOT_POINT_OOM);
  mm__plot_reserve(d, 1.2 * line_in, more ? line_in : 0); /* the table's header, the note */

  g_autofree char *def_title = sw.title ? g_strdup(sw.title) : g_strdup("Strategies ranked by throughput");
  mm__plot_begin(d, out_name, o->title ? o->title : def_title);
  const char *unit;
  const double f = mm__plot_count_unit(top_sps, &unit);

  /* the table: a header and a field per column for each row */
  const guint head = mm__plot_block(d, "columns: header");
  for (guint c = 0; c < nc; c++) {
    const Col *col = &g_array_index(cols, Col, c);
    mm__plot_field(d->data, col->head, col->width);
    g_string_append_c(d->data, '\n');
  }
  const guint table = mm__plot_block(d, "table: row, then the row's text in each column");
  for (guint r = 0; r < nr; r++) {
    g_string_append_printf(d->data, "%u ", r);
    for (guint c = 0; c < nc; c++) {
      const Col *col = &g_array_index(cols, Col, c);
      g_autofree char *t = cell(&sw, &g_array_index(rows, Row, r), col);
      mm__plot_field(d->data, t, col->width);
    }
    g_string_append_c(d->data, '\n');
  }
  /* the bars: class 0 fits, 1 the baseline, 2 out of memory, 3 the baseline out of memory */
  const guint bars = mm__plot_block(d, "bars: row, samples/s (the x axis' unit), class (0 fits, 1 the FSDP "
                                       "baseline, 2 out of memory, 3 the baseline out of memory)");
  guint value_ch = 4;
  gboolean drawn[4] = {FALSE};
  GString *values = g_string_new(NULL);
  for (guint r = 0; r < nr; r++) {
    const Row *row = &g_array_index(rows, Row, r);
    const MmPlotPoint *p = &g_array_index(sw.pts, MmPlotPoint, row->pt);
    GString *t = g_string_new(NULL);
    double at = 0;
    if (row->kind == R_BAR) {
      const gboolean base = (int)row->pt == sw.base, fits = p->status == MM_PLOT_POINT_OK;
      const int cls = (base ? 1 : 0) + (fits ? 0 : 2);
      g_string_append_printf(d->data, "%u %.9g %d\n", r, row->sps * f, cls);
      drawn[cls] = TRUE;
      if (sw.base_sps > 0) {
        g_autofree char *x = mm__plot_speedup(row->sps / sw.base_sps);
        g_string_append(t, x);
      } else { /* no baseline: the value */
        g_string_append_printf(t, "%.4g", row->sps * f);
      }
      if (!fits) g_string_append_printf(t, "%sOOM", t->len ? ", " : "");
      at = row->sps * f;
      value_ch = MAX(value_ch, (guint)g_utf8_strlen(t->str, -1) + 1);
    } else if (row->kind == R_LISTED) {
      /* no bar: not simulated */
      if (isfinite(sw.cap_bytes))
        g_string_append_printf(t, "OOM: %.3g of %.3g GiB", p->mem_bytes / GIB, sw.cap_bytes / GIB);
      else g_string_append_printf(t, "OOM: %.3g GiB", p->mem_bytes / GIB);
    }
    g_string_append_printf(values, "%u %.9g ", r, at);
    mm__plot_field(values, t->str, G_MAXUINT);
    g_string_append_c(values, '\n');
    g_string_free(t, TRUE);
  }
  const guint vals = mm__plot_block(d, "values: row, x, the text after the bar");
  g_string_append_len(d->data, values->str, (gssize)values->len);
  g_string_free(values, TRUE);
  guint note = 0;
  if (more) {
    note = mm__plot_block(d, "note: the pruned points not listed");
    g_autofree char *t = g_strdup_printf("%s%u %s%s out of memory (not simulated)", listed_n ? "and " : "", more,
                                         listed_n ? "more " : "", more == 1 ? "point" : "points");
    mm__plot_field(d->data, t, G_MAXUINT);
    g_string_append_c(d->data, '\n');
  }

  GString *g = d->script;
  /* room right of the longest bar for its label */
  const double plot_in = (d->rm - d->lm) * d->w_in;
  const double label_frac = MIN(0.6, mm__plot_text_in(d, value_ch + 1) / plot_in);
  const double xmax = top_sps > 0 ? top_sps * f / (1.0 - label_frac) : 1.0;
  g_string_append_printf(g, "set xlabel 'samples/s%s'\nset xrange [0:%.9g]\nset xtics %.9g\n"
                            "set grid xtics back lt 1 lc rgb '#E8E8E8' lw 0.5\n", unit,
                         xmax, mm__plot_tic_step(d, xmax, plot_in));
  g_string_append_printf(g, "set yrange [%u.5:-0.5]\nunset ytics\nset xtics out nomirror\n", nr - 1);
  /* the table, left of the plot: column c starts x[c] screen */
  mm__plot_read_labels(d, "head", head, nc, 1, 1);
  double x = 0.1 / d->w_in;
  for (guint c = 0; c < nc; c++) {
    const Col *col = &g_array_index(cols, Col, c);
    g_string_append_printf(g, "set label %u ''.head[%u] at screen %.4f, graph 1 offset 0, 0.7 left\n", HEAD_TAG + c,
                           c + 1, x);
    char arr[16];
    g_snprintf(arr, sizeof arr, "col%u", c);
    mm__plot_read_labels(d, arr, table, nr, 2 + c, 1);
    g_string_append_printf(g, "do for [i=1:%u] { set label (%u + i) ''.%s[i] at screen %.4f, first i-1 left }\n", nr,
                           CELL_TAG + c * CELL_TAGS, arr, x);
    x += mm__plot_text_in(d, col->width + 2) / d->w_in;
  }
  /* rules where the rows are not neighbours in rank */
  for (guint r = 0; r < nr; r++)
    if (g_array_index(rows, Row, r).rule)
      g_string_append_printf(g, "set arrow from screen %.4f, first %u.5 to graph 1, first %u.5 nohead back "
                                "lc rgb '#999999' lw 0.5 dt 2\n",
                             0.1 / d->w_in, r - 1, r - 1);
  /* the note, on the figure's last line */
  if (more) {
    mm__plot_read_labels(d, "note", note, 1, 1, 1);
    g_string_append_printf(g, "set label 999 ''.note[1] at screen %.4f, screen %.4f left tc rgb '#555555'\n",
                           0.1 / d->w_in, (0.08 + 0.5 * line_in) / d->h_in);
  }
  const MmPlotSeries *fits = &mm__plot_series[mm__plot_series_key("rank_fits")];
  const MmPlotSeries *base = &mm__plot_series[mm__plot_series_key("rank_baseline")];
  const MmPlotSeries *oom = &mm__plot_series[mm__plot_series_key("rank_oom")];
  /* a clause per class drawn (gnuplot 5.4 fails on some plots without a point) */
  g_string_append(g, "h = 0.34\nplot ");
  for (int cls = 0; cls < 4; cls++) {
    if (!drawn[cls]) continue;
    const MmPlotSeries *se = cls % 2 ? base : cls ? oom : fits;
    g_string_append_printf(g, "data index %u using ($3 == %d ? $2/2 : NaN):1:(0):2:($1-h):($1+h) with boxxyerror ",
                           bars, cls);
    if (cls < 2) g_string_append_printf(g, "fs solid 1.0 noborder lc rgb '%s' notitle, \\\n  ", se->rgb);
    else g_string_append_printf(g, "fs pattern 4 border lc rgb '#555555' fc rgb '%s' notitle, \\\n  ", se->rgb);
  }
  g_string_append_printf(g, "data index %u using 2:1:(strcol(3)) with labels left offset 0.5, 0 notitle", vals);
  g_string_append_c(g, '\n');
  mm__plot_sweep_clear(&sw);
  return TRUE;
}
