/* cmd_op_kernel: `madmax op emb-a2a | gemv-ar | gemm-a2a`: a fused compute-collective kernel
 * (slice puts from persistent workgroups) against the bulk-synchronous kernel + collective,
 * per WG schedule; tables, JSON, a Chrome trace of slices and puts, a gnuplot figure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>

#include "cli.h"
#include "fused/fused.h"
#include "report/report.h"

/* The shape options of each op: the name, the spec field, what it is. One row each. */
typedef struct {
  const char *option;
  gsize offset; /* of the int64_t in MmFusedSpec */
  guint ops;    /* bit per MmFusedOp it applies to */
  const char *help;
} ShapeOpt;

#define EMB (1u << MM_FUSED_EMB_A2A)
#define GEMV (1u << MM_FUSED_GEMV_AR)
#define GEMM (1u << MM_FUSED_GEMM_A2A)
static const ShapeOpt shape_opts[] = {
  {"batch", offsetof(MmFusedSpec, batch), EMB, "Global batch (default 2048)"},
  {"tables", offsetof(MmFusedSpec, tables), EMB, "Embedding tables per GPU (default 64)"},
  {"dim", offsetof(MmFusedSpec, dim), EMB, "Embedding dimension (default 256, the paper's)"},
  {"pooling", offsetof(MmFusedSpec, pooling), EMB, "Rows pooled per bag (default 70)"},
  {"m", offsetof(MmFusedSpec, m), GEMV | GEMM, "Output rows (gemv-ar default 16384; gemm-a2a 8192 tokens)"},
  {"n", offsetof(MmFusedSpec, n), GEMM, "Output columns (default 4096)"},
  {"k", offsetof(MmFusedSpec, k), GEMV | GEMM, "Reduction dimension on one GPU (default 4096)"},
  {"slice-wgs", offsetof(MmFusedSpec, slice_wgs), EMB | GEMV | GEMM,
   "Logical WGs per slice (emb-a2a 32; gemv-ar, gemm-a2a 1: a WG's tile)"},
};
#define N_SHAPE G_N_ELEMENTS(shape_opts)

static int64_t *field(MmFusedSpec *s, const ShapeOpt *o) { return (int64_t *)(void *)((char *)s + o->offset); }

/* "8192,16384" -> values (each in [1, 2^40]); FALSE with the error printed. */
static gboolean parse_list(const char *option, const char *text, GArray *out)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (guint i = 0; parts[i]; i++) {
    gint64 v = 0;
    g_autoptr(GError) error = NULL;
    g_autofree char *opt = g_strdup_printf("--%s", option);
    if (!mm_cli_parse_int(opt, parts[i], 1, (gint64)1 << 40, &v, &error)) {
      fprintf(stderr, "madmax: %s (a comma-separated list of positive integers)\n", error->message);
      return FALSE;
    }
    g_array_append_val(out, v);
  }
  if (out->len == 0) /* "" splits into no parts */
    fprintf(stderr, "madmax: --%s '': expected a comma-separated list of positive integers\n", option);
  return out->len > 0;
}

