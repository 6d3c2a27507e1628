/* cmd_op: `madmax op KIND`: one operation studied alone (collectives, sparse gradient sync). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "comm/comm.h"
#include "report/report.h"

/* The largest size --bytes and --sweep take: 2^53 bytes (8 PiB), the largest integer a double holds. */
#define MAX_BYTES 9007199254740992.0

/* "16MiB", "1GiB", "8B", "1e9", "512KB" -> a whole number of bytes up to MAX_BYTES; FALSE on
 * anything else (NaN, 0.5, 1e30). */
static gboolean parse_size(const char *text, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text || !isfinite(v) || v < 0) return FALSE;
  static const struct {
    const char *suffix;
    double mul;
  } units[] = {{"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
               {"TiB", 1099511627776.0}, {"PiB", 1125899906842624.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
               {"TB", 1e12}, {"PB", 1e15},
               {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  for (guint i = 0; i < G_N_ELEMENTS(units); i++) {
    if (g_ascii_strcasecmp(end, units[i].suffix) == 0 && (units[i].suffix[0] || *end == '\0')) {
      const double b = v * units[i].mul;
      if (b > MAX_BYTES || b != floor(b)) return FALSE;
      *out = b;
      return TRUE;
    }
  }
  return FALSE;
}

/* An optional integer option given as text (NULL: @def); prints the error. */
static gboolean int_option(const char *option, const char *text, gint64 def, gint64 min, gint64 max, gint64 *out)
{
  if (!text) {
    *out = def;
    return TRUE;
  }
  g_autoptr(GError) error = NULL;
  if (mm_cli_parse_int(option, text, min, max, out, &error)) return TRUE;
  fprintf(stderr, "madmax: %s\n", error->message);
  return FALSE;
}

static gboolean write_json(const cJSON *doc, const char *path, GError **error)
{
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add_json(outs, "--json", path, doc);
  return mm_outputs_commit(outs, error);
}

static char *names_list(const char *const *names)
{
  g_autofree char *joined = g_strjoinv(", ", (char **)names);
  return g_steal_pointer(&joined);
}

static cJSON *cost_json(const MmHardware *hw, const MmLinks *links, const MmCollective *c, const MmCommCost *o)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "kind", mm_coll_names[c->kind]);
  cJSON_AddNumberToObject(j, "bytes", c->bytes);
  cJSON_AddNumberToObject(j, "ranks", (double)c->degree);
  cJSON_AddNumberToObject(j, "stride", (double)c->stride);
  cJSON_AddStringToObject(j, "scope", mm_scope_names[o->shape.scope]);
  cJSON_AddStringToObject(j, "algorithm", mm_algorithm_names[o->algorithm]);
  cJSON_AddStringToObject(j, "protocol", mm_protocol_names[o->protocol]);
  cJSON_AddNumberToObject(j, "time_s", o->time_s);
  cJSON_AddNumberToObject(j, "latency_s", o->latency_s);
  cJSON_AddNumberToObject(j, "alg_bw_GBps", o->alg_bw_Bps / 1e9);
  cJSON_AddNumberToObject(j, "bus_bw_GBps", o->bus_bw_Bps / 1e9);
  cJSON *ls = cJSON_AddArrayToObject(j, "links");
  for (uint32_t i = 0; i < o->n_use; i++) {
    cJSON *l = cJSON_CreateObject();
    g_autofree char *name = mm_comm_link_name(hw, links, o->link[i]);
    cJSON_AddStringToObject(l, "link", name);
    cJSON_AddNumberToObject(l, "bytes", o->bytes[i]);
    cJSON_AddNumberToObject(l, "bw_GBps", links->bw_Bps[o->link[i]] / 1e9);
    cJSON_AddItemToArray(ls, l);
  }
  return j;
}

static int op_collective(int argc, char **argv)
{
  g_autofree char *kind_s = NULL, *bytes_s = NULL, *hw_path = NULL, *algo_s = NULL, *json_path = NULL,
                  *sweep_s = NULL, *ranks_s = NULL, *stride_s = NULL;
  gint64 ranks = 0, stride = 1;
  GOptionEntry entries[] = {
    {"kind", 'k', 0, G_OPTION_ARG_STRING, &kind_s, "all_reduce, all_gather, reduce_scatter, all_to_all, p2p, broadcast, permute", "KIND"},
    {"bytes", 'b', 0, G_OPTION_ARG_STRING, &bytes_s, "Buffer size (8B, 64KiB, 16MiB, 1GiB, 1e9): nccl-tests' size", "SIZE"},
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &hw_path, "System file (hardware/*.json)", "H"},
    {"ranks", 'r', 0, G_OPTION_ARG_STRING, &ranks_s, "Devices in the group (default: one node)", "N"},
    {"stride", 's', 0, G_OPTION_ARG_STRING, &stride_s, "Device-index distance between members (default 1; gpus_per_node: one per node)", "D"},
    {"algorithm", 'a', 0, G_OPTION_ARG_STRING, &algo_s, "Force an algorithm (default: auto, the fastest)", "ALGO"},
    {"sweep", 0, 0, G_OPTION_ARG_STRING, &sweep_s, "Sizes from A to B, doubling (e.g. 8B:16GiB), instead of --bytes", "A:B"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write JSON to OUT ('-' = stdout)", "OUT"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- one collective alone on idle links");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autofree char *algos = names_list(mm_algorithm_names);
  g_autofree char *summary = g_strdup_printf(
    "Costs one collective over --ranks devices of the system (members d0 + j * stride) and prints\n"
    "its time, algorithm bandwidth (size / time) and bus bandwidth (nccl-tests conventions:\n"
    "AllReduce x 2(p-1)/p, AllGather/ReduceScatter/All2All x (p-1)/p), the algorithm and the\n"
    "bytes it moves on each link. Algorithms: %s.", algos);
  g_option_context_set_summary(ctx, summary);
  g_option_context_set_description(ctx,
    "Examples:\n"
    "  madmax op collective --kind all_reduce --bytes 1GiB --hardware hardware/dgx-h100-2048.json\n"
    "  madmax op collective --kind all_reduce --sweep 1MiB:16GiB --hardware hardware/mi300x-8.json --ranks 2\n"
    "  madmax op collective --kind all_gather --bytes 4GiB --hardware hardware/dgx-a100-2048.json --ranks 64\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry 'madmax op collective --help'.\n", argv[1]);
    return MM_EXIT_INPUT;
  }
  if (!kind_s || !hw_path || (!bytes_s == !sweep_s)) {
    fprintf(stderr, "madmax: op collective needs --kind, --hardware and one of --bytes, --sweep\n"
                    "Try 'madmax op collective --help'.\n");
    return MM_EXIT_INPUT;
  }
  int kind = mm_name_index(mm_coll_names, kind_s);
  if (kind < 0) {
    g_autofree char *k = names_list(mm_coll_names);
    fprintf(stderr, "madmax: --kind %s: expected one of %s\n", kind_s, k);
    return MM_EXIT_INPUT;
  }
  int algo = algo_s ? mm_name_index(mm_algorithm_names, algo_s) : MM_ALGO_AUTO;
  if (algo < 0) {
    fprintf(stderr, "madmax: --algorithm %s: expected one of %s\n", algo_s, algos);
    return MM_EXIT_INPUT;
  }
  double lo = 0, hi = 0;
  if (bytes_s && !parse_size(bytes_s, &lo)) {
    g_autofree char *shown = mm_config_printable(bytes_s);
    fprintf(stderr, "madmax: --bytes %s: expected a whole number of bytes up to 8PiB, such as 8B, 64KiB, 1GiB or 1e9\n",
            shown);
    return MM_EXIT_INPUT;
  }
  if (sweep_s) {
    g_auto(GStrv) parts = g_strsplit(sweep_s, ":", 2);
    if (g_strv_length(parts) != 2 || !parse_size(parts[0], &lo) || !parse_size(parts[1], &hi) || lo <= 0 || hi < lo) {
      g_autofree char *shown = mm_config_printable(sweep_s);
      fprintf(stderr, "madmax: --sweep %s: expected A:B, whole numbers of bytes with 0 < A <= B <= 8PiB (e.g. 8B:16GiB)\n",
              shown);
      return MM_EXIT_INPUT;
    }
  } else {
    hi = lo;
  }
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--hardware", hw_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  g_autoptr(MmHardware) hw = mm_hardware_load(hw_path, &error);
  if (!hw) return mm_cli_fail(error);
  int64_t n = mm_hardware_devices(hw), g = hw->gpus_per_node;
  if (!int_option("--ranks", ranks_s, g, 1, G_MAXINT64, &ranks) || !int_option("--stride", stride_s, 1, 1, G_MAXINT64, &stride))
    return MM_EXIT_INPUT;
  if (ranks > n || (ranks > 1 && (stride >= n || (ranks - 1) * stride >= n))) { /* no overflow */
    fprintf(stderr, "madmax: --ranks %" G_GINT64_FORMAT " --stride %" G_GINT64_FORMAT ": the group must fit the %" G_GINT64_FORMAT
                    " devices of %s\n", ranks, stride, n, hw_path);
    return MM_EXIT_INPUT;
  }
  if (!mm_comm_group_even(hw, ranks, stride)) {
    fprintf(stderr, "madmax: --ranks %" G_GINT64_FORMAT " --stride %" G_GINT64_FORMAT ": the group straddles %" G_GINT64_FORMAT
                    "-GPU nodes unevenly; use a divisor or multiple of the node\n", ranks, stride, g);
    return MM_EXIT_INPUT;
  }
  MmLinks links;
  mm_comm_links(hw, &links);
  MmCollective c = {.kind = (MmCollKind)kind, .bytes = lo, .degree = ranks, .stride = stride,
                    .algorithm = (MmAlgorithm)algo, .skew = 1.0};
  if (algo != MM_ALGO_AUTO && !mm_comm_applies(hw, &links, &c, (MmAlgorithm)algo)) {
    fprintf(stderr, "madmax: --algorithm %s does not apply to %s over %" G_GINT64_FORMAT " ranks (%s) of %s\n", algo_s,
            kind_s, ranks, mm_scope_names[mm_comm_group_shape(hw, ranks, stride).scope], hw_path);
    return MM_EXIT_INPUT;
  }

  g_autoptr(cJSON) doc = cJSON_CreateObject();
  cJSON_AddStringToObject(doc, "hardware", hw->path);
  cJSON *points = sweep_s ? cJSON_AddArrayToObject(doc, "points") : NULL;
  gboolean text = !json_path || strcmp(json_path, "-") != 0;
  if (text)
    printf("%s over %" G_GINT64_FORMAT " ranks (stride %" G_GINT64_FORMAT ") of %s\n\n", kind_s, ranks, stride, hw->name);
  static const char *const head[] = {"size", "time", "alg bw GB/s", "bus bw GB/s", "<algorithm", "<protocol", "<scope"};
  g_autoptr(MmTable) t = mm_table_new(7, head);
  for (double b = lo; b <= hi * (1 + 1e-12); b *= 2) {
    c.bytes = b;
    MmCommCost o;
    mm_comm_cost(hw, &links, &c, &o);
    if (points) cJSON_AddItemToArray(points, cost_json(hw, &links, &c, &o));
    else cJSON_AddItemToObject(doc, "result", cost_json(hw, &links, &c, &o));
    char *cells[7] = {mm_fmt_bytes(b), mm_fmt_seconds(o.time_s), g_strdup_printf("%.2f", o.alg_bw_Bps / 1e9),
                      g_strdup_printf("%.2f", o.bus_bw_Bps / 1e9), g_strdup(mm_algorithm_names[o.algorithm]),
                      g_strdup(mm_protocol_names[o.protocol]), g_strdup(mm_scope_names[o.shape.scope])};
    mm_table_addv(t, cells);
    if (!points) {
      if (text) {
        mm_table_print(t, stdout, "  ");
        g_autofree char *latency = mm_fmt_seconds(o.latency_s);
        printf("\n  latency %s; bytes per link:\n", latency);
        for (uint32_t i = 0; i < o.n_use; i++) {
          g_autofree char *name = mm_comm_link_name(hw, &links, o.link[i]);
          g_autofree char *by = mm_fmt_bytes(o.bytes[i]);
          printf("    %-10s %s at %.1f GB/s\n", name, by, links.bw_Bps[o.link[i]] / 1e9);
        }
      }
      break;
    }
    if (b <= 0) break;
  }
  if (points && text) mm_table_print(t, stdout, "  ");
  /* the single-point JSON carries the keys at the top level as well */
  if (!points) {
    cJSON *r = cJSON_GetObjectItemCaseSensitive(doc, "result");
    static const char *const keys[] = {"time_s", "alg_bw_GBps", "bus_bw_GBps", "algorithm"};
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
      cJSON_AddItemToObject(doc, keys[i], cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, keys[i]), TRUE));
  }
  if (json_path && !write_json(doc, json_path, &error)) return mm_cli_fail(error);
  return MM_EXIT_OK;
}

