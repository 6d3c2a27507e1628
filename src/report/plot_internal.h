/* plot_internal: what plot.c (scripts, sizes, rendering) and plot_input.c (checked JSON
 * reading) share with the figure kinds (plot_timeline.c, plot_breakdown.c, plot_ranking.c,
 * plot_pareto.c, plot_whatif.c) and plot_sweep.c (a sweep's folder, read). Not a public header. */
#pragma once

#include <cjson/cJSON.h>

#include "config/json.h" /* the loaders' JSON reader */
#include "report.h"

/* How a series is drawn, and so its legend sample. */
typedef enum {
  MM_PLOT_MARK_BOX,   /* a filled box */
  MM_PLOT_MARK_HATCH, /* a hatched box with a border */
  MM_PLOT_MARK_POINT, /* a point of type pt */
  MM_PLOT_MARK_LINE,  /* a solid line */
  MM_PLOT_MARK_DASH,  /* a dashed line */
} MmPlotMark;

/* What a box, a bar segment, a point or a line is, its legend, colour (Okabe-Ito, then
 * greys) and mark. */
typedef struct {
  const char *key, *title, *rgb;
  MmPlotMark mark;
  int pt; /* gnuplot point type of MM_PLOT_MARK_POINT */
} MmPlotSeries;

/* The size of a point mark (gnuplot's `ps`), in the plot and in the legend. */
#define MM_PLOT_POINT_SIZE 0.7

extern const MmPlotSeries mm__plot_series[];
extern const guint mm__plot_n_series;
/* The row of @key among the trace categories and breakdown parts; "other" when none (the
 * studies' marks after it are never a trace's). */
guint mm__plot_series_of(const char *key);
/* The row of one of madmax's own keys, any row (asserted to exist). */
guint mm__plot_series_key(const char *key);

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
/* Room for @top_in more inches above the plot and @bottom_in below it (a header row, a note):
 * the figure grows without --size, else the plot shrinks. Call after mm__plot_layout. */
void mm__plot_reserve(MmPlotDoc *d, double top_in, double bottom_in);
/* The size to write in a label's `font ',N'` for text @scale times the figure's. */
double mm__plot_font(const MmPlotDoc *d, double scale);
/* A line of text of the figure's font, in inches. */
double mm__plot_line_in(const MmPlotDoc *d);
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

/* Characters of a config's name a study's title shows whole (mm__plot_short_name). */
#define MM_PLOT_SHORT_NAME 24
/* A name short enough for a title: @name cleaned and cut before its first " (", and when
 * still over @max_chars characters before its first ':' or ','. "DLRM pretraining: tables
 * model-parallel ..." -> "DLRM pretraining". (transfer full) */
char *mm__plot_short_name(const char *name, guint max_chars);
/* The title of a study (summary.json, whatif --json) from its "inputs" names: @prefix then
 * "MODEL on SYSTEM: CONFIG", the parts present (the config's headline only when its name is
 * long: MM_PLOT_SHORT_NAME); a summary written before it held
 * names (paths under those keys) gives the files' stems. *@title NULL when none. */
gboolean mm__plot_study_title(const MmJsonCtx *ctx, const cJSON *root, const char *prefix, char **title,
                              GError **error);

/* Seconds in a readable unit for a span of @span_s: the factor and its name. */
double mm__plot_time_unit(double span_s, const char **name);
/* A step between the numbers of an axis from 0 to @hi @axis_in inches long that keeps them
 * apart (1, 2, 2.5 or 5 times a power of ten). */
double mm__plot_tic_step(const MmPlotDoc *d, double hi, double axis_in);
/* A count (samples per second) up to @top in a readable unit: the factor and what an axis
 * label adds ("", " (thousands)", " (millions)", " (billions)"). */
double mm__plot_count_unit(double top, const char **name);
/* "1.76x", "0.54x", "0.032x": a speedup. (transfer full) */
char *mm__plot_speedup(double x);

