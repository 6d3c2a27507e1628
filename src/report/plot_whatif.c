/* plot_whatif: a what-if study (madmax whatif --json): a horizontal bar per system (the
 * baseline, each component scaled alone, all of them together) of its speedup with the
 * strategy re-optimized, labelled with the value, the best strategy small under the bar, a
 * reference line at 1. */
#include <math.h>
#include <string.h>

#include "plot_internal.h"

#define MAX_SYSTEMS 256
#define MAX_SPS 1e18
#define MAX_FACTOR 1e6   /* a component's scale factor, and a speedup */
#define SPEEDUP_REL_TOL 1e-6 /* speedups are samples/s over the baseline's, to 15 or more digits */
#define ROW_LINES 2.6    /* a row: its bar, the strategy under it, a gap */
#define BAR_LINES 1.4    /* a row without the strategy (--size too small for it) */
#define SMALL 0.8        /* the strategies' text, of the figure's */

typedef enum { W_BASE, W_SINGLE, W_JOINT } Role;
static const char *const role_series[] = {"wi_base", "wi_single", "wi_joint"};

typedef struct {
  const char *name, *strategy; /* (transfer none) into the document */
  gboolean fits;
  double sps, speedup;
  Role role;
} Sys;

static gboolean read_system(const MmJsonCtx *ctx, const cJSON *e, const char *jp, Sys *s, GError **error)
{
  if (!cJSON_IsObject(e)) {
    g_autofree char *got = mm_json_describe_value(e);
    mm__plot_input_error(error, ctx, jp, "expected an object, got %s", got);
    return FALSE;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
  g_autofree char *np = g_strdup_printf("%s.name", jp);
  if (!cJSON_IsString(name)) {
    g_autofree char *got = name ? mm_json_describe_value(name) : g_strdup("nothing");
    mm__plot_input_error(error, ctx, np, "expected the system's name, got %s", got);
    return FALSE;
  }
  s->name = name->valuestring;
  /* its role: how many components it scales */
  const cJSON *scale = cJSON_GetObjectItemCaseSensitive(e, "scale");
  g_autofree char *sp = g_strdup_printf("%s.scale", jp);
  if (!cJSON_IsObject(scale)) {
    g_autofree char *got = scale ? mm_json_describe_value(scale) : g_strdup("nothing");
    mm__plot_input_error(error, ctx, sp, "expected an object of scale factors, got %s", got);
    return FALSE;
  }
  guint scaled = 0;
  for (const cJSON *f = scale->child; f; f = f->next) {
    double v = 0;
    if (!mm__plot_number(ctx, scale, f->string, sp, 1.0 / MAX_FACTOR, MAX_FACTOR, &v, error)) return FALSE;
    scaled += v != 1.0;
  }
  s->role = scaled == 0 ? W_BASE : scaled == 1 ? W_SINGLE : W_JOINT;
  const cJSON *fits = cJSON_GetObjectItemCaseSensitive(e, "fits");
  g_autofree char *fp = g_strdup_printf("%s.fits", jp);
  if (!cJSON_IsBool(fits)) {
    g_autofree char *got = fits ? mm_json_describe_value(fits) : g_strdup("nothing");
    mm__plot_input_error(error, ctx, fp, "expected true or false, got %s", got);
    return FALSE;
  }
  s->fits = cJSON_IsTrue(fits);
  if (!s->fits) return TRUE; /* nothing fits on it: no strategy, no time */
  return mm__plot_opt_string(ctx, e, "best_strategy", jp, &s->strategy, error) &&
         mm__plot_number(ctx, e, "samples_per_s", jp, 0, MAX_SPS, &s->sps, error) &&
         mm__plot_number(ctx, e, "speedup", jp, 0, MAX_FACTOR, &s->speedup, error);
}

/* The systems, the first the reference of the speedups; @note: the joint improvement. */
static gboolean read_study(const MmJsonCtx *ctx, const cJSON *root, GArray *sys, char **note, GError **error)
{
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "systems");
  const int n = cJSON_IsArray(rows) ? cJSON_GetArraySize(rows) : 0;
  if (n < 1 || n > MAX_SYSTEMS) {
    mm__plot_input_error(error, ctx, "$.systems", "expected an array of 1 to %d systems (madmax whatif --json)",
                         MAX_SYSTEMS);
    return FALSE;
  }
  int i = 0;
  for (const cJSON *e = rows->child; e; e = e->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.systems[%d]", i);
    Sys s = {0};
    if (!read_system(ctx, e, jp, &s, error)) return FALSE;
    g_array_append_val(sys, s);
  }
  /* the speedups are each system's samples/s over the first's */
  const Sys *b = &g_array_index(sys, Sys, 0);
  for (guint k = 0; b->fits && b->sps > 0 && k < sys->len; k++) {
    const Sys *s = &g_array_index(sys, Sys, k);
    if (!s->fits) continue;
    const double want = s->sps / b->sps;
    if (fabs(s->speedup - want) > SPEEDUP_REL_TOL * want) {
      g_autofree char *jp = g_strdup_printf("$.systems[%u].speedup", k);
      mm__plot_input_error(error, ctx, jp, "%g is not its samples_per_s over the first system's (%g)", s->speedup,
                           want);
      return FALSE;
    }
  }
  double prod = 0, best = 0;
  const gboolean has_prod = cJSON_GetObjectItemCaseSensitive(root, "joint_over_product_of_singles") != NULL;
  const gboolean has_best = cJSON_GetObjectItemCaseSensitive(root, "joint_over_best_single") != NULL;
  if ((has_prod && !mm__plot_number(ctx, root, "joint_over_product_of_singles", "$", 0, MAX_FACTOR, &prod, error)) ||
      (has_best && !mm__plot_number(ctx, root, "joint_over_best_single", "$", 0, MAX_FACTOR, &best, error)))
    return FALSE;
  if (prod > 0) {
    /* as madmax whatif words it */
    GString *g = g_string_new("all together: ");
    if (best > 0) g_string_append_printf(g, "%.2fx the best single one, ", best);
    g_string_append_printf(g, "%.2fx the product of the single ones (%s)", prod,
                           prod > 1.005 ? "super-linear" : prod < 0.995 ? "sub-linear" : "linear");
    *note = g_string_free(g, FALSE);
  }
  return TRUE;
}

