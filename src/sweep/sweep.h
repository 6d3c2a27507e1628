/* sweep: whole simulations of points (loaded inputs x overrides -> report), the unit of sweeps and what-if studies. */
#pragma once

#include "report/report.h"

G_BEGIN_DECLS

/* The three loaded input files of a study: parsed once, never edited, shared by every
 * point (and thread) that simulates them. */
typedef struct {
  MmModel *model;
  MmHardware *hardware;
  MmParallelConfig *config;
} MmInputs;

/* Loads the three files (config errors are MM_CONFIG_ERROR). (transfer full) */
MmInputs *mm_inputs_load(const char *model, const char *hardware, const char *config, GError **error);
/* The inputs of @in on another system: the system file @hardware loaded, @in's model and config
 * borrowed (@in must outlive the result); free it with mm_inputs_free_system. (transfer full) */
MmInputs *mm_inputs_with_hardware(const MmInputs *in, const char *hardware, GError **error);
/* Frees inputs made by mm_inputs_with_hardware: their system, not the borrowed model and config. */
void mm_inputs_free_system(MmInputs *in);
void mm_inputs_free(MmInputs *in);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmInputs, mm_inputs_free)
/* Adds the inputs' names ("model", "hardware", "config": the files' name fields) and paths
 * ("model_path", ...) to @obj, as summary.json and whatif --json carry them. */
void mm_sweep_inputs_json(const MmInputs *in, cJSON *obj);

/* Process-wide allocator settings for running many simulations in one process (sweeps,
 * what-if studies, benchmarks); call once at the start of main(). A point allocates and frees
 * plan and engine arrays of 128 KB to a few MB; glibc's defaults serve those from fresh
 * mappings or give the heap's top back to the kernel after each point, and the next point
 * faults the pages in again: 45% of a whole LLaMA-2-70B point (perf: page faults, brk, munmap;
 * madmax-bench us_per_point 130-180 -> 74-80). Keeps mappings for blocks above 32 MB (the
 * per-device runs' large arrays) and the heap's free top up to 256 MB. Nothing elsewhere. */
void mm_simulation_tune_allocator(void);

/* One complete simulation of one point and everything it produced. */
typedef struct {
  MmInputs *owned;          /* the inputs when the simulation loaded them itself (else NULL) */
  const MmInputs *inputs;   /* (transfer none) */
  MmPoint point;
  MmScenario *scenario;
  /* the model, system and config as this point sees them (the scenario's views; read only) */
  const MmModel *model;
  const MmHardware *hardware;
  const MmParallelConfig *config;
  MmGraph *graph;
  MmMemory *memory;
  MmPlan *plan;
  MmEngine *engine;
  MmRunMetrics metrics;     /* the iteration (serving: the prefill) */
  /* Set before running to keep the whole iteration in plan and engine (traces, per-stage
   * tables); otherwise a pipeline or gradient-accumulation schedule whose steady periods repeat
   * exactly is simulated with fewer micro-batches, its metrics those of the whole iteration
   * (mm_report_run_metrics_steady), and plan and engine those of the shorter run. */
  gboolean timeline;
  uint32_t steady_micro_steps; /* micro-batches simulated when that reduction applied, else 0 */
  /* Set before running to replay engine runs met before (a sweep's memo, borrowed; NULL: none):
   * the same answer (mm_engine_memo_run), without simulating again. */
  MmEngineMemo *memo;
  /* serving only: one decode step, and the request-level figures */
  MmGraph *decode_graph;
  gboolean graphs_shared;   /* graph and decode_graph belong to an MmGraphCache */
  MmPlan *decode_plan;
  MmEngine *decode_engine;
  MmRunMetrics decode_metrics;
  MmServingMetrics serving;
} MmSimulation;

/* Derives point @pt's scenario, graphs and memory (no plan or engine yet: a sweep prunes
 * points that do not fit here). (transfer full) */
MmSimulation *mm_simulation_prepare(const MmInputs *in, const MmPoint *pt, GError **error);
/* Graphs shared by the points of a study: a point's graph depends on its model and pass only, and
 * points that leave the loaded model as it is build the same one (not: a sequence length the
 * model's blocks do not have, from the point or the config; inference dropping MTP modules). A
 * handful of (model, pass) graphs, built on first use; thread-safe. */
typedef struct MmGraphCache MmGraphCache;
MmGraphCache *mm_graph_cache_new(void);
void mm_graph_cache_free(MmGraphCache *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmGraphCache, mm_graph_cache_free)
/* mm_simulation_prepare taking the graphs from @cache (NULL: building its own) where the point's
 * model is the loaded one; @cache must outlive the result. (transfer full) */
