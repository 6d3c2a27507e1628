/* report: what madmax prints and writes: text tables, JSON documents, number formatting. */
#pragma once

#include <cjson/cJSON.h>
#include <stdio.h>

#include "config/config.h"
#include "engine/engine.h"
#include "graph/graph.h"
#include "plan/plan.h"

G_BEGIN_DECLS

#ifndef MM_CJSON_AUTOPTR_DEFINED /* shared with the other header that defines it */
#define MM_CJSON_AUTOPTR_DEFINED
G_DEFINE_AUTOPTR_CLEANUP_FUNC(cJSON, cJSON_Delete)
#endif

#define MM_REPORT_ERROR (mm_report_error_quark())
GQuark mm_report_error_quark(void);
typedef enum {
  MM_REPORT_ERROR_IO,    /* an output cannot be written */
  MM_REPORT_ERROR_INPUT, /* a result or trace given to plot is not what it needs (key, type, range) */
  MM_REPORT_ERROR_TOOL,  /* an external program (gnuplot) is missing or failed */
  MM_REPORT_ERROR_READ,  /* a result or trace given to plot is missing, unreadable or not JSON */
} MmReportError;

/* ---- describe ---------------------------------------------------------- */

/* The describe document: model totals, per-unit layers with per-sample costs,
 * and with a scenario the resolved strategies and per-device memory.
 * @s and @mem may be NULL (model only). (transfer full) */
/* @decode: serving configs' decode-step graph (then @g is the prefill's), else NULL. */
cJSON *mm_report_describe_json(const MmGraph *g, const MmGraph *decode, const MmScenario *s, const MmMemory *mem);

/* Human-readable version of the same. */
void mm_report_describe_text(FILE *out, const MmGraph *g, const MmGraph *decode, const MmScenario *s,
                             const MmMemory *mem);

/* Adds "kernel" (its per-sample shape) to @op, the describe object of layer @li; with a
 * scenario also "kernel_per_device": the forward call one device runs and the compute and
 * memory efficiency its time uses (a device curve or the utilization scalar). */
void mm_report_kernel_json(cJSON *op, const MmGraph *g, guint li, const MmScenario *s);
/* Adds "efficiency" (the device's scalars and curves with their sources) to @root; nothing
 * without a scenario. */
void mm_report_efficiency_json(cJSON *root, const MmScenario *s);
/* The kernels of one layer of each block: per sample, or with @s per device with the
 * efficiency each uses and where that comes from. */
void mm_report_kernels_text(FILE *out, const MmGraph *g, const MmScenario *s);
/* Adds "hardware_parameters" to @root: every behavioural network number of @hw with its value,
 * unit, origin (system file, fit file, default) and evidence; the paths left at defaults and
 * those given without provenance. */
void mm_report_hardware_params_json(const MmHardware *hw, cJSON *root);
/* The same as text: a summary line and the parameters at defaults. */
void mm_report_hardware_params_text(FILE *out, const MmHardware *hw);

/* The memory object of run and describe documents. (transfer full) */
cJSON *mm_report_memory_json(const MmMemory *mem, const MmModel *m);

/* Adds "model", "hardware" and "config" (names, paths, sizes) to @root; returns @root. */
cJSON *mm_report_inputs_json(const MmScenario *s, cJSON *root);

/* ---- run --------------------------------------------------------------- */