gboolean mm__plot_whatif(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                         const MmPlotOptions *o, GError **error)
{
  g_assert(n == 1);
  g_autoptr(cJSON) root = mm__plot_load(inputs[0], error);
  if (!root) return FALSE;
  MmJsonCtx ctx = {inputs[0]};
  g_autoptr(GArray) sys = g_array_new(FALSE, TRUE, sizeof(Sys));
  g_autofree char *note = NULL;
  if (!read_study(&ctx, root, sys, &note, error)) return FALSE;
  const guint ns = sys->len;
  const Sys *b = &g_array_index(sys, Sys, 0);
  /* speedups over the first system; when nothing fits on it, samples/s */
  const gboolean speedup = b->fits && b->sps > 0;
  double top = 0;
  gboolean legend[64] = {FALSE};
  g_assert(mm__plot_n_series <= G_N_ELEMENTS(legend));
  guint name_ch = 4;
  for (guint i = 0; i < ns; i++) {
    const Sys *s = &g_array_index(sys, Sys, i);
    g_autofree char *clean = mm__plot_clean(s->name);
    name_ch = MAX(name_ch, (guint)g_utf8_strlen(clean, -1));
    if (!s->fits) continue;
    top = MAX(top, speedup ? s->speedup : s->sps);
    legend[mm__plot_series_key(role_series[s->role])] = TRUE;
  }
  const char *unit = "";
  const double f = speedup ? 1.0 : mm__plot_count_unit(top, &unit);
  name_ch = MIN(name_ch, (guint)mm__plot_chars(d, 0.35 * d->w_in));
  const double line_in = mm__plot_line_in(d), left_in = 0.1 + mm__plot_text_in(d, name_ch + 1);
  mm__plot_layout(d, left_in, legend, ns, ROW_LINES * line_in);
  if (note) mm__plot_reserve(d, 0, line_in);
  /* a --size too small for the strategies under the bars: the bars alone */
  const gboolean strategies = d->auto_height || (d->tm - d->bm) * d->h_in >= ns * ROW_LINES * line_in;
  g_autofree char *def_title = NULL;
  if (!mm__plot_study_title(&ctx, root, "What-if: ", &def_title, error)) return FALSE;
  mm__plot_begin(d, out_name,
                 o->title ? o->title : def_title ? def_title : "What-if: scaled hardware, the strategy re-optimized");

  const guint names = mm__plot_block(d, "systems: row, name");
  for (guint i = 0; i < ns; i++) {
    g_string_append_printf(d->data, "%u ", i);
    mm__plot_field(d->data, g_array_index(sys, Sys, i).name, name_ch);
    g_string_append_c(d->data, '\n');
  }
  /* a block per role (gnuplot 5.4 fails on some plots without a point) */
  guint bars[3] = {0};
  for (int r = 0; r < 3; r++) {
    if (!legend[mm__plot_series_key(role_series[r])]) continue;
    bars[r] = mm__plot_block(d, r == W_BASE ? "bars of the baseline: row, value"
                                : r == W_SINGLE ? "bars of one component scaled: row, value"
                                                : "bars of components scaled together: row, value");
    for (guint i = 0; i < ns; i++) {
      const Sys *s = &g_array_index(sys, Sys, i);
      if (s->fits && s->role == (Role)r)
        g_string_append_printf(d->data, "%u %.9g\n", i, (speedup ? s->speedup : s->sps) * f);
    }
  }
  const double plot_in = (d->rm - d->lm) * d->w_in;
  const guint small_ch = (guint)MAX(8.0, mm__plot_chars(d, plot_in) / SMALL);
  const guint labels = mm__plot_block(d, "labels: row, x, the value after the bar, the strategy under it");
  guint value_ch = 5;
  for (guint i = 0; i < ns; i++) {
    const Sys *s = &g_array_index(sys, Sys, i);
    const double v = (speedup ? s->speedup : s->sps) * f;
    g_autofree char *value = !s->fits ? g_strdup("nothing fits in memory")
                             : speedup ? mm__plot_speedup(v)
                                       : g_strdup_printf("%.4g", v);
    if (s->fits) value_ch = MAX(value_ch, (guint)strlen(value) + 1);
    g_string_append_printf(d->data, "%u %.9g ", i, s->fits ? v : 0.0);
    mm__plot_field(d->data, value, G_MAXUINT);
    mm__plot_field(d->data, s->strategy ? s->strategy : "", small_ch);
    g_string_append_c(d->data, '\n');
  }
  guint note_b = 0;
  if (note) {
    note_b = mm__plot_block(d, "note: the joint improvement");
    mm__plot_field(d->data, note, (guint)mm__plot_chars(d, d->w_in - 0.2));
    g_string_append_c(d->data, '\n');
  }

  GString *g = d->script;
  const double label_frac = MIN(0.5, mm__plot_text_in(d, value_ch + 1) / plot_in);
  const double xmax = (top > 0 ? top * f : 1.0) / (1.0 - label_frac);
  if (speedup) g_string_append(g, "set xlabel 'speedup over the baseline (samples/s)'\n");
  else g_string_append_printf(g, "set xlabel 'samples/s%s'\n", unit);
  g_string_append_printf(g, "set xrange [0:%.9g]\nset xtics %.9g\n", xmax, mm__plot_tic_step(d, xmax, plot_in));
  g_string_append(g, "set grid xtics back lt 1 lc rgb '#E8E8E8' lw 0.5\n");
  /* a row: the bar on top, the strategy under it */
  g_string_append_printf(g, "set yrange [%.2f:-0.45]\nset ytics scale 0 ()\n", ns - (strategies ? 0.25 : 0.55));
  mm__plot_read_labels(d, "sys", names, ns, 2, 1);
  g_string_append_printf(g, "do for [i=1:%u] { set ytics add (sys[i] i-1) }\n", ns);
  if (speedup)
    g_string_append(g, "set arrow from 1, graph 0 to 1, graph 1 nohead back lc rgb '#000000' lw 1 dt 2\n");
  if (note) {
    mm__plot_read_labels(d, "note", note_b, 1, 1, 1);
    g_string_append_printf(g, "set label 1000 ''.note[1] at screen %.4f, screen %.4f right tc rgb '#555555'\n",
                           d->rm, (0.08 + 0.5 * line_in) / d->h_in);
  }
  g_string_append(g, "set style textbox opaque noborder margins 0.5, 0.2\n");
  g_string_append_printf(g, "h = %.2f\nplot ", strategies ? 0.27 : 0.36);
  for (int r = 0; r < 3; r++) {
    const MmPlotSeries *se = &mm__plot_series[mm__plot_series_key(role_series[r])];
    if (legend[se - mm__plot_series])
      g_string_append_printf(g, "data index %u using ($2/2):1:(0):2:($1-h):($1+h) with boxxyerror fs solid 1.0 "
                                "noborder lc rgb '%s' notitle, \\\n  ",
                             bars[r], se->rgb);
  }
  g_string_append_printf(g, "data index %u using 2:1:(strcol(3)) with labels left offset 0.5, 0 notitle", labels);
  /* the strategies on white, over the line at 1 */
  if (strategies)
    g_string_append_printf(g, ", \\\n  data index %u using (0):($1+0.47):(strcol(4)) with labels left offset 0.3, 0 "
                              "boxed font ',%.1f' tc rgb '#555555' notitle",
                           labels, mm__plot_font(d, SMALL));
  g_string_append_c(g, '\n');
  return TRUE;
}
