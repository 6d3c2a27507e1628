/* plot_timeline: the timeline of a trace written by `madmax run --trace`: a row per device
 * class and stream, and along each row spans coloured by what fills them. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

/* Limits on what a trace may hold; beyond them it is not one madmax wrote. */
#define MAX_PID 2147483647.0 /* device classes, or devices with --per-device */
#define MAX_TID 1048575.0    /* streams of a device */
#define MAX_US 1e15          /* timestamps and durations: about 31 years */
#define MIN_DUR_US 1e-6      /* one picosecond, the trace's resolution */

/* A figure row per stream, by the stream's thread name (madmax's stream names). The four
 * pipeline send/receive streams share one row: they are sparse and one colour. */
static const struct {
  const char *prefix, *label;
} stream_rows[] = {
  {"compute", "compute"},
  {"comm_intra", "comm intra"},
  {"comm_inter", "comm inter"},
  {"pp_", "p2p"},
};
#define OTHER_SLOT 16 /* other streams: their own row, slot 16 + tid */

typedef struct {
  gint64 pid, tid;
  double t0, t1; /* us */
  guint series;
  guint row;
} Ev;

typedef struct {
  gint64 key; /* pid << 21 | slot */
  gint64 pid;
  double sort; /* the smallest sort index of its streams */
  char *label;
  guint first; /* its index before sorting */
} Row;

typedef struct {
  char *name;
  double sort;
  gboolean has_sort;
} Stream;

static void stream_free(gpointer p)
{
  Stream *s = p;
  g_free(s->name);
  g_free(s);
}

static Stream *stream_get(GHashTable *streams, gint64 pid, gint64 tid)
{
  gint64 k = pid << 20 | tid;
  Stream *s = g_hash_table_lookup(streams, &k);
  if (!s) {
    s = g_new0(Stream, 1);
    g_hash_table_insert(streams, g_memdup2(&k, sizeof k), s);
  }
  return s;
}

static int row_cmp(const void *a, const void *b)
{
  const Row *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->sort != y->sort) return x->sort < y->sort ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

