/* cmd_calibrate: `madmax calibrate`: measure kernels (CPU backend, the GPU harness) or read
 * measurements (--from-csv), fit efficiency models, write a calibrated device file. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "calib/calib.h"
#include "calib/convert.h"
#include "calib/fit.h"
#include "cli.h"
#include "config/json.h"
#include "report/report.h"

/* The GPU harness: --harness, else madmax-calib beside this program, else on PATH. */
static char *find_harness(const char *given, const char *argv0)
{
  if (given) return g_strdup(given);
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  g_autofree char *dir = g_path_get_dirname(self ? self : argv0);
  g_autofree char *beside = g_build_filename(dir, "madmax-calib", NULL);
  if (g_file_test(beside, G_FILE_TEST_IS_EXECUTABLE)) return g_steal_pointer(&beside);
  return g_find_program_in_path("madmax-calib");
}

/* Runs the GPU harness (argv, no shell) into a temporary CSV and reads it. */
static gboolean run_harness(const char *bin, gboolean quick, MmCalibTable *t, GError **error)
{
  g_autofree char *tmp = NULL;
  int fd = g_file_open_tmp("madmax-calib-XXXXXX.csv", &tmp, error);
  if (fd < 0) return FALSE;
  close(fd);
  const char *argv[] = {bin, "--out", tmp, quick ? "--quick" : NULL, NULL};
  int status = 0;
  gboolean ok = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_CHILD_INHERITS_STDIN, NULL, NULL, NULL, NULL,
                             &status, error) &&
                g_spawn_check_wait_status(status, error) && mm_calib_csv_read(tmp, t, error);
  if (!ok) g_prefix_error(error, "the GPU harness %s: ", bin);
  g_unlink(tmp);
  return ok;
}

/* The device a CPU calibration describes when no --device is given: peaks are the best the
 * run measured (so every fitted fraction is of what this machine showed it can do). */
static cJSON *cpu_device(const MmCalibTable *t)
{
  double best_flops = 0, best_bw = 0;
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!strcmp(r->bench, "gemm") && r->flops > 0) best_flops = MAX(best_flops, r->flops / r->median_s);
    if (!strcmp(r->bench, "copy") && r->bytes > 0) best_bw = MAX(best_bw, r->bytes / r->median_s);
  }
  const char *dev = mm_calib_table_meta(t, "device");
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", dev ? dev : "CPU");
  cJSON_AddStringToObject(root, "source",
                          "madmax calibrate --backend cpu: the peaks are the best GEMM FLOP/s and copy bandwidth "
                          "this run measured");
  cJSON *peak = cJSON_AddObjectToObject(root, "peak_tflops");
  cJSON_AddNumberToObject(peak, "fp32", MAX(best_flops, 1e6) / 1e12);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  cJSON_AddNumberToObject(root, "hbm_GiB", pages > 0 && page > 0 ? (double)pages * (double)page / 1073741824.0 : 1);
  cJSON_AddNumberToObject(root, "hbm_bw_GBps", MAX(best_bw, 1e6) / 1e9);
  cJSON_AddNumberToObject(root, "launch_overhead_us", 0);
  cJSON *util = cJSON_AddObjectToObject(root, "utilization");
  const char *names[] = {"gemm", "hbm"};
  for (int i = 0; i < 2; i++) {
    cJSON *u = cJSON_AddObjectToObject(util, names[i]);
    cJSON_AddNumberToObject(u, "value", 1);
    cJSON_AddStringToObject(u, "provenance", "calibration");
    cJSON_AddStringToObject(u, "source", "the best this run measured (the peak above)");
  }
  return root;
}