/* What `madmax run` reports, for the slowest device class (see docs/MODEL.md). */
typedef struct {
  double iteration_time_s;
  double samples_per_s, tokens_per_s;
  double mfu, model_flops;
  double compute_s;   /* serialized compute (GEMMs, attention, elementwise, optimizer) */
  /* the parts of compute_s and of embedding_s that collectives running beside the kernels added
   * (the device's overlap.collective_slowdown; docs/MODEL.md, "Interference") */
  double interference_compute_s, interference_embedding_s;
  double embedding_s; /* serialized embedding lookups */
  double comm_s;      /* serialized collectives */
  double comm_by_kind_s[MM_COLL_COUNT];
  double comm_by_reason_s[MM_REASON_COUNT];
  double compute_by_phase_s[MM_PHASE_COUNT];
  double comm_active_s;    /* wall time with any collective running */
  double compute_active_s; /* wall time with the compute stream busy */
  double exposed_comm_s;   /* comm_active minus its overlap with compute */
  double hidden_comm_s;
  double exposed_comm_fraction; /* exposed / comm_active, in [0, 1] */
  double idle_s;           /* neither computing nor communicating: pipeline bubble, waiting for peers */
  double bubble_fraction;  /* 1 - compute_active / iteration */
  /* fused and decomposed (overlapped) ops, over their groups (MmOpInfo.fused): wall time a group
   * spent computing only, communicating only, both at once, and stalled (inside its span, neither
   * its transfers nor the compute stream busy: a piece waiting for its shard); their communication
   * overlapping their compute counts as hidden above */
  uint32_t fused_groups, fused_ops;
  double fused_compute_s, fused_comm_s, fused_both_s, fused_stalled_s, fused_span_s;
  /* optimizer offload (docs/MODEL.md, "Optimizer offload"): serialized copies over the host link,
   * the CPU step, and the wall time host work ran while neither compute nor a collective did (in
   * idle_s) */
  double host_copy_s, host_step_s, host_exposed_s;
  double stream_busy_s[MM_STREAM_COUNT];
  uint32_t stream_ops[MM_STREAM_COUNT];
  uint32_t critical_class;
  uint32_t ops;
  uint64_t events;
} MmRunMetrics;

void mm_report_run_metrics(const MmPlan *p, const MmEngine *e, MmRunMetrics *out);
/* The metrics of the iteration of @micro_steps micro-batches that @p (lowered with fewer,
 * mm_plan_steady_micro_steps) stands for: FALSE, and @out untouched, unless every stage's steady
 * periods repeated exactly (same ops, times shifted by one period time) around a common time;
 * then the iteration is this run with the missing periods inserted there, and the figures are
 * this run's plus the missing periods' (what the window of one period time adds). Fused groups
 * and per-device runs are not reduced. */
gboolean mm_report_run_metrics_steady(const MmPlan *p, const MmEngine *e, uint32_t micro_steps, MmRunMetrics *out);
/* The metrics of the whole iteration that a cut program @p (mm_plan_cut) stands for: FALSE, and
 * @out untouched, unless the kept periods of each run repeat exactly (same ops, times shifted by
 * one period time) around some time inside them; then the iteration is this run with each run's
 * cut periods inserted there, and the figures are this run's plus what the window of one period
 * time adds, times the periods cut. */
gboolean mm_report_run_metrics_cut(const MmPlan *p, const MmEngine *e, MmRunMetrics *out);
/* The run document; @e (may be NULL) adds the per-behaviour table (stages, skewed ranks). */
cJSON *mm_report_run_json(const MmPlan *p, const MmEngine *e, const MmRunMetrics *r, const MmMemory *mem);
/* Per device behaviour (pipeline stage, busiest expert rank): end, compute busy, idle, memory. */
cJSON *mm_report_classes_json(const MmPlan *p, const MmEngine *e, const MmMemory *mem);
void mm_report_run_text(FILE *out, const MmPlan *p, const MmRunMetrics *r, const MmMemory *mem);

/* Serving (task inference with an "inference" object): a prefill and a decode step. */
typedef struct {
  int64_t sequences;        /* served together (the global batch) */
  int64_t prompt_tokens, output_tokens;
  double decode_context;    /* mean context of a decode step: prompt + output / 2 */
  double ttft_s;            /* time to first token: the prefill */
  double tpot_s;            /* time per output token: one decode step */
  double latency_s;         /* ttft + (output - 1) x tpot */
  double tokens_per_s;      /* generated tokens of all sequences / latency */
  double tokens_per_s_per_device;
  double decode_tokens_per_s; /* sequences / tpot: the steady decode rate */
  double kv_cache_bytes;    /* per device */
  double decode_hbm_bytes;  /* HBM bytes one decode step moves on the slowest device */
  double decode_flops;      /* executed FLOPs of that step */
  double decode_hbm_time_s; /* decode_hbm_bytes / nominal HBM bandwidth: the memory-bound floor */
  double decode_hbm_achievable_s; /* the same at the achievable bandwidth (x utilization.hbm) */
  double decode_kernel_s;   /* the step's serialized kernels, launches included */
  uint32_t decode_kernels;
  double decode_launch_s;   /* kernels x fixed cost per kernel (eager or graph replay) */
  double decode_comm_s;     /* the step's serialized collectives */
  uint32_t decode_collectives;
  gboolean cuda_graphs, custom_all_reduce;
} MmServingMetrics;

