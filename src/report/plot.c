/* plot: gnuplot figures of madmax's outputs: a run's timeline (its Chrome trace) and
 * the iteration-time breakdown of one or more run results. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <glib/gstdio.h>
#include <unistd.h>

#include "config/json.h" /* the loaders' JSON reader */
#include "report.h"

const char *const mm_plot_kind_names[] = {"timeline", "breakdown", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_plot_kind_names) == MM_PLOT_COUNT + 1);

/* What a box or a bar segment is, its legend and colour (Okabe-Ito, then greys):
 * the trace's categories (compute phases, collective kinds) and the breakdown's parts. */
typedef struct {
  const char *key, *title, *rgb;
} Series;

static const Series series[] = {
  {"fwd", "forward", "#0072B2"},
  {"bwd", "backward", "#56B4E9"},
  {"recompute", "recompute", "#009E73"},
  {"optimizer", "optimizer", "#000000"},
  {"all_reduce", "all-reduce", "#E69F00"},
  {"all_gather", "all-gather", "#D55E00"},
  {"reduce_scatter", "reduce-scatter", "#CC79A7"},
  {"all_to_all", "all-to-all", "#F0E442"},
  {"p2p", "pipeline send/recv", "#882255"},
  {"broadcast", "broadcast", "#44AA99"},
  {"permute", "permute", "#117733"},
  {"exposed", "exposed communication", "#D55E00"},
  {"idle", "idle (bubble, waiting)", "#DDDDDD"},
  {"other", "other", "#777777"},
};
#define N_SERIES G_N_ELEMENTS(series)

static guint series_of(const char *key)
{
  for (guint i = 0; i + 1 < N_SERIES; i++)
    if (g_strcmp0(series[i].key, key) == 0) return i;
  return N_SERIES - 1;
}

/* A gnuplot single-quoted string ('' stands for a quote). */
static void quoted(GString *g, const char *s)
{
  g_string_append_c(g, '\'');
  for (; *s; s++) {
    if (*s == '\'') g_string_append_c(g, '\'');
    if (*s == '\n' || *s == '\r') g_string_append_c(g, ' ');
    else g_string_append_c(g, *s);
  }
  g_string_append_c(g, '\'');
}

/* The terminal @out's extension asks for, sized @w x @h pixels (PDF at 100 px an inch). */
static gboolean terminal(GString *g, const char *out, int w, int h, GError **error)
{
  const char *dot = strrchr(out, '.');
  const char *slash = strrchr(out, '/');
  if (dot && slash && dot < slash) dot = NULL;
  if (dot && g_ascii_strcasecmp(dot, ".png") == 0) {
    g_string_append_printf(g, "set terminal pngcairo noenhanced font 'Sans,10' size %d,%d\n", w, h);
  } else if (dot && g_ascii_strcasecmp(dot, ".svg") == 0) {
    g_string_append_printf(g, "set terminal svg noenhanced font 'Sans,11' size %d,%d\n", w, h);
  } else if (dot && g_ascii_strcasecmp(dot, ".pdf") == 0) {
    g_string_append_printf(g, "set terminal pdfcairo noenhanced font 'Sans,7' size %.2fin,%.2fin\n", w / 100.0,
                           h / 100.0);
  } else {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: the figure's name must end in .png, .svg or .pdf",
                out);
    return FALSE;
  }
  return TRUE;
}

/* Seconds in a readable unit for a span of @span_s: the factor and its name. */
static double time_unit(double span_s, const char **name)
{
  if (span_s < 2e-3) return *name = "us", 1e6;
  if (span_s < 2.0) return *name = "ms", 1e3;
  return *name = "s", 1.0;
}

/* ---- timeline (a Chrome trace of madmax run --trace) ------------------------------- */

typedef struct {
  gint64 key; /* pid << 20 | tid */
  double sort;
  char *label;
} Row;

typedef struct {
  gint64 key;
  double t0, t1; /* us */
  guint series;
} Box;