static int op_sparse(int argc, char **argv)
{
  g_autofree char *hw_path = NULL, *json_path = NULL, *dtype_s = NULL, *rows_s = NULL, *dim_s = NULL, *ranks_s = NULL,
                  *stride_s = NULL;
  gint64 rows = 0, dim = 0, ranks = 0, stride = 1;
  double touched = 0.01, overlap = 0.0;
  GOptionEntry entries[] = {
    {"rows", 0, 0, G_OPTION_ARG_STRING, &rows_s, "Rows of the embedding table", "R"},
    {"dim", 0, 0, G_OPTION_ARG_STRING, &dim_s, "Embedding dimension", "D"},
    {"touched", 0, 0, G_OPTION_ARG_DOUBLE, &touched, "Fraction of rows one rank touches (default 0.01)", "F"},
    {"overlap", 0, 0, G_OPTION_ARG_DOUBLE, &overlap, "Fraction of a rank's rows the others touch too (default 0)", "F"},
    {"dtype", 0, 0, G_OPTION_ARG_STRING, &dtype_s, "Gradient dtype (default fp32)", "T"},
    {"hardware", 'H', 0, G_OPTION_ARG_FILENAME, &hw_path, "System file", "H"},
    {"ranks", 'r', 0, G_OPTION_ARG_STRING, &ranks_s, "Data-parallel ranks (default: one node)", "N"},
    {"stride", 's', 0, G_OPTION_ARG_STRING, &stride_s, "Device-index distance between ranks", "D"},
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write JSON to OUT ('-' = stdout)", "OUT"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- synchronize a sparse embedding gradient: dense vs sparse vs host");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Compares three ways to synchronize an embedding table's gradient across data-parallel ranks:\n"
    "dense (AllReduce of the whole table), sparse (all-gather of the padded local row indices,\n"
    "de-duplication into their union, AllReduce of the union's rows; the PyTorch Sparse All-Reduce\n"
    "blog) and host (the sparse exchange staged through host memory, Gloo-like).");
  g_option_context_set_description(ctx, "Example (the blog's case):\n"
    "  madmax op sparse --rows 5000000 --dim 2048 --touched 0.01 --hardware hardware/dgx-h100-2048.json\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  /* written so that NaN fails every comparison */
  if (!hw_path || !rows_s || !dim_s || !(touched > 0 && touched <= 1) || !(overlap >= 0 && overlap <= 1)) {
    fprintf(stderr, "madmax: op sparse needs --hardware, --rows > 0, --dim > 0, 0 < --touched <= 1, 0 <= --overlap <= 1\n"
                    "Try 'madmax op sparse --help'.\n");
    return MM_EXIT_INPUT;
  }
  if (!int_option("--rows", rows_s, 0, 1, G_MAXINT64, &rows) || !int_option("--dim", dim_s, 0, 1, G_MAXINT64, &dim))
    return MM_EXIT_INPUT;
  int dt = dtype_s ? mm_name_index(mm_dtype_names, dtype_s) : MM_DTYPE_FP32;
  if (dt < 0) {
    g_autofree char *shown = mm_config_printable(dtype_s);
    g_autofree char *names = names_list(mm_dtype_names);
    fprintf(stderr, "madmax: --dtype %s: expected one of %s\n", shown, names);
    return MM_EXIT_INPUT;
  }
  if ((double)rows * (double)dim * mm_dtype_bytes((MmDtype)dt) > MAX_BYTES) {
    fprintf(stderr, "madmax: --rows %" G_GINT64_FORMAT " --dim %" G_GINT64_FORMAT ": a table over 8PiB\n", rows, dim);
    return MM_EXIT_INPUT;
  }
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {NULL, NULL}};
  const MmPathArg inputs[] = {{"--hardware", hw_path}, {NULL, NULL}};
  if (!mm_cli_outputs_check(outputs, inputs, &error)) return mm_cli_fail(error);
  g_autoptr(MmHardware) hw = mm_hardware_load(hw_path, &error);
  if (!hw) return mm_cli_fail(error);
  const int64_t n = mm_hardware_devices(hw);
  if (!int_option("--ranks", ranks_s, hw->gpus_per_node, 1, G_MAXINT64, &ranks) ||
      !int_option("--stride", stride_s, 1, 1, G_MAXINT64, &stride))
    return MM_EXIT_INPUT;
  if (ranks > n || (ranks > 1 && (stride >= n || (ranks - 1) * stride >= n))) { /* no overflow */
    fprintf(stderr, "madmax: --ranks %" G_GINT64_FORMAT " --stride %" G_GINT64_FORMAT ": the group must fit the %"
                    G_GINT64_FORMAT " devices of %s\n", ranks, stride, n, hw_path);
    return MM_EXIT_INPUT;
  }
  MmLinks links;
  mm_comm_links(hw, &links);
  MmSparseGrad sg = {rows, dim, mm_dtype_bytes((MmDtype)dt), touched, overlap, ranks, stride};
  g_autoptr(cJSON) doc = cJSON_CreateObject();
  cJSON *methods = cJSON_AddArrayToObject(doc, "methods");
  static const char *const head[] = {"<method", "time", "indices", "values", "<value all-reduce"};
  g_autoptr(MmTable) t = mm_table_new(5, head);
  MmSparseCost best;
  mm_comm_sparse_best(hw, &links, &sg, &best);
  for (int m = 0; m < MM_SYNC_COUNT; m++) {
    MmSparseCost sc;
    mm_comm_sparse_cost(hw, &links, &sg, (MmSparseMethod)m, &sc);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", mm_sparse_method_names[m]);
    cJSON_AddNumberToObject(o, "time_s", sc.time_s);
    cJSON_AddNumberToObject(o, "index_bytes", sc.index_bytes);
    cJSON_AddNumberToObject(o, "value_bytes", sc.value_bytes);
    cJSON_AddNumberToObject(o, "union_rows", sc.union_rows);
    cJSON_AddItemToArray(methods, o);
    char *cells[5] = {g_strdup(mm_sparse_method_names[m]), mm_fmt_seconds(sc.time_s), mm_fmt_bytes(sc.index_bytes),
                      mm_fmt_bytes(sc.value_bytes), g_strdup(mm_algorithm_names[sc.reduce.algorithm])};
    mm_table_addv(t, cells);
  }
  cJSON_AddStringToObject(doc, "best", mm_sparse_method_names[best.method]);
  if (!json_path || strcmp(json_path, "-") != 0) {
    printf("embedding gradient %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT " (%s), %.3g%% rows touched per rank, %"
           G_GINT64_FORMAT " ranks of %s\n\n", rows, dim, mm_dtype_names[dt], 100 * touched, ranks, hw->name);
    mm_table_print(t, stdout, "  ");
    printf("\n  best: %s\n", mm_sparse_method_names[best.method]);
  }
  if (json_path && !write_json(doc, json_path, &error)) return mm_cli_fail(error);
  return MM_EXIT_OK;
}