MmSimulation *mm_simulation_prepare_cached(const MmInputs *in, const MmPoint *pt, MmGraphCache *cache,
                                           GError **error);
/* Lowers and runs a prepared simulation. */
gboolean mm_simulation_run(MmSimulation *sim, gboolean per_device, GError **error);

/* Simulates point @pt (NULL: the files as loaded) of @in, which must outlive the result:
 * derives the scenario, builds the graphs (serving: prefill and decode passes), memory,
 * plan and engine, runs one iteration. Config errors are MM_CONFIG_ERROR; engine failures
 * MM_ENGINE_ERROR. (transfer full) */
MmSimulation *mm_simulation_new_point(const MmInputs *in, const MmPoint *pt, gboolean per_device, GError **error);

/* Changes applied to the inputs before simulating (0 / FALSE: keep the file's). */
typedef struct {
  int64_t nodes;        /* nodes of the system's design */
  int64_t global_batch; /* samples */
  int64_t micro_batch;
  int64_t pipeline_degree; /* pipeline stages */
  gboolean per_device;
  gboolean calibrated; /* the device's calibrated sibling where it has one (mm_hardware_use_calibrated) */
  gboolean timeline;   /* keep the whole iteration's plan and engine (MmSimulation.timeline) */
} MmSimOptions;

/* Loads the three files and simulates the point @opt describes (may be NULL). (transfer full) */
MmSimulation *mm_simulation_new(const char *model, const char *hardware, const char *config, const MmSimOptions *opt,
                                GError **error);

/* The graph a scenario runs (serving: the prefill pass; else the model at its seq_len) and,
 * for serving, the decode step's in @decode (else NULL). (transfer full) */
MmGraph *mm_simulation_graphs(const MmScenario *s, MmGraph **decode);

void mm_simulation_free(MmSimulation *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmSimulation, mm_simulation_free)

/* ---- design-space sweeps ---------------------------------------------------- */

/* One varied block kind and its candidate strategy hierarchies. */
typedef struct {
  MmBlockKind kind;
  MmStrategyEntry *choices; /* keys point at static kind names */
  guint n_choices;
} MmSweepKind;

#define MM_SWEEP_MAX_KINDS 3

/* The points of a sweep: the product of its dimensions, decoded from an index. */
typedef struct {
  char *path;                 /* the space file, "full", or NULL (the default space) */
  MmSweepKind *kinds;         /* transformer, mlp, embedding_bag: those the model has */
  guint n_kinds;
  int64_t *nodes;             /* 0: the system's */
  guint n_nodes;
  int64_t *pp, *vpp, *micro;  /* vpp, micro 0: the config's (vpp: or the point's schedule's) */
  guint n_pp, n_vpp, n_micro;
  int *recompute;             /* 1 + MmRecompute; 0: the config's */
  guint n_recompute;
  int *schedule;              /* 1 + MmPipeSchedule; 0: the config's */
  guint n_schedule;
  int *zero;
  guint n_zero;
  guint max_levels;
  uint64_t n_points;
} MmSweepSpace;

/* Builds the space from loaded inputs and a space file (NULL: the default, the strategies of
 * every varied kind; "full": every dimension). Errors name the file and JSON path. */
MmSweepSpace *mm_sweep_space_new(const MmInputs *in, const char *path, GError **error);
void mm_sweep_space_free(MmSweepSpace *sp);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmSweepSpace, mm_sweep_space_free)
void mm_sweep_space_write_schema(FILE *out);

/* Point @i of a space: its overrides and the strategy entries they point at. Not to be
 * copied (point.strategies points into entries). */
typedef struct {
  MmPoint point;
  MmStrategyEntry entries[MM_BLOCK_KIND_COUNT];
  guint n_entries;
  uint32_t choice[MM_SWEEP_MAX_KINDS]; /* per varied kind: its hierarchy */
  int zero;
} MmSweepPoint;
void mm_sweep_space_point(const MmSweepSpace *sp, const MmModel *m, uint64_t i, MmSweepPoint *out);

/* The key under which a sweep knows point @p of system @system (its index among the sweep's systems): equal
 * exactly for the same point of the same system (mm_point_key). (transfer full) */
GBytes *mm_sweep_point_key(const MmSweepPoint *p, guint system);

/* Whether point @i of @sp is a point of a lower index again (the same mm_point_key), one of another
 * ZeRO stage: a ZeRO stage is no part of a point whose strategies have no ddp level, and the stage is
 * the only dimension a point may not hold. A sweep evaluates such a point once. */
gboolean mm_sweep_space_repeat(const MmSweepSpace *sp, const MmModel *m, uint64_t i);