static int box_cmp(const void *a, const void *b)
{
  const Box *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Back-to-back ops of one kind on one stream become one box (the figure shows them as one
 * anyway; thousands of hairline seams and megabytes of SVG less). */
static void merge_boxes(GArray *boxes, double span)
{
  if (boxes->len == 0) return;
  g_array_sort(boxes, box_cmp);
  Box *B = (Box *)boxes->data;
  guint w = 0;
  for (guint r = 1; r < boxes->len; r++) {
    if (B[r].key == B[w].key && B[r].series == B[w].series && B[r].t0 <= B[w].t1 + 1e-9 * span) {
      B[w].t1 = MAX(B[w].t1, B[r].t1);
    } else {
      B[++w] = B[r];
    }
  }
  g_array_set_size(boxes, w + 1);
}

static int row_cmp(const void *a, const void *b)
{
  const Row *x = a, *y = b;
  gint64 px = x->key >> 20, py = y->key >> 20;
  if (px != py) return px < py ? -1 : 1;
  if (x->sort != y->sort) return x->sort < y->sort ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* "device class 2: stage 1 (16 devices)" -> "stage 1"; "decode step, device class 0: stage 0
 * (8 devices)" -> "decode step, stage 0"; other names as they are. */
static char *process_label(const char *name)
{
  const char *dc = strstr(name, "device class ");
  const char *colon = dc ? strstr(dc, ": ") : NULL;
  if (!colon) return g_strdup(name);
  g_autofree char *rest = g_strdup(colon + 2);
  char *paren = strstr(rest, " (");
  if (paren && g_str_has_suffix(rest, ")")) *paren = '\0';
  return g_strdup_printf("%.*s%s", (int)(dc - name), name, rest);
}

/* A fault of a trace or result at JSON path @jpath: MM_REPORT_ERROR_INPUT, in the config
 * loaders' "FILE: PATH: message" layout. */
static void input_error(GError **error, const MmJsonCtx *ctx, const char *jpath, const char *fmt, ...)
  G_GNUC_PRINTF(4, 5);
static void input_error(GError **error, const MmJsonCtx *ctx, const char *jpath, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: %s: %s", ctx->file, jpath, msg);
}

/* A trace or result file, parsed. The reader is src/config's and raises MM_CONFIG_ERROR;
 * here the same message is MM_REPORT_ERROR: READ (missing, unreadable, not JSON) or INPUT
 * (not a JSON object). (transfer full) */
static cJSON *load_input(const char *path, GError **error)
{
  GError *cfg = NULL;
  cJSON *root = mm_json_load_file(path, &cfg);
  if (root) return root;
  g_assert(cfg->domain == MM_CONFIG_ERROR);
  const gboolean unreadable = cfg->code == MM_CONFIG_ERROR_IO || cfg->code == MM_CONFIG_ERROR_PARSE;
  g_set_error_literal(error, MM_REPORT_ERROR, unreadable ? MM_REPORT_ERROR_READ : MM_REPORT_ERROR_INPUT, cfg->message);
  g_error_free(cfg);
  return NULL;
}

static gboolean number_at(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double *out,
                          GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (!v) {
    input_error(error, ctx, path, "missing; expected a number");
    return FALSE;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
    g_autofree char *d = mm_json_describe_value(v);
    input_error(error, ctx, path, "expected a number, got %s", d);
    return FALSE;
  }
  *out = v->valuedouble;
  return TRUE;
}

static gboolean timeline(GString *g, const char *path, const char *term_out, const char *out, const MmPlotOptions *o,
                         GError **error)
{
  g_autoptr(cJSON) root = load_input(path, error);
  if (!root) return FALSE;
  MmJsonCtx ctx = {path};
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  if (!cJSON_IsArray(ev)) {
    input_error(error, &ctx, "$.traceEvents", "expected an array of trace events (a trace written by madmax run --trace)");
    return FALSE;
  }
  g_autoptr(GHashTable) pname = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GArray) boxes = g_array_new(FALSE, FALSE, sizeof(Box));
  g_autoptr(GHashTable) tname = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GHashTable) tsort = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  const double from_us = o->from_s * 1e6, to_us = o->to_s > o->from_s ? o->to_s * 1e6 : INFINITY;
  double lo = INFINITY, hi = -INFINITY;
  int i = 0;
  for (const cJSON *e = ev->child; e; e = e->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.traceEvents[%d]", i);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    if (!cJSON_IsObject(e) || !cJSON_IsString(ph)) {
      input_error(error, &ctx, jp, "expected an event object with a string \"ph\"");
      return FALSE;
    }
    double pid = 0, tid = 0;
    g_autoptr(GError) bad = NULL; /* a metadata event's tid */
    if (!number_at(&ctx, e, "pid", jp, &pid, error)) return FALSE;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (strcmp(ph->valuestring, "M") == 0) {
      /* metadata: process and thread names, thread order */
      const char *what = cJSON_IsString(nm) ? nm->valuestring : "";
      const cJSON *an = cJSON_GetObjectItemCaseSensitive(args, "name");
      const cJSON *si = cJSON_GetObjectItemCaseSensitive(args, "sort_index");
      if (strcmp(what, "process_name") == 0 && cJSON_IsString(an)) {
        g_hash_table_replace(pname, g_memdup2(&(gint64){(gint64)pid}, sizeof(gint64)), process_label(an->valuestring));
      } else if (strcmp(what, "thread_name") == 0 && cJSON_IsString(an) && number_at(&ctx, e, "tid", jp, &tid, &bad)) {
        gint64 k = (gint64)pid << 20 | (gint64)tid;
        g_hash_table_replace(tname, g_memdup2(&k, sizeof k), g_strdup(an->valuestring));
      } else if (strcmp(what, "thread_sort_index") == 0 && cJSON_IsNumber(si) &&
                 number_at(&ctx, e, "tid", jp, &tid, &bad)) {
        gint64 k = (gint64)pid << 20 | (gint64)tid;
        g_hash_table_replace(tsort, g_memdup2(&k, sizeof k), g_memdup2(&si->valuedouble, sizeof(double)));
      }
      if (bad) {
        g_propagate_error(error, g_steal_pointer(&bad));
        return FALSE;
      }
      continue;
    }
    if (strcmp(ph->valuestring, "X") != 0) continue; /* other phases are not drawn */
    double ts = 0, dur = 0;
    if (!number_at(&ctx, e, "tid", jp, &tid, error) || !number_at(&ctx, e, "ts", jp, &ts, error) ||
        !number_at(&ctx, e, "dur", jp, &dur, error))
      return FALSE;
    if (pid < 0 || tid < 0 || tid >= (1 << 20) || dur < 0) {
      input_error(error, &ctx, jp, "expected pid, tid >= 0 and dur >= 0");
      return FALSE;
    }
    double t0 = MAX(ts, from_us), t1 = MIN(ts + dur, to_us);
    if (dur <= 0 || t1 <= t0) continue;
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
    Box b = {(gint64)pid << 20 | (gint64)tid, t0, t1, series_of(cJSON_IsString(cat) ? cat->valuestring : "")};
    g_array_append_val(boxes, b);
    lo = MIN(lo, t0);
    hi = MAX(hi, t1);
  }
  if (boxes->len == 0) {
    input_error(error, &ctx, "$.traceEvents", "%s",
                o->to_s > o->from_s ? "no op falls in the window" : "no complete (\"ph\": \"X\") events to draw");
    return FALSE;
  }
  merge_boxes(boxes, hi - lo); /* sorted by stream key: one row per distinct key */
  g_autoptr(GArray) row_arr = g_array_new(FALSE, TRUE, sizeof(Row));
  for (guint k = 0; k < boxes->len; k++) {
    const gint64 key = g_array_index(boxes, Box, k).key;
    if (k > 0 && key == g_array_index(boxes, Box, k - 1).key) continue;
    const double *s = g_hash_table_lookup(tsort, &key);
    Row r = {key, s ? *s : (double)(key & ((1 << 20) - 1)), NULL};
    g_array_append_val(row_arr, r);
  }
  /* rows: device classes in order, their streams in the trace's order */
  Row *R = (Row *)row_arr->data;
  qsort(R, row_arr->len, sizeof(Row), row_cmp);
  /* one class: the stream names alone */
  gboolean one_process = TRUE;
  for (guint r = 1; r < row_arr->len; r++) one_process &= (R[r].key >> 20) == (R[0].key >> 20);
  g_autoptr(GHashTable) row_index = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint r = 0; r < row_arr->len; r++) {
    gint64 p = R[r].key >> 20;
    const char *pn = g_hash_table_lookup(pname, &p);
    const char *tn = g_hash_table_lookup(tname, &R[r].key);
    g_autofree char *tdef = g_strdup_printf("thread %" G_GINT64_FORMAT, R[r].key & ((1 << 20) - 1));
    g_autofree char *pdef = g_strdup_printf("process %" G_GINT64_FORMAT, p);
    R[r].label = one_process ? g_strdup(tn ? tn : tdef) : g_strdup_printf("%s  %s", pn ? pn : pdef, tn ? tn : tdef);
    g_hash_table_insert(row_index, &R[r].key, GUINT_TO_POINTER(r));
  }

  const char *unit;
  const double f = time_unit((hi - lo) * 1e-6, &unit) * 1e-6; /* us -> unit */
  const int nrows = (int)row_arr->len;
  gboolean ok = terminal(g, term_out, 1400, MIN(4000, 160 + 26 * nrows), error);
  if (ok) {
    g_string_append(g, "set output ");
    quoted(g, out);
    g_string_append(g, "\nset title ");
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *title = o->title ? g_strdup(o->title) : g_strdup_printf("%s: per device class and stream", base);
    quoted(g, title);
    g_string_append_printf(g, "\nset xlabel 'time (%s)'\nset xrange [%.9g:%.9g]\n", unit, lo * f, hi * f);
    g_string_append_printf(g, "set yrange [%d.5:-0.5]\nset ytics scale 0 (", nrows - 1);
    for (int r = 0; r < nrows; r++) {
      if (r) g_string_append(g, ", ");
      quoted(g, R[r].label);
      g_string_append_printf(g, " %d", r);
    }
    g_string_append(g, ")\nset grid xtics\nset key outside right top vertical\nset style fill solid 1.0 noborder\n");
    /* one data block per series present, in legend order */
    gboolean used[N_SERIES] = {FALSE};
    for (guint k = 0; k < boxes->len; k++) used[g_array_index(boxes, Box, k).series] = TRUE;
    for (guint s = 0; s < N_SERIES; s++) {
      if (!used[s]) continue;
      g_string_append_printf(g, "$%s << EOD\n", series[s].key);
      for (guint k = 0; k < boxes->len; k++) {
        const Box *b = &g_array_index(boxes, Box, k);
        if (b->series != s) continue;
        guint r = GPOINTER_TO_UINT(g_hash_table_lookup(row_index, &b->key));
        g_string_append_printf(g, "%.9g %u %.9g %.9g %.2f %.2f\n", 0.5 * (b->t0 + b->t1) * f, r, b->t0 * f, b->t1 * f,
                               r - 0.4, r + 0.4);
      }
      g_string_append(g, "EOD\n");
    }
    g_string_append(g, "plot ");
    gboolean first = TRUE;
    for (guint s = 0; s < N_SERIES; s++) {
      if (!used[s]) continue;
      g_string_append_printf(g, "%s$%s using 1:2:3:4:5:6 with boxxyerror lc rgb '%s' title '%s'", first ? "" : ", \\\n  ",
                             series[s].key, series[s].rgb, series[s].title);
      first = FALSE;
    }
    g_string_append(g, "\n");
  }
  for (guint r = 0; r < row_arr->len; r++) g_free(R[r].label);
  return ok;
}