static int ev_cmp(const void *a, const void *b)
{
  const Ev *x = a, *y = b;
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* "device class 2: stage 1 (16 devices)" -> "stage 1"; "decode step, device class 0: stage 0
 * (8 devices)" -> "decode step, stage 0"; other names as they are. (transfer full) */
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

/* Everything drawn: events clipped to the window, streams' names and order, processes' names. */
typedef struct {
  GArray *evs;
  GHashTable *streams; /* pid << 20 | tid -> Stream */
  GHashTable *pname;   /* pid -> label */
  double lo, hi;       /* us */
  MmPlotRun run;
} Trace;

static gboolean read_trace(const MmJsonCtx *ctx, const cJSON *root, const MmPlotOptions *o, Trace *t,
                           GError **error)
{
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  if (!cJSON_IsArray(ev)) {
    mm__plot_input_error(error, ctx, "$.traceEvents",
                         "expected an array of trace events (a trace written by madmax run --trace)");
    return FALSE;
  }
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
  if (other && !cJSON_IsObject(other)) {
    g_autofree char *got = mm_json_describe_value(other);
    mm__plot_input_error(error, ctx, "$.otherData", "expected an object, got %s", got);
    return FALSE;
  }
  if (!mm__plot_run_names(ctx, other, "$.otherData", &t->run, error)) return FALSE;
  const double from_us = o->from_s * 1e6, to_us = o->to_s > o->from_s ? o->to_s * 1e6 : INFINITY;
  int i = 0;
  for (const cJSON *e = ev->child; e; e = e->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.traceEvents[%d]", i);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    if (!cJSON_IsObject(e) || !cJSON_IsString(ph)) {
      mm__plot_input_error(error, ctx, jp, "expected an event object with a string \"ph\"");
      return FALSE;
    }
    const gboolean meta = strcmp(ph->valuestring, "M") == 0, complete = strcmp(ph->valuestring, "X") == 0;
    if (!meta && !complete) continue; /* other phases are not drawn */
    gint64 pid = 0, tid = 0;
    if (!mm__plot_index(ctx, e, "pid", jp, MAX_PID, &pid, error)) return FALSE;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (meta) {
      /* process and thread names, thread order */
      const char *what = cJSON_IsString(nm) ? nm->valuestring : "";
      const gboolean thread = strcmp(what, "thread_name") == 0 || strcmp(what, "thread_sort_index") == 0;
      if (strcmp(what, "process_name") != 0 && !thread) continue;
      if (thread && !mm__plot_index(ctx, e, "tid", jp, MAX_TID, &tid, error)) return FALSE;
      const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
      g_autofree char *ap = g_strdup_printf("%s.args", jp);
      if (!cJSON_IsObject(args)) {
        mm__plot_input_error(error, ctx, ap, "expected an object");
        return FALSE;
      }
      if (strcmp(what, "thread_sort_index") == 0) {
        Stream *s = stream_get(t->streams, pid, tid);
        if (!mm__plot_number(ctx, args, "sort_index", ap, -MAX_US, MAX_US, &s->sort, error)) return FALSE;
        s->has_sort = TRUE;
        continue;
      }
      const char *name = NULL;
      if (!mm__plot_opt_string(ctx, args, "name", ap, &name, error)) return FALSE;
      if (!name) {
        mm__plot_input_error(error, ctx, ap, "missing \"name\"; expected a string");
        return FALSE;
      }
      if (thread) {
        Stream *s = stream_get(t->streams, pid, tid);
        g_free(s->name);
        s->name = g_strdup(name);
      } else {
        g_hash_table_replace(t->pname, g_memdup2(&pid, sizeof pid), process_label(name));
      }
      continue;
    }
    double ts = 0, dur = 0;
    if (!mm__plot_index(ctx, e, "tid", jp, MAX_TID, &tid, error) ||
        !mm__plot_number(ctx, e, "ts", jp, 0, MAX_US, &ts, error) ||
        !mm__plot_number(ctx, e, "dur", jp, 0, MAX_US, &dur, error))
      return FALSE;
    if (dur > 0 && dur < MIN_DUR_US) {
      g_autofree char *dp = g_strdup_printf("%s.dur", jp);
      mm__plot_input_error(error, ctx, dp, "%g us is below the trace's resolution; expected 0 or from %g to %g", dur,
                           MIN_DUR_US, MAX_US);
      return FALSE;
    }
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
    Ev b = {pid, tid, MAX(ts, from_us), MIN(ts + dur, to_us), mm__plot_series_of(cJSON_IsString(cat) ? cat->valuestring : ""), 0};
    stream_get(t->streams, pid, tid); /* a row even without a name */
    if (dur <= 0 || b.t1 <= b.t0) continue;
    g_array_append_val(t->evs, b);
    t->lo = MIN(t->lo, b.t0);
    t->hi = MAX(t->hi, b.t1);
  }
  if (t->evs->len == 0) {
    mm__plot_input_error(error, ctx, "$.traceEvents", "%s",
                         o->to_s > o->from_s ? "no op falls in the window" : "no complete (\"ph\": \"X\") events to draw");
    return FALSE;
  }
  if (o->to_s > o->from_s) { /* the axis spans the window, up to the trace's end */
    t->lo = from_us;
    t->hi = MIN(to_us, t->hi);
  }
  return TRUE;
}

/* The row of stream (@pid, @tid): its key and label; merged streams share a key. */
static gint64 row_key(const Stream *s, gint64 pid, gint64 tid, const char **label)
{
  for (guint r = 0; s->name && r < G_N_ELEMENTS(stream_rows); r++) {
    if (g_str_has_prefix(s->name, stream_rows[r].prefix)) {
      *label = stream_rows[r].label;
      return pid << 21 | r;
    }
  }
  *label = s->name;
  return pid << 21 | (OTHER_SLOT + tid);
}

/* The rows of the events (each event's row set), sorted: device classes in order, their
 * streams in the trace's order. */
static GArray *make_rows(Trace *t)
{
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(Row));
  g_autoptr(GHashTable) by_key = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL); /* -> index + 1 */
  for (guint k = 0; k < t->evs->len; k++) {
    Ev *e = &g_array_index(t->evs, Ev, k);
    const gint64 sk = e->pid << 20 | e->tid;
    const Stream *s = g_hash_table_lookup(t->streams, &sk);
    const char *label = NULL;
    const gint64 key = row_key(s, e->pid, e->tid, &label);
    const double sort = s->has_sort ? s->sort : (double)e->tid;
    guint idx = GPOINTER_TO_UINT(g_hash_table_lookup(by_key, &key));
    if (idx == 0) {
      Row r = {key, e->pid, sort, label ? g_strdup(label) : g_strdup_printf("thread %" G_GINT64_FORMAT, e->tid),
               rows->len};
      g_array_append_val(rows, r);
      idx = rows->len;
      g_hash_table_insert(by_key, g_memdup2(&key, sizeof key), GUINT_TO_POINTER(idx));
    }
    Row *r = &g_array_index(rows, Row, idx - 1);
    r->sort = MIN(r->sort, sort);
    e->row = idx - 1;
  }
  g_array_sort(rows, row_cmp);
  g_autofree guint *rank = g_new(guint, rows->len);
  for (guint r = 0; r < rows->len; r++) rank[g_array_index(rows, Row, r).first] = r;
  for (guint k = 0; k < t->evs->len; k++) g_array_index(t->evs, Ev, k).row = rank[g_array_index(t->evs, Ev, k).row];
  return rows;
}

