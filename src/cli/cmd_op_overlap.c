/* cmd_op_overlap: `madmax op ag-gemm | gemm-rs`: a GEMM beside its collective, serial vs decomposed
 * overlap (shard overlap, FiCCO's schedules, XLA collective matmul, a Flux-style fused kernel). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>

#include "cli.h"
#include "fused/fused.h"
#include "report/report.h"

/* FiCCO Table I (MI300X, 8 GPUs): the 16 GEMMs; g13-g16 follow an All2All (expert parallelism). */
static const struct {
  const char *name;
  int64_t m, n, k;
  MmOverlapOp op;
  const char *what;
} ficco_cases[] = {
  {"g1", 16384, 16384, 131072, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g2", 131072, 16384, 16384, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g3", 53248, 16384, 131072, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g4", 131072, 53248, 16384, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g5", 8192, 8192, 262144, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g6", 262144, 8192, 8192, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g7", 28672, 8192, 262144, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g8", 262144, 28672, 8192, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g9", 196608, 18432, 16384, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g10", 196608, 106496, 16384, MM_OVERLAP_AG_GEMM, "SP+TP llama-3-405b"},
  {"g11", 1048576, 10240, 8192, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g12", 1048576, 57344, 8192, MM_OVERLAP_AG_GEMM, "SP+TP llama-2-70b"},
  {"g13", 1607680, 57344, 8192, MM_OVERLAP_A2A_GEMM, "EP DeepSeek"},
  {"g14", 147456, 28672, 4096, MM_OVERLAP_A2A_GEMM, "EP Mixtral"},
  {"g15", 327680, 28672, 4096, MM_OVERLAP_A2A_GEMM, "EP Mixtral"},
  {"g16", 229376, 28672, 4096, MM_OVERLAP_A2A_GEMM, "EP Mixtral"},
};

static const char *const coll_cat[MM_OVERLAP_OP_COUNT] = {"all_gather", "all_to_all", "reduce_scatter"};

static char *fmt_ms(double s) { return g_strdup_printf("%.3f", s * 1e3); }

/* @only >= 0: that schedule and serial. */
static cJSON *result_json(const MmOverlapResult *r, const char *name, int only)
{
  cJSON *j = cJSON_CreateObject();
  if (name) cJSON_AddStringToObject(j, "case", name);
  cJSON_AddStringToObject(j, "op", mm_overlap_op_names[r->spec.op]);
  cJSON_AddNumberToObject(j, "m", (double)r->spec.m);
  cJSON_AddNumberToObject(j, "n", (double)r->spec.n);
  cJSON_AddNumberToObject(j, "k", (double)r->spec.k);
  cJSON_AddNumberToObject(j, "ranks", (double)r->spec.ranks);
  cJSON_AddStringToObject(j, "dtype", mm_dtype_names[r->spec.dtype]);
  cJSON_AddStringToObject(j, "comm", mm_overlap_comm_names[r->spec.comm]);
  cJSON_AddNumberToObject(j, "gemm_s", r->gemm_s);
  cJSON_AddNumberToObject(j, "comm_s", r->comm_s);
  cJSON_AddNumberToObject(j, "lower_bound_s", r->lower_bound_s);
  cJSON_AddNumberToObject(j, "otb_flop_per_byte", r->otb_flop_per_B);
  cJSON_AddNumberToObject(j, "mt_bytes", r->mt_bytes);
  cJSON_AddNumberToObject(j, "machine_otb_flop_per_byte", r->machine_otb);
  cJSON_AddNumberToObject(j, "heuristic_score", r->heuristic_score);
  if (mm_overlap_applies(r->spec.op, MM_OVERLAP_UNIFORM_FUSED_1D)) {
    cJSON_AddStringToObject(j, "heuristic", mm_overlap_schedule_names[r->heuristic]);
    cJSON_AddStringToObject(j, "oracle", mm_overlap_schedule_names[r->oracle]);
    cJSON_AddBoolToObject(j, "heuristic_agrees", r->heuristic == r->oracle);
  }
  cJSON_AddStringToObject(j, "best", mm_overlap_schedule_names[r->best]);
  cJSON *ss = cJSON_AddArrayToObject(j, "schedules");
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++) {
    const MmOverlapRun *u = &r->runs[s];
    if (!u->applies || (only >= 0 && s != only && s != MM_OVERLAP_SERIAL)) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "schedule", mm_overlap_schedule_names[s]);
    cJSON_AddNumberToObject(o, "time_s", u->time_s);
    cJSON_AddNumberToObject(o, "speedup", u->speedup);
    cJSON_AddNumberToObject(o, "exposed_comm_s", u->exposed_comm_s);
    cJSON_AddNumberToObject(o, "gemm_alone_s", u->gemm_alone_s);
    cJSON_AddNumberToObject(o, "comm_alone_s", u->comm_alone_s);
    cJSON_AddNumberToObject(o, "copy_alone_s", u->copy_alone_s);
    cJSON_AddNumberToObject(o, "gemm_dil", u->gemm_dil);
    cJSON_AddNumberToObject(o, "gemm_cil", u->gemm_cil);
    cJSON_AddNumberToObject(o, "comm_dil", u->comm_dil);
    cJSON_AddNumberToObject(o, "comm_cil", u->comm_cil);
    cJSON_AddItemToArray(ss, o);
  }
  return j;
}

