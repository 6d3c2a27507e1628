/* check_calib: the calibration CSV, the fitter, the calibration block of device files, the
 * cost unit's use of fits, and `madmax calibrate` / `validate --calibrated`. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/fit.h"
#include "cost/cost.h"
#include "testutil.h"

#define HEADER "bench,kind,dtype,m,n,k,batch,bytes,flops,variant,reps,median_s,min_s,max_s,source\n"

/* A device with bf16 at 400 TFLOP/s, 2 TB/s of HBM, a 4 us launch overhead, and @extra keys. */
static char *device_text(const char *extra)
{
  return g_strdup_printf("{\"name\":\"d\",\"peak_tflops\":{\"bf16\":400,\"fp32\":50},\"hbm_GiB\":80,"
                         "\"hbm_bw_GBps\":2000,\"launch_overhead_us\":4,"
                         "\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"estimate\"},"
                         "\"hbm\":{\"value\":0.5,\"provenance\":\"estimate\"}}%s%s}",
                         extra[0] ? "," : "", extra);
}

static void load_device(const char *extra, MmDevice *dev)
{
  g_autofree char *text = device_text(extra);
  g_autofree char *path = mm_test_write("dev.json", text);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_device_load(path, dev, &error), "%s", error ? error->message : "");
}

static char *device_error(const char *extra)
{
  g_autofree char *text = device_text(extra);
  g_autofree char *path = mm_test_write("bad-dev.json", text);
  g_autoptr(GError) error = NULL;
  MmDevice dev;
  ck_assert(!mm_device_load(path, &dev, &error));
  ck_assert(error->domain == MM_CONFIG_ERROR); /* exit 1: bad input */
  return g_strdup(error->message);
}

/* Rows a known model produces on that device: GEMMs over a grid, copies over sizes, and the
 * launch bench; times are launch + the model (exactly). */
static MmCalibTable *synthetic(double ec, double em, double t0, double copy_em, double copy_t0)
{
  MmDevice dev;
  load_device("", &dev);
  MmCalibTable *t = mm_calib_table_new();
  mm_calib_table_set_meta(t, "device", "synthetic");
  const double launch = 4e-6;
  MmCalibRow l = {.bench = "launch", .m = 1, .n = 1, .k = 1, .batch = 1, .variant = "stream", .reps = 5,
                  .median_s = launch, .min_s = launch, .max_s = launch};
  mm_calib_table_add(t, &l);
  const MmEffFit gf = {.compute_fraction = ec, .memory_fraction = em, .t0_s = t0};
  const double dims[] = {16, 256, 4096, 16384}; /* m = 16: weight-read (memory) bound */
  for (guint a = 0; a < 4; a++)
    for (guint b = 0; b < 4; b++)
      for (guint c = 0; c < 4; c++) {
        double m = dims[a], n = dims[b], k = dims[c], flops = 2 * m * n * k;
        double bytes = mm_cost_fit_bytes(MM_KERNEL_GEMM, MM_DTYPE_BF16, m, n, k, 1);
        double s = launch + mm_cost_fit_s(&dev, &gf, MM_DTYPE_BF16, flops, bytes);
        MmCalibRow r = {.bench = "gemm", .kind = "gemm", .dtype = "bf16", .m = m, .n = n, .k = k, .batch = 1,
                        .bytes = bytes, .flops = flops, .variant = "vendor", .reps = 5, .median_s = s, .min_s = s,
                        .max_s = s};
        mm_calib_table_add(t, &r);
      }
  const MmEffFit cf = {.memory = TRUE, .memory_fraction = copy_em, .t0_s = copy_t0};
  for (double sz = 1 << 20; sz <= (double)(1 << 30); sz *= 4) {
    double s = launch + mm_cost_fit_s(&dev, &cf, MM_DTYPE_BF16, 0, 2 * sz);
    MmCalibRow r = {.bench = "copy", .kind = "elementwise", .dtype = "bf16", .m = sz / 2, .n = 1, .k = 1,
                    .batch = 1, .bytes = 2 * sz, .variant = "kernel", .reps = 5, .median_s = s, .min_s = s, .max_s = s};
    mm_calib_table_add(t, &r);
    /* a DMA copy at a different speed: not a kernel, not fitted */
    r.variant = "dma", r.median_s = r.min_s = r.max_s = s * 3;
    mm_calib_table_add(t, &r);
  }
  mm_device_clear(&dev);
  return t;
}

