/* cmd_sweep: `madmax sweep`: every valid strategy (and, where asked, pipeline, batch, recompute,
 * ZeRO and node choices) of one model on one system, ranked; `madmax sweep merge` joins shards. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "report/report.h"
#include "sweep/sweep.h"

#ifdef MM_HAVE_MPI
#include <mpi.h>
#endif

/* Under mpirun (an MPI build): each rank runs the shard rank/size into DIR/rank-K, rank 0
 * merges them into DIR in point order (the bytes of one process) and writes the summary. */
typedef struct {
  gboolean on;
  int rank, size;
} Mpi;

static Mpi mpi_start(int *argc, char ***argv)
{
  Mpi m = {FALSE, 0, 1};
#ifdef MM_HAVE_MPI
  if (!g_getenv("OMPI_COMM_WORLD_SIZE") && !g_getenv("PMI_SIZE")) return m; /* not under mpirun */
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &m.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m.size);
  m.on = m.size > 1;
  if (!m.on) MPI_Finalize();
#else
  (void)argc, (void)argv;
#endif
  return m;
}

/* Waits for every rank; TRUE when all of them succeeded. */
static gboolean mpi_all_ok(const Mpi *m, gboolean ok)
{
#ifdef MM_HAVE_MPI
  int mine = ok ? 1 : 0, all = 0;
  if (m->on) MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return m->on ? all == 1 : ok;
#else
  (void)m;
  return ok;
#endif
}

static void mpi_end(const Mpi *m)
{
#ifdef MM_HAVE_MPI
  if (m->on) MPI_Finalize();
#else
  (void)m;
#endif
}

static volatile int stop_flag = 0;

static void on_sigint(int sig)
{
  (void)sig;
  stop_flag = 1;
}

/* What a sweep is of, for --resume to check: the inputs' paths and contents, the space (a file,
 * or "full") and the options that change the rows (--nodes when given). (transfer full) */
static char *signature(const char *const files[4], gboolean full_space, char **more_systems, gint64 nodes,
                       gboolean include_oom, guint shard, guint shards)
{
  GString *s = g_string_new("{");
  static const char *const keys[] = {"model", "hardware", "config", "space"};
  for (guint i = 0; i < 4; i++) {
    g_autofree char *text = NULL;
    gsize len = 0;
    g_autofree char *sum = files[i] && g_file_get_contents(files[i], &text, &len, NULL)
                             ? g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len)
                             : g_strdup("");
    g_autofree char *esc = g_strescape(files[i] ? files[i] : i == 3 && full_space ? "full" : "", NULL);
    g_string_append_printf(s, "%s\"%s\": {\"path\": \"%s\", \"sha256\": \"%s\"}", i ? ", " : "", keys[i], esc, sum);
  }
  for (guint i = 0; more_systems && more_systems[i]; i++) { /* the systems after the first */
    g_autofree char *text = NULL;
    gsize len = 0;
    g_autofree char *sum = g_file_get_contents(more_systems[i], &text, &len, NULL)
                             ? g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len)
                             : g_strdup("");
    g_autofree char *esc = g_strescape(more_systems[i], NULL);
    g_string_append_printf(s, "%s{\"path\": \"%s\", \"sha256\": \"%s\"}", i ? ", " : ", \"more_systems\": [", esc,
                           sum);
    if (!more_systems[i + 1]) g_string_append_c(s, ']');
  }
  if (nodes > 0) g_string_append_printf(s, ", \"nodes\": %" G_GINT64_FORMAT, nodes);
  g_string_append_printf(s, ", \"include_oom\": %s" MM_SWEEP_SIG_SHARD, include_oom ? "true" : "false",
                         shard, shards);
  return g_string_free(s, FALSE);
}