/* Fills @out from the prefill and decode runs. */
void mm_report_serving_metrics(const MmPlan *prefill, const MmRunMetrics *rp, const MmPlan *decode,
                               const MmRunMetrics *rd, const MmMemory *mem,
                               MmServingMetrics *out);
cJSON *mm_report_serving_json(const MmServingMetrics *sv);
void mm_report_serving_text(FILE *out, const MmServingMetrics *sv);

/* Chrome trace-event JSON (Perfetto, chrome://tracing): a process per device class,
 * a thread per stream, an event per op; @len gets its length. (transfer full) */
char *mm_report_trace(const MmPlan *p, const MmEngine *e, const MmPlan *decode, const MmEngine *de, gsize *len);
/* The same written to @path as one output (see MmOutputs). */
gboolean mm_report_write_trace(const MmPlan *p, const MmEngine *e, const MmPlan *decode, const MmEngine *de,
                               const char *path, GError **error);

/* ---- output ------------------------------------------------------------ */

/* The files one command writes (--json, --trace, --out, ...), committed together so that a
 * failed command leaves none of them behind. Destinations:
 *  - "-": standard output;
 *  - a regular file, or a name that does not exist yet: the content goes to a temporary file
 *    beside it, renamed over it once every output is ready (a reader never sees half a file;
 *    the replaced file's permissions are kept);
 *  - a symbolic link: followed; the file it leads to is replaced as above and the link stays
 *    (a link to a missing file is refused);
 *  - anything else (/dev/null, a FIFO, a terminal): opened and written in place, never replaced;
 *  - a directory: refused.
 * Errors (MM_REPORT_ERROR_IO) name the option and the path as the user typed them. */
typedef struct MmOutputs MmOutputs;
MmOutputs *mm_outputs_new(void);
/* Removes the temporaries of what was not committed. NULL-safe. */
void mm_outputs_free(MmOutputs *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmOutputs, mm_outputs_free)
/* Adds @len bytes of @data (transfer full, g_free) for @path, which the option @option ("--json";
 * may be NULL) named. */
void mm_outputs_add(MmOutputs *s, const char *option, const char *path, char *data, gsize len);
/* Adds @root, printed, with a final newline. */
void mm_outputs_add_json(MmOutputs *s, const char *option, const char *path, const cJSON *root);
/* For an external program (gnuplot) that writes a file itself: the path of an empty temporary
 * it should write, committed to @path with the rest; NULL and @error when @path cannot be
 * written (checked now). (transfer none: valid until commit or free) */
const char *mm_outputs_stage_file(MmOutputs *s, const char *option, const char *path, GError **error);
/* Writes every output: first all temporaries (any failure: nothing written, @s keeps nothing),
 * then stdout and devices, then the renames. The outputs are gone from @s afterwards. */
gboolean mm_outputs_commit(MmOutputs *s, GError **error);

/* An option naming a file: "--json" and its path. */
typedef struct {
  const char *option;
  const char *path; /* NULL: not given (skipped) */
} MmPathArg;
/* Before the work a command's outputs wait for: whether each of @outputs can be written (the
 * checks of commit: not a directory, writable; a new file's folder exists and takes files) and
 * names none of @inputs, the files the command reads (a result written over its own model or
 * measurements would destroy them). Both arrays end at an entry whose option is NULL. A long run
 * (a calibration on a GPU, a validation) so never ends in a refusal of where to put its result.
 * MM_REPORT_ERROR_IO naming the option and the path. */