int mm_cmd_op(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    FILE *out = argc < 2 ? stderr : stdout;
    fprintf(out, "usage: madmax op KIND [OPTIONS]   (madmax op KIND --help)\n\n"
                 "  collective   one collective alone: time, algorithm and bus bandwidth, per-link bytes\n"
                 "  sparse       embedding-gradient synchronization: dense vs sparse vs host-staged\n"
                 "  emb-a2a      fused embedding pooling + All2All (slice puts) vs bulk\n"
                 "  gemv-ar      fused GEMV + AllReduce (zero-copy slice puts) vs bulk\n"
                 "  gemm-a2a     fused GEMM + All2All (tile puts) vs bulk\n"
                 "  ag-gemm      AllGather + GEMM: serial, shard overlap, FiCCO schedules, collective matmul\n"
                 "  gemm-rs      GEMM + ReduceScatter: serial vs decomposed overlap\n");
    return argc < 2 ? MM_EXIT_INPUT : MM_EXIT_OK;
  }
  g_autofree char *name = g_strdup_printf("madmax op %s", argv[1]);
  argv[1] = name;
  if (strcmp(argv[1] + 10, "collective") == 0) return op_collective(argc - 1, argv + 1);
  if (strcmp(argv[1] + 10, "sparse") == 0) return op_sparse(argc - 1, argv + 1);
  if (strcmp(argv[1] + 10, "emb-a2a") == 0 || strcmp(argv[1] + 10, "gemv-ar") == 0 ||
      strcmp(argv[1] + 10, "gemm-a2a") == 0)
    return mm_cmd_op_kernel(argc - 1, argv + 1);
  if (strcmp(argv[1] + 10, "ag-gemm") == 0 || strcmp(argv[1] + 10, "gemm-rs") == 0)
    return mm_cmd_op_overlap(argc - 1, argv + 1);
  fprintf(stderr, "madmax: unknown op '%s'\nTry 'madmax op --help'.\n", argv[1] + 10);
  return MM_EXIT_INPUT;
}
