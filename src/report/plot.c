/* plot: gnuplot figures of madmax's outputs: the script and data file a figure kind writes,
 * figure sizes, and drawing with gnuplot. The kinds are plot_timeline.c and plot_breakdown.c.
 *
 * Inputs are never script text. A trace or result (and its file name) is data an adversary
 * may have written: gnuplot reads every string from them, from the title option and the
 * output's name out of a separate data file, as quoted fields, so no name can end a block,
 * start a command or run `system`. The script holds madmax's own text only. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <glib/gstdio.h>
#include <unistd.h>

#include "plot_internal.h"

const char *const mm_plot_kind_names[] = {"timeline", "breakdown", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_plot_kind_names) == MM_PLOT_COUNT + 1);

/* The trace's categories (compute phases, collective kinds) and the breakdown's parts. */
const MmPlotSeries mm__plot_series[] = {
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
  {"idle", "idle (bubble, waiting)", "#BBBBBB"},
  {"other", "other", "#777777"},
};
const guint mm__plot_n_series = G_N_ELEMENTS(mm__plot_series);

guint mm__plot_series_of(const char *key)
{
  for (guint i = 0; i + 1 < mm__plot_n_series; i++)
    if (g_strcmp0(mm__plot_series[i].key, key) == 0) return i;
  return mm__plot_n_series - 1;
}

/* ---- sizes ------------------------------------------------------------------------- */

/* --size presets: where the figure goes, and a text size that reads there (papers set
 * figure text at about the caption's 7-8 pt; slides need about twice that). */
static const struct {
  const char *name;
  double w_in, h_in, font_pt;
} sizes[] = {
  {"column", 3.5, 2.4, 7},  /* one column of a two-column paper */
  {"page", 7.0, 3.5, 8},    /* the full text width */
  {"slide", 10.0, 5.6, 16}, /* most of a 16:9 slide */
};
#define DEFAULT_SIZE 1 /* page */
#define MIN_IN 1.0
#define MAX_IN 40.0
#define PNG_PX_PER_IN 150.0 /* PNG resolution: sharp on screens and in READMEs */
#define SVG_PX_PER_IN 96.0  /* CSS pixels */
/* Merged spans are multiples of a point (two PNG pixels): the thinnest is a solid line in
 * print and on screen, and every format draws the same data. */
#define SPAN_PER_IN 72.0
/* Average advance of a character of gnuplot's Sans (DejaVu Sans) in ems, some capitals
 * included (measured: 0.59 for digits and lower case). */
#define CHAR_EM 0.62
#define LINE_EM 1.3 /* a line of text */
#define PAD_IN 0.08 /* between the figure's edge and its text */
#define KEY_SAMPLE_CH 2.0 /* a legend entry's colour sample, in characters */

gboolean mm_plot_parse_size(const char *s, MmPlotOptions *o)
{
  g_return_val_if_fail(s && o, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
    if (strcmp(s, sizes[i].name) == 0) {
      o->width_in = sizes[i].w_in;
      o->height_in = sizes[i].h_in;
      o->font_pt = sizes[i].font_pt;
      return TRUE;
    }
  }
  char *end = NULL;
  double w = g_ascii_strtod(s, &end);
  if (end == s || (*end != 'x' && *end != 'X')) return FALSE;
  const char *hs = end + 1;
  double h = g_ascii_strtod(hs, &end);
  if (end == hs || (*end != '\0' && strcmp(end, "in") != 0)) return FALSE;
  if (!(w >= MIN_IN && w <= MAX_IN && h >= MIN_IN && h <= MAX_IN)) return FALSE;
  o->width_in = w;
  o->height_in = h;
  o->font_pt = w < 5.0 ? sizes[0].font_pt : sizes[1].font_pt; /* a print size: column or page text */
  return TRUE;
}

double mm__plot_chars(const MmPlotDoc *d, double in)
{
  return MAX(0.0, in * 72.0 / (CHAR_EM * d->font_pt));
}