/* ---- breakdown (madmax run --json results) ---------------------------------------- */

/* The compute stream's phases (embedding lookups are inside them), then what is not compute. */
enum { B_FWD, B_BWD, B_RECOMPUTE, B_OPT, B_EXPOSED, B_IDLE, B_N };
static const char *const bar_series[B_N] = {"fwd", "bwd", "recompute", "optimizer", "exposed", "idle"};

typedef struct {
  char *label;
  double part[B_N];
  double total;
} Bar;

static void bar_clear(gpointer p) { g_free(((Bar *)p)->label); }

static const cJSON *object_at(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (cJSON_IsObject(v)) return v;
  g_autofree char *got = v ? mm_json_describe_value(v) : NULL;
  if (!v) input_error(error, ctx, path, "missing; expected an object");
  else input_error(error, ctx, path, "expected an object, got %s", got);
  return NULL;
}

/* One bar from a run document (or its decode_step) at @jp. */
static gboolean bar_from(const MmJsonCtx *ctx, const cJSON *doc, const char *jp, char *label, GArray *bars,
                         GError **error)
{
  Bar b = {label, {0}, 0};
  g_autofree char *sp = g_strdup_printf("%s.serialized", jp);
  g_autofree char *pp = g_strdup_printf("%s.serialized.compute_by_phase", jp);
  const cJSON *ser = NULL, *ph = NULL;
  gboolean ok = number_at(ctx, doc, "iteration_time_s", jp, &b.total, error) &&
                (ser = object_at(ctx, doc, "serialized", jp, error)) &&
                (ph = object_at(ctx, ser, "compute_by_phase", sp, error)) &&
                number_at(ctx, ph, "fwd", pp, &b.part[B_FWD], error) &&
                number_at(ctx, ph, "bwd", pp, &b.part[B_BWD], error) &&
                number_at(ctx, ph, "recompute", pp, &b.part[B_RECOMPUTE], error) &&
                number_at(ctx, ph, "optimizer", pp, &b.part[B_OPT], error) &&
                number_at(ctx, doc, "exposed_comm_s", jp, &b.part[B_EXPOSED], error) &&
                number_at(ctx, doc, "idle_s", jp, &b.part[B_IDLE], error);
  if (!ok) {
    g_free(label);
    return FALSE;
  }
  g_array_append_val(bars, b);
  return TRUE;
}