/* Chrome trace of the schedules asked for: a process per schedule, a thread per stream. (transfer full) */
static char *trace_text(const MmOverlapResult *r, int only, const MmHardware *hw)
{
  static const char *const stream_names[] = {"compute", "communication", "compute 2", "gather", "scatter"};
  g_autoptr(cJSON) doc = cJSON_CreateObject();
  cJSON *ev = cJSON_AddArrayToObject(doc, "traceEvents");
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++) {
    const MmOverlapRun *u = &r->runs[s];
    if (!u->applies || (only >= 0 && s != only)) continue;
    cJSON *pm = cJSON_CreateObject();
    cJSON_AddStringToObject(pm, "ph", "M");
    cJSON_AddStringToObject(pm, "name", "process_name");
    cJSON_AddNumberToObject(pm, "pid", s);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(pm, "args"), "name", mm_overlap_schedule_names[s]);
    cJSON_AddItemToArray(ev, pm);
    gboolean used[G_N_ELEMENTS(stream_names)] = {0};
    for (guint i = 0; i < u->steps->len; i++) used[g_array_index(u->steps, MmOverlapStep, i).stream] = TRUE;
    for (guint t = 0; t < G_N_ELEMENTS(stream_names); t++) {
      if (!used[t]) continue;
      cJSON *tm = cJSON_CreateObject();
      cJSON_AddStringToObject(tm, "ph", "M");
      cJSON_AddStringToObject(tm, "name", "thread_name");
      cJSON_AddNumberToObject(tm, "pid", s);
      cJSON_AddNumberToObject(tm, "tid", t);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(tm, "args"), "name", stream_names[t]);
      cJSON_AddItemToArray(ev, tm);
    }
    for (guint i = 0; i < u->steps->len; i++) {
      const MmOverlapStep *st = &g_array_index(u->steps, MmOverlapStep, i);
      cJSON *e = cJSON_CreateObject();
      g_autofree char *nm = g_strdup_printf("%s %u", mm_overlap_step_names[st->kind], st->step);
      cJSON_AddStringToObject(e, "name", nm);
      cJSON_AddStringToObject(e, "cat", st->kind == MM_OVERLAP_STEP_GEMM   ? "fwd"
                                        : st->kind == MM_OVERLAP_STEP_COMM ? coll_cat[r->spec.op]
                                                                           : "other");
      cJSON_AddStringToObject(e, "ph", "X");
      cJSON_AddNumberToObject(e, "pid", s);
      cJSON_AddNumberToObject(e, "tid", st->stream);
      cJSON_AddNumberToObject(e, "ts", st->start_s * 1e6);
      cJSON_AddNumberToObject(e, "dur", (st->end_s - st->start_s) * 1e6);
      cJSON *a = cJSON_AddObjectToObject(e, "args");
      cJSON_AddNumberToObject(a, "alone_us", st->alone_s * 1e6);
      cJSON_AddItemToArray(ev, e);
    }
  }
  cJSON *od = cJSON_AddObjectToObject(doc, "otherData");
  cJSON *h = cJSON_AddObjectToObject(od, "hardware");
  cJSON_AddStringToObject(h, "device", hw->device.name);
  cJSON_AddNumberToObject(h, "devices", (double)r->spec.ranks);
  return cJSON_PrintUnformatted(doc);
}