double mm__plot_text_in(const MmPlotDoc *d, double chars)
{
  return chars * CHAR_EM * d->font_pt / 72.0;
}

/* ---- the data file ------------------------------------------------------------------ */

char *mm__plot_clean(const char *s)
{
  g_autofree char *valid = g_utf8_make_valid(s ? s : "", -1);
  GString *g = g_string_new(NULL);
  gboolean space = TRUE; /* drops leading blanks and runs */
  for (const char *c = valid; *c; c = g_utf8_next_char(c)) {
    gunichar u = g_utf8_get_char(c);
    if (g_unichar_isspace(u) || g_unichar_iscntrl(u) || g_unichar_type(u) == G_UNICODE_FORMAT ||
        g_unichar_type(u) == G_UNICODE_LINE_SEPARATOR || g_unichar_type(u) == G_UNICODE_PARAGRAPH_SEPARATOR) {
      if (!space) g_string_append_c(g, ' ');
      space = TRUE;
      continue;
    }
    space = FALSE;
    if (u == '"') g_string_append_c(g, '\'');
    else g_string_append_unichar(g, u);
  }
  if (g->len > 0 && g->str[g->len - 1] == ' ') g_string_truncate(g, g->len - 1);
  return g_string_free(g, FALSE);
}

/* @s cut to @max characters, the last an ellipsis when cut, at a space when one is near. (transfer full) */
static char *cut(const char *s, guint max)
{
  if ((guint)g_utf8_strlen(s, -1) <= max) return g_strdup(s);
  if (max == 0) return g_strdup("");
  const char *end = g_utf8_offset_to_pointer(s, max - 1);
  g_autofree char *head = g_strndup(s, (gsize)(end - s));
  char *space = strrchr(head, ' ');
  if (space && g_utf8_strlen(head, space - head) * 4 >= (glong)max * 3) *space = '\0'; /* in the last quarter */
  g_strchomp(head);
  while (*head && strchr(",;:", head[strlen(head) - 1])) head[strlen(head) - 1] = '\0';
  return g_strconcat(head, "\u2026", NULL);
}

void mm__plot_field(GString *data, const char *s, guint max_chars)
{
  g_autofree char *clean = mm__plot_clean(s);
  g_autofree char *text = cut(clean, max_chars);
  g_string_append_c(data, '"');
  for (const char *c = text; *c; c++) {
    if (*c == '\\') g_string_append_c(data, '\\'); /* gnuplot unescapes quoted data fields */
    g_string_append_c(data, *c);
  }
  g_string_append(data, "\" ");
}

GStrv mm__plot_wrap(const char *s, guint width, guint lines)
{
  g_return_val_if_fail(width > 1 && lines > 0, NULL);
  g_autofree char *clean = mm__plot_clean(s);
  GPtrArray *out = g_ptr_array_new();
  const char *rest = clean;
  while (*rest && out->len + 1 < lines && (guint)g_utf8_strlen(rest, -1) > width) {
    /* the last space within the width, else a hard break */
    const char *lim = g_utf8_offset_to_pointer(rest, width);
    const char *brk = NULL;
    for (const char *c = rest; c <= lim && *c; c = g_utf8_next_char(c))
      if (*c == ' ') brk = c;
    if (!brk || brk == rest) brk = lim;
    g_ptr_array_add(out, g_strndup(rest, (gsize)(brk - rest)));
    rest = *brk == ' ' ? brk + 1 : brk;
  }
  if (*rest || out->len == 0) g_ptr_array_add(out, cut(rest, width));
  g_ptr_array_add(out, NULL);
  return (GStrv)g_ptr_array_free(out, FALSE);
}

guint mm__plot_block(MmPlotDoc *d, const char *what)
{
  /* blocks are separated by two blank lines (gnuplot's `index`); the file's header
   * comment belongs to block 0 */
  if (d->blocks > 0) g_string_append(d->data, "\n\n");
  g_string_append_printf(d->data, "# [%u] %s\n", d->blocks, what);
  return d->blocks++;
}