static void print_point(const cJSON *p, const char *what)
{
  if (!p) return;
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "strategies");
  printf("  %-28s", what);
  for (const cJSON *k = st ? st->child : NULL; k; k = k->next) printf(" %s %s", k->string, k->valuestring);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "samples_per_s");
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(p, "speedup_over_fsdp");
  const cJSON *pp = cJSON_GetObjectItemCaseSensitive(p, "pipeline_degree");
  if (pp && pp->valuedouble > 1) printf(" pp %.0f", pp->valuedouble);
  if (t) printf(": %.4g samples/s", t->valuedouble);
  if (sp) printf(" (%.2fx FSDP)", sp->valuedouble);
  const cJSON *fits = cJSON_GetObjectItemCaseSensitive(p, "fits");
  if (cJSON_IsFalse(fits)) printf(", does NOT fit in memory (simulated for reference)");
  printf("\n");
}

/* A latency bound option: a positive number of milliseconds -> seconds; FALSE with a message. */
static gboolean parse_bound_ms(const char *option, const char *text, double *out_s)
{
  char *end = NULL;
  const double v = text ? g_ascii_strtod(text, &end) : 0;
  if (text && (end == text || *end || !isfinite(v) || !(v > 0) || v > 1e9)) {
    g_autofree char *shown = mm_config_printable(text);
    fprintf(stderr, "madmax: %s %s: expected a positive number of milliseconds (at most 1e9)\n", option,
            *text ? shown : "''");
    return FALSE;
  }
  *out_s = text ? v * 1e-3 : 0;
  return TRUE;
}

/* Before the work: the files the sweep writes in @dir (points.csv, sweep.json, summary.json; a
 * shard's shard.json) are none of its inputs, the files the systems name included. A folder yet to
 * be made holds none; the runner makes it. */
static gboolean check_out(const char *dir, const char *model, char **hardware, guint n_hardware, const char *config,
                          const char *space, guint shards, GError **error)
{
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) return TRUE;
  static const char *const names[] = {"points.csv", "sweep.json", "summary.json", MM_SWEEP_SHARD_FILE};
  char *paths[G_N_ELEMENTS(names)] = {NULL};
  MmPathArg outputs[G_N_ELEMENTS(names) + 1] = {{NULL, NULL}};
  for (guint i = 0; i < G_N_ELEMENTS(names) - (shards > 1 ? 0 : 1); i++) {
    paths[i] = g_build_filename(dir, names[i], NULL);
    outputs[i] = (MmPathArg){"--out", paths[i]};
  }
  g_autoptr(GArray) inputs = g_array_new(TRUE, TRUE, sizeof(MmPathArg));
  g_array_append_val(inputs, ((MmPathArg){"--model", model}));
  for (guint k = 0; k < n_hardware; k++) g_array_append_val(inputs, ((MmPathArg){"--hardware", hardware[k]}));
  g_array_append_val(inputs, ((MmPathArg){"--config", config}));
  if (space && strcmp(space, "full") != 0) g_array_append_val(inputs, ((MmPathArg){"--space", space}));
  gboolean ok = mm_cli_outputs_check(outputs, (const MmPathArg *)(void *)inputs->data, error);
  for (guint i = 0; i < G_N_ELEMENTS(paths); i++) g_free(paths[i]);
  return ok;
}

static int sweep_merge(int argc, char **argv)
{
  g_autofree char *out_dir = NULL;
  GOptionEntry entries[] = {
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out_dir, "Folder of the merged points.csv", "DIR"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("SHARD_DIR... - join the shards of one sweep");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx, "Merges the points.csv of `madmax sweep --shard K/N` runs into one, in point\n"
                                    "order: the same bytes as the sweep run in one process.");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (!out_dir || argc < 2) {
    fprintf(stderr, "madmax: sweep merge needs --out DIR and the shard folders\nTry 'madmax sweep merge --help'.\n");
    return MM_EXIT_INPUT;
  }
  g_autoptr(GError) error = NULL;
  uint64_t failed = 0;
  if (!mm_sweep_merge(out_dir, argv + 1, (guint)(argc - 1), &failed, &error)) return mm_cli_fail(error);
  if (failed) {
    fprintf(stderr, "madmax: the shards' runs left %" G_GUINT64_FORMAT " point%s out of points.csv with an internal "
                    "error (each run named its first; please report it)\n", failed, failed == 1 ? "" : "s");
    return MM_EXIT_INTERNAL;
  }
  return MM_EXIT_OK;
}