static void print_one(const MmOverlapResult *r, const MmHardware *hw, int only)
{
  const MmOverlapSpec *sp = &r->spec;
  printf("%s: M=%" G_GINT64_FORMAT " N=%" G_GINT64_FORMAT " K=%" G_GINT64_FORMAT " (%s) on %" G_GINT64_FORMAT
         " GPUs of %s, communication by %s\n\n",
         mm_overlap_op_names[sp->op], sp->m, sp->n, sp->k, mm_dtype_names[sp->dtype], sp->ranks, hw->name,
         sp->comm == MM_OVERLAP_COMM_DMA ? "DMA engines" : "compute units");
  g_autofree char *g = mm_fmt_seconds(r->gemm_s), *c = mm_fmt_seconds(r->comm_s), *lb = mm_fmt_seconds(r->lower_bound_s);
  printf("  GEMM alone %s, collective alone %s (src/comm), lower bound %s (roofline GEMM, busiest link)\n", g, c, lb);
  printf("  op-to-byte %.0f FLOP/B (machine %.0f), memory traffic MK+NK+MN %.3g GB\n\n", r->otb_flop_per_B,
         r->machine_otb, r->mt_bytes / 1e9);
  static const char *const head[] = {"<schedule", "time ms", "speedup", "exposed comm ms", "GEMM DIL", "GEMM CIL",
                                     "comm DIL",  "comm CIL", "vs bound"};
  g_autoptr(MmTable) t = mm_table_new(9, head);
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++) {
    const MmOverlapRun *u = &r->runs[s];
    if (!u->applies || (only >= 0 && s != only && s != MM_OVERLAP_SERIAL)) continue;
    char *cells[9] = {g_strdup(mm_overlap_schedule_names[s]), fmt_ms(u->time_s), g_strdup_printf("%.2fx", u->speedup),
                      fmt_ms(u->exposed_comm_s), g_strdup_printf("%.3f", u->gemm_dil),
                      g_strdup_printf("%.3f", u->gemm_cil), g_strdup_printf("%.3f", u->comm_dil),
                      g_strdup_printf("%.3f", u->comm_cil), g_strdup_printf("%.2fx", u->time_s / r->lower_bound_s)};
    mm_table_addv(t, cells);
  }
  mm_table_print(t, stdout, "  ");
  printf("\n  DIL: pieces alone / the whole op alone; CIL: pieces as simulated / alone (shared SMs, HBM, links)\n");
  if (mm_overlap_applies(sp->op, MM_OVERLAP_UNIFORM_FUSED_1D)) {
    const double lost = r->runs[r->heuristic].time_s / r->runs[r->oracle].time_s - 1.0;
    printf("  FiCCO heuristic (%s, OTB x MT = %.3g x the machine's): %s; oracle (fastest simulated): %s%s",
           sp->m > sp->k ? "M > K" : "M <= K", r->heuristic_score, mm_overlap_schedule_names[r->heuristic],
           mm_overlap_schedule_names[r->oracle], r->heuristic == r->oracle ? " (agree)\n" : "");
    if (r->heuristic != r->oracle) printf(" (the heuristic's pick is %.1f%% slower)\n", 100.0 * lost);
  }
  printf("  best of all: %s (%.2fx)\n", mm_overlap_schedule_names[r->best], r->runs[r->best].speedup);
}

static gboolean parse_dim(const char *opt, const char *text, gint64 *out)
{
  g_autoptr(GError) error = NULL;
  if (mm_cli_parse_int(opt, text, 1, (gint64)1 << 40, out, &error)) return TRUE;
  fprintf(stderr, "madmax: %s\n", error->message);
  return FALSE;
}