static gboolean bars_from_file(const char *path, gboolean from_dir, GArray *bars, GError **error)
{
  g_autoptr(cJSON) doc = load_input(path, error);
  if (!doc) return FALSE;
  if (from_dir && !cJSON_GetObjectItemCaseSensitive(doc, "iteration_time_s")) return TRUE; /* not a run result */
  MmJsonCtx ctx = {path};
  g_autofree char *base = g_path_get_basename(path);
  if (g_str_has_suffix(base, ".json")) base[strlen(base) - 5] = '\0';
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(doc, "decode_step");
  if (!bar_from(&ctx, doc, "$", dec ? g_strdup_printf("%s prefill", base) : g_strdup(base), bars, error)) return FALSE;
  return !dec || bar_from(&ctx, dec, "$.decode_step", g_strdup_printf("%s decode step", base), bars, error);
}

static gint path_cmp(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static gboolean breakdown(GString *g, const char *const *inputs, guint n, const char *term_out, const char *out,
                          const MmPlotOptions *o, GError **error)
{
  g_autoptr(GArray) bars = g_array_new(FALSE, TRUE, sizeof(Bar));
  g_array_set_clear_func(bars, bar_clear);
  for (guint i = 0; i < n; i++) {
    if (g_file_test(inputs[i], G_FILE_TEST_IS_DIR)) {
      g_autoptr(GError) derr = NULL;
      g_autoptr(GDir) dir = g_dir_open(inputs[i], 0, &derr);
      if (!dir) {
        g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ, "%s: cannot read: %s", inputs[i], derr->message);
        return FALSE;
      }
      g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
      for (const char *nm; (nm = g_dir_read_name(dir));)
        if (g_str_has_suffix(nm, ".json")) g_ptr_array_add(names, g_build_filename(inputs[i], nm, NULL));
      g_ptr_array_sort(names, path_cmp);
      for (guint k = 0; k < names->len; k++)
        if (!bars_from_file(names->pdata[k], TRUE, bars, error)) return FALSE;
    } else if (!bars_from_file(inputs[i], FALSE, bars, error)) {
      return FALSE;
    }
  }
  if (bars->len == 0) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT,
                "%s: no run results (JSON written by madmax run --json) to plot", inputs[0]);
    return FALSE;
  }
  double top = 0;
  for (guint i = 0; i < bars->len; i++) top = MAX(top, g_array_index(bars, Bar, i).total);
  const char *unit;
  const double f = time_unit(top, &unit);
  if (!terminal(g, term_out, MAX(900, MIN(3000, 300 + 110 * (int)bars->len)), 700, error)) return FALSE;
  g_string_append(g, "set output ");
  quoted(g, out);
  g_string_append(g, "\nset title ");
  quoted(g, o->title ? o->title : "Where the iteration goes (slowest device class)");
  g_string_append_printf(g, "\nset ylabel 'time per iteration (%s)'\nset yrange [0:*]\n", unit);
  g_string_append(g, "set style data histograms\nset style histogram rowstacked\nset boxwidth 0.7\n"
                     "set style fill solid 1.0 border rgb '#444444'\nset grid ytics\nset key outside right top\n"
                     "set xtics rotate by 30 right nomirror scale 0\n");
  /* room for the longest label, slanted; the first may reach left of the axis */
  guint longest = 0;
  for (guint i = 0; i < bars->len; i++) longest = MAX(longest, (guint)strlen(g_array_index(bars, Bar, i).label));
  g_string_append_printf(g, "set bmargin %u\nset lmargin %u\n", 3 + longest * 3 / 10, MAX(10u, MIN(40u, longest * 9 / 20)));
  gboolean used[B_N] = {FALSE};
  for (guint i = 0; i < bars->len; i++)
    for (int s = 0; s < B_N; s++) used[s] |= g_array_index(bars, Bar, i).part[s] > 0;
  g_string_append(g, "$bars << EOD\n");
  for (guint i = 0; i < bars->len; i++) {
    const Bar *b = &g_array_index(bars, Bar, i);
    g_autofree char *lab = g_strdup(b->label);
    g_strdelimit(lab, "\"", '\'');
    g_string_append_printf(g, "\"%s\"", lab);
    for (int s = 0; s < B_N; s++) g_string_append_printf(g, " %.9g", b->part[s] * f);
    g_string_append_printf(g, " %.9g\n", b->total * f);
  }
  g_string_append(g, "EOD\nplot ");
  gboolean first = TRUE;
  for (int s = 0; s < B_N; s++) {
    if (!used[s]) continue;
    const Series *se = &series[series_of(bar_series[s])];
    g_string_append_printf(g, "%s$bars using %d%s lc rgb '%s' title '%s'", first ? "" : ", \\\n  ", s + 2,
                           first ? ":xtic(1)" : "", se->rgb, se->title);
    first = FALSE;
  }
  /* the iteration time above each bar */
  g_string_append_printf(g, ", \\\n  $bars using 0:%d:(sprintf('%%.3g', $%d)) with labels offset 0,0.7 notitle\n", B_N + 2,
                         B_N + 2);
  return TRUE;
}