/* The terminal for the figure's format and size. */
static void terminal(MmPlotDoc *d)
{
  if (strcmp(d->ext, "png") == 0) {
    /* pngcairo sets a point as 96 pixels an inch would (measured); lines of half a point */
    g_string_append_printf(d->script,
                           "set terminal pngcairo noenhanced font 'Sans,%.1f' size %d,%d linewidth %.2f\n",
                           d->font_pt * d->px_per_in / 96.0, (int)lround(d->w_in * d->px_per_in),
                           (int)lround(d->h_in * d->px_per_in), d->px_per_in / 144.0);
  } else if (strcmp(d->ext, "svg") == 0) {
    /* SVG user units are CSS pixels, 96 an inch */
    g_string_append_printf(d->script, "set terminal svg noenhanced font 'Sans,%.1f' size %d,%d linewidth %.2f\n",
                           d->font_pt * SVG_PX_PER_IN / 72.0, (int)lround(d->w_in * SVG_PX_PER_IN),
                           (int)lround(d->h_in * SVG_PX_PER_IN), SVG_PX_PER_IN / 144.0);
  } else {
    /* pdfcairo sets text at font x fontscale x 4/3 points (measured): fontscale 0.75 makes
     * them true points; its lines are half a point */
    g_string_append_printf(d->script,
                           "set terminal pdfcairo noenhanced font 'Sans,%g' fontscale 0.75 size %.2fin,%.2fin\n",
                           d->font_pt, d->w_in, d->h_in);
  }
}

void mm__plot_layout(MmPlotDoc *d, double left_in, const gboolean *legend, guint rows, double row_in)
{
  const double line_in = LINE_EM * d->font_pt / 72.0;
  guint chars = 0;
  d->legend_n = 0;
  for (guint s = 0; s < mm__plot_n_series; s++) {
    if (!legend[s]) continue;
    g_assert(d->legend_n < G_N_ELEMENTS(d->legend));
    d->legend[d->legend_n++] = s;
    chars = MAX(chars, (guint)strlen(mm__plot_series[s].title));
  }
  /* the legend: entries (a sample, a gap, the text) in columns across the figure */
  d->key_col_in = mm__plot_text_in(d, chars + KEY_SAMPLE_CH + 1.0) + 0.15;
  d->key_cols = (guint)CLAMP(floor((d->w_in - 2 * PAD_IN) / d->key_col_in), 1, MAX(d->legend_n, 1));
  d->key_rows = (d->legend_n + d->key_cols - 1) / d->key_cols;
  const double top_in = PAD_IN + line_in * (1 + d->key_rows) + PAD_IN;
  const double bottom_in = 3.0 * line_in + PAD_IN; /* tic marks, numbers, the axis label */
  if (d->auto_height) d->h_in = CLAMP(top_in + bottom_in + rows * row_in, 1.2, MAX_IN);
  d->lm = MIN(0.6, left_in / d->w_in);
  d->rm = 1.0 - 0.2 / d->w_in;
  d->tm = 1.0 - top_in / d->h_in;
  d->bm = bottom_in / d->h_in;
}