/* Draws @trace (a Chrome trace's text) as a timeline (src/report, gnuplot) in a private directory and
 * stages the figure as DIR/OP-timeline.png in @outs: it appears with the other outputs or not at all. */
static gboolean add_plot(MmOutputs *outs, const char *dir, const char *op, const char *trace, GError **error)
{
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "--plot %s: cannot create the directory: %s", dir,
                g_strerror(errno));
    return FALSE;
  }
  g_autofree char *tmp = g_dir_make_tmp("madmax-overlap-XXXXXX", error);
  if (!tmp) return FALSE;
  g_autofree char *tp = g_build_filename(tmp, "trace.json", NULL);
  g_autofree char *png = g_build_filename(tmp, "timeline.png", NULL);
  g_autofree char *title = g_strdup_printf("%s: schedules over time", op);
  MmPlotOptions po = {.title = title};
  const char *inputs[1] = {tp};
  char *bytes = NULL;
  gsize len = 0;
  gboolean ok = g_file_set_contents(tp, trace, -1, error) && mm_plot_render(MM_PLOT_TIMELINE, inputs, 1, png, &po, error) &&
                g_file_get_contents(png, &bytes, &len, error);
  g_unlink(tp);
  g_unlink(png);
  g_rmdir(tmp);
  if (!ok) return FALSE;
  g_autofree char *name = g_strdup_printf("%s-timeline.png", op);
  g_autofree char *out = g_build_filename(dir, name, NULL);
  mm_outputs_add(outs, "--plot", out, bytes, len);
  return TRUE;
}