/* Each row's events as spans over @bins equal bins of [lo, hi]: a bin any event touches is
 * painted the colour of the series covering most of it, and runs of one colour are one
 * span. At any zoom a span is at least a pixel (or half a point) wide and fully saturated:
 * a thousand sub-pixel ops are neither a wash of anti-aliased hairlines nor lost. Appends
 * "row x0 x1" (x in the figure's unit, @f per us) to @out[series]. */
static void spans(const Trace *t, guint nrows, guint bins, double f, GString **out)
{
  const guint ns = mm__plot_n_series;
  const double w = (t->hi - t->lo) / bins;
  g_autofree double *cov = g_new(double, (gsize)bins * ns);
  const Ev *E = (const Ev *)t->evs->data;
  guint k = 0;
  for (guint r = 0; r < nrows; r++) {
    memset(cov, 0, sizeof(double) * bins * ns);
    for (; k < t->evs->len && E[k].row == r; k++) {
      const double a = (E[k].t0 - t->lo) / w, b = (E[k].t1 - t->lo) / w;
      const guint b0 = (guint)CLAMP(floor(a), 0, bins - 1), b1 = (guint)CLAMP(ceil(b) - 1, b0, bins - 1);
      for (guint x = b0; x <= b1; x++) /* the overlap, and a little for a touch */
        cov[x * ns + E[k].series] += MIN(b, x + 1.0) - MAX(a, (double)x) + 1e-9;
    }
    guint run_s = ns, run_from = 0;
    for (guint x = 0; x <= bins; x++) {
      guint s = ns; /* none */
      double best = 0;
      for (guint q = 0; x < bins && q < ns; q++)
        if (cov[x * ns + q] > best) best = cov[x * ns + q], s = q;
      if (s == run_s) continue;
      if (run_s < ns)
        g_string_append_printf(out[run_s], "%u %.9g %.9g\n", r, (t->lo + run_from * w) * f, (t->lo + x * w) * f);
      run_s = s;
      run_from = x;
    }
  }
}

/* The default title: the run's model, system and config, else what the figure is. */
static char *default_title(const MmPlotRun *run)
{
  g_autofree char *sys = mm__plot_run_system(run, TRUE, TRUE);
  if (sys && run->config) return g_strdup_printf("%s: %s", sys, run->config);
  if (sys || run->config) return g_strdup(sys ? sys : run->config);
  return g_strdup("Timeline per device class and stream");
}