static char *shape_label(const MmFusedSpec *s)
{
  switch (s->op) {
  case MM_FUSED_EMB_A2A:
    return g_strdup_printf("%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT, s->batch, s->tables);
  case MM_FUSED_GEMV_AR:
    return g_strdup_printf("%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT, s->m, s->k);
  default:
    return g_strdup_printf("%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT, s->m, s->n, s->k);
  }
}

static cJSON *spec_json(const MmFusedSpec *s)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "op", mm_fused_op_names[s->op]);
  cJSON_AddStringToObject(j, "dtype", mm_dtype_names[s->dtype]);
  cJSON_AddNumberToObject(j, "ranks", (double)s->ranks);
  cJSON_AddNumberToObject(j, "stride", (double)s->stride);
  if (s->op == MM_FUSED_EMB_A2A) {
    cJSON_AddNumberToObject(j, "batch", (double)s->batch);
    cJSON_AddNumberToObject(j, "tables", (double)s->tables);
    cJSON_AddNumberToObject(j, "dim", (double)s->dim);
    cJSON_AddNumberToObject(j, "pooling", (double)s->pooling);
  } else {
    cJSON_AddNumberToObject(j, "m", (double)s->m);
    if (s->op == MM_FUSED_GEMM_A2A) cJSON_AddNumberToObject(j, "n", (double)s->n);
    cJSON_AddNumberToObject(j, "k", (double)s->k);
  }
  cJSON_AddNumberToObject(j, "slice_wgs", (double)s->slice_wgs);
  cJSON_AddNumberToObject(j, "wg_elems", (double)s->wg_elems);
  cJSON_AddNumberToObject(j, "wg_threads", (double)s->wg_threads);
  cJSON_AddNumberToObject(j, "thread_bytes", s->thread_bytes);
  cJSON_AddNumberToObject(j, "occupancy_frac", s->occupancy);
  return j;
}

static cJSON *fused_json(const MmFusedResult *r)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schedule", mm_fused_schedule_names[r->spec.schedule]);
  cJSON_AddNumberToObject(j, "fused_time_s", r->fused_s);
  cJSON_AddNumberToObject(j, "fastest_rank_time_s", r->fused_min_s);
  cJSON_AddNumberToObject(j, "skew_frac", r->skew);
  cJSON_AddNumberToObject(j, "speedup", r->speedup);
  cJSON_AddNumberToObject(j, "saved_frac", 1.0 - r->fused_s / r->baseline_s);
  cJSON_AddNumberToObject(j, "compute_only_s", r->compute_s);
  cJSON_AddNumberToObject(j, "comm_only_s", r->comm_s);
  cJSON_AddNumberToObject(j, "both_s", r->both_s);
  cJSON_AddNumberToObject(j, "stalled_s", r->stalled_s);
  cJSON_AddNumberToObject(j, "exposed_comm_s", r->exposed_comm_s);
  cJSON_AddNumberToObject(j, "compute_alone_s", r->compute_alone_s);
  cJSON_AddNumberToObject(j, "comm_alone_s", r->comm_alone_s);
  cJSON_AddNumberToObject(j, "lower_bound_s", r->lower_bound_s);
  cJSON *ranks = cJSON_AddArrayToObject(j, "rank_time_s");
  for (int64_t d = 0; d < r->spec.ranks; d++) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(r->rank_s[d]));
  cJSON_AddNumberToObject(j, "engine_events", (double)r->events);
  return j;
}

static cJSON *point_json(const MmFusedResult *first)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "spec", spec_json(&first->spec));
  cJSON *k = cJSON_AddObjectToObject(j, "kernel");
  cJSON_AddNumberToObject(k, "logical_wgs", (double)first->logical_wgs);
  cJSON_AddNumberToObject(k, "slices", (double)first->n_slices);
  cJSON_AddNumberToObject(k, "physical_wgs", (double)first->physical_wgs);
  cJSON_AddNumberToObject(k, "lanes", (double)first->lanes);
  cJSON_AddNumberToObject(k, "slice_bytes", first->slice_bytes);
  cJSON_AddNumberToObject(k, "flops", first->flops);
  cJSON_AddNumberToObject(k, "hbm_bytes", first->hbm_bytes);
  cJSON_AddNumberToObject(k, "comm_bytes", first->comm_bytes);
  cJSON *b = cJSON_AddObjectToObject(j, "baseline");
  cJSON_AddNumberToObject(b, "time_s", first->baseline_s);
  cJSON_AddNumberToObject(b, "kernel_s", first->kernel_s);
  cJSON_AddNumberToObject(b, "collective_s", first->coll_s);
  cJSON_AddStringToObject(b, "collective_algorithm", first->coll_algorithm);
  cJSON_AddNumberToObject(b, "launch_s", first->launch_s);
  cJSON_AddNumberToObject(b, "exposed_comm_s", first->coll_s + first->launch_s);
  cJSON_AddArrayToObject(j, "fused");
  return j;
}

/* ---- trace and plot ------------------------------------------------------ */