int mm_cmd_op_overlap(int argc, char **argv)
{
  const char *kind = strrchr(argv[0], ' ') ? strrchr(argv[0], ' ') + 1 : argv[0];
  const MmOverlapOp op = strcmp(kind, "gemm-rs") == 0 ? MM_OVERLAP_GEMM_RS : MM_OVERLAP_AG_GEMM;
  g_autofree char *m_s = NULL, *n_s = NULL, *k_s = NULL, *ranks_s = NULL, *dtype_s = NULL, *hw_path = NULL,
                  *sched_s = NULL, *comm_s = NULL, *cases_s = NULL, *trace_path = NULL, *json_path = NULL,
                  *plot_dir = NULL;
  gboolean a2a = FALSE;
  GOptionEntry entries[] = {
    {"m", 0, 0, G_OPTION_ARG_STRING, &m_s, "Rows of A and C (all GPUs' rows: ag-gemm gathers them)", "M"},
    {"n", 0, 0, G_OPTION_ARG_STRING, &n_s, "Columns of B and C one GPU computes", "N"},
    {"k", 0, 0, G_OPTION_ARG_STRING, &k_s, "Inner dimension one GPU multiplies over", "K"},
    {"ranks", 'r', 0, G_OPTION_ARG_STRING, &ranks_s, "GPUs (default: one node)", "P"},
    {"dtype", 0, 0, G_OPTION_ARG_STRING, &dtype_s, "Element type (default bf16)", "T"},
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &hw_path, "System file (hardware/*.json)", "H"},
    {"schedule", 's', 0, G_OPTION_ARG_STRING, &sched_s, "One schedule (beside serial), or all (default)", "NAME"},
    {"comm", 0, 0, G_OPTION_ARG_STRING, &comm_s, "Who moves the decomposed transfers: dma (default) or cu", "dma|cu"},
    {"a2a", 0, 0, G_OPTION_ARG_NONE, &a2a, "ag-gemm: the rows come by All2All (expert parallelism)", NULL},
    {"cases", 0, 0, G_OPTION_ARG_STRING, &cases_s, "ficco: FiCCO's 16 GEMMs (Table I) in one table", "SET"},
    {"trace", 't', 0, G_OPTION_ARG_FILENAME, &trace_path, "Write a Chrome trace of the schedules to T", "T"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write JSON to OUT ('-' = stdout)", "OUT"},
    {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir, "Draw the schedules' steps over time into DIR/KIND-timeline.png",
     "DIR"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- a GEMM beside its collective: serial vs decomposed overlap");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "ag-gemm: AllGather of A (M x K, M/p rows per GPU), then C = A B (B: K x N, the GPU's columns).\n"
    "gemm-rs: C = A B (A: M x K, the GPU's K columns), then ReduceScatter of C (M x N).\n\n"
    "Each schedule is simulated on one GPU's resources (SMs, HBM, links; src/engine): GEMM pieces\n"
    "take SMs and HBM, transfers take links and HBM, and SMs too when compute units drive them\n"
    "(--comm cu); what runs together shares them max-min fairly, so contention (CIL) is simulated.\n"
    "A piece alone costs what the cost model says for its shape (DIL: smaller pieces lose more).\n\n"
    "Schedules: serial (the collective, then the GEMM: the baseline); shard (PyTorch async-TP: p-1\n"
    "peer-to-peer steps of whole shards; on a full mesh one link of p-1 works); FiCCO's\n"
    "uniform-fused-1d, hetero-fused-1d, hetero-unfused-1d, uniform-fused-2d (ag-gemm only: every step\n"
    "moves 1/p of every shard, all-to-all); cmm-x1, cmm-x2 (XLA collective matmul: bidirectional\n"
    "permutes, one or two compute streams, serial below overlap.cmm_threshold_MiB); flux (a fused\n"
    "kernel: tiles wait for copy-engine pulls (AG) or push their output by remote stores (RS)).\n\n"
    "Prints per schedule: time, speedup over serial, exposed communication, GEMM and communication\n"
    "DIL (pieces alone / whole alone) and CIL (pieces simulated / alone), and the time over the\n"
    "max(GEMM, collective) bound; then FiCCO's heuristic (2D unless M > K, else OTB x MT against the\n"
    "machine's, thresholds 1x and 5x) against the oracle (the fastest simulated). docs/overlap.md.");
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax op ag-gemm --m 131072 --n 16384 --k 16384 --hardware hardware/mi300x-8.json\n"
    "  madmax op ag-gemm --cases ficco --hardware hardware/mi300x-8.json\n"
    "  madmax op ag-gemm --m 4096 --n 6144 --k 12288 --dtype fp16 --hardware hardware/a800-8.json --schedule flux\n"
    "  madmax op gemm-rs --m 4096 --n 12288 --k 6144 --hardware hardware/a800-8.json --json -\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry 'madmax op %s --help'.\n", argv[1], kind);
    return MM_EXIT_INPUT;
  }
  const gboolean cases = cases_s != NULL;
  if (!hw_path || (!cases && (!m_s || !n_s || !k_s)) || (cases && (m_s || n_s || k_s))) {
    fprintf(stderr, "madmax: op %s needs --hardware and either --m, --n, --k or --cases ficco\nTry 'madmax op %s --help'.\n",
            kind, kind);
    return MM_EXIT_INPUT;
  }
  if (cases && strcmp(cases_s, "ficco") != 0) {
    g_autofree char *shown = mm_config_printable(cases_s);
    fprintf(stderr, "madmax: --cases %s: expected ficco\n", shown);
    return MM_EXIT_INPUT;
  }
  if (cases && op == MM_OVERLAP_GEMM_RS) {
    fprintf(stderr, "madmax: --cases ficco: FiCCO's cases are ag-gemm (DMA engines cannot reduce; FiCCO Sec. IV-B2)\n");
    return MM_EXIT_INPUT;
  }
  if (a2a && op == MM_OVERLAP_GEMM_RS) {
    fprintf(stderr, "madmax: --a2a: only for ag-gemm\n");
    return MM_EXIT_INPUT;
  }
  if (cases && (trace_path || plot_dir)) {
    fprintf(stderr, "madmax: --trace and --plot draw one GEMM; give --m, --n, --k instead of --cases\n");
    return MM_EXIT_INPUT;
  }
  int only = -1;
  if (sched_s && strcmp(sched_s, "all") != 0) {
    only = mm_name_index(mm_overlap_schedule_names, sched_s);
    if (only < 0) {
      g_autofree char *shown = mm_config_printable(sched_s);
      g_autofree char *names = g_strjoinv(", ", (char **)mm_overlap_schedule_names);
      fprintf(stderr, "madmax: --schedule %s: expected all or one of %s\n", shown, names);
      return MM_EXIT_INPUT;
    }
    if (!mm_overlap_applies(op, (MmOverlapSchedule)only)) {
      fprintf(stderr, "madmax: --schedule %s: applies to ag-gemm only (DMA engines cannot reduce; FiCCO Sec. IV-B2)\n",
              sched_s);
      return MM_EXIT_INPUT;
    }
  }
  int comm = comm_s ? mm_name_index(mm_overlap_comm_names, comm_s) : MM_OVERLAP_COMM_DMA;
  if (comm < 0) {
    g_autofree char *shown = mm_config_printable(comm_s);
    fprintf(stderr, "madmax: --comm %s: expected dma or cu\n", shown);
    return MM_EXIT_INPUT;
  }
  int dt = dtype_s ? mm_name_index(mm_dtype_names, dtype_s) : MM_DTYPE_BF16;
  if (dt < 0) {
    g_autofree char *shown = mm_config_printable(dtype_s);
    g_autofree char *names = g_strjoinv(", ", (char **)mm_dtype_names);
    fprintf(stderr, "madmax: --dtype %s: expected one of %s\n", shown, names);
    return MM_EXIT_INPUT;
  }
  gint64 m = 0, n = 0, k = 0, ranks = 0;
  if (!cases && (!parse_dim("--m", m_s, &m) || !parse_dim("--n", n_s, &n) || !parse_dim("--k", k_s, &k)))
    return MM_EXIT_INPUT;
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {"--trace", trace_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--hardware", hw_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  g_autoptr(MmHardware) hw = mm_hardware_load(hw_path, &error);
  if (!hw) return mm_cli_fail(error);
  ranks = hw->gpus_per_node;
  if (ranks_s) {
    g_autoptr(GError) rerr = NULL;
    if (!mm_cli_parse_int("--ranks", ranks_s, 2, hw->gpus_per_node, &ranks, &rerr)) {
      fprintf(stderr, "madmax: %s (the GPUs of one node of %s)\n", rerr->message, hw_path);
      return MM_EXIT_INPUT;
    }
  }
  const gboolean text = !json_path || strcmp(json_path, "-") != 0;
  g_autoptr(cJSON) doc = cJSON_CreateObject();
  cJSON_AddStringToObject(doc, "hardware", hw->path);
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  /* a --plot directory made here is removed again if the outputs fail (nothing half-written) */
  const gboolean made_dir = plot_dir && !g_file_test(plot_dir, G_FILE_TEST_EXISTS);
  if (!cases) {
    MmOverlapSpec sp = {a2a ? MM_OVERLAP_A2A_GEMM : op, m, n, k, ranks, (MmDtype)dt, (MmOverlapComm)comm};
    g_autoptr(MmOverlapResult) r = mm_overlap_run(hw, &sp, &error);
    if (!r) {
      fprintf(stderr, "madmax: op %s: %s\n", kind, error->message);
      return error->code == MM_FUSED_ERROR_INVALID ? MM_EXIT_INPUT : MM_EXIT_INTERNAL;
    }
    if (text) print_one(r, hw, only);
    cJSON_AddItemToObject(doc, "result", result_json(r, NULL, only));
    if (trace_path || plot_dir) {
      g_autofree char *tr = trace_text(r, only, hw);
      if (trace_path) mm_outputs_add(outs, "--trace", trace_path, g_strdup(tr), strlen(tr));
      if (plot_dir && !add_plot(outs, plot_dir, kind, tr, &error)) {
        if (made_dir) g_rmdir(plot_dir);
        return mm_cli_fail(error);
      }
    }
  } else {
    static const char *const head[] = {"<case", "M", "N", "K", "serial ms", "shard", "uf-1d", "hf-1d", "hu-1d",
                                       "uf-2d", "cmm-x2", "<heuristic", "<oracle", "<agree"};
    g_autoptr(MmTable) t = mm_table_new(14, head);
    cJSON *arr = cJSON_AddArrayToObject(doc, "cases");
    guint agree = 0;
    double worst_ficco = 0, best_1d = 0, best_2d = 0;
    for (guint c = 0; c < G_N_ELEMENTS(ficco_cases); c++) {
      MmOverlapSpec sp = {ficco_cases[c].op, ficco_cases[c].m, ficco_cases[c].n, ficco_cases[c].k, ranks, (MmDtype)dt,
                          (MmOverlapComm)comm};
      g_autoptr(MmOverlapResult) r = mm_overlap_run(hw, &sp, &error);
      if (!r) {
        fprintf(stderr, "madmax: op %s: case %s: %s\n", kind, ficco_cases[c].name, error->message);
        return error->code == MM_FUSED_ERROR_INVALID ? MM_EXIT_INPUT : MM_EXIT_INTERNAL;
      }
      agree += r->heuristic == r->oracle;
      for (int s = MM_OVERLAP_UNIFORM_FUSED_1D; s <= MM_OVERLAP_HETERO_UNFUSED_1D; s++)
        best_1d = fmax(best_1d, r->runs[s].speedup);
      best_2d = fmax(best_2d, r->runs[MM_OVERLAP_UNIFORM_FUSED_2D].speedup);
      worst_ficco = fmax(worst_ficco, r->runs[r->heuristic].time_s / r->runs[r->oracle].time_s - 1.0);
      const MmOverlapRun *u = r->runs;
      char *cells[14] = {g_strdup(ficco_cases[c].name), g_strdup_printf("%" G_GINT64_FORMAT, sp.m),
                         g_strdup_printf("%" G_GINT64_FORMAT, sp.n), g_strdup_printf("%" G_GINT64_FORMAT, sp.k),
                         fmt_ms(u[MM_OVERLAP_SERIAL].time_s), g_strdup_printf("%.2f", u[MM_OVERLAP_SHARD].speedup),
                         g_strdup_printf("%.2f", u[MM_OVERLAP_UNIFORM_FUSED_1D].speedup),
                         g_strdup_printf("%.2f", u[MM_OVERLAP_HETERO_FUSED_1D].speedup),
                         g_strdup_printf("%.2f", u[MM_OVERLAP_HETERO_UNFUSED_1D].speedup),
                         g_strdup_printf("%.2f", u[MM_OVERLAP_UNIFORM_FUSED_2D].speedup),
                         g_strdup_printf("%.2f", u[MM_OVERLAP_CMM_X2].speedup),
                         g_strdup(mm_overlap_schedule_names[r->heuristic]), g_strdup(mm_overlap_schedule_names[r->oracle]),
                         g_strdup(r->heuristic == r->oracle ? "yes" : "no")};
      mm_table_addv(t, cells);
      cJSON_AddItemToArray(arr, result_json(r, ficco_cases[c].name, -1));
    }
    cJSON *sum = cJSON_AddObjectToObject(doc, "summary");
    cJSON_AddNumberToObject(sum, "cases", G_N_ELEMENTS(ficco_cases));
    cJSON_AddNumberToObject(sum, "heuristic_agrees", agree);
    cJSON_AddNumberToObject(sum, "best_1d_speedup", best_1d);
    cJSON_AddNumberToObject(sum, "best_2d_speedup", best_2d);
    cJSON_AddNumberToObject(sum, "worst_heuristic_loss_frac", worst_ficco);
    if (text) {
      printf("FiCCO's 16 GEMMs (Table I; g13-g16 after an All2All) on %" G_GINT64_FORMAT " GPUs of %s, %s, "
             "communication by %s: speedup over serial\n\n",
             ranks, hw->name, mm_dtype_names[dt], comm == MM_OVERLAP_COMM_DMA ? "DMA engines" : "compute units");
      mm_table_print(t, stdout, "  ");
      printf("\n  heuristic = oracle in %u of %u cases (worst pick %.1f%% slower than the oracle's); "
             "best 1D %.2fx, best 2D %.2fx\n",
             agree, (guint)G_N_ELEMENTS(ficco_cases), 100.0 * worst_ficco, best_1d, best_2d);
    }
  }
  if (json_path) mm_outputs_add_json(outs, "--json", json_path, doc);
  if (!mm_outputs_commit(outs, &error)) {
    if (made_dir) g_rmdir(plot_dir);
    return mm_cli_fail(error);
  }
  return MM_EXIT_OK;
}