void mm__plot_begin(MmPlotDoc *d, const char *out_name, const char *title)
{
  g_assert(d->blocks == 0);
  g_string_append(d->data, "# madmax plot data: every number and name the figure draws, read by its script\n");
  const guint b = mm__plot_block(d, "figure: output, title");
  mm__plot_field(d->data, out_name, G_MAXUINT);
  mm__plot_field(d->data, title ? title : "", (guint)mm__plot_chars(d, d->w_in - 2 * PAD_IN));
  g_string_append_c(d->data, '\n');

  GString *g = d->script;
  g_string_append(g, "# gnuplot script written by madmax plot. It holds the style; the data, every number and\n"
                     "# name, is in the file beside it: `gnuplot F.gp` reads F.dat. Edit and rerun.\n"
                     "data = ARG0[strlen(ARG0)-2:] eq '.gp' ? ARG0[1:strlen(ARG0)-3].'.dat' : ARG0.'.dat'\n");
  g_string_append_printf(g, "stats data index %u using (fig_out = strcol(1), fig_title = strcol(2), 0) nooutput\n", b);
  terminal(d);
  const double line = LINE_EM * d->font_pt / 72.0 / d->h_in; /* a line, in fractions of the height */
  g_string_append_printf(g, "set output fig_out\nset label 1 fig_title at screen 0.5, screen %.4f center noenhanced\n",
                         1.0 - PAD_IN / d->h_in - 0.55 * line);
  /* the legend, row by row, centred: a sample box and the series' name (madmax's own text) */
  g_string_append(g, "unset key\n");
  const double x0 = 0.5 - 0.5 * (d->key_cols * d->key_col_in - 0.15) / d->w_in;
  const double sample = mm__plot_text_in(d, KEY_SAMPLE_CH) / d->w_in, gap = mm__plot_text_in(d, 0.6) / d->w_in;
  for (guint i = 0; i < d->legend_n; i++) {
    const MmPlotSeries *se = &mm__plot_series[d->legend[i]];
    const double x = x0 + (i % d->key_cols) * d->key_col_in / d->w_in;
    const double y = 1.0 - PAD_IN / d->h_in - (1.55 + i / d->key_cols) * line;
    g_string_append_printf(g, "set object %u rect from screen %.4f, screen %.4f to screen %.4f, screen %.4f "
                              "fc rgb '%s' fs solid 1.0 noborder\n",
                           i + 1, x, y - 0.3 * line, x + sample, y + 0.3 * line, se->rgb);
    g_string_append_printf(g, "set label %u '%s' at screen %.4f, screen %.4f left\n", i + 2, se->title,
                           x + sample + gap, y);
  }
  g_string_append_printf(g, "set lmargin at screen %.4f\nset rmargin at screen %.4f\n"
                            "set tmargin at screen %.4f\nset bmargin at screen %.4f\n",
                         d->lm, d->rm, d->tm, d->bm);
  g_string_append(g, "set border 3 lc rgb '#444444'\nset grid xtics lc rgb '#DDDDDD'\nset xtics out nomirror\n");
}

void mm__plot_read_labels(MmPlotDoc *d, const char *array, guint block, guint n, guint col, guint lines)
{
  g_string_append_printf(d->script, "array %s[%u]\nstats data index %u using (%s[int($0)+1] = strcol(%u)", array, n,
                         block, array, col);
  for (guint l = 1; l < lines; l++)
    g_string_append_printf(d->script, " . (strcol(%u) eq '' ? '' : \"\\n\" . strcol(%u))", col + l, col + l);
  g_string_append(d->script, ", 0) nooutput\n");
}

/* ---- reading traces and results ------------------------------------------------------ */

void mm__plot_input_error(GError **error, const MmJsonCtx *ctx, const char *jpath, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: %s: %s", ctx->file, jpath, msg);
}

cJSON *mm__plot_load(const char *path, GError **error)
{
  /* the reader is src/config's and raises MM_CONFIG_ERROR; here it is MM_REPORT_ERROR */
  GError *cfg = NULL;
  cJSON *root = mm_json_load_file(path, &cfg);
  if (root) return root;
  g_assert(cfg->domain == MM_CONFIG_ERROR);
  const gboolean unreadable = cfg->code == MM_CONFIG_ERROR_IO || cfg->code == MM_CONFIG_ERROR_PARSE;
  g_set_error_literal(error, MM_REPORT_ERROR, unreadable ? MM_REPORT_ERROR_READ : MM_REPORT_ERROR_INPUT, cfg->message);
  g_error_free(cfg);
  return NULL;
}

