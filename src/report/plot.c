/* plot: gnuplot figures of madmax's outputs: the script and data file a figure kind writes,
 * figure sizes, and drawing with gnuplot. The kinds are plot_timeline.c, plot_breakdown.c,
 * plot_ranking.c, plot_pareto.c and plot_whatif.c.
 *
 * Inputs are never script text. A trace or result (and its file name) is data an adversary
 * may have written: gnuplot reads every string from them, from the title option and the
 * output's name out of a separate data file, as quoted fields, so no name can end a block,
 * start a command or run `system`. The script holds madmax's own text only. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <unistd.h>

#include "plot_internal.h"

const char *const mm_plot_kind_names[] = {"timeline", "breakdown", "ranking", "pareto", "whatif", "systems", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_plot_kind_names) == MM_PLOT_COUNT + 1);

/* One row per kind: what it draws from, and the function that reads it and writes the figure. */
static const struct {
  const char *one; /* NULL: any number of inputs; else the one input it draws */
  MmPlotKindFn draw;
} kinds[MM_PLOT_COUNT] = {
  [MM_PLOT_TIMELINE] = {"trace", mm__plot_timeline},
  [MM_PLOT_BREAKDOWN] = {NULL, mm__plot_breakdown},
  [MM_PLOT_RANKING] = {"sweep folder", mm__plot_ranking},
  [MM_PLOT_PARETO] = {"sweep folder", mm__plot_pareto},
  [MM_PLOT_WHATIF] = {"what-if study", mm__plot_whatif},
  [MM_PLOT_SYSTEMS] = {"sweep folder", mm__plot_systems},
};

/* The trace's categories (compute phases, collective kinds) and the breakdown's parts, then
 * "other", then the marks of the sweep and what-if figures. */
const MmPlotSeries mm__plot_series[] = {
  {"fwd", "forward", "#0072B2", MM_PLOT_MARK_BOX, 0},
  {"bwd", "backward", "#56B4E9", MM_PLOT_MARK_BOX, 0},
  {"recompute", "recompute", "#009E73", MM_PLOT_MARK_BOX, 0},
  {"optimizer", "optimizer", "#000000", MM_PLOT_MARK_BOX, 0},
  {"all_reduce", "all-reduce", "#E69F00", MM_PLOT_MARK_BOX, 0},
  {"all_gather", "all-gather", "#D55E00", MM_PLOT_MARK_BOX, 0},
  {"reduce_scatter", "reduce-scatter", "#CC79A7", MM_PLOT_MARK_BOX, 0},
  {"all_to_all", "all-to-all", "#F0E442", MM_PLOT_MARK_BOX, 0},
  {"p2p", "pipeline send/recv", "#882255", MM_PLOT_MARK_BOX, 0},
  {"broadcast", "broadcast", "#44AA99", MM_PLOT_MARK_BOX, 0},
  {"permute", "permute", "#117733", MM_PLOT_MARK_BOX, 0},
  {"exposed", "exposed communication", "#D55E00", MM_PLOT_MARK_BOX, 0},
  {"idle", "idle (bubble, waiting)", "#BBBBBB", MM_PLOT_MARK_BOX, 0},
  {"other", "other", "#777777", MM_PLOT_MARK_BOX, 0},
  /* ranking */
  {"rank_fits", "fits in memory", "#0072B2", MM_PLOT_MARK_BOX, 0},
  {"rank_baseline", "FSDP baseline", "#E69F00", MM_PLOT_MARK_BOX, 0},
  {"rank_oom", "out of memory (simulated)", "#999999", MM_PLOT_MARK_HATCH, 0},
  /* pareto */
  {"pt_fits", "fits in memory", "#0072B2", MM_PLOT_MARK_POINT, 7},
  {"pt_oom", "out of memory", "#777777", MM_PLOT_MARK_POINT, 2},
  {"pt_front", "Pareto front", "#D55E00", MM_PLOT_MARK_LINE, 0},
  {"pt_capacity", "memory capacity", "#000000", MM_PLOT_MARK_DASH, 0},
  /* whatif */
  {"wi_base", "baseline", "#999999", MM_PLOT_MARK_BOX, 0},
  {"wi_single", "one component scaled", "#0072B2", MM_PLOT_MARK_BOX, 0},
  {"wi_joint", "several scaled together", "#D55E00", MM_PLOT_MARK_BOX, 0},
  /* systems */
  {"sys_front", "time-vs-GPU-hours Pareto front across systems", "#555555", MM_PLOT_MARK_LINE, 0},
};
const guint mm__plot_n_series = G_N_ELEMENTS(mm__plot_series);

guint mm__plot_series_of(const char *key)
{
  guint i = 0;
  for (; strcmp(mm__plot_series[i].key, "other") != 0; i++)
    if (g_strcmp0(mm__plot_series[i].key, key) == 0) return i;
  return i;
}