/* "tp8>fsdp*": a hierarchy innermost first, "*" for the level that takes what is left. (transfer full) */
char *mm_sweep_entry_text(const MmStrategyEntry *e);

/* One system of a sweep: its inputs (one model and config shared by every system) and space.
 * A sweep's point index runs over the systems' spaces one after the other: the system is the
 * outermost dimension. */
typedef struct {
  const MmInputs *inputs;     /* (transfer none) */
  const MmSweepSpace *space;  /* (transfer none) */
  uint64_t first;             /* its first point in the sweep's index */
} MmSweepSystem;

/* Sets each system's first point; returns the sweep's point count. */
uint64_t mm_sweep_systems_index(MmSweepSystem *sys, guint n);
/* The system of the sweep's point @i and the point's index in that system's space. */
guint mm_sweep_locate(const MmSweepSystem *sys, guint n, uint64_t i, uint64_t *local);
/* A system's name as points.csv's system column holds it: commas as semicolons, control
 * characters as spaces (the CSV is not quoted). (transfer full) */
char *mm_sweep_system_label(const MmHardware *hw);

/* Derives the sweep's points @points (at most 65,535) without simulating them (scenario, graphs, memory), on
 * @jobs threads, for the estimate before a sweep: each one's seconds into @seconds, into @fits whether it is
 * valid and fits in memory (with @include_oom: valid), and into @repeat whether the sweep will evaluate it
 * at all (mm_sweep_space_repeat: not when it repeats a point before it; then it is not derived either). */
void mm_sweep_sample(const MmSweepSystem *sys, guint n_systems, gboolean include_oom, const uint64_t *points, guint n,
                     guint jobs, double *seconds, gboolean *fits, gboolean *repeat);

/* Points of a sweep evaluated ahead of it, to time them (the run's estimate): each point's row
 * as the run would write it, which the run then takes instead of evaluating the point again. */
typedef struct MmSweepProbes MmSweepProbes;
#define MM_SWEEP_PROBES 8

/* Evaluates the sweep's points @points (up to MM_SWEEP_PROBES of them) on @jobs threads. (transfer full) */
MmSweepProbes *mm_sweep_probe(const MmSweepSystem *sys, guint n_systems, gboolean include_oom, const uint64_t *points,
                              guint n, guint jobs);
/* The seconds the probes that were simulated took (on their threads), their count in @simulated. */
double mm_sweep_probe_seconds(const MmSweepProbes *pr, guint *simulated);
/* Probes whose rows no run has taken (a run takes those of the points it writes). */
guint mm_sweep_probes_left(const MmSweepProbes *pr);
void mm_sweep_probes_free(MmSweepProbes *pr);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmSweepProbes, mm_sweep_probes_free)

typedef struct {
  const MmSweepSystem *systems; /* (transfer none); more than one: points.csv has a system column */
  guint n_systems;
  const char *dir;            /* output folder */
  guint jobs;                 /* threads (0: all cores) */
  gboolean include_oom;       /* simulate points that do not fit */
  gboolean resume;            /* continue DIR/points.csv */
  guint shard, shards;        /* this process runs points i with i % shards == shard */
  gboolean sharded;           /* a shard to merge (--shard given, an MPI rank): it keeps DIR/shard.json even
                               * when shards is 1 */
  volatile int *stop;         /* set asynchronously (SIGINT): finish the points under way and return */
  gboolean progress;          /* a progress line on stderr */
  const char *signature;      /* what the sweep is of (inputs, space, options): DIR/sweep.json */
  MmSweepProbes *probes;      /* points already evaluated (NULL: none); the run takes their rows */
  gsize memo_bytes;           /* engine runs kept for replay, at most this many bytes (0: none; the
                               * same rows either way, see MmSimulation.memo) */
  gboolean no_dedup;          /* evaluate every point, also one met before under another index (equal
                               * mm_point_key; by default its outcome is reused: the same rows either way) */
} MmSweepOptions;

#define MM_SWEEP_REASONS 8 /* rules a run's stats tell apart; the points of further rules count as others */

/* The points a run wrote that the scenario rejected for one rule (mm_json_rule: one check, whatever
 * its numbers), by the first of them. */
typedef struct {
  uint64_t rule;    /* 0: other rules (beyond MM_SWEEP_REASONS, or a rejection no rule noted) */
  uint64_t points;
  uint64_t example; /* the first such point */
  char *why;        /* its message, "point N: FILE: JSON path: reason" (transfer full) */
} MmSweepRejection;