gboolean mm_outputs_check(const MmPathArg *outputs, const MmPathArg *inputs, GError **error);

/* Writes @root to @path ("-" = stdout) as a single MmOutputs. */
gboolean mm_report_write_json(const cJSON *root, const char *path, GError **error);

/* ---- text tables and numbers ------------------------------------------- */

typedef struct MmTable MmTable;

/* A left/right aligned text table; columns whose header starts with '<' are left-aligned. */
MmTable *mm_table_new(guint ncols, const char *const *headers);
void mm_table_add(MmTable *t, ...); /* ncols strings (transfer none) */
void mm_table_addv(MmTable *t, char **cells); /* ncols strings (transfer full, each freed) */
void mm_table_print(const MmTable *t, FILE *out, const char *indent);
void mm_table_free(MmTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmTable, mm_table_free)

/* "68.98 B", "1.25 T", "512" (transfer full) */
char *mm_fmt_count(double v);
/* "12.50 GiB" (transfer full) */
char *mm_fmt_bytes(double v);
/* "1.23 TFLOP" (transfer full) */
char *mm_fmt_flops(double v);
/* "12.3 ms" (transfer full) */
char *mm_fmt_seconds(double v);

/* ---- plots (gnuplot) --------------------------------------------------- */

typedef enum {
  MM_PLOT_TIMELINE,  /* a trace of madmax run --trace: ops per device class and stream over time */
  MM_PLOT_BREAKDOWN, /* run results (madmax run --json): iteration time stacked by what fills it */
  MM_PLOT_RANKING,   /* a sweep's folder: its points ranked by samples/s, speedups over FSDP */
  MM_PLOT_PARETO,    /* a sweep's folder: memory per device vs samples/s, the Pareto front */
  MM_PLOT_WHATIF,    /* madmax whatif --json: the speedup of each scaled system */
  MM_PLOT_SYSTEMS,   /* a sweep of several systems: time vs GPU-hours, the front across systems */
  MM_PLOT_COUNT
} MmPlotKind;
extern const char *const mm_plot_kind_names[];

typedef struct {
  double from_s, to_s; /* timeline window (to_s <= from_s: the whole iteration) */
  const char *title;   /* NULL: from the run's names (model, system, config) */
  double width_in, height_in; /* figure size; 0: page width, the height the rows need */
  double font_pt;             /* text size; 0: by the width (column or page text) */
} MmPlotOptions;

/* --size: a preset (column 3.5 x 2.4 in, page 7 x 3.5 in, slide 10 x 5.6 in) or WxH in
 * inches (1 to 40, an optional "in"), into @o's size and font. FALSE when @s is neither. */
gboolean mm_plot_parse_size(const char *s, MmPlotOptions *o);

/* The gnuplot script drawing @kind from @inputs (a trace; result files or directories of
 * them; a sweep's folder; a what-if JSON) into @out, whose extension (.png, .svg, .pdf) picks the terminal, and in @data
 * (transfer full) the data file it reads: every number and every name from the inputs.
 * The script reads the data from beside itself (see mm_plot_data_path); no text from an
 * input or a file name is ever script text. (transfer full) */
char *mm_plot_script(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                     char **data, GError **error);
/* Where the script at @script_path reads its data: F.gp -> F.dat, else F + ".dat". (transfer full) */
char *mm_plot_data_path(const char *script_path);
/* Draws it with gnuplot (in a private directory, on names madmax chose); @out appears only
 * when gnuplot succeeded. */
gboolean mm_plot_render(MmPlotKind kind, const char *const *inputs, guint n, const char *out, const MmPlotOptions *o,
                        GError **error);
/* Writes @bytes to @path: a regular or new file is replaced atomically (a temporary beside
 * it, renamed); a device, FIFO or symbolic link is written through, never replaced.
 * Errors name @path. */
gboolean mm_plot_write_file(const char *path, const char *bytes, gsize len, GError **error);

G_END_DECLS
