/* plot_internal: what plot.c (scripts, sizes, rendering) shares with the figure kinds
 * (plot_timeline.c, plot_breakdown.c). Not a public header. */
#pragma once

#include <cjson/cJSON.h>

#include "config/json.h" /* the loaders' JSON reader */
#include "report.h"

/* What a box or a bar segment is, its legend and colour (Okabe-Ito, then greys). */
typedef struct {
  const char *key, *title, *rgb;
} MmPlotSeries;

extern const MmPlotSeries mm__plot_series[];
extern const guint mm__plot_n_series;
/* The row of @key (a trace category, a breakdown part); "other" when none. */
guint mm__plot_series_of(const char *key);

/* The figure's format, size and type, and the gnuplot script and data file being written.
 *
 * The script holds only madmax's own text: commands, numbers it formatted, colours and
 * legends from its tables. Every string that comes from an input (a name in a trace or
 * result, a file name, the title option, the output's name) goes into the data file as
 * a quoted field, which gnuplot reads with `using`/`strcol` and never runs. */
typedef struct {
  const char *ext;  /* "png", "svg", "pdf" */
  double w_in, h_in; /* figure size */
  double font_pt;    /* text size on paper */
  double px_per_in;  /* PNG (SVG) pixels per inch */
  double span_per_in; /* the resolution of a timeline's merged spans */
  gboolean auto_height; /* no --size: the height is what the rows need */
  double lm, rm, tm, bm;  /* the plot's edges, in fractions of the figure (mm__plot_layout) */
  guint legend[32], legend_n; /* the series in the legend */
  guint key_cols, key_rows;  /* its grid (row by row) */
  double key_col_in;         /* a column's width */
  GString *script, *data;
  guint blocks; /* data blocks written: the next block's index */
} MmPlotDoc;

/* Characters of the figure's font that fit in @in inches (a conservative estimate). */
double mm__plot_chars(const MmPlotDoc *d, double in);
/* Inches @chars characters of the figure's font take. */
double mm__plot_text_in(const MmPlotDoc *d, double chars);

/* Starts data block @what (a comment line); returns its index for `index N`. */
guint mm__plot_block(MmPlotDoc *d, const char *what);
/* Appends @s to the data as one quoted field, inert: valid UTF-8, no control characters,
 * no double quote, at most @max_chars characters (longer text ends in an ellipsis). */
void mm__plot_field(GString *data, const char *s, guint max_chars);
/* @s cleaned as mm__plot_field does, unquoted, whitespace runs as one space. (transfer full) */
char *mm__plot_clean(const char *s);
/* Splits @s (cleaned) into at most @lines lines of at most @width characters at spaces;
 * what does not fit ends in an ellipsis. (transfer full) */
GStrv mm__plot_wrap(const char *s, guint width, guint lines);

/* The layout: the title on top, the legend (the series @legend[s] marks) in rows under it,
 * the plot @left_in inches from the left edge, the x axis below. Without --size the height
 * is what @rows rows of @row_in inches need. */
void mm__plot_layout(MmPlotDoc *d, double left_in, const gboolean *legend, guint rows, double row_in);
/* Writes the figure block (the output's name, the title) and the script's preamble: the
 * data file's name, the terminal, the output, the title (read from the data), the legend
 * and the margins. Call once, after mm__plot_layout, before any other block. Plots draw
 * with `notitle`: the legend is madmax's. */
void mm__plot_begin(MmPlotDoc *d, const char *out_name, const char *title);
/* Script lines reading column @col (and @col + 1 .. @col + @lines - 1, joined by line
 * breaks) of data block @block into the gnuplot array @array, one element per line of the
 * block; the block has @n lines. */
void mm__plot_read_labels(MmPlotDoc *d, const char *array, guint block, guint n, guint col, guint lines);

/* A fault of a trace or result at JSON path @jpath: MM_REPORT_ERROR_INPUT, in the config
 * loaders' "FILE: PATH: message" layout. */
void mm__plot_input_error(GError **error, const MmJsonCtx *ctx, const char *jpath, const char *fmt, ...)
  G_GNUC_PRINTF(4, 5);
/* A trace or result file, parsed: READ when missing, unreadable or not JSON, INPUT when
 * not an object. (transfer full) */
cJSON *mm__plot_load(const char *path, GError **error);
/* The number at @obj.@key (path @jp.@key), finite and within [@min, @max]. */
gboolean mm__plot_number(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double min,
                         double max, double *out, GError **error);
/* The integer at @obj.@key, within [0, @max]. */
gboolean mm__plot_index(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double max,
                        gint64 *out, GError **error);
/* The optional string at @obj.@key: NULL when absent; an error when not a string. */
gboolean mm__plot_opt_string(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                             const char **out, GError **error);

/* The names of the run that wrote a trace or result ({"model": {"name"}, "hardware":
 * {"device", "devices"}, "config": {"name"}}, each optional); (transfer none) into @root. */
typedef struct {
  const char *model, *device, *config;
  gint64 devices; /* 0: unknown */
} MmPlotRun;
gboolean mm__plot_run_names(const MmJsonCtx *ctx, const cJSON *root, const char *jp, MmPlotRun *run, GError **error);
/* "Llama-3-70B on 512 x NVIDIA H100" (the parts known; NULL when none). (transfer full) */
char *mm__plot_run_system(const MmPlotRun *run, gboolean model, gboolean system);

/* Seconds in a readable unit for a span of @span_s: the factor and its name. */
double mm__plot_time_unit(double span_s, const char **name);

/* The kinds: parse @inputs, size the figure, write blocks and script. */
gboolean mm__plot_timeline(MmPlotDoc *d, const char *path, const char *out_name, const MmPlotOptions *o,
                           GError **error);
gboolean mm__plot_breakdown(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                            const MmPlotOptions *o, GError **error);