/* ---- script and rendering ------------------------------------------------------- */

static char *build(MmPlotKind kind, const char *const *inputs, guint n, const char *term_out, const char *out,
                   const MmPlotOptions *o, GError **error)
{
  g_return_val_if_fail(n > 0, NULL);
  MmPlotOptions none = {0};
  if (!o) o = &none;
  GString *g = g_string_new("# gnuplot script written by madmax plot; data inline. Edit and rerun: gnuplot FILE\n");
  gboolean ok;
  if (kind == MM_PLOT_TIMELINE) {
    if (n != 1) {
      g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "a timeline draws one trace, got %u inputs", n);
      ok = FALSE;
    } else {
      ok = timeline(g, inputs[0], term_out, out, o, error);
    }
  } else {
    ok = breakdown(g, inputs, n, term_out, out, o, error);
  }
  if (!ok) {
    g_string_free(g, TRUE);
    return NULL;
  }
  return g_string_free(g, FALSE);
}

char *mm_plot_script(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                     GError **error)
{
  return build(kind, inputs, n, out, out, o, error);
}

gboolean mm_plot_render(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                        GError **error)
{
  /* gnuplot draws into a temporary file beside @out, renamed once it succeeded */
  g_autofree char *dir = g_path_get_dirname(out);
  g_autofree char *base = g_path_get_basename(out);
  g_autofree char *tmpl = g_strdup_printf("%s/.%s.%d.tmp", dir, base, (int)getpid());
  g_autofree char *script = build(kind, inputs, n, out, tmpl, o, error); /* inputs checked first */
  if (!script) return FALSE;
  int fd = g_open(tmpl, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    int err = errno;
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s: cannot write: %s", out, g_strerror(err));
    return FALSE;
  }
  close(fd);
  g_autofree char *err_text = NULL;
  int status = 0;
  g_autoptr(GError) spawn = NULL;
  g_autofree char *script_path = NULL;
  int sfd = g_file_open_tmp("madmax-plot-XXXXXX.gp", &script_path, &spawn);
  gboolean ok = sfd >= 0;
  if (ok) {
    close(sfd);
    ok = g_file_set_contents(script_path, script, -1, &spawn);
  }
  if (ok) {
    char *args[] = {(char *)"gnuplot", script_path, NULL};
    ok = g_spawn_sync(NULL, args, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err_text,
                      &status, &spawn);
  }
  if (script_path) g_unlink(script_path);
  if (!ok) {
    g_unlink(tmpl);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_TOOL,
                "cannot run gnuplot (%s); install it (Debian: gnuplot-nox) or write the script with --script",
                spawn->message);
    return FALSE;
  }
  GStatBuf st;
  if (!g_spawn_check_wait_status(status, NULL) || g_stat(tmpl, &st) != 0 || st.st_size == 0) {
    g_unlink(tmpl);
    g_strstrip(err_text);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_TOOL, "gnuplot failed on %s: %s", out,
                err_text && *err_text ? err_text : "no output");
    return FALSE;
  }
  if (g_rename(tmpl, out) != 0) {
    int err = errno;
    g_unlink(tmpl);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s: cannot write: %s", out, g_strerror(err));
    return FALSE;
  }
  return TRUE;
}