static void draw(MmPlotDoc *d, Trace *t, const char *out_name, const MmPlotOptions *o)
{
  GArray *row_arr = make_rows(t);
  Row *R = (Row *)row_arr->data;
  const guint nrows = row_arr->len;
  /* one class: the stream names alone */
  gboolean one_process = TRUE;
  for (guint r = 1; r < nrows; r++) one_process &= R[r].pid == R[0].pid;
  const guint max_label = (guint)mm__plot_chars(d, 0.4 * d->w_in);
  guint label_chars = 1;
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
  for (guint r = 0; r < nrows; r++) {
    /* the class's name on its first row; its other rows under it, the stream's name alone */
    const char *pn = g_hash_table_lookup(t->pname, &R[r].pid);
    g_autofree char *pdef = g_strdup_printf("process %" G_GINT64_FORMAT, R[r].pid);
    g_autofree char *both = g_strdup_printf("%s \u00b7 %s", pn ? pn : pdef, R[r].label);
    const gboolean first = r == 0 || R[r].pid != R[r - 1].pid;
    char *label = mm__plot_clean(one_process || !first ? R[r].label : both);
    label_chars = MAX(label_chars, MIN(max_label, (guint)g_utf8_strlen(label, -1)));
    g_ptr_array_add(labels, label);
  }

  /* layout: labels left, the legend above, a row for each stream; the legend lists the
   * series drawn (a series may cover no bin's majority) */
  const double left_in = mm__plot_text_in(d, label_chars + 1) + 0.1, row_in = 1.6 * d->font_pt / 72.0;
  gboolean legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  mm__plot_layout(d, left_in, legend, nrows, row_in); /* the width, for the bins */
  const guint bins = (guint)MAX(1.0, round((d->rm - d->lm) * d->w_in * d->span_per_in));
  const char *unit;
  const double f = mm__plot_time_unit((t->hi - t->lo) * 1e-6, &unit) * 1e-6; /* us -> unit */
  g_array_sort(t->evs, ev_cmp);
  GString *blocks[64];
  for (guint s = 0; s < mm__plot_n_series; s++) blocks[s] = g_string_new(NULL);
  spans(t, nrows, bins, f, blocks);
  for (guint s = 0; s < mm__plot_n_series; s++) legend[s] = blocks[s]->len > 0;
  mm__plot_layout(d, left_in, legend, nrows, row_in);

  g_autofree char *title = o->title ? g_strdup(o->title) : default_title(&t->run);
  mm__plot_begin(d, out_name, title);
  const guint rows_block = mm__plot_block(d, "rows: index, label");
  for (guint r = 0; r < nrows; r++) {
    g_string_append_printf(d->data, "%u ", r);
    mm__plot_field(d->data, labels->pdata[r], max_label);
    g_string_append_c(d->data, '\n');
  }
  guint block_of[64];
  for (guint s = 0; s < mm__plot_n_series; s++) {
    if (blocks[s]->len == 0) continue;
    g_autofree char *what = g_strdup_printf("%s spans: row, from, to (%s)", mm__plot_series[s].key, unit);
    block_of[s] = mm__plot_block(d, what);
    g_string_append_len(d->data, blocks[s]->str, (gssize)blocks[s]->len);
  }

  GString *g = d->script;
  mm__plot_read_labels(d, "row", rows_block, nrows, 2, 1);
  g_string_append_printf(g, "set xlabel 'time (%s)'\nset xrange [%.9g:%.9g]\n", unit, t->lo * f, t->hi * f);
  g_string_append_printf(g, "set yrange [%u.5:-0.5]\nset ytics scale 0 ()\n"
                            "do for [i=1:%u] { set ytics add (row[i] i-1) }\n", nrows - 1, nrows);
  g_string_append(g, "set style fill solid 1.0 noborder\n");
  /* a rule between device classes */
  for (guint r = 1; r < nrows; r++)
    if (R[r].pid != R[r - 1].pid)
      g_string_append_printf(g, "set arrow from graph 0, first %u.5 to graph 1, first %u.5 nohead back "
                                "lc rgb '#999999' lw 0.5 dt 2\n", r - 1, r - 1);
  g_string_append(g, "plot ");
  gboolean first = TRUE;
  for (guint s = 0; s < mm__plot_n_series; s++) {
    if (blocks[s]->len == 0) continue;
    g_string_append_printf(g, "%sdata index %u using (($2+$3)/2):1:2:3:($1-0.4):($1+0.4) with boxxyerror "
                              "lc rgb '%s' notitle",
                           first ? "" : ", \\\n  ", block_of[s], mm__plot_series[s].rgb);
    first = FALSE;
  }
  g_string_append_c(g, '\n');
  for (guint s = 0; s < mm__plot_n_series; s++) g_string_free(blocks[s], TRUE);
  for (guint r = 0; r < nrows; r++) g_free(R[r].label);
  g_array_free(row_arr, TRUE);
}

gboolean mm__plot_timeline(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                           const MmPlotOptions *o, GError **error)
{
  g_assert(n == 1);
  const char *path = inputs[0];
  g_autoptr(cJSON) root = mm__plot_load(path, error);
  if (!root) return FALSE;
  MmJsonCtx ctx = {path};
  Trace t = {g_array_new(FALSE, FALSE, sizeof(Ev)),
             g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, stream_free),
             g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free), INFINITY, -INFINITY, {0}};
  gboolean ok = read_trace(&ctx, root, o, &t, error);
  if (ok) draw(d, &t, out_name, o);
  g_array_free(t.evs, TRUE);
  g_hash_table_destroy(t.streams);
  g_hash_table_destroy(t.pname);
  return ok;
}