gboolean mm__plot_number(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double min,
                         double max, double *out, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (!v) {
    mm__plot_input_error(error, ctx, path, "missing; expected a number from %g to %g", min, max);
    return FALSE;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min || v->valuedouble > max) {
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "%s is not a number from %g to %g", got, min, max);
    return FALSE;
  }
  *out = v->valuedouble;
  return TRUE;
}

gboolean mm__plot_index(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double max,
                        gint64 *out, GError **error)
{
  double v = 0;
  if (!mm__plot_number(ctx, obj, key, jp, 0, max, &v, error)) return FALSE;
  if (v != floor(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    mm__plot_input_error(error, ctx, path, "%g is not an integer from 0 to %g", v, max);
    return FALSE;
  }
  *out = (gint64)v;
  return TRUE;
}

gboolean mm__plot_opt_string(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                             const char **out, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v) return TRUE;
  if (!cJSON_IsString(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "expected a string, got %s", got);
    return FALSE;
  }
  *out = v->valuestring;
  return TRUE;
}

/* The optional object at @obj.@key: NULL when absent or @obj is NULL. */
static gboolean opt_object(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                           const cJSON **out, GError **error)
{
  const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  *out = NULL;
  if (!v) return TRUE;
  if (!cJSON_IsObject(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "expected an object, got %s", got);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

gboolean mm__plot_run_names(const MmJsonCtx *ctx, const cJSON *root, const char *jp, MmPlotRun *run, GError **error)
{
  *run = (MmPlotRun){0};
  g_autofree char *mp = g_strdup_printf("%s.model", jp);
  g_autofree char *hp = g_strdup_printf("%s.hardware", jp);
  g_autofree char *cp = g_strdup_printf("%s.config", jp);
  const cJSON *m = NULL, *h = NULL, *c = NULL;
  if (!opt_object(ctx, root, "model", jp, &m, error) || !opt_object(ctx, root, "hardware", jp, &h, error) ||
      !opt_object(ctx, root, "config", jp, &c, error))
    return FALSE;
  if ((m && !mm__plot_opt_string(ctx, m, "name", mp, &run->model, error)) ||
      (h && !mm__plot_opt_string(ctx, h, "device", hp, &run->device, error)) ||
      (c && !mm__plot_opt_string(ctx, c, "name", cp, &run->config, error)))
    return FALSE;
  if (h && cJSON_GetObjectItemCaseSensitive(h, "devices") &&
      !mm__plot_index(ctx, h, "devices", hp, MM_INT_MAX, &run->devices, error))
    return FALSE;
  return TRUE;
}

char *mm__plot_run_system(const MmPlotRun *run, gboolean model, gboolean system)
{
  GString *g = g_string_new(NULL);
  if (model && run->model) g_string_append(g, run->model);
  if (system && run->device) {
    if (g->len) g_string_append(g, " on ");
    if (run->devices > 0) g_string_append_printf(g, "%" G_GINT64_FORMAT " x ", run->devices);
    g_string_append(g, run->device);
  }
  if (g->len == 0) {
    g_string_free(g, TRUE);
    return NULL;
  }
  return g_string_free(g, FALSE);
}

double mm__plot_time_unit(double span_s, const char **name)
{
  if (span_s < 2e-3) return *name = "us", 1e6;
  if (span_s < 2.0) return *name = "ms", 1e3;
  return *name = "s", 1.0;
}

/* ---- scripts and rendering ----------------------------------------------------------- */

/* The format @out's extension asks for ("png", "svg", "pdf"), NULL when none. */
static const char *format_of(const char *out)
{
  static const char *const ext[] = {"png", "svg", "pdf"};
  const char *dot = strrchr(out, '.');
  const char *slash = strrchr(out, '/');
  if (!dot || (slash && dot < slash)) return NULL;
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++)
    if (g_ascii_strcasecmp(dot + 1, ext[i]) == 0) return ext[i];
  return NULL;
}

/* The script and data drawing @kind into a file named @out_name (written into the data)
 * of @out's format. */
static gboolean build(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const char *out_name,
                      const MmPlotOptions *o, char **script, char **data, GError **error)
{
  g_return_val_if_fail(n > 0 && inputs && out, FALSE);
  MmPlotOptions none = {0};
  if (!o) o = &none;
  const char *ext = format_of(out);
  MmPlotDoc d = {.ext = ext ? ext : "png"};
  const gboolean sized = o->width_in > 0 && o->height_in > 0;
  d.w_in = sized ? o->width_in : sizes[DEFAULT_SIZE].w_in;
  d.h_in = sized ? o->height_in : sizes[DEFAULT_SIZE].h_in;
  d.font_pt = o->font_pt > 0 ? o->font_pt : sized && d.w_in < 5.0 ? sizes[0].font_pt : sizes[DEFAULT_SIZE].font_pt;
  d.auto_height = !sized;
  d.px_per_in = d.ext && strcmp(d.ext, "png") == 0 ? PNG_PX_PER_IN : SVG_PX_PER_IN;
  d.span_per_in = SPAN_PER_IN;
  if (kind == MM_PLOT_TIMELINE && n != 1) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "a timeline draws one trace, got %u inputs", n);
    return FALSE;
  }
  d.script = g_string_new(NULL);
  d.data = g_string_new(NULL);
  gboolean ok = kind == MM_PLOT_TIMELINE ? mm__plot_timeline(&d, inputs[0], out_name, o, error)
                                         : mm__plot_breakdown(&d, inputs, n, out_name, o, error);
  /* inputs are checked first: a bad input is reported as such whatever the output */
  if (ok && !ext) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: the figure's name must end in .png, .svg or .pdf",
                out);
    ok = FALSE;
  }
  if (!ok) {
    g_string_free(d.script, TRUE);
    g_string_free(d.data, TRUE);
    return FALSE;
  }
  *script = g_string_free(d.script, FALSE);
  *data = g_string_free(d.data, FALSE);
  return TRUE;
}