START_TEST(test_csv_roundtrip)
{
  g_autoptr(MmCalibTable) t = synthetic(0.7, 0.8, 5e-6, 0.9, 2e-6);
  mm_calib_table_set_meta(t, "power_limit", "500 W, derated");
  MmCalibRow odd = {.bench = "gemm", .kind = "gemm", .dtype = "bf16", .m = 3, .n = 5, .k = 7, .batch = 2,
                    .bytes = 1.5, .flops = 420, .variant = "a,b", .reps = 0, .median_s = 1e-5, .min_s = 1e-6,
                    .max_s = 2e-5, .source = "a paper, table 2\nline"};
  mm_calib_table_add(t, &odd);
  g_autofree char *text = mm_calib_csv_text(t);
  g_autofree char *path = mm_test_write("rt.csv", text);
  g_autoptr(MmCalibTable) back = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_csv_read(path, back, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(back->rows->len, t->rows->len);
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *a = t->rows->pdata[i], *b = back->rows->pdata[i];
    ck_assert_str_eq(a->bench, b->bench);
    ck_assert(a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch && a->flops == b->flops);
    ck_assert(fabs(a->median_s - b->median_s) <= 1e-6 * a->median_s);
  }
  /* the separators inside text fields are replaced, never split a row */
  const MmCalibRow *o = back->rows->pdata[back->rows->len - 1];
  ck_assert_str_eq(o->variant, "a;b");
  ck_assert_str_eq(o->source, "a paper; table 2 line");
  ck_assert_str_eq(mm_calib_table_meta(back, "power_limit"), "500 W; derated");
  ck_assert_str_eq(mm_calib_table_meta(back, "device"), "synthetic");
  /* a header key given twice keeps both values */
  g_autofree char *twice = g_strconcat("# check: a\n# check: b\n", HEADER,
                                       "gemm,gemm,bf16,1,2,3,1,0,12,v,5,1e-6,1e-6,1e-6,\n", NULL);
  g_autofree char *tp = mm_test_write("twice.csv", twice);
  g_autoptr(MmCalibTable) tt = mm_calib_table_new();
  ck_assert(mm_calib_csv_read(tp, tt, &error));
  ck_assert_str_eq(mm_calib_table_meta(tt, "check"), "a | b");
}
END_TEST

