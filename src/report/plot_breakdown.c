/* plot_breakdown: where the iteration goes, from results written by `madmax run --json`: a
 * horizontal bar per result (serving: the prefill and the decode step) stacked into
 * compute by phase, exposed communication and idle time, labelled with the runs' names. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

#define MAX_S 1e15 /* an iteration time: about 31 million years */
/* The parts must add up to the iteration time; results carry 15 or more digits. */
#define SUM_REL_TOL 1e-6

/* The compute stream's phases (embedding lookups are inside them), then what is not compute. */
enum { B_FWD, B_BWD, B_RECOMPUTE, B_OPT, B_EXPOSED, B_IDLE, B_N };
static const struct {
  const char *series; /* mm__plot_series key */
  const char *key;    /* in the result: "serialized.compute_by_phase.KEY" or "KEY" */
  gboolean phase;
} parts[B_N] = {
  {"fwd", "fwd", TRUE},       {"bwd", "bwd", TRUE},
  {"recompute", "recompute", TRUE}, {"optimizer", "optimizer", TRUE},
  {"exposed", "exposed_comm_s", FALSE}, {"idle", "idle_s", FALSE},
};

typedef struct {
  char *model, *system, *config; /* NULL: not in the result */
  char *stem;                    /* the file's name without .json: a last resort label */
  const char *phase;             /* serving: "prefill", "decode step"; else NULL */
  char *label[2]; /* two lines; the second may be NULL */
  double part[B_N];
  double total;
} Bar;

static void bar_clear(gpointer p)
{
  Bar *b = p;
  g_free(b->model);
  g_free(b->system);
  g_free(b->config);
  g_free(b->stem);
  g_free(b->label[0]);
  g_free(b->label[1]);
}

static const cJSON *object_at(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (cJSON_IsObject(v)) return v;
  g_autofree char *got = v ? mm_json_describe_value(v) : NULL;
  if (!v) mm__plot_input_error(error, ctx, path, "missing; expected an object");
  else mm__plot_input_error(error, ctx, path, "expected an object, got %s", got);
  return NULL;
}

/* One bar from a run document (or its decode_step) at @jp: the iteration time, positive,
 * and its parts, each from 0 to the iteration time and together the iteration time. */
static gboolean bar_from(const MmJsonCtx *ctx, const cJSON *doc, const char *jp, const MmPlotRun *run,
                         const char *stem, const char *phase, GArray *bars, GError **error)
{
  Bar b = {0};
  g_autofree char *sp = g_strdup_printf("%s.serialized", jp);
  g_autofree char *pp = g_strdup_printf("%s.serialized.compute_by_phase", jp);
  const cJSON *ser = NULL, *ph = NULL;
  if (!mm__plot_number(ctx, doc, "iteration_time_s", jp, 0, MAX_S, &b.total, error) ||
      !(ser = object_at(ctx, doc, "serialized", jp, error)) ||
      !(ph = object_at(ctx, ser, "compute_by_phase", sp, error)))
    return FALSE;
  if (!(b.total > 0)) {
    g_autofree char *at = g_strdup_printf("%s.iteration_time_s", jp);
    mm__plot_input_error(error, ctx, at, "0 is not a positive time in seconds (at most %g)", MAX_S);
    return FALSE;
  }
  double sum = 0;
  for (int s = 0; s < B_N; s++) {
    const double top = b.total * (1 + SUM_REL_TOL);
    if (!mm__plot_number(ctx, parts[s].phase ? ph : doc, parts[s].key, parts[s].phase ? pp : jp, 0, top, &b.part[s],
                         error))
      return FALSE;
    sum += b.part[s];
  }
  if (fabs(sum - b.total) > SUM_REL_TOL * b.total) {
    mm__plot_input_error(error, ctx, jp,
                         "the parts (serialized.compute_by_phase, exposed_comm_s, idle_s) sum to %g s, not the "
                         "iteration_time_s %g s",
                         sum, b.total);
    return FALSE;
  }
  b.model = g_strdup(run->model);
  b.system = mm__plot_run_system(run, FALSE, TRUE);
  b.config = g_strdup(run->config);
  b.stem = g_strdup(stem);
  b.phase = phase;
  g_array_append_val(bars, b);
  return TRUE;
}

static gboolean bars_from_file(const char *path, gboolean from_dir, GArray *bars, GError **error)
{
  g_autoptr(cJSON) doc = mm__plot_load(path, error);
  if (!doc) return FALSE;
  if (from_dir && !cJSON_GetObjectItemCaseSensitive(doc, "iteration_time_s")) return TRUE; /* not a run result */
  MmJsonCtx ctx = {path};
  MmPlotRun run;
  if (!mm__plot_run_names(&ctx, doc, "$", &run, error)) return FALSE;
  g_autofree char *stem = g_path_get_basename(path);
  if (g_str_has_suffix(stem, ".json")) stem[strlen(stem) - 5] = '\0';
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(doc, "decode_step");
  if (dec && !cJSON_IsObject(dec)) {
    g_autofree char *got = mm_json_describe_value(dec);
    mm__plot_input_error(error, &ctx, "$.decode_step", "expected an object, got %s", got);
    return FALSE;
  }
  if (!bar_from(&ctx, doc, "$", &run, stem, dec ? "prefill" : NULL, bars, error)) return FALSE;
  return !dec || bar_from(&ctx, dec, "$.decode_step", &run, stem, "decode step", bars, error);
}