static void append_us(GString *g, double s)
{
  char num[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(g, g_ascii_formatd(num, sizeof num, "%.6f", s * 1e6));
}

/* Chrome trace: a process per (schedule, rank), a thread per lane's compute and per lane's puts. */
static char *trace_text(GPtrArray *runs, gsize *len)
{
  GString *g = g_string_new("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  gboolean first = TRUE;
  for (guint ri = 0; ri < runs->len; ri++) {
    const MmFusedResult *r = g_ptr_array_index(runs, ri);
    const char *sched = mm_fused_schedule_names[r->spec.schedule];
    for (int64_t d = 0; d < r->spec.ranks; d++) {
      const unsigned pid = (unsigned)(ri * (guint)r->spec.ranks + (guint)d);
      g_string_append_printf(g, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"name\":\"%s, rank %"
                             G_GINT64_FORMAT "\"}}", first ? "" : ",\n", pid, sched, d);
      first = FALSE;
      g_string_append_printf(g, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"sort_index\":%u}}",
                             pid, pid);
    }
    for (guint i = 0; i < r->slices->len; i++) {
      const MmFusedSlice *s = &g_array_index(r->slices, MmFusedSlice, i);
      const unsigned pid = (unsigned)(ri * (guint)r->spec.ranks + s->device);
      const gboolean again = i > 0 && s->phase == 1 && s->dest != s->device; /* an all-gather put of the reduce before */
      if (!again) {
        g_string_append_printf(g, ",\n{\"name\":\"%s %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT
                               "\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":",
                               s->phase ? "reduce" : "slices", s->first, s->count, pid, 2 * s->group);
        append_us(g, s->start_s);
        g_string_append(g, ",\"dur\":");
        append_us(g, s->end_s - s->start_s);
        g_string_append_printf(g, ",\"args\":{\"dest\":%u,\"group\":%u,\"slices\":%" G_GUINT64_FORMAT "}}", s->dest,
                               s->group, s->count);
      }
      if (s->put_end_s > 0) {
        g_string_append_printf(g, ",\n{\"name\":\"%s to %u\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":",
                               s->phase ? "all-gather" : "put", s->dest, s->zero_copy ? "zero-copy" : "nic", pid,
                               2 * s->group + 1);
        append_us(g, s->put_start_s);
        g_string_append(g, ",\"dur\":");
        append_us(g, s->put_end_s - s->put_start_s);
        g_string_append_printf(g, ",\"args\":{\"slices\":%" G_GUINT64_FORMAT ",\"dest\":%u}}", s->count, s->dest);
      }
    }
  }
  g_string_append(g, "\n]}\n");
  *len = g->len;
  return g_string_free(g, FALSE);
}

typedef struct {
  double t;
  double n;
} Step;

static int cmp_step(const void *a, const void *b)
{
  const Step *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

/* The figure's data: per (schedule, rank) two blocks, slices computed and slices landed at their
 * destination over time (cumulative, time in microseconds). Numbers only; the titles are
 * madmax's own words. */
static char *plot_data(GPtrArray *runs, GString *titles_out, guint *blocks)
{
  GString *g = g_string_new("# time_us slices\n");
  *blocks = 0;
  for (guint ri = 0; ri < runs->len; ri++) {
    const MmFusedResult *r = g_ptr_array_index(runs, ri);
    for (int64_t d = 0; d < r->spec.ranks; d++) {
      for (int kind = 0; kind < 2; kind++) {
        g_autoptr(GArray) t = g_array_new(FALSE, FALSE, sizeof(Step));
        for (guint i = 0; i < r->slices->len; i++) {
          const MmFusedSlice *s = &g_array_index(r->slices, MmFusedSlice, i);
          if ((int64_t)s->device != d || s->phase != 0) continue;
          if (kind == 1 && !(s->put_end_s > 0)) continue;
          Step st = {kind == 0 ? s->end_s : s->put_end_s, (double)s->count};
          g_array_append_val(t, st);
        }
        qsort(t->data, t->len, sizeof(Step), cmp_step);
        if (*blocks) g_string_append(g, "\n\n");
        g_string_append(g, "0 0\n");
        double sum = 0;
        for (guint i = 0; i < t->len; i++) {
          char num[G_ASCII_DTOSTR_BUF_SIZE];
          sum += g_array_index(t, Step, i).n;
          g_string_append_printf(g, "%s %.0f\n",
                                 g_ascii_formatd(num, sizeof num, "%.6f", g_array_index(t, Step, i).t * 1e6), sum);
        }
        g_string_append_printf(titles_out, "%s\"%s-rank-%" G_GINT64_FORMAT "-%s\"", titles_out->len ? " " : "",
                               mm_fused_schedule_names[r->spec.schedule], d, kind == 0 ? "computed" : "put");
        (*blocks)++;
      }
    }
  }
  return g_string_free(g, FALSE);
}

static char *plot_script(const GString *titles, guint blocks, const char *op)
{
  return g_strdup_printf(
    "# gnuplot script written by madmax op %s: slices computed and puts landed over time, per\n"
    "# schedule and rank. The numbers are in fused-slices.dat beside it: `gnuplot fused-slices.gp`.\n"
    "set terminal pngcairo size 1200,700 font 'Sans,10'\n"
    "set output 'fused-slices.png'\n"
    "set xlabel 'time (us)'\nset ylabel 'slices (cumulative)'\nset key left top\nset grid\n"
    "titles = '%s'\n"
    "plot for [i=0:%u] 'fused-slices.dat' index i using 1:2 with steps lw 1.5 lc i/2+1 dt i%%2+1 title word(titles, i+1)\n",
    op, titles->str, blocks - 1);
}

/* Runs gnuplot on @script/@data in a private directory; the PNG's bytes (transfer full) or NULL. */
static char *render_png(const char *script, const char *data, gsize *len, GError **error)
{
  g_autofree char *dir = g_dir_make_tmp("madmax-fused-XXXXXX", error);
  if (!dir) return NULL;
  g_autofree char *gp = g_build_filename(dir, "fused-slices.gp", NULL);
  g_autofree char *dat = g_build_filename(dir, "fused-slices.dat", NULL);
  g_autofree char *png = g_build_filename(dir, "fused-slices.png", NULL);
  char *bytes = NULL;
  if (g_file_set_contents(gp, script, -1, error) && g_file_set_contents(dat, data, -1, error)) {
    char *args[] = {(char *)"gnuplot", (char *)"fused-slices.gp", NULL};
    gint status = 0;
    g_autofree char *err_text = NULL;
    if (!g_spawn_sync(dir, args, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err_text,
                      &status, error)) {
      g_prefix_error(error, "cannot run gnuplot (install it, e.g. Debian gnuplot-nox): ");
    } else if (!g_spawn_check_wait_status(status, NULL) || !g_file_get_contents(png, &bytes, len, NULL) || *len == 0) {
      g_free(bytes);
      bytes = NULL;
      g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_TOOL, "gnuplot failed: %s", err_text ? err_text : "");
    }
  }
  g_remove(gp);
  g_remove(dat);
  g_remove(png);
  g_rmdir(dir);
  return bytes;
}

int mm_cmd_op_kernel(int argc, char **argv)
{
  const char *kind = argv[0] + strlen("madmax op ");
  const int op = mm_name_index(mm_fused_op_names, kind);
  g_return_val_if_fail(op >= 0, MM_EXIT_INTERNAL);
  g_autofree char *hw_path = NULL, *json_path = NULL, *trace_path = NULL, *plot_dir = NULL, *sched_s = NULL,
                  *dtype_s = NULL, *ranks_s = NULL, *stride_s = NULL, *occupancy_s = NULL;
  char *values[N_SHAPE] = {NULL};
  GOptionEntry fixed[] = {
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &hw_path, "System file (hardware/*.json)", "H"},
    {"ranks", 'r', 0, G_OPTION_ARG_STRING, &ranks_s, "GPUs in the group (default: one node)", "N"},
    {"stride", 's', 0, G_OPTION_ARG_STRING, &stride_s, "Device-index distance between them (default 1; gpus_per_node: one per node)", "D"},
    {"schedule", 0, 0, G_OPTION_ARG_STRING, &sched_s, "aware (remote slices first), oblivious (WG order), interleaved (a what-if: remote destinations round-robin), a comma list or all (default aware,oblivious)", "S"},
    {"occupancy", 0, 0, G_OPTION_ARG_STRING, &occupancy_s, "Fused kernel's occupancy, a fraction of the plain kernel's full one (default 1 - occupancy_loss)", "F"},
    {"dtype", 0, 0, G_OPTION_ARG_STRING, &dtype_s, "Element type (emb-a2a fp32; gemv-ar, gemm-a2a fp16)", "T"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write JSON to OUT ('-' = stdout)", "OUT"},
    {"trace", 't', 0, G_OPTION_ARG_FILENAME, &trace_path, "Write a Chrome trace of slices and puts (one shape)", "T.json"},
    {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir, "Write fused-slices.{gp,dat,png} to DIR (one shape)", "DIR"},
  };
  GArray *all = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));
  g_array_append_vals(all, fixed, G_N_ELEMENTS(fixed));
  for (guint i = 0; i < N_SHAPE; i++) {
    if (!(shape_opts[i].ops & (1u << op))) continue;
    GOptionEntry e = {shape_opts[i].option, 0, 0, G_OPTION_ARG_STRING, &values[i], shape_opts[i].help, "N[,N...]"};
    g_array_append_val(all, e);
  }
  g_autoptr(GOptionContext) ctx = NULL;
  static const char *const what[MM_FUSED_OP_COUNT] = {
    "- fused embedding pooling + All2All vs embedding kernel then All2All",
    "- fused GEMV + AllReduce vs GEMV kernel then AllReduce",
    "- fused GEMM + All2All vs GEMM kernel then All2All",
  };
  ctx = g_option_context_new(what[op]);
  g_option_context_add_main_entries(ctx, (GOptionEntry *)(void *)all->data, NULL);
  static const char *const summary[MM_FUSED_OP_COUNT] = {
    ("DLRM's embedding pooling fused with the All2All that follows it (the AMD fused-kernel paper,\n"
     "Sec. III-A): a persistent kernel runs one logical WG per (table, sample) bag; 32 of them form a\n"
     "slice of pooled vectors; the last WG of a slice puts it to the rank that owns those samples (a\n"
     "NIC put between nodes, zero-copy stores inside one) and sets its flag after a fence.\n"
     "Shapes are the paper's labels {global batch | tables per GPU}; lists run every combination."),
    ("Tensor-parallel decode's GEMV fused with its AllReduce (Sec. III-B): each logical WG computes a\n"
     "tile of y = A x (A: m x k, this GPU's shard of k); tiles owned by a peer are stored straight into\n"
     "its memory (zero-copy, no local store), one ready flag per peer per physical WG; each GPU then\n"
     "reduces its 1/ranks of the tiles and stores them to every peer (two-phase direct)."),
    ("An MoE expert's GEMM fused with the All2All combine (Sec. III-B, the Triton kernel): 128 x 128\n"
     "output tiles are stored to the rank that owns their tokens (m is split over the ranks)."),
  };
  g_autofree char *sum = g_strdup_printf(
    "%s\n\nPrints, per shape and schedule: the baseline (launch + kernel + launch + collective, the\n"
    "collective from the topology's algorithms), the fused op simulated slice by slice in the event\n"
    "engine (compute on the SMs and HBM, puts on the links, shared max-min fairly), speedup, time\n"
    "saved, exposed communication, and the skew between ranks. Model: docs/fused-kernels.md.",
    summary[op]);
  g_option_context_set_summary(ctx, sum);
  static const char *const examples[MM_FUSED_OP_COUNT] = {
    ("Examples:\n"
     "  madmax op emb-a2a --hardware hardware/mi210-4.json --batch 512,1024,2048 --tables 64,128,256\n"
     "  madmax op emb-a2a --hardware hardware/mi210-2x4.json --ranks 2 --stride 4 --batch 2048 --tables 256\n"
     "  madmax op emb-a2a --hardware hardware/mi210-4.json --occupancy 0.25 --schedule aware\n"
     "  madmax op emb-a2a --hardware hardware/mi210-4.json --trace emb.json --plot figs/\n"),
    ("Examples:\n"
     "  madmax op gemv-ar --hardware hardware/mi210-4.json --m 8192,16384,32768,65536\n"
     "  madmax op gemv-ar --hardware hardware/mi210-4.json --m 65536 --k 2048 --json -\n"),
    ("Examples:\n"
     "  madmax op gemm-a2a --hardware hardware/mi210-4.json --m 4096,8192,16384\n"
     "  madmax op gemm-a2a --hardware hardware/mi300x-8.json --m 16384 --n 4096 --k 14336\n"),
  };
  g_option_context_set_description(ctx, examples[op]);
  gboolean parsed = mm_cli_parse(ctx, &argc, &argv);
  g_array_unref(all);
  g_autoptr(GPtrArray) owned = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < N_SHAPE; i++)
    if (values[i]) g_ptr_array_add(owned, values[i]);
  if (!parsed) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry '%s --help'.\n", argv[1], argv[0]);
    return MM_EXIT_INPUT;
  }
  if (!hw_path) {
    fprintf(stderr, "madmax: %s needs --hardware\nTry '%s --help'.\n", argv[0], argv[0]);
    return MM_EXIT_INPUT;
  }
  /* schedules: the paper's two by default, a comma-separated list, or all */
  gboolean want[MM_FUSED_SCHED_COUNT] = {TRUE, TRUE, FALSE};
  if (sched_s) {
    g_auto(GStrv) parts = g_strsplit(sched_s, ",", -1);
    memset(want, 0, sizeof want);
    for (guint i = 0; i == 0 || parts[i]; i++) { /* "" splits into no parts: no schedule, an error */
      const int sc = !parts[i]                      ? -1
                     : strcmp(parts[i], "all") == 0 ? MM_FUSED_SCHED_COUNT
                                                    : mm_name_index(mm_fused_schedule_names, parts[i]);
      if (sc < 0 || !parts[0][0]) {
        g_autofree char *shown = mm_config_printable(sched_s);
        fprintf(stderr, "madmax: --schedule %s: expected aware, oblivious, interleaved (comma-separated) or all\n", shown);
        return MM_EXIT_INPUT;
      }
      for (int k = 0; k < MM_FUSED_SCHED_COUNT; k++) want[k] = want[k] || sc == k || sc == MM_FUSED_SCHED_COUNT;
    }
  }
  MmFusedSpec base = {.op = (MmFusedOp)op};
  if (dtype_s) {
    const int dt = mm_name_index(mm_dtype_names, dtype_s);
    if (dt < 0) {
      g_autofree char *shown = mm_config_printable(dtype_s);
      fprintf(stderr, "madmax: --dtype %s: expected one of fp32, tf32, fp16, bf16, fp8, int8\n", shown);
      return MM_EXIT_INPUT;
    }
    base.dtype = (MmDtype)dt;
    base.dtype_given = TRUE;
  }
  double occupancy = 0; /* 0: the device's default */
  if (occupancy_s) { /* given, 0 included: a double option could not tell 0 from absent */
    char *end = NULL;
    occupancy = g_ascii_strtod(occupancy_s, &end);
    if (end == occupancy_s || *end || !(occupancy > 0 && occupancy <= 1)) {
      g_autofree char *shown = mm_config_printable(occupancy_s);
      fprintf(stderr, "madmax: --occupancy %s: expected a fraction in (0, 1]\n", shown);
      return MM_EXIT_INPUT;
    }
  }
  base.occupancy = occupancy;
  gint64 v = 0;
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {"--trace", trace_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--hardware", hw_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  if (ranks_s) {
    if (!mm_cli_parse_int("--ranks", ranks_s, 2, 64, &v, &error)) return mm_cli_fail(error);
    base.ranks = v;
  }
  if (stride_s) {
    if (!mm_cli_parse_int("--stride", stride_s, 1, G_MAXINT32, &v, &error)) return mm_cli_fail(error);
    base.stride = v;
  }
  /* shape lists -> the points (their cross product, first option outermost) */
  GArray *lists[N_SHAPE] = {NULL};
  guint npoints = 1;
  gboolean ok = TRUE;
  for (guint i = 0; i < N_SHAPE && ok; i++) {
    if (!values[i]) continue;
    lists[i] = g_array_new(FALSE, FALSE, sizeof(gint64));
    ok = parse_list(shape_opts[i].option, values[i], lists[i]);
    if (ok) npoints *= lists[i]->len;
    if (npoints > 4096) {
      fprintf(stderr, "madmax: the shape lists make %u points; at most 4096\n", npoints);
      ok = FALSE;
    }
  }
  g_autoptr(MmHardware) hw = NULL;
  if (ok) {
    hw = mm_hardware_load(hw_path, &error);
    if (!hw) {
      for (guint i = 0; i < N_SHAPE; i++)
        if (lists[i]) g_array_unref(lists[i]);
      return mm_cli_fail(error);
    }
  }
  if (ok && (trace_path || plot_dir) && npoints > 1) {
    fprintf(stderr, "madmax: --trace and --plot draw one shape; the lists make %u\n", npoints);
    ok = FALSE;
  }
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)mm_fused_result_free);
  g_autoptr(cJSON) doc = cJSON_CreateObject();
  cJSON_AddStringToObject(doc, "op", mm_fused_op_names[op]);
  cJSON_AddStringToObject(doc, "hardware", hw ? hw->path : hw_path);
  cJSON *points = cJSON_AddArrayToObject(doc, "points");
  static const char *const head[] = {"<shape", "<schedule", "baseline", "kernel", "collective", "fused", "speedup",
                                     "saved", "exposed comm", "skew"};
  g_autoptr(MmTable) t = mm_table_new(G_N_ELEMENTS(head), head);
  for (guint pi = 0; ok && pi < npoints; pi++) {
    MmFusedSpec s = base;
    s.timeline = trace_path || plot_dir;
    guint rest = pi;
    for (int i = (int)N_SHAPE - 1; i >= 0; i--) {
      if (!lists[i]) continue;
      *field(&s, &shape_opts[i]) = g_array_index(lists[i], gint64, rest % lists[i]->len);
      rest /= lists[i]->len;
    }
    cJSON *pj = NULL;
    for (int sc = 0; ok && sc < MM_FUSED_SCHED_COUNT; sc++) {
      if (!want[sc]) continue;
      s.schedule = (MmFusedSchedule)sc;
      MmFusedResult *r = mm_fused_kernel_run(hw, &s, &error);
      if (!r) {
        /* spec errors name the field: "batch: ..." -> "--batch: ..." where it is an option */
        const gsize w = strcspn(error->message, ": ,");
        gboolean opt = FALSE;
        static const char *const others[] = {"ranks", "stride", "occupancy", "dtype", "schedule"};
        for (guint i = 0; i < N_SHAPE && !opt; i++)
          opt = strlen(shape_opts[i].option) == w && strncmp(error->message, shape_opts[i].option, w) == 0;
        for (guint i = 0; i < G_N_ELEMENTS(others) && !opt; i++)
          opt = strlen(others[i]) == w && strncmp(error->message, others[i], w) == 0;
        fprintf(stderr, "madmax: %s%s\n", opt && error->domain == MM_FUSED_ERROR ? "--" : "", error->message);
        ok = FALSE;
        break;
      }
      g_ptr_array_add(results, r);
      if (!pj) {
        pj = point_json(r);
        cJSON_AddItemToArray(points, pj);
      }
      cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(pj, "fused"), fused_json(r));
      char *cells[10] = {shape_label(&r->spec), g_strdup(mm_fused_schedule_names[sc]), mm_fmt_seconds(r->baseline_s),
                         mm_fmt_seconds(r->kernel_s), mm_fmt_seconds(r->coll_s), mm_fmt_seconds(r->fused_s),
                         g_strdup_printf("%.3f", r->speedup), g_strdup_printf("%.1f%%", 100 * (1 - r->fused_s / r->baseline_s)),
                         mm_fmt_seconds(r->exposed_comm_s), g_strdup_printf("%.1f%%", 100 * r->skew)};
      mm_table_addv(t, cells);
    }
  }
  for (guint i = 0; i < N_SHAPE; i++)
    if (lists[i]) g_array_unref(lists[i]);
  if (!ok) return error && error->domain != MM_FUSED_ERROR ? MM_EXIT_INTERNAL : MM_EXIT_INPUT;

  const gboolean text = !json_path || strcmp(json_path, "-") != 0;
  if (text) {
    const MmFusedResult *r0 = g_ptr_array_index(results, 0);
    printf("fused %s over %" G_GINT64_FORMAT " ranks (stride %" G_GINT64_FORMAT ") of %s\n", mm_fused_op_names[op],
           r0->spec.ranks, r0->spec.stride, hw->name);
    printf("  occupancy %.3g of the plain kernel's; %" G_GINT64_FORMAT " persistent WGs; baseline collective: %s\n\n",
           r0->spec.occupancy, r0->physical_wgs, r0->coll_algorithm);
    mm_table_print(t, stdout, "  ");
    if (results->len <= MM_FUSED_SCHED_COUNT) {
      for (guint i = 0; i < results->len; i++) {
        const MmFusedResult *r = g_ptr_array_index(results, i);
        g_autofree char *sb = mm_fmt_bytes(r->slice_bytes);
        g_autofree char *c = mm_fmt_seconds(r->compute_s), *m = mm_fmt_seconds(r->comm_s),
                        *bo = mm_fmt_seconds(r->both_s), *st = mm_fmt_seconds(r->stalled_s),
                        *lb = mm_fmt_seconds(r->lower_bound_s);
        printf("\n  %s: %" G_GINT64_FORMAT " logical WGs in %" G_GINT64_FORMAT " slices of %s, %" G_GINT64_FORMAT
               " in flight; slowest rank: compute only %s, puts only %s, both %s, stalled %s; lower bound %s\n",
               mm_fused_schedule_names[r->spec.schedule], r->logical_wgs, r->n_slices, sb, r->lanes, c, m, bo, st, lb);
      }
    }
  }
  /* outputs, all or nothing */
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  if (json_path) mm_outputs_add_json(outs, "--json", json_path, doc);
  if (trace_path) {
    gsize len = 0;
    char *tr = trace_text(results, &len);
    mm_outputs_add(outs, "--trace", trace_path, tr, len);
  }
  /* a --plot directory made here is removed again if the outputs fail (nothing half-written) */
  const gboolean made_dir = plot_dir && !g_file_test(plot_dir, G_FILE_TEST_EXISTS);
  if (plot_dir) {
    if (g_mkdir_with_parents(plot_dir, 0755) != 0) {
      g_autofree char *shown = mm_config_printable(plot_dir);
      fprintf(stderr, "madmax: --plot %s: cannot create the directory: %s\n", shown, g_strerror(errno));
      return MM_EXIT_INPUT;
    }
    g_autoptr(GString) titles = g_string_new(NULL);
    guint blocks = 0;
    char *data = plot_data(results, titles, &blocks);
    char *script = plot_script(titles, blocks, mm_fused_op_names[op]);
    gsize png_len = 0;
    g_autoptr(GError) perr = NULL;
    char *png = render_png(script, data, &png_len, &perr);
    g_autofree char *dat_path = g_build_filename(plot_dir, "fused-slices.dat", NULL);
    g_autofree char *gp_path = g_build_filename(plot_dir, "fused-slices.gp", NULL);
    g_autofree char *png_path = g_build_filename(plot_dir, "fused-slices.png", NULL);
    mm_outputs_add(outs, "--plot", dat_path, data, strlen(data));
    mm_outputs_add(outs, "--plot", gp_path, script, strlen(script));
    if (png) mm_outputs_add(outs, "--plot", png_path, png, png_len);
    else fprintf(stderr, "madmax: --plot: wrote the script and data only: %s\n", perr->message);
  }
  if (!mm_outputs_commit(outs, &error)) {
    if (made_dir) g_rmdir(plot_dir);
    return mm_cli_fail(error);
  }
  return MM_EXIT_OK;
}