typedef struct {
  uint64_t points, valid, oom, invalid, failed, simulated, written;
  uint64_t replayed;          /* engine runs the memo answered (varies with the threads' timing) */
  uint64_t reused;            /* points whose outcome an earlier point of the same key gave (varies likewise) */
  gboolean interrupted;
  /* the rejected points this run wrote by rule, most points first (a tie: the earlier example), the
   * others (rule 0) last; of all the sweep's (this shard's) unless the run resumed one */
  MmSweepRejection rejected[MM_SWEEP_REASONS + 1];
  guint n_rejected;
  gboolean resumed;           /* the run began after the first point: earlier ones are not in its counts */
  char *first_failure;        /* an internal failure (a bug): the first (transfer full) */
} MmSweepStats;

/* Frees what @st holds (the rejections' messages, the failure). */
void mm_sweep_stats_clear(MmSweepStats *st);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MmSweepStats, mm_sweep_stats_clear)

/* Runs the points of @o's space (this shard's) on a thread pool and streams DIR/points.csv in
 * point order (the same bytes for any jobs count, and after an interruption and --resume).
 * Fails on output errors and on a resume that does not match. */
gboolean mm_sweep_run(const MmSweepOptions *o, MmSweepStats *stats, GError **error);

/* The summary's objectives beyond the fixed ones (0: not asked): a training budget
 * (time-to-train ranks points by the time to process it) and a serving latency bound (the
 * most output tokens/s per device among the points whose time to first token and time per
 * output token are within it). */
typedef struct {
  double tokens, samples;
  double ttft_max_s, tpot_max_s;
} MmSweepBudget;

/* Writes DIR/summary.json from DIR/points.csv: the best point per objective, the baseline
 * (every varied kind FSDP over all devices) and each point's speedup over it, the best
 * strategy per layer kind, the memory-throughput Pareto set; with a latency bound, how many
 * points meet it and the best of them; with several systems, each system's best points and the
 * time-vs-GPU-hours Pareto front within it and across all of them. (transfer full) */
cJSON *mm_sweep_summary(const char *dir, const MmSweepSystem *sys, guint n_systems, const MmSweepBudget *budget,
                        GError **error);

/* How a sweep.json (MmSweepOptions.signature) ends: its shard K of N; mm_sweep_merge reads it back. */
#define MM_SWEEP_SIG_SHARD ", \"shard\": %u, \"shards\": %u}\n"

/* A shard's progress, beside its points.csv: {"shard": K, "shards": N, "points": P (the sweep's),
 * "complete": false, "failed": 0} from the start of its run, "complete": true once every point of the
 * shard was evaluated (rows are written for valid points only: the rows alone cannot tell an
 * interrupted shard), "failed" then the points that run left out with an internal error (a run
 * resumed counts those it evaluated; a shard.json of an older madmax has no "failed"). */
#define MM_SWEEP_SHARD_FILE "shard.json"

/* Merges the points.csv of shard folders into DIR/points.csv in point order. The folders must be
 * the N shards of one sweep, each once (their sweep.json equal but for K/N), each row an index on
 * its shard after the one before, each complete (its shard.json); DIR/points.csv is replaced once
 * complete (DIR may be a shard's), and a summary.json there, which described other rows, removed.
 * @failed (may be NULL): the points the shards' runs left out with an internal error (shard.json). */
gboolean mm_sweep_merge(const char *dir, char **shard_dirs, guint n, uint64_t *failed, GError **error);

/* ---- what-if: scaled hardware, re-optimized strategies ---------------------------------- */

typedef struct {
  char *name;                  /* "baseline", "compute x10", "all together" */
  double scale[MM_SCALE_COUNT];/* 0: 1 */
  gboolean found;              /* some point of the space fits */
  uint64_t point;              /* the best (most samples/s) */
  char *strategies;            /* its strategies, as text */
  double samples_per_s, iteration_time_s, compute_s, comm_s, exposed_comm_s, memory_per_device_bytes;
  double comm_by_kind_s[MM_COLL_COUNT];
  double speedup;              /* over the baseline's best */
} MmWhatifRow;

typedef struct {
  cJSON *inputs;                 /* the study's inputs (mm_sweep_inputs_json) (transfer: owned) */
  MmWhatifRow *rows;
  guint n_rows;
  double joint_over_product;     /* all together / the product of the single speedups (> 1: super-linear) */
  double joint_over_best_single;
} MmWhatif;

/* For the system as loaded, each component of @factor (0 or 1: not asked) scaled alone, and
 * all of them together: the best point of @sp that fits on that system. (transfer full) */
MmWhatif *mm_whatif_run(const MmInputs *in, const MmSweepSpace *sp, const double factor[MM_SCALE_COUNT], guint jobs);
void mm_whatif_free(MmWhatif *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmWhatif, mm_whatif_free)
cJSON *mm_whatif_json(const MmWhatif *w);
void mm_whatif_text(FILE *out, const MmWhatif *w);

G_END_DECLS