static gint path_cmp(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static gboolean read_bars(const char *const *inputs, guint n, GArray *bars, GError **error)
{
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
  return TRUE;
}

/* Whether the name at @offset (a char * in Bar) is the same for every bar. */
static gboolean shared(const GArray *bars, gsize offset)
{
  const char *first = G_STRUCT_MEMBER(char *, &g_array_index(bars, Bar, 0), offset);
  for (guint i = 1; i < bars->len; i++)
    if (g_strcmp0(first, G_STRUCT_MEMBER(char *, &g_array_index(bars, Bar, i), offset)) != 0) return FALSE;
  return TRUE;
}

/* "MODEL on SYSTEM", either, or NULL. (transfer full) */
static char *on(const char *model, const char *system)
{
  if (model && system) return g_strdup_printf("%s on %s", model, system);
  return g_strdup(model ? model : system);
}

/* Labels name what tells the bars apart (model and system on the first line, config on
 * the second); what they share titles the figure. Results without names, and bars the
 * names do not tell apart, add the file's name. Returns the default title. (transfer full) */
static char *label_bars(GArray *bars)
{
  gboolean model = shared(bars, G_STRUCT_OFFSET(Bar, model)), system = shared(bars, G_STRUCT_OFFSET(Bar, system)),
           config = shared(bars, G_STRUCT_OFFSET(Bar, config));
  if (model && system && config) config = FALSE; /* one run, or runs of one setup: the config labels the bars */
  for (guint i = 0; i < bars->len; i++) {
    Bar *b = &g_array_index(bars, Bar, i);
    g_autofree char *head = on(model ? NULL : b->model, system ? NULL : b->system);
    const char *conf = config ? NULL : b->config;
    if (!head && !conf) head = g_strdup(b->stem);
    b->label[0] = g_strdup(head ? head : conf);
    b->label[1] = head && conf ? g_strdup(conf) : NULL;
  }
  g_autofree gboolean *alike = g_new0(gboolean, bars->len); /* names alike: the files tell them apart */
  for (guint i = 0; i < bars->len; i++) {
    const Bar *b = &g_array_index(bars, Bar, i);
    for (guint k = 0; k < bars->len; k++) {
      const Bar *c = &g_array_index(bars, Bar, k);
      alike[i] |= k != i && g_strcmp0(b->label[0], c->label[0]) == 0 && g_strcmp0(b->label[1], c->label[1]) == 0 &&
                  g_strcmp0(b->phase, c->phase) == 0;
    }
  }
  for (guint i = 0; i < bars->len; i++) {
    Bar *b = &g_array_index(bars, Bar, i);
    if (alike[i] && strcmp(b->label[0], b->stem) != 0) {
      char *l = g_strdup_printf("%s (%s)", b->label[0], b->stem);
      g_free(b->label[0]);
      b->label[0] = l;
    }
    if (b->phase) { /* serving: the phase ends the label */
      char **last = &b->label[b->label[1] ? 1 : 0];
      char *l = g_strdup_printf("%s: %s", *last, b->phase);
      g_free(*last);
      *last = l;
    }
  }
  const Bar *b0 = &g_array_index(bars, Bar, 0);
  /* b0->system is "N x device"; the shared parts read "model on N x device: config" */
  g_autofree char *sys = on(model ? b0->model : NULL, system ? b0->system : NULL);
  const char *conf = config ? b0->config : NULL;
  if (sys && conf) return g_strdup_printf("%s: %s", sys, conf);
  if (sys || conf) return g_strdup(sys ? sys : conf);
  return g_strdup("Where the iteration goes (slowest device class)");
}

gboolean mm__plot_breakdown(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                            const MmPlotOptions *o, GError **error)
{
  g_autoptr(GArray) bars = g_array_new(FALSE, TRUE, sizeof(Bar));
  g_array_set_clear_func(bars, bar_clear);
  if (!read_bars(inputs, n, bars, error)) return FALSE;
  g_autofree char *def_title = label_bars(bars);
  const guint nbars = bars->len;

  /* layout: the legend on top, then per result its label (one or two lines) over its bar
   * across the plot's width */
  gboolean used[B_N] = {FALSE}, legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  for (int s = 0; s < B_N; s++) {
    for (guint i = 0; i < nbars; i++) used[s] |= g_array_index(bars, Bar, i).part[s] > 0;
    legend[mm__plot_series_of(parts[s].series)] = used[s];
  }
  const double left_in = 0.2;
  const guint width = MAX(12u, (guint)mm__plot_chars(d, d->w_in - left_in - 0.3));
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  for (guint i = 0; i < nbars; i++) {
    const Bar *b = &g_array_index(bars, Bar, i);
    g_autofree char *both = b->label[1] ? g_strdup_printf("%s \u00b7 %s", b->label[0], b->label[1]) : NULL;
    GStrv l = NULL;
    if (!b->label[1] || (guint)g_utf8_strlen(both, -1) <= width) { /* one line, or one name on two */
      l = mm__plot_wrap(both ? both : b->label[0], width, 2);
    } else { /* two names: a line each */
      l = g_new0(char *, 3);
      for (guint k = 0; k < 2; k++) {
        g_auto(GStrv) one = mm__plot_wrap(b->label[k], width, 1);
        l[k] = g_strdup(one[0]);
      }
    }
    g_ptr_array_add(lines, l);
  }
  /* vertical positions in lines of text from the top: per result a gap, its label's lines,
   * a gap, the bar; a figure taller than that (--size) thickens the bars, up to 3 lines, and
   * spreads what is left evenly above, between and below the results */
  const double line_in = 1.3 * d->font_pt / 72.0, gap = 0.35, bar_gap = 0.15;
  double need = 0;
  for (guint i = 0; i < nbars; i++) need += gap + g_strv_length(lines->pdata[i]) + bar_gap + 1.1;
  mm__plot_layout(d, left_in, legend, 1, need * line_in + 0.1);
  const double avail = (d->tm - d->bm) * d->h_in / line_in - 0.3;
  const double thick = CLAMP(1.1 + (avail - need) / nbars, 1.1, 3.0);
  const double spread = MAX(0.0, avail - need - nbars * (thick - 1.1)) / (nbars + 1);

  mm__plot_begin(d, out_name, o->title ? o->title : def_title);
  double top = 0;
  for (guint i = 0; i < nbars; i++) top = MAX(top, g_array_index(bars, Bar, i).total);
  const char *unit;
  const double f = mm__plot_time_unit(top, &unit);
  const guint blk = mm__plot_block(d, "bars: index, bar's middle (lines from the top), iteration time, then where "
                                      "each part starts and the last ends (fwd bwd recompute optimizer exposed idle)");
  GString *labs = g_string_new(NULL);
  double y = 0;
  for (guint i = 0; i < nbars; i++) {
    const Bar *b = &g_array_index(bars, Bar, i);
    GStrv l = lines->pdata[i];
    y += gap + spread;
    for (guint k = 0; l[k]; k++, y += 1) {
      g_string_append_printf(labs, "%u %.4f ", i, y + 0.5);
      mm__plot_field(labs, l[k], G_MAXUINT);
      g_string_append_c(labs, '\n');
    }
    y += bar_gap;
    g_string_append_printf(d->data, "%u %.4f %.9g", i, y + 0.5 * thick, b->total * f);
    y += thick;
    double at = 0;
    for (int s = 0; s <= B_N; s++) {
      g_string_append_printf(d->data, " %.9g", at * f);
      if (s < B_N) at += b->part[s];
    }
    g_string_append_c(d->data, '\n');
  }
  y += spread;
  const guint lab = mm__plot_block(d, "labels: bar, y (lines from the top), a line of the label");
  g_string_append_len(d->data, labs->str, (gssize)labs->len);
  g_string_free(labs, TRUE);

  GString *g = d->script;
  g_string_append_printf(g, "set xlabel 'time per iteration (%s)'\nset xrange [0:%.9g]\n", unit, top * f * 1.1);
  g_string_append_printf(g, "set yrange [%.4f:0]\nunset ytics\nset border 1 lc rgb '#444444'\n", y + 0.3);
  g_string_append_printf(g, "set style fill solid 1.0 border lc rgb '#FFFFFF'\nh = %.4f\n", 0.5 * thick);
  g_string_append(g, "plot ");
  for (int s = 0; s < B_N; s++) {
    if (!used[s]) continue;
    const MmPlotSeries *se = &mm__plot_series[mm__plot_series_of(parts[s].series)];
    /* column 4 + s: where part s starts; 5 + s: where it ends */
    g_string_append_printf(g, "data index %u using ($%d > $%d ? ($%d+$%d)/2 : NaN):2:%d:%d:($2-h):($2+h) "
                              "with boxxyerror lc rgb '%s' notitle, \\\n  ",
                           blk, 5 + s, 4 + s, 4 + s, 5 + s, 4 + s, 5 + s, se->rgb);
  }
  /* the label over each bar, the iteration time at its end */
  g_string_append_printf(g, "data index %u using (0):2:(strcol(3)) with labels left noenhanced notitle, \\\n  ", lab);
  g_string_append_printf(g, "data index %u using 3:2:(sprintf(' %%.3g', $3)) with labels left notitle\n", blk);
  return TRUE;
}