char *mm_plot_script(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                     char **data, GError **error)
{
  g_return_val_if_fail(data != NULL, NULL);
  *data = NULL;
  /* the script names the figure through its data: only a name that survives that unchanged */
  g_autofree char *clean = mm__plot_clean(out);
  char *script = NULL;
  if (!build(kind, inputs, n, out, out, o, &script, data, error)) return NULL;
  if (strcmp(clean, out) != 0) {
    g_clear_pointer(&script, g_free);
    g_clear_pointer(data, g_free);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT,
                "%s: a gnuplot script cannot name this figure (a control character, a double quote or "
                "surrounding blanks); choose another --out",
                out);
  }
  return script;
}

char *mm_plot_data_path(const char *script_path)
{
  g_return_val_if_fail(script_path != NULL, NULL);
  const gsize len = strlen(script_path);
  if (len > 3 && g_str_has_suffix(script_path, ".gp")) return g_strdup_printf("%.*s.dat", (int)(len - 3), script_path);
  return g_strconcat(script_path, ".dat", NULL);
}

/* Writes @len bytes to @fd; FALSE with errno set on failure. */
static gboolean write_all(int fd, const char *bytes, gsize len)
{
  while (len > 0) {
    gssize w = write(fd, bytes, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return FALSE;
    bytes += w;
    len -= (gsize)w;
  }
  return TRUE;
}

/* Whether @path is a symbolic link or exists and is not a regular file (a device, a FIFO). */
static gboolean special_file(const char *path)
{
  return g_file_test(path, G_FILE_TEST_IS_SYMLINK) ||
         (g_file_test(path, G_FILE_TEST_EXISTS) && !g_file_test(path, G_FILE_TEST_IS_REGULAR));
}

gboolean mm_plot_write_file(const char *path, const char *bytes, gsize len, GError **error)
{
  g_return_val_if_fail(path && bytes, FALSE);
  int err = 0;
  if (special_file(path)) {
    /* a device, FIFO or symbolic link: written through, never replaced by a file */
    int fd = g_open(path, O_WRONLY | O_TRUNC, 0);
    gboolean ok = fd >= 0 && write_all(fd, bytes, len);
    err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = FALSE, err = errno;
    if (ok) return TRUE;
  } else {
    /* a regular file or a new one: a temporary beside it, renamed once complete */
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *tmp = g_strdup_printf("%s/.%s.XXXXXX", dir, base);
    int fd = g_mkstemp_full(tmp, O_WRONLY, 0644);
    gboolean ok = fd >= 0 && write_all(fd, bytes, len);
    err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = FALSE, err = errno;
    if (ok && g_rename(tmp, path) != 0) ok = FALSE, err = errno;
    if (fd >= 0 && !ok) g_unlink(tmp);
    if (ok) return TRUE;
  }
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s: cannot write: %s", path, g_strerror(err));
  return FALSE;
}

/* Removes the files gnuplot was given and made, then their directory. */
static void remove_workdir(const char *dir)
{
  static const char *const names[] = {"plot.gp", "plot.dat", "figure.png", "figure.svg", "figure.pdf"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *p = g_build_filename(dir, names[i], NULL);
    g_unlink(p);
  }
  g_rmdir(dir);
}

gboolean mm_plot_render(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                        GError **error)
{
  /* gnuplot works in a private directory on names madmax chose: plot.gp reads plot.dat and
   * draws figure.EXT, which then replaces @out */
  g_autofree char *script = NULL, *data = NULL;
  const char *ext = format_of(out);
  g_autofree char *fig_name = g_strdup_printf("figure.%s", ext ? ext : "png");
  if (!build(kind, inputs, n, out, fig_name, o, &script, &data, error)) return FALSE;
  /* an output that cannot be written fails before gnuplot runs */
  g_autofree char *out_dir = g_path_get_dirname(out);
  const gboolean special = special_file(out);
  if (g_access(special ? out : out_dir, W_OK) != 0) {
    int err = errno;
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s: cannot write: %s", out, g_strerror(err));
    return FALSE;
  }
  g_autoptr(GError) io = NULL;
  g_autofree char *dir = g_dir_make_tmp("madmax-plot-XXXXXX", &io);
  if (!dir) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "cannot make a temporary directory: %s", io->message);
    return FALSE;
  }
  g_autofree char *gp = g_build_filename(dir, "plot.gp", NULL);
  g_autofree char *dat = g_build_filename(dir, "plot.dat", NULL);
  g_autofree char *fig = g_build_filename(dir, fig_name, NULL);
  if (!g_file_set_contents(gp, script, -1, &io) || !g_file_set_contents(dat, data, -1, &io)) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "cannot write gnuplot's files: %s", io->message);
    remove_workdir(dir);
    return FALSE;
  }
  g_autofree char *err_text = NULL;
  int status = 0;
  char *args[] = {(char *)"gnuplot", (char *)"plot.gp", NULL};
  if (!g_spawn_sync(dir, args, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err_text,
                    &status, &io)) {
    remove_workdir(dir);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_TOOL,
                "cannot run gnuplot (%s); install it (Debian: gnuplot-nox) or write the script with --script",
                io->message);
    return FALSE;
  }
  g_autofree char *bytes = NULL;
  gsize len = 0;
  if (!g_spawn_check_wait_status(status, NULL) || !g_file_get_contents(fig, &bytes, &len, NULL) || len == 0) {
    remove_workdir(dir);
    g_strstrip(err_text);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_TOOL, "gnuplot failed on %s: %s", out,
                err_text && *err_text ? err_text : "no output");
    return FALSE;
  }
  remove_workdir(dir);
  return mm_plot_write_file(out, bytes, len, error);
}