/* The kinds: parse @inputs, size the figure, write blocks and script. */
typedef gboolean (*MmPlotKindFn)(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                                 const MmPlotOptions *o, GError **error);
gboolean mm__plot_timeline(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                           const MmPlotOptions *o, GError **error);
gboolean mm__plot_breakdown(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                            const MmPlotOptions *o, GError **error);
gboolean mm__plot_ranking(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                          const MmPlotOptions *o, GError **error);
gboolean mm__plot_pareto(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                         const MmPlotOptions *o, GError **error);
gboolean mm__plot_systems(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                          const MmPlotOptions *o, GError **error);
gboolean mm__plot_whatif(MmPlotDoc *d, const char *const *inputs, guint n, const char *out_name,
                         const MmPlotOptions *o, GError **error);

/* ---- a sweep's folder (plot_sweep.c), for ranking and pareto ---------------------------- */

typedef enum {
  MM_PLOT_POINT_OK,            /* fits, simulated */
  MM_PLOT_POINT_OOM_SIMULATED, /* does not fit, simulated anyway (sweep --include-oom) */
  MM_PLOT_POINT_OOM,           /* does not fit, pruned: no time */
} MmPlotPointStatus;

/* The dimensions a sweep may vary besides the strategies (and the system, in a sweep of several),
 * as points.csv names them. */
enum { MM_PLOT_DIM_NODES, MM_PLOT_DIM_PP, MM_PLOT_DIM_SCHEDULE, MM_PLOT_DIM_VSTAGES, MM_PLOT_DIM_MB,
       MM_PLOT_DIM_RECOMPUTE, MM_PLOT_DIM_ZERO, MM_PLOT_DIM_SYSTEM, MM_PLOT_N_DIMS };
extern const struct MmPlotDim {
  const char *column; /* in points.csv */
  const char *head;   /* a ranking's column header */
  gboolean integer;   /* else a name */
} mm__plot_dims[MM_PLOT_N_DIMS];

/* One row of points.csv. */
typedef struct {
  gint64 id;   /* the sweep's point index */
  guint line;  /* in points.csv */
  MmPlotPointStatus status;
  double sps;  /* samples per second; NAN when not simulated */
  double mem_bytes, cap_bytes; /* per device */
  char **strategy;             /* one per varied kind, as the CSV has it (transfer: owned) */
  char *dim[MM_PLOT_N_DIMS];   /* NULL when points.csv has no such column */
} MmPlotPoint;

/* A sweep's folder: points.csv, and the FSDP baseline, the best point and the Pareto set from
 * summary.json, checked against each other. */
typedef struct {
  char *csv, *summary;  /* their paths */
  GPtrArray *kinds;     /* the varied block kinds (the CSV's KIND_strategy columns) */
  GArray *pts;          /* MmPlotPoint, in file order */
  int base, best;       /* indexes into pts; -1 when the summary has none */
  double base_sps;      /* the baseline's samples/s (the summary's when it was simulated for reference) */
  gboolean base_fits;
  GArray *front;        /* guint indexes into pts: the summary's memory-throughput Pareto set */
  double cap_bytes;     /* every point's memory capacity; NAN when they differ */
  guint n[3];           /* points by status */
  char *title;          /* "MODEL on SYSTEM: CONFIG" from the summary's inputs; NULL when none */
} MmPlotSweep;

/* Reads @input (a sweep's folder, or its points.csv or summary.json) into @sw. Errors name the
 * file and the CSV line and column or the JSON path: MM_REPORT_ERROR_READ when a file is
 * missing or unreadable, _INPUT when it is not what a sweep writes. */
gboolean mm__plot_sweep_read(const char *input, MmPlotSweep *sw, GError **error);
void mm__plot_sweep_clear(MmPlotSweep *sw);
/* Point @i's strategies: "fsdp8>ddp* \u00b7 mp(table)*", the kinds' names before them when
 * @kinds. (transfer full) */
char *mm__plot_sweep_strategies(const MmPlotSweep *sw, guint i, gboolean kinds);