static int sweep_main(int argc, char **argv, const Mpi *mpi);

int mm_cmd_sweep(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "merge") == 0) return sweep_merge(argc - 1, argv + 1);
  Mpi mpi = mpi_start(&argc, &argv);
  /* Ctrl-C from the start to the end: while loading and estimating it stops the sweep before its
   * first point, while running it finishes the points under way and writes them, after it is
   * ignored (the summary follows); never a kill halfway (exit 130 when interrupted) */
  void (*old)(int) = signal(SIGINT, on_sigint);
  int rc = sweep_main(argc, argv, &mpi);
  signal(SIGINT, old);
  mpi_end(&mpi);
  return rc;
}

static int sweep_main(int argc, char **argv, const Mpi *mpi)
{
  g_autofree char *space_path = NULL, *out_dir = NULL, *shard_text = NULL, *ttft_text = NULL, *tpot_text = NULL;
  gint jobs = 0, memo_mb = 0;
  gdouble budget_tokens = 0, budget_samples = 0;
  gboolean include_oom = FALSE, resume = FALSE, yes = FALSE, quiet = FALSE;
  g_autoptr(GPtrArray) hw_list = g_ptr_array_new_with_free_func(g_free);
  MmInputPaths paths = {.hardware_list = hw_list};
  GOptionEntry entries[] = {
    {"space", 's', 0, G_OPTION_ARG_FILENAME, &space_path, "Sweep-space file (docs/SCHEMA.md), or 'full' (default: the strategies of every layer kind)", "S"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out_dir, "Output folder: points.csv, summary.json (default results/sweep)", "DIR"},
    {"jobs", 'J', 0, G_OPTION_ARG_INT, &jobs, "Threads (default: all cores)", "N"},
    {"include-oom", 0, 0, G_OPTION_ARG_NONE, &include_oom, "Simulate points that do not fit in memory too (else pruned before simulating)", NULL},
    {"resume", 0, 0, G_OPTION_ARG_NONE, &resume, "Continue an interrupted sweep in --out", NULL},
    {"shard", 0, 0, G_OPTION_ARG_STRING, &shard_text, "Run the points i with i mod N = K only (Slurm arrays; join with sweep merge)", "K/N"},
    {"yes", 'y', 0, G_OPTION_ARG_NONE, &yes, "Run sweeps estimated to take over 10 minutes", NULL},
    {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No progress line", NULL},
    {"memo-mb", 0, 0, G_OPTION_ARG_INT, &memo_mb, "Keep up to M MiB of engine runs and replay them for points whose programs were simulated before (the same rows either way; e.g. 64). Default 0 (none): a point met again under another index (a ZeRO stage its strategies ignore) is evaluated once anyway, and other points rarely lower programs simulated before (5 of the LLaMA-2-70B bench sweep's 152 runs), while digesting and keeping runs costs about 6% of simulating them", "M"},
    {"budget-tokens", 0, 0, G_OPTION_ARG_DOUBLE, &budget_tokens, "Time-to-train objective: the days to process T tokens (e.g. 1.4e12)", "T"},
    {"budget-samples", 0, 0, G_OPTION_ARG_DOUBLE, &budget_samples, "Time-to-train objective for a budget of S samples", "S"},
    {"ttft-max-ms", 0, 0, G_OPTION_ARG_STRING, &ttft_text, "Serving: the best point (most output tokens/s per GPU) among those whose time to first token is at most X ms", "X"},
    {"tpot-max-ms", 0, 0, G_OPTION_ARG_STRING, &tpot_text, "Serving: ... whose time per output token is at most Y ms (with --ttft-max-ms: both)", "Y"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- rank every valid parallelization of a model on a system");
  mm_cli_add_input_options(ctx, &paths);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Enumerates, for each layer kind of the model (transformer, mlp, embedding_bag), every ordered\n"
    "hierarchy of up to two strategies (the inner one over 2..gpus_per_node devices, the outer over\n"
    "the rest) that the strategy table allows, and their product across kinds; the other block kinds\n"
    "follow the first. A --space file widens or narrows it (pipeline degrees, virtual stages,\n"
    "micro-batches, recompute, ZeRO, node counts, up to three levels). Points whose degrees do not\n"
    "divide or whose groups straddle nodes are skipped; points that do not fit in memory are pruned\n"
    "before simulating (--include-oom simulates them). The inputs are parsed once; points run on a\n"
    "thread pool and stream to DIR/points.csv in point order (the same bytes for any --jobs, and\n"
    "after Ctrl-C or a kill and --resume); DIR/summary.json holds the best point per objective\n"
    "(throughput, time to train a --budget-tokens/--budget-samples budget, A100-normalized GPU-hours\n"
    "per sample, memory headroom, time per output token; serving under a --ttft-max-ms/--tpot-max-ms\n"
    "latency bound: the most output tokens/s per GPU among the points that meet it),\n"
    "the speedup over FSDP everywhere, the best strategy per layer kind with the others at FSDP,\n"
    "and the memory-throughput Pareto set.\n"
    "Several --hardware files sweep one model and config over several systems: the system is the\n"
    "outermost dimension of the point index, points.csv gains a system column (the system's name)\n"
    "and summary.json each system's best points and the time-vs-GPU-hours Pareto front across them\n"
    "(madmax plot --kind systems draws it).");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax sweep -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json --out results/dlrm-a\n"
    "  madmax sweep -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json --space full --yes\n"
    "  madmax sweep -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -H hardware/dgx-h100-2048.json \\\n"
    "      -c configs/llm-pretrain-fsdp.json --nodes 16 --out results/a100-h100\n"
    "  madmax sweep ... --out results/s --shard 0/4   (then: madmax sweep merge --out results/s results/s-0 ...)\n"
    "  mpirun -np 4 madmax sweep ... --out results/s   (an MPI build, cmake -DMM_MPI=ON: ranks split the points,\n"
    "      rank 0 merges them into results/s: the bytes of one process)\n");
  gboolean parsed = mm_cli_parse(ctx, &argc, &argv);
  g_autofree char *model_path = paths.model, *hw_path = paths.hardware, *cfg_path = paths.config;
  if (!parsed) return MM_EXIT_INPUT;
  if (argc > 1 || !model_path || !hw_path || !cfg_path) {
    fprintf(stderr, "madmax: sweep needs --model, --hardware and --config%s%s\nTry 'madmax sweep --help'.\n",
            argc > 1 ? "; unexpected " : "", argc > 1 ? argv[1] : "");
    return MM_EXIT_INPUT;
  }
  guint shard = 0, shards = 1;
  if (shard_text) {
    char *end = NULL;
    guint64 k = g_ascii_strtoull(shard_text, &end, 10), nn = 0;
    if (end && *end == '/') nn = g_ascii_strtoull(end + 1, &end, 10);
    if (!end || *end || nn < 1 || nn > 65536 || k >= nn) {
      fprintf(stderr, "madmax: --shard %s: expected K/N with 0 <= K < N <= 65536\n", shard_text);
      return MM_EXIT_INPUT;
    }
    shard = (guint)k, shards = (guint)nn;
  }
  if (jobs < 0 || jobs > 4096) {
    fprintf(stderr, "madmax: --jobs %d: expected 1 to 4096 (0: all cores)\n", jobs);
    return MM_EXIT_INPUT;
  }
  if (memo_mb < 0 || memo_mb > 1048576) {
    fprintf(stderr, "madmax: --memo-mb %d: expected 0 to 1048576 MiB (0: no memo)\n", memo_mb);
    return MM_EXIT_INPUT;
  }
  if (!(budget_tokens >= 0 && budget_tokens <= 1e18) || !(budget_samples >= 0 && budget_samples <= 1e18) ||
      (budget_tokens > 0 && budget_samples > 0)) {
    fprintf(stderr, "madmax: --budget-tokens / --budget-samples: one of them, from 0 to 1e18\n");
    return MM_EXIT_INPUT;
  }
  MmSweepBudget budget = {budget_tokens, budget_samples, 0, 0};
  if (!parse_bound_ms("--ttft-max-ms", ttft_text, &budget.ttft_max_s) ||
      !parse_bound_ms("--tpot-max-ms", tpot_text, &budget.tpot_max_s))
    return MM_EXIT_INPUT;
  if (mpi->on && shard_text) {
    fprintf(stderr, "madmax: --shard and mpirun both split the points; give one\n");
    return MM_EXIT_INPUT;
  }
  if (mpi->on) shard = (guint)mpi->rank, shards = (guint)mpi->size;
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in = NULL;
  g_autoptr(MmSweepSpace) sp = NULL;
  paths.model = model_path, paths.hardware = hw_path, paths.config = cfg_path;
  /* several --hardware: the first is system 0; the others share its model and config, each with
   * its own space (its node size) */
  const guint n_sys = MAX(1u, hw_list->len);
  const char *hw0_path = n_sys > 1 ? hw_list->pdata[0] : hw_path;
  paths.hardware = (char *)hw0_path;
  if (!mm_cli_study_load(&paths, space_path, &in, &sp, &error)) return mm_cli_fail(error);
  g_autoptr(GPtrArray) more_in = g_ptr_array_new_with_free_func((GDestroyNotify)mm_inputs_free_system);
  g_autoptr(GPtrArray) more_sp = g_ptr_array_new_with_free_func((GDestroyNotify)mm_sweep_space_free);
  g_autofree MmSweepSystem *sys = g_new0(MmSweepSystem, n_sys);
  sys[0] = (MmSweepSystem){in, sp, 0};
  if (n_sys > 1) {
    for (guint k = 1; k < n_sys; k++) {
      MmInputs *ik = mm_inputs_with_hardware(in, hw_list->pdata[k], &error);
      if (!ik) return mm_cli_fail(error);
      g_ptr_array_add(more_in, ik);
      if (paths.nodes > 0 && !mm_hardware_set_nodes(ik->hardware, paths.nodes, &error)) return mm_cli_fail(error);
      for (guint j = 0; j < k; j++)
        if (strcmp(sys[j].inputs->hardware->name, ik->hardware->name) == 0) {
          fprintf(stderr, "madmax: %s: $.name: \"%s\" is %s's name too; the systems of one sweep need distinct "
                          "names\n", (const char *)hw_list->pdata[k], ik->hardware->name, (const char *)hw_list->pdata[j]);
          return MM_EXIT_INPUT;
        }
      MmSweepSpace *sk = mm_sweep_space_new(ik, space_path, &error);
      if (!sk) return mm_cli_fail(error);
      g_ptr_array_add(more_sp, sk);
      sys[k] = (MmSweepSystem){ik, sk, 0};
    }
  }
  const uint64_t n_points = mm_sweep_systems_index(sys, n_sys);
  if ((ttft_text || tpot_text) && !in->config->serving.present) {
    fprintf(stderr, "madmax: %s: %s has no serving block; the latency bounds rank serving points (a serving config, "
                    "e.g. configs/llama3-70b-serving-tp8.json)\n", ttft_text ? "--ttft-max-ms" : "--tpot-max-ms",
            cfg_path);
    return MM_EXIT_INPUT;
  }
  if (!out_dir) out_dir = g_strdup("results/sweep");
  if (!check_out(out_dir, model_path, n_sys > 1 ? (char **)hw_list->pdata : &hw_path, n_sys, cfg_path, space_path,
                 shards, &error))
    return mm_cli_fail(error);

  /* how long: up to 256 points spread over the space derived (which are valid, which fit), and
   * MM_SWEEP_PROBES of those that fit, spread over them, simulated on the sweep's threads (the
   * first that fit would sit at the space's start: in a space with pipeline degrees its cheapest
   * points, and the estimate came out 7x short); the run takes their rows instead of simulating
   * them again */
  const guint threads = jobs ? (guint)jobs : MAX(1u, g_get_num_processors());
  double prep_s = 0;
  guint fit = 0, timed = 0;
  const guint probed = (guint)MIN(n_points, (uint64_t)256);
  uint64_t sample[256], fits[256];
  double sample_s[256];
  gboolean sample_fits[256], sample_repeat[256];
  guint repeats = 0;
  for (guint i = 0; i < probed; i++) sample[i] = n_points * i / probed;
  mm_sweep_sample(sys, n_sys, include_oom, sample, probed, threads, sample_s, sample_fits, sample_repeat);
  for (guint i = 0; i < probed; i++) {
    prep_s += sample_s[i];
    repeats += sample_repeat[i];
    if (sample_fits[i]) fits[fit++] = sample[i];
  }
  uint64_t timed_points[MM_SWEEP_PROBES];
  const guint n_timed = MIN(fit, (guint)MM_SWEEP_PROBES);
  for (guint j = 0; j < n_timed; j++) timed_points[j] = fits[(guint64)j * fit / n_timed];
  g_autoptr(MmSweepProbes) probe = mm_sweep_probe(sys, n_sys, include_oom, timed_points, n_timed, threads);
  const double sim_s = mm_sweep_probe_seconds(probe, &timed);
  /* a point that repeats one before it costs nothing (its row is repeated), one that does not fit its
   * preparation, one that does a probe's whole evaluation */
  const guint derived = probed - repeats;
  const double fit_share = derived ? (double)fit / derived : 0, prep = derived ? prep_s / derived : 0;
  const double per_point =
      (timed ? prep * (1 - fit_share) + sim_s / timed * fit_share : prep) * (probed ? (double)derived / probed : 1);
  const double est = per_point * (double)n_points / shards / threads;
  if (mpi->rank == 0)
    fprintf(stderr, "madmax: %" G_GUINT64_FORMAT " points (%u layer kind%s varied%s%s), about %.*f s on %u thread%s\n",
          n_points / shards, sp->n_kinds, sp->n_kinds == 1 ? "" : "s", n_sys > 1 ? ", several systems" : "",
          shards > 1 ? ", this shard" : "", est < 10 ? 1 : 0, est,
          threads, threads == 1 ? "" : "s");
  if (est > 600 && !yes) {
    fprintf(stderr, "madmax: that is over 10 minutes; give --yes to run it, or narrow it with --space\n");
    return MM_EXIT_INPUT;
  }

  const char *files[4] = {model_path, hw0_path, cfg_path, space_path && strcmp(space_path, "full") ? space_path : NULL};
  g_autoptr(GPtrArray) more_paths = g_ptr_array_new();
  for (guint k = 1; k < n_sys; k++) g_ptr_array_add(more_paths, hw_list->pdata[k]);
  g_ptr_array_add(more_paths, NULL);
  g_autofree char *sig = signature(files, space_path && strcmp(space_path, "full") == 0, (char **)more_paths->pdata,
                                   paths.nodes, include_oom, shard, shards);
  g_autofree char *rank_dir = mpi->on ? g_strdup_printf("%s/rank-%d", out_dir, mpi->rank) : NULL;
  MmSweepOptions o = {.systems = sys, .n_systems = n_sys, .dir = rank_dir ? rank_dir : out_dir, .jobs = (guint)jobs,
                      .include_oom = include_oom, .resume = resume, .shard = shard, .shards = shards,
                      .stop = &stop_flag, .progress = !quiet && isatty(2) && mpi->rank == 0, .signature = sig,
                      .probes = probe, .memo_bytes = memo_mb > 0 ? (gsize)memo_mb << 20 : 0,
                      .sharded = shard_text != NULL || mpi->on};
  g_auto(MmSweepStats) st = {0};
  gboolean ok = mm_sweep_run(&o, &st, &error);
  const char *failure = st.first_failure;
  if (mpi->on) { /* every rank has its shard: rank 0 joins them */
    const gboolean all = mpi_all_ok(mpi, ok && !st.interrupted);
    if (!ok) return mm_cli_fail(error);
    if (mpi->rank != 0) return st.interrupted ? 130 : MM_EXIT_OK;
    if (!all) {
      fprintf(stderr, "madmax: a rank failed or was interrupted; --resume continues every rank's shard\n");
      return st.interrupted ? 130 : MM_EXIT_INPUT;
    }
    g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func(g_free);
    for (int r = 0; r < mpi->size; r++) g_ptr_array_add(dirs, g_strdup_printf("%s/rank-%d", out_dir, r));
    uint64_t failed = 0;
    if (!mm_sweep_merge(out_dir, (char **)dirs->pdata, dirs->len, &failed, &error)) return mm_cli_fail(error);
    st.failed = failed; /* every rank's, rank 0's first failure the example when it has one */
    shards = 1; /* the summary of the whole sweep follows */
  }
  if (!ok) return mm_cli_fail(error);
  if (st.failed)
    fprintf(stderr, "madmax: internal error on %" G_GUINT64_FORMAT " point%s (left out of points.csv); the first: %s\n",
            st.failed, st.failed == 1 ? "" : "s", failure ? failure : "in another rank's run (it named it)");
  if (st.interrupted) {
    fprintf(stderr, "madmax: interrupted; %" G_GUINT64_FORMAT " points written to %s/points.csv: --resume continues\n",
            st.written, out_dir);
    return 130;
  }
  if (shards > 1) {
    fprintf(stderr, "madmax: shard %u/%u done (%s/points.csv); join the shards with madmax sweep merge\n", shard, shards,
            out_dir);
    return MM_EXIT_OK;
  }
  g_autoptr(cJSON) sum = mm_sweep_summary(out_dir, sys, n_sys, &budget, &error);
  if (!sum) return mm_cli_fail(error);
  g_autofree char *sum_path = g_build_filename(out_dir, "summary.json", NULL);
  if (!mm_report_write_json(sum, sum_path, &error)) return mm_cli_fail(error);

  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(sum, "points");
  if (n_sys == 1) printf("sweep    %s on %s (%s)\n", in->model->name, in->hardware->name, in->config->name);
  else printf("sweep    %s on %u systems (%s)\n", in->model->name, n_sys, in->config->name);
  printf("points   %.0f in the space: %.0f valid (%.0f out of memory%s), %.0f rejected by the scenario\n",
         cJSON_GetObjectItemCaseSensitive(pts, "in_space")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(pts, "valid")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(pts, "out_of_memory")->valuedouble, include_oom ? ", simulated" : ", pruned",
         cJSON_GetObjectItemCaseSensitive(pts, "rejected_by_scenario")->valuedouble);
  for (guint k = 0; k < st.n_rejected && !mpi->on; k++) {
    const MmSweepRejection *x = &st.rejected[k];
    const char *what = st.resumed ? "rejected (this run's)" : "rejected";
    printf("  %-28s %" G_GUINT64_FORMAT " point%s%s, e.g. %s\n", k ? "" : what, x->points, x->points == 1 ? "" : "s",
           x->rule ? "" : " for other rules", x->why ? x->why : "");
  }
  print_point(cJSON_GetObjectItemCaseSensitive(sum, "baseline_fsdp"), "baseline (FSDP; tables MP)");
  const cJSON *best = cJSON_GetObjectItemCaseSensitive(sum, "best");
  print_point(cJSON_GetObjectItemCaseSensitive(best, "throughput"), "best throughput");
  const cJSON *ttt = cJSON_GetObjectItemCaseSensitive(best, "time_to_train");
  if (ttt) printf("  %-28s %.3g days for the budget\n", "time to train",
                  cJSON_GetObjectItemCaseSensitive(ttt, "time_to_train_days")->valuedouble);
  const cJSON *lb = cJSON_GetObjectItemCaseSensitive(sum, "latency_bound");
  if (lb) {
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(lb, "time_to_first_token_max_s");
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(lb, "time_per_output_token_max_s");
    GString *b = g_string_new(NULL);
    if (tt) g_string_append_printf(b, "TTFT <= %.4g ms", tt->valuedouble * 1e3);
    if (tp) g_string_append_printf(b, "%sTPOT <= %.4g ms", b->len ? ", " : "", tp->valuedouble * 1e3);
    g_autofree char *bound = g_string_free(b, FALSE);
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(best, "serving_under_latency_bound");
    const double meeting = cJSON_GetObjectItemCaseSensitive(lb, "points_meeting")->valuedouble;
    const double simulated = cJSON_GetObjectItemCaseSensitive(lb, "points_simulated")->valuedouble;
    if (sv) {
      print_point(sv, "best under latency bound");
      printf("  %-28s %.0f of %.0f points meet %s; this one: %.4g output tokens/s per GPU, TTFT %.4g ms, TPOT %.4g ms\n",
             "", meeting, simulated, bound,
             cJSON_GetObjectItemCaseSensitive(sv, "output_tokens_per_s_per_device")->valuedouble,
             cJSON_GetObjectItemCaseSensitive(sv, "time_to_first_token_s")->valuedouble * 1e3,
             cJSON_GetObjectItemCaseSensitive(sv, "time_per_output_token_s")->valuedouble * 1e3);
    } else {
      printf("  %-28s none of the %.0f points that ran meets %s\n", "latency bound", simulated, bound);
    }
  }
  const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(sum, "per_layer_kind");
  for (const cJSON *k = kinds ? kinds->child : NULL; k; k = k->next) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(k, "best"), *w = cJSON_GetObjectItemCaseSensitive(k, "worst");
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(k, "best_speedup_over_fsdp");
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(k, "worst_speedup_over_fsdp");
    if (!b) continue;
    printf("  %-28s best %s (%.2fx), worst %s (%.2fx) of the baseline, others at it\n",
           cJSON_GetObjectItemCaseSensitive(k, "kind")->valuestring, b->valuestring, bs ? bs->valuedouble : 0,
           w->valuestring, ws ? ws->valuedouble : 0);
  }
  const cJSON *systems = cJSON_GetObjectItemCaseSensitive(sum, "systems");
  for (const cJSON *y = systems ? systems->child : NULL; y; y = y->next) {
    const cJSON *yb = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(y, "best"), "throughput");
    const char *name = cJSON_GetObjectItemCaseSensitive(y, "name")->valuestring;
    if (!yb) {
      printf("  %s: nothing fits\n", name);
      continue;
    }
    printf("  %s: best throughput %.4g samples/s, %.4g A100 GPU-hours per sample\n", name,
           cJSON_GetObjectItemCaseSensitive(yb, "samples_per_s")->valuedouble,
           cJSON_GetObjectItemCaseSensitive(yb, "a100_gpu_hours_per_sample")->valuedouble);
    print_point(yb, "");
  }
  const cJSON *tg = cJSON_GetObjectItemCaseSensitive(sum, "pareto_time_gpu_hours");
  if (tg) printf("  %-28s %d points (summary.json pareto_time_gpu_hours)\n", "time-vs-GPU-hours front", cJSON_GetArraySize(tg));
  printf("wrote    %s/points.csv, %s\n", out_dir, sum_path);
  return st.failed ? MM_EXIT_INTERNAL : MM_EXIT_OK;
}