int mm_cmd_calibrate(int argc, char **argv)
{
  g_autofree char *backend = NULL, *device_path = NULL, *out_path = NULL, *csv_out = NULL, *harness = NULL;
  g_autofree char *format = NULL;
  g_auto(GStrv) from_csv = NULL;
  gboolean quick = FALSE;
  gint64 threads = 0;
  g_autofree char *threads_text = NULL;
  GOptionEntry entries[] = {
    {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend, "Measure now: cpu (this machine's cores) or hip (the GPU harness)",
     "cpu|hip"},
    {"from-csv", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &from_csv, "Fit measurements taken elsewhere (repeatable)", "FILE"},
    {"device", 'd', 0, G_OPTION_ARG_FILENAME, &device_path,
     "Device file to calibrate (peaks, memory; hardware/devices/*.json); cpu: optional", "DEV.json"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out_path, "Write the calibrated device file here", "OUT.json"},
    {"csv", 0, 0, G_OPTION_ARG_FILENAME, &csv_out, "Also write the measurements (the CSV of docs/CALIBRATION.md)",
     "OUT.csv"},
    {"quick", 'q', 0, G_OPTION_ARG_NONE, &quick, "A small grid of shapes (seconds, for tests)", NULL},
    {"threads", 't', 0, G_OPTION_ARG_STRING, &threads_text, "cpu: worker threads (default: all cores)", "N"},
    {"harness", 0, 0, G_OPTION_ARG_FILENAME, &harness,
     "hip: the harness program (default: madmax-calib beside madmax, or on PATH)", "PATH"},
    {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "--from-csv: the files' format (default: madmax)", "FORMAT"},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- measure kernels, fit efficiency, write a calibrated device");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Replaces a device's one-number efficiencies with models fitted to measured kernels\n"
    "(docs/CALIBRATION.md). Per kernel kind and dtype (GEMM, GEMV, attention):\n"
    "  time = max(flops / (peak x compute_fraction), bytes / (HBM bw x memory_fraction)) + t0\n"
    "and per memory-bound kind (copies, embedding lookups): bytes / (HBM bw x memory_fraction) + t0,\n"
    "least squares on log time, every fourth call held out and predicted; per collective series\n"
    "(nccl/rccl-tests) latency + bytes / bandwidth. The launch overhead measured (an empty\n"
    "kernel) goes in launch_overhead_us. run, sweep, whatif, op and describe\n"
    "then use the fits; describe shows per kernel which factor applied.\n\n"
    "  madmax calibrate --backend cpu --out results/cpu.json\n"
    "  scripts/calib-hip.sh results/mi300x.csv        # on the GPU: build and run the harness\n"
    "  madmax calibrate --from-csv results/mi300x.csv --device hardware/devices/mi300x.json \\\n"
    "                   --out hardware/devices/mi300x-calibrated.json");
  g_autofree char *formats = g_strjoinv(", ", (char **)mm_calib_convert_formats());
  g_autofree char *desc = g_strdup_printf(
    "Formats of --from-csv: madmax (the harness's CSV, docs/CALIBRATION.md), or the output of\n"
    "  %s (converted on reading).\n"
    "Published measurements ship as hardware/calibration/public-*.csv; the harness's own runs\n"
    "as hardware/calibration/<device>-<power>.csv.\n"
    "Exit codes: 0 ok, 1 bad input or too few measurements to fit, 2 a backend failed.", formats);
  g_option_context_set_description(ctx, desc);
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  g_autoptr(GError) error = NULL;
  const char *usage = NULL;
  if (argc > 1) usage = "unexpected argument";
  else if (!backend == !from_csv) usage = "expected one of --backend or --from-csv";
  else if (backend && strcmp(backend, "cpu") && strcmp(backend, "hip")) usage = "--backend: expected cpu or hip";
  else if (!out_path) usage = "expected --out OUT.json";
  else if (!device_path && !(backend && !strcmp(backend, "cpu")))
    usage = "expected --device DEV.json (the device the measurements are of: its peaks and memory)";
  else if (format && !from_csv) usage = "--format goes with --from-csv";
  if (usage) {
    fprintf(stderr, "madmax: %s\nTry 'madmax calibrate --help'.\n", usage);
    return MM_EXIT_INPUT;
  }
  if (threads_text && !mm_cli_parse_int("--threads", threads_text, 1, 4096, &threads, &error)) return mm_cli_fail(error);
  /* where the result goes, before minutes of measuring; never over the measurements read (the
   * base device may be replaced by its calibrated version: it is read first) */
  const MmPathArg outputs[] = {{"--out", out_path}, {"--csv", csv_out}, {NULL, NULL}};
  g_autoptr(GArray) inputs = g_array_new(TRUE, TRUE, sizeof(MmPathArg));
  for (guint i = 0; from_csv && from_csv[i]; i++) g_array_append_val(inputs, ((MmPathArg){"--from-csv", from_csv[i]}));
  if (!mm_outputs_check(outputs, (const MmPathArg *)(void *)inputs->data, &error)) return mm_cli_fail(error);
  /* the measurements are no device file: --csv never replaces the base device */
  const MmPathArg csv_output[] = {{"--csv", csv_out}, {NULL, NULL}}, device[] = {{"--device", device_path}, {NULL, NULL}};
  if (!mm_outputs_check(csv_output, device, &error)) return mm_cli_fail(error);

  /* the base device first: a bad file fails before minutes of measuring */
  g_autoptr(cJSON) base_root = NULL;
  g_auto(MmDevice) dev = {0};
  if (device_path) {
    base_root = mm_json_load_file(device_path, &error);
    if (!base_root || !mm_device_load(device_path, &dev, &error)) return mm_cli_fail(error);
  }

  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autofree char *what = NULL;
  if (from_csv) {
    gboolean native = !format || !strcmp(format, "madmax");
    for (guint i = 0; from_csv[i]; i++)
      if (native ? !mm_calib_csv_read(from_csv[i], t, &error) : !mm_calib_convert(format, from_csv[i], t, &error))
        return mm_cli_fail(error);
    what = g_strjoinv(", ", from_csv);
  } else if (!strcmp(backend, "cpu")) {
    MmCalibCpuOptions opt = {.threads = (guint)threads, .quick = quick};
    if (!mm_calib_cpu_run(&opt, t, &error)) return mm_cli_fail(error);
    what = g_strdup(quick ? "the CPU backend (--quick)" : "the CPU backend");
  } else {
    g_autofree char *bin = find_harness(harness, argv[0]);
    if (!bin) {
      fprintf(stderr, "madmax: the GPU harness madmax-calib is not built: scripts/calib-hip.sh OUT.csv builds and "
                      "runs it (hipcc or nvcc), then madmax calibrate --from-csv OUT.csv\n");
      return MM_EXIT_INPUT;
    }
    if (!run_harness(bin, quick, t, &error)) {
      fprintf(stderr, "madmax: %s\n", error->message);
      return MM_EXIT_INTERNAL;
    }
    what = g_strdup_printf("the GPU harness (%s)", bin);
  }
  if (!base_root) {
    base_root = cpu_device(t);
    g_autofree char *text = cJSON_Print(base_root);
    if (!mm_device_parse("(the CPU device)", text, strlen(text), &dev, &error)) return mm_cli_fail(error);
  }
  MmCalibResult r;
  if (!mm_calib_fit(t, &dev, what, &r, &error)) return mm_cli_fail(error);
  char *text = mm_calib_device_text(device_path ? device_path : "the CPU device", base_root, &r, out_path, &error);
  if (!text) {
    mm_calib_result_clear(&r);
    return mm_cli_fail(error);
  }
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add(outs, "--out", out_path, text, strlen(text));
  if (csv_out) {
    char *csv = mm_calib_csv_text(t);
    mm_outputs_add(outs, "--csv", csv_out, csv, strlen(csv));
  }
  fputs(r.report->str, stdout);
  mm_calib_result_clear(&r);
  if (!mm_outputs_commit(outs, &error)) return mm_cli_fail(error);
  printf("wrote %s\n", out_path);
  return MM_EXIT_OK;
}