guint mm__plot_series_key(const char *key)
{
  for (guint i = 0; i < mm__plot_n_series; i++)
    if (strcmp(mm__plot_series[i].key, key) == 0) return i;
  g_assert_not_reached();
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
#define LEGEND_POINT_LABEL 900 /* the legend's point samples: labels from here (the kinds' from 1000) */
#define LEGEND_ARROW 900       /* its line samples: arrows from here */

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

double mm__plot_line_in(const MmPlotDoc *d)
{
  return LINE_EM * d->font_pt / 72.0;
}

double mm__plot_font(const MmPlotDoc *d, double scale)
{
  /* as terminal() sets the figure's font */
  if (strcmp(d->ext, "png") == 0) return scale * d->font_pt * d->px_per_in / 96.0;
  if (strcmp(d->ext, "svg") == 0) return scale * d->font_pt * SVG_PX_PER_IN / 72.0;
  return scale * d->font_pt;
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

void mm__plot_reserve(MmPlotDoc *d, double top_in, double bottom_in)
{
  double top = (1.0 - d->tm) * d->h_in + top_in, bottom = d->bm * d->h_in + bottom_in;
  if (d->auto_height) d->h_in = CLAMP(d->h_in + top_in + bottom_in, 1.2, MAX_IN);
  /* a plot of at least a quarter of the figure */
  const double most = 0.75 * d->h_in;
  if (top + bottom > most) {
    const double f = most / (top + bottom);
    top *= f, bottom *= f;
  }
  d->tm = 1.0 - top / d->h_in;
  d->bm = bottom / d->h_in;
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
    switch (se->mark) {
    case MM_PLOT_MARK_BOX:
    case MM_PLOT_MARK_HATCH:
      g_string_append_printf(g, "set object %u rect from screen %.4f, screen %.4f to screen %.4f, screen %.4f "
                                "fc rgb '%s' %s\n",
                             i + 1, x, y - 0.3 * line, x + sample, y + 0.3 * line, se->rgb,
                             se->mark == MM_PLOT_MARK_BOX ? "fs solid 1.0 noborder"
                                                          : "fs pattern 4 border lc rgb '#555555'");
      break;
    case MM_PLOT_MARK_POINT:
      g_string_append_printf(g, "set label %u '' at screen %.4f, screen %.4f point pt %d ps %.2f lc rgb '%s'\n",
                             LEGEND_POINT_LABEL + i, x + 0.5 * sample, y, se->pt, MM_PLOT_POINT_SIZE, se->rgb);
      break;
    case MM_PLOT_MARK_LINE:
    case MM_PLOT_MARK_DASH:
      g_string_append_printf(g, "set arrow %u from screen %.4f, screen %.4f to screen %.4f, screen %.4f nohead "
                                "lc rgb '%s' lw 2 dt %d\n",
                             LEGEND_ARROW + i, x, y, x + sample, y, se->rgb, se->mark == MM_PLOT_MARK_LINE ? 1 : 2);
      break;
    }
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

/* ---- units ------------------------------------------------------------------------- */

double mm__plot_time_unit(double span_s, const char **name)
{
  if (span_s < 2e-3) return *name = "us", 1e6;
  if (span_s < 2.0) return *name = "ms", 1e3;
  return *name = "s", 1.0;
}

double mm__plot_tic_step(const MmPlotDoc *d, double hi, double axis_in)
{
  g_return_val_if_fail(hi > 0 && axis_in > 0, 1.0);
  /* a tic's number is at most as wide as the axis' end, in gnuplot's %g; two characters apart */
  char text[G_ASCII_DTOSTR_BUF_SIZE];
  g_snprintf(text, sizeof text, "%g", hi);
  const double most = MAX(1.0, floor(axis_in / mm__plot_text_in(d, (double)strlen(text) + 2.0)));
  const double raw = hi / most, mag = pow(10.0, floor(log10(raw)));
  static const double nice[] = {1, 2, 2.5, 5, 10};
  for (guint i = 0; i < G_N_ELEMENTS(nice); i++)
    if (nice[i] * mag >= raw) return nice[i] * mag;
  return 10 * mag;
}

double mm__plot_count_unit(double top, const char **name)
{
  if (top >= 2e9) return *name = " (billions)", 1e-9;
  if (top >= 2e6) return *name = " (millions)", 1e-6;
  if (top >= 2e4) return *name = " (thousands)", 1e-3;
  return *name = "", 1.0;
}

char *mm__plot_speedup(double x)
{
  /* two decimals, as madmax sweep and whatif print them; small ones in two digits */
  return x >= 0.1 || x == 0 ? g_strdup_printf("%.2fx", x) : g_strdup_printf("%.2gx", x);
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
  g_return_val_if_fail(kind < MM_PLOT_COUNT, FALSE);
  if (kinds[kind].one && n != 1) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "a %s figure draws one %s, got %u inputs",
                mm_plot_kind_names[kind], kinds[kind].one, n);
    return FALSE;
  }
  d.script = g_string_new(NULL);
  d.data = g_string_new(NULL);
  gboolean ok = kinds[kind].draw(&d, inputs, n, out_name, o, error);
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