static char *csv_error(const char *text)
{
  g_autofree char *path = mm_test_write("bad.csv", text);
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert(!mm_calib_csv_read(path, t, &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
  ck_assert_msg(strstr(error->message, "bad.csv") != NULL, "%s", error->message);
  return g_strdup(error->message);
}

START_TEST(test_csv_errors)
{
  static const struct {
    const char *text, *expect;
  } cases[] = {
    {"", "no column line"},
    {"# only a header: x\n", "no column line"},
    {"bench,kind\n", ":1: expected the column line"},
    {HEADER, "no measurement rows"},
    {HEADER "gemm,gemm,bf16,1,2,3,1,0,12,v,5,1e-6,1e-6\n", ":2: 13 fields, expected 15"},
    {HEADER "gemm,gemm,bf16,-1,2,3,1,0,12,v,5,1e-6,1e-6,1e-6,\n", ":2: column m: expected a number >= 0"},
    {HEADER "gemm,gemm,bf16,1,2,x,1,0,12,v,5,1e-6,1e-6,1e-6,\n", "column k"},
    {HEADER "gemm,gemm,bf16,1,2,3,1,0,12,v,2.5,1e-6,1e-6,1e-6,\n", "column reps: expected a whole number"},
    {HEADER "gemm,gemm,bf16,1,2,3,1,0,12,v,5,0,0,0,\n", "column median_s: expected seconds > 0"},
    {HEADER "gemm,gemm,bf16,1,2,3,1,0,12,v,5,1e-6,2e-6,3e-6,\n", "min_s <= median_s <= max_s"},
    {HEADER ",gemm,bf16,1,2,3,1,0,12,v,5,1e-6,1e-6,1e-6,\n", "column bench is empty"},
    {HEADER "gemm,gemm,bf16,1,2,3,1,0,1e999,v,5,1e-6,1e-6,1e-6,\n", "column flops"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *msg = csv_error(cases[i].text);
    ck_assert_msg(strstr(msg, cases[i].expect) != NULL, "case %u: %s", i, msg);
  }
}
END_TEST

/* The fitter recovers the parameters of rows a known model made, and predicts held-out calls. */
START_TEST(test_fit_recovers_model)
{
  MmDevice dev;
  load_device("", &dev);
  g_autoptr(MmCalibTable) t = synthetic(0.7, 0.8, 5e-6, 0.9, 2e-6);
  MmCalibResult r;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_fit(t, &dev, "synthetic rows", &r, &error), "%s", error ? error->message : "");
  ck_assert(fabs(r.launch_us - 4) < 1e-9);
  const cJSON *fits = cJSON_GetObjectItem(r.calibration, "fits");
  const cJSON *g = cJSON_GetObjectItem(fits, "gemm.bf16"), *c = cJSON_GetObjectItem(fits, "hbm.elementwise");
  ck_assert(g && c);
  ck_assert_msg(fabs(cJSON_GetObjectItem(g, "compute_fraction")->valuedouble - 0.7) < 0.005, "%s",
                cJSON_PrintUnformatted(g));
  ck_assert(fabs(cJSON_GetObjectItem(g, "memory_fraction")->valuedouble - 0.8) < 0.01);
  ck_assert(fabs(cJSON_GetObjectItem(g, "t0_us")->valuedouble - 5) < 0.1);
  ck_assert(cJSON_GetObjectItem(g, "rms_rel_err")->valuedouble < 0.002);
  ck_assert_int_eq(cJSON_GetObjectItem(g, "points")->valueint, 64);
  ck_assert_int_eq(cJSON_GetObjectItem(g, "held_out_points")->valueint, 16);
  ck_assert(cJSON_GetObjectItem(g, "held_out_rms_rel_err")->valuedouble < 0.005);
  /* the copies: the kernel rows only (the DMA rows at a third of the speed are not fitted) */
  ck_assert(fabs(cJSON_GetObjectItem(c, "memory_fraction")->valuedouble - 0.9) < 0.01);
  ck_assert_int_eq(cJSON_GetObjectItem(c, "points")->valueint, 6);
  ck_assert(strstr(r.report->str, "gemm.bf16") != NULL);
  mm_calib_result_clear(&r);
  mm_device_clear(&dev);
}
END_TEST

START_TEST(test_fit_needs_rows)
{
  MmDevice dev;
  load_device("", &dev);
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  MmCalibRow r = {.bench = "launch", .m = 1, .n = 1, .k = 1, .batch = 1, .reps = 5, .median_s = 4e-6,
                  .min_s = 4e-6, .max_s = 4e-6};
  mm_calib_table_add(t, &r);
  /* a GEMM in a dtype the device lacks and one within the launch overhead */
  MmCalibRow g = {.bench = "gemm", .kind = "gemm", .dtype = "fp8", .m = 64, .n = 64, .k = 64, .batch = 1,
                  .flops = 2 * 64 * 64 * 64.0, .reps = 5, .median_s = 1e-3, .min_s = 1e-3, .max_s = 1e-3};
  mm_calib_table_add(t, &g);
  g.dtype = "bf16", g.median_s = g.min_s = g.max_s = 4.1e-6;
  mm_calib_table_add(t, &g);
  MmCalibResult res;
  g_autoptr(GError) error = NULL;
  ck_assert(!mm_calib_fit(t, &dev, "two rows", &res, &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_FIT));
  ck_assert(res.calibration == NULL);
  mm_device_clear(&dev);
}
END_TEST

/* The written device loads, and its fits drive the cost: a GEMM's time is the fit's, a
 * memory-bound kind without its own fit takes hbm.elementwise, fp32 keeps the scalar. */
START_TEST(test_fit_drives_cost)
{
  MmDevice dev;
  load_device("", &dev);
  g_autoptr(MmCalibTable) t = synthetic(0.7, 0.8, 5e-6, 0.9, 2e-6);
  MmCalibResult r;
  g_autoptr(GError) error = NULL;
  ck_assert(mm_calib_fit(t, &dev, "synthetic rows", &r, &error));
  g_autofree char *base_text = device_text("");
  g_autoptr(cJSON) base = cJSON_Parse(base_text);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "cal.json", NULL);
  g_autofree char *text = mm_calib_device_text("dev.json", base, &r, out, &error);
  ck_assert_msg(text != NULL, "%s", error ? error->message : "");
  mm_calib_result_clear(&r);
  g_autofree char *path = mm_test_write("cal.json", text);
  MmDevice cal;
  ck_assert_msg(mm_device_load(path, &cal, &error), "%s", error ? error->message : "");
  ck_assert(strstr(cal.name, "(calibrated)") != NULL);
  ck_assert(cal.calibration_source && strstr(cal.calibration_source, "synthetic rows"));
  ck_assert(fabs(cal.launch_overhead_s - 4e-6) < 1e-12);

  MmKernel k = {.kind = MM_KERNEL_GEMM, .dtype = MM_DTYPE_BF16, .m = 8192, .n = 8192, .k = 8192, .batch = 1};
  double flops = 2.0 * 8192 * 8192 * 8192;
  MmCostWhy why;
  double s = mm_cost_kernel_s(&cal, &k, flops, 1e6, &why);
  ck_assert(why.compute.fit == cal.compute_fit[MM_KERNEL_GEMM][MM_DTYPE_BF16] && why.compute.curve == NULL);
  double expect = flops / (400e12 * 0.7) + 5e-6;
  ck_assert_msg(fabs(s - expect) < 0.01 * expect, "%g vs %g", s, expect);
  /* the uncalibrated device: the scalar */
  double s0 = mm_cost_kernel_s(&dev, &k, flops, 1e6, &why);
  ck_assert(why.compute.fit == NULL && fabs(s0 - flops / (400e12 * 0.5)) < 1e-12);
  /* interaction has no fit of its own: its memory side is hbm.elementwise's */
  MmKernel x = {.kind = MM_KERNEL_INTERACTION, .dtype = MM_DTYPE_FP32, .m = 32, .n = 32, .k = 128, .batch = 64};
  double sx = mm_cost_kernel_s(&cal, &x, 1e3, 1e9, &why);
  ck_assert(why.memory.fit == cal.memory_fit[MM_KERNEL_ELEMENTWISE]);
  ck_assert(why.compute.fit == NULL && why.compute.scalar == &cal.util_gemm);
  ck_assert(fabs(sx - (1e9 / (2e12 * 0.9) + 2e-6)) < 1e-3 * sx);
  g_autofree char *ft = mm_cost_factor_text(&why.memory);
  ck_assert_msg(g_str_has_prefix(ft, "fit hbm.elementwise (calibration): 0.8"), "%s", ft);
  mm_device_clear(&cal);
  mm_device_clear(&dev);
}
END_TEST

START_TEST(test_calibration_block_errors)
{
  static const struct {
    const char *extra, *expect;
  } cases[] = {
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{\"gemm.bf17\":{}}}",
     "$.calibration.fits.gemm.bf17: expected a key KIND.DTYPE"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{\"gemm.fp8\":{\"model\":"
     "\"roofline_t0\",\"compute_fraction\":0.5,\"memory_fraction\":1,\"t0_us\":1,\"points\":3,"
     "\"measured_from\":1,\"measured_to\":2}}}",
     "which the device lacks (no peak_tflops.fp8)"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{\"gemm.bf16\":{\"model\":"
     "\"roofline_t0\",\"memory_fraction\":1,\"t0_us\":1,\"points\":3,\"measured_from\":1,\"measured_to\":2}}}",
     "expected compute_fraction for a roofline_t0 model"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{\"hbm.lookup\":{\"model\":"
     "\"roofline_t0\",\"compute_fraction\":0.5,\"memory_fraction\":1,\"t0_us\":1,\"points\":3,"
     "\"measured_from\":1,\"measured_to\":2}}}",
     "expected model bandwidth_t0"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{\"hbm.lookup\":{\"model\":"
     "\"bandwidth_t0\",\"memory_fraction\":-1,\"t0_us\":1,\"points\":3,\"measured_from\":1,\"measured_to\":2}}}",
     "$.calibration.fits.hbm.lookup.memory_fraction"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"fits\":{}}", "$.calibration"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{},\"measured\":{\"a\":1}}",
     "$.calibration.measured.a"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{},\"overlap\":[{\"bench\":"
     "\"dil_gemm\",\"variant\":\"split_m=2\",\"time_ratio\":0}]}",
     "$.calibration.overlap[0].time_ratio"},
    {"\"calibration\":{\"provenance\":\"calibration\",\"source\":\"s\",\"fits\":{},\"collectives\":[{\"bench\":"
     "\"allreduce\",\"variant\":\"v\",\"ranks\":8,\"latency_us\":1,\"points\":2,\"measured_from\":1,"
     "\"measured_to\":2}]}",
     "$.calibration.collectives[0]"},
    {"\"calibration\":[]", "$.calibration"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *msg = device_error(cases[i].extra);
    ck_assert_msg(strstr(msg, cases[i].expect) != NULL, "case %u: %s", i, msg);
    ck_assert_msg(strstr(msg, "bad-dev.json") != NULL, "case %u: %s", i, msg);
  }
}
END_TEST

/* The shipped H200 measurements: calibrate writes a device that loads; the fits stay close to
 * what was measured (a regression in the fitter or the CSV shows as a jump in the error). */
START_TEST(test_cli_from_csv)
{
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "h200-cal.json", NULL);
  g_autofree char *csv = g_build_filename(mm_test_tmpdir(), "h200-copy.csv", NULL);
  const char *args[] = {"calibrate", "--from-csv", "hardware/calibration/h200-sxm-700w.csv", "--device",
                        "hardware/devices/h200.json", "--out", out, "--csv", csv, NULL};
  g_autofree char *so = NULL, *se = NULL;
  ck_assert_msg(mm_test_cli(args, &so, &se) == 0, "%s", se);
  ck_assert(strstr(so, "gemm.fp8") != NULL && strstr(so, "attention.bf16") != NULL);
  MmDevice d;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_device_load(out, &d, &error), "%s", error ? error->message : "");
  const MmEffFit *g = d.compute_fit[MM_KERNEL_GEMM][MM_DTYPE_BF16], *f8 = d.compute_fit[MM_KERNEL_GEMM][MM_DTYPE_FP8];
  ck_assert(g && f8 && d.compute_fit[MM_KERNEL_ATTENTION][MM_DTYPE_BF16] && d.memory_fit[MM_KERNEL_ELEMENTWISE]);
  /* measured: bf16 GEMMs reach about 0.73 of peak, fp8 ones less of theirs */
  ck_assert(g->compute_fraction > 0.6 && g->compute_fraction < 0.85);
  ck_assert(f8->compute_fraction < g->compute_fraction);
  ck_assert(g->rms_rel_err < 0.25 && g->held_out_rms_rel_err < 0.25);
  ck_assert(d.launch_overhead_s > 1e-6 && d.launch_overhead_s < 2e-5);
  mm_device_clear(&d);
  /* --csv wrote the measurements back; they read the same count */
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  ck_assert_msg(mm_calib_csv_read(csv, t, &error), "%s", error ? error->message : "");
  ck_assert_uint_gt(t->rows->len, 1000);
}
END_TEST

START_TEST(test_cli_errors)
{
  g_autofree char *bad = mm_test_write("cli-bad.csv", HEADER "gemm,gemm,bf16,1,2,3,1,0,12,v,5,1e-6,1e-6\n");
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "never.json", NULL);
  static const char *expect[] = {"cli-bad.csv:2:", "expected --out", "expected one of --backend or --from-csv",
                                 "expected --device", "--backend: expected cpu or hip"};
  const char *a0[] = {"calibrate", "--from-csv", bad, "--device", "hardware/devices/h200.json", "--out", out, NULL};
  const char *a1[] = {"calibrate", "--from-csv", bad, "--device", "hardware/devices/h200.json", NULL};
  const char *a2[] = {"calibrate", "--out", out, NULL};
  const char *a3[] = {"calibrate", "--from-csv", bad, "--out", out, NULL};
  const char *a4[] = {"calibrate", "--backend", "tpu", "--out", out, NULL};
  const char *const *args[] = {a0, a1, a2, a3, a4};
  for (guint i = 0; i < G_N_ELEMENTS(args); i++) {
    g_autofree char *se = NULL;
    ck_assert_int_eq(mm_test_cli(args[i], NULL, &se), 1);
    ck_assert_msg(strstr(se, expect[i]) != NULL, "case %u: %s", i, se);
  }
  ck_assert(!g_file_test(out, G_FILE_TEST_EXISTS));
}
END_TEST

/* The outputs are checked before the fitting: --out or --csv naming a measurements file it reads
 * exits 1 with nothing printed and the measurements as they were (before, --out replaced them with
 * the device file, exit 0). */
START_TEST(test_cli_keeps_inputs)
{
  g_autofree char *src = mm_test_src("hardware/calibration/h200-sxm-700w.csv"), *text = NULL;
  gsize len = 0;
  ck_assert(g_file_get_contents(src, &text, &len, NULL));
  g_autofree char *csv = mm_test_write("keep-h200.csv", text);
  const char *a0[] = {"calibrate", "--from-csv", csv, "--device", "hardware/devices/h200.json", "--out", csv, NULL};
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "keep-h200.json", NULL);
  const char *a1[] = {"calibrate", "--from-csv", csv, "--device", "hardware/devices/h200.json", "--out", out,
                      "--csv", csv, NULL};
  const char *const *args[] = {a0, a1};
  const char *option[] = {"--out", "--csv"};
  /* two outputs on one place, and --csv over the base device: refused before the fit (printed nothing) */
  g_autofree char *dev = NULL;
  g_autofree char *dev_src = mm_test_src("hardware/devices/h200.json");
  ck_assert(g_file_get_contents(dev_src, &dev, NULL, NULL));
  g_autofree char *devcopy = mm_test_write("keep-h200-device.json", dev);
  const char *a2[] = {"calibrate", "--from-csv", csv, "--device", devcopy, "--out", out, "--csv", out, NULL};
  const char *a3[] = {"calibrate", "--from-csv", csv, "--device", devcopy, "--out", out, "--csv", devcopy, NULL};
  const char *const *more[] = {a2, a3};
  const char *says[] = {"write to the same place", "is the file --device"};
  for (guint i = 0; i < G_N_ELEMENTS(more); i++) {
    g_autofree char *so = NULL, *se = NULL, *after = NULL;
    ck_assert_int_eq(mm_test_cli(more[i], &so, &se), 1);
    ck_assert_msg(strstr(se, says[i]) != NULL, "case %u: %s", i, se);
    ck_assert_str_eq(so, "");
    ck_assert(g_file_get_contents(devcopy, &after, NULL, NULL));
    ck_assert_str_eq(after, dev);
  }
  for (guint i = 0; i < G_N_ELEMENTS(args); i++) {
    g_autofree char *so = NULL, *se = NULL, *after = NULL;
    ck_assert_int_eq(mm_test_cli(args[i], &so, &se), 1);
    g_autofree char *want = g_strdup_printf("%s %s: is the file --from-csv %s reads", option[i], csv, csv);
    ck_assert_msg(strstr(se, want) != NULL, "case %u: %s", i, se);
    ck_assert_str_eq(so, "");
    ck_assert(g_file_get_contents(csv, &after, NULL, NULL));
    ck_assert_str_eq(after, text);
  }
  ck_assert(!g_file_test(out, G_FILE_TEST_EXISTS));
}
END_TEST

/* validate --calibrated swaps in devices/X-calibrated.json where it exists: the H200 cases
 * change, the others do not. */
START_TEST(test_use_calibrated)
{
  g_autofree char *hp = mm_test_src("hardware/dgx-h200-8.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) h = mm_hardware_load(hp, &error);
  ck_assert(h);
  gboolean used = FALSE;
  ck_assert(mm_hardware_use_calibrated(h, &used, &error));
  ck_assert(used && h->device.compute_fit[MM_KERNEL_GEMM][MM_DTYPE_BF16] != NULL);
  g_autofree char *mp = mm_test_src("hardware/mi210-4.json");
  g_autoptr(MmHardware) m = mm_hardware_load(mp, &error);
  ck_assert(m && mm_hardware_use_calibrated(m, &used, &error));
  ck_assert(!used && m->device.calibration_source == NULL);
}
END_TEST

/* The end-to-end: calibrate --backend cpu writes a device that drives run, and
 * describe shows the fitted factors. */
START_TEST(test_cli_cpu_end_to_end)
{
  g_autofree char *dev = g_build_filename(mm_test_tmpdir(), "cpu.json", NULL);
  const char *cal[] = {"calibrate", "--backend", "cpu", "--quick", "--threads", "2", "--out", dev, NULL};
  g_autofree char *so = NULL, *se = NULL;
  ck_assert_msg(mm_test_cli(cal, &so, &se) == 0, "%s", se);
  ck_assert(strstr(so, "gemm.fp32") != NULL);
  g_autofree char *hw_text = g_strdup_printf("{\"name\":\"one CPU\",\"device\":\"%s\",\"gpus_per_node\":1,"
                                             "\"nodes\":1,\"intra_node\":{\"topology\":\"switch\","
                                             "\"links_per_gpu\":1,\"link_bw_GBps\":10}}", dev);
  g_autofree char *hw = mm_test_write("cpu-node.json", hw_text);
  g_autofree char *model = mm_test_write("tiny.json", "{\"name\":\"tiny\",\"seq_len\":64,\"dtype\":\"fp32\","
                                                      "\"blocks\":[" "{\"kind\":\"transformer\",\"count\":2,"
                                                      "\"hidden\":64,\"heads\":4,\"ffn\":256}]}");
  g_autofree char *cfg = mm_test_write("cfg.json", "{\"name\":\"ddp\",\"task\":\"pretrain\",\"global_batch\":4,"
                                                    "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\","
                                                    "\"degree\":\"all\"}]}}");
  const char *run[] = {"run", "-m", model, "-H", hw, "-c", cfg, NULL};
  g_autofree char *ro = NULL, *re = NULL;
  ck_assert_msg(mm_test_cli(run, &ro, &re) == 0, "%s", re);
  ck_assert(strstr(ro, "iteration time") != NULL);
  const char *desc[] = {"describe", "-m", model, "-H", hw, "-c", cfg, NULL};
  g_autofree char *dout = NULL, *derr = NULL;
  ck_assert_msg(mm_test_cli(desc, &dout, &derr) == 0, "%s", derr);
  ck_assert_msg(strstr(dout, "fit gemm.fp32 (calibration)") != NULL, "%s", dout);
  ck_assert(strstr(dout, "the CPU backend (--quick)") != NULL);
}
END_TEST

/* Collective series: latency + bytes / bandwidth recovered from exact rows; bus bandwidth in
 * the nccl-tests convention (all_reduce: 2 (n - 1) / n of the algorithm bandwidth). */
START_TEST(test_fit_collectives)
{
  MmDevice dev;
  load_device("", &dev);
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  const double lat = 20e-6, algbw = 100e9;
  for (double b = 1 << 20; b <= (double)(1u << 31); b *= 2) {
    double s = lat + b / algbw;
    MmCalibRow r = {.bench = "allreduce", .m = 8, .n = 1, .k = 1, .batch = 1, .bytes = b, .variant = "out_of_place",
                    .median_s = s, .min_s = s, .max_s = s};
    mm_calib_table_add(t, &r);
    /* another series (in place, half the speed) stays apart */
    r.variant = "in_place", r.median_s = r.min_s = r.max_s = lat + 2 * b / algbw;
    mm_calib_table_add(t, &r);
  }
  MmCalibResult res;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_fit(t, &dev, "collectives", &res, &error), "%s", error ? error->message : "");
  const cJSON *c = cJSON_GetObjectItem(res.calibration, "collectives");
  ck_assert_int_eq(cJSON_GetArraySize(c), 2);
  const cJSON *o = cJSON_GetArrayItem(c, 0), *i = cJSON_GetArrayItem(c, 1);
  ck_assert_str_eq(cJSON_GetObjectItem(o, "variant")->valuestring, "out_of_place");
  ck_assert(fabs(cJSON_GetObjectItem(o, "latency_us")->valuedouble - 20) < 0.01);
  ck_assert(fabs(cJSON_GetObjectItem(o, "bus_GBps")->valuedouble - 175) < 0.05); /* 100 x 2 x 7 / 8 */
  ck_assert(fabs(cJSON_GetObjectItem(i, "bus_GBps")->valuedouble - 87.5) < 0.05);
  ck_assert_int_eq(cJSON_GetObjectItem(o, "points")->valueint, 12);
  /* the block loads */
  g_autofree char *base_text = device_text("");
  g_autoptr(cJSON) base = cJSON_Parse(base_text);
  g_autofree char *text = mm_calib_device_text("dev.json", base, &res, "coll.json", &error);
  ck_assert_msg(text != NULL, "%s", error ? error->message : "");
  mm_calib_result_clear(&res);
  mm_device_clear(&dev);
}
END_TEST

/* A power-capped device: kernels slow by the clock derate, fitted or not. */
START_TEST(test_clock_derate)
{
  MmDevice full, capped;
  load_device("", &full);
  load_device("\"clock_derate\":{\"value\":0.8,\"provenance\":\"estimate\",\"source\":\"500 W\"}", &capped);
  ck_assert(full.clock_derate.value == 1.0 && capped.clock_derate.value == 0.8);
  MmKernel k = {.kind = MM_KERNEL_GEMM, .dtype = MM_DTYPE_BF16, .m = 4096, .n = 4096, .k = 4096, .batch = 1};
  double flops = 2.0 * 4096 * 4096 * 4096;
  double a = mm_cost_kernel_s(&full, &k, flops, 0, NULL), b = mm_cost_kernel_s(&capped, &k, flops, 0, NULL);
  ck_assert_msg(fabs(b / a - 1.25) < 1e-12, "%g", b / a);
  /* memory-bound time does not change */
  ck_assert(mm_cost_kernel_s(&full, &k, 0, 1e9, NULL) == mm_cost_kernel_s(&capped, &k, 0, 1e9, NULL));
  g_autofree char *msg = device_error("\"clock_derate\":{\"value\":1.5,\"provenance\":\"estimate\"}");
  ck_assert_msg(strstr(msg, "$.clock_derate.value") != NULL, "%s", msg);
  mm_device_clear(&full);
  mm_device_clear(&capped);
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("calib");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_csv_roundtrip);
  tcase_add_test(tc, test_csv_errors);
  tcase_add_test(tc, test_fit_recovers_model);
  tcase_add_test(tc, test_fit_needs_rows);
  tcase_add_test(tc, test_fit_drives_cost);
  tcase_add_test(tc, test_calibration_block_errors);
  tcase_add_test(tc, test_cli_from_csv);
  tcase_add_test(tc, test_cli_errors);
  tcase_add_test(tc, test_cli_keeps_inputs);
  tcase_add_test(tc, test_use_calibrated);
  tcase_add_test(tc, test_cli_cpu_end_to_end);
  tcase_add_test(tc, test_fit_collectives);
  tcase_add_test(tc, test_clock_derate);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(suite()); }
