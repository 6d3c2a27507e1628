/* check_fused_overlap: decomposed compute-communication overlap (shard overlap, FiCCO,
 * collective matmul) in the event engine. */
#include <math.h>
#include <string.h>

#include "fused/fused.h"
#include "testutil.h"
#include "validate/validate.h"

/* A GEMM flow (SMs + HBM) beside a DMA copy (HBM + a link): the copy slows the GEMM only when
 * their HBM traffic together passes the HBM's capacity (contention comes out of the sharing). */
START_TEST(test_prog_sharing)
{
  for (int heavy = 0; heavy <= 1; heavy++) {
    MmFusedProg p;
    mm_fused_prog_init(&p, 2);
    /* resources: 0 a link (1 byte/ps), 1 SMs (1/ps), 2 HBM (2 bytes/ps) */
    const double cap[3] = {1.0, 1.0, 2.0};
    const uint32_t gres[2] = {1, 2}, cres[2] = {0, 2};
    const double gwork[2] = {1000.0, heavy ? 1800.0 : 500.0}; /* 1000 ps alone */
    const double cwork[2] = {1000.0, 1000.0};                 /* 1000 ps alone, 1 byte/ps of HBM */
    const uint32_t gemm = mm_fused_prog_op(&p, 0, 0, NULL, 0, gres, gwork, 2);
    const uint32_t copy = mm_fused_prog_op(&p, 1, 0, NULL, 0, cres, cwork, 2);
    MmEngineProgram prog = mm_fused_prog_view(&p, 3);
    MmEngineClass cls = {0, (const MmTime *)(void *)p.dur->data, 0, cap, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(MmEngine) e = mm_engine_new(&prog, 1, &cls, 1, &error);
    ck_assert_msg(e, "%s", error ? error->message : "");
    ck_assert(mm_engine_run(e, &error));
    const MmTime g = mm_engine_op_end(e, 0, gemm), c = mm_engine_op_end(e, 0, copy);
    if (!heavy) {
      ck_assert_uint_eq(g, 1000); /* 0.5 + 1 bytes/ps of HBM fit in 2 */
      ck_assert_uint_eq(c, 1000);
    } else {
      /* 1.8 + 1 do not: max-min fair shares give the copy the 1 byte/ps it can use and the GEMM
       * the other 1, so the GEMM runs at 1/1.8 until the copy ends, then alone: 1000 + 445 */
      ck_assert_uint_eq(c, 1000);
      ck_assert_uint_ge(g, 1443);
      ck_assert_uint_le(g, 1446);
    }
    mm_fused_prog_clear(&p);
  }
}
END_TEST


/* ---- decomposed overlap (src/fused/overlap.c) ------------------------------ */

static MmHardware *load_hw(const char *rel)
{
  g_autofree char *path = mm_test_src(rel);
  g_autoptr(GError) error = NULL;
  MmHardware *hw = mm_hardware_load(path, &error);
  ck_assert_msg(hw != NULL, "%s", error ? error->message : "");
  return hw;
}

static MmOverlapResult *run_ok(const MmHardware *hw, MmOverlapOp op, int64_t m, int64_t n, int64_t k, MmOverlapComm comm)
{
  const MmOverlapSpec sp = {op, m, n, k, hw->gpus_per_node, MM_DTYPE_BF16, comm};
  g_autoptr(GError) error = NULL;
  MmOverlapResult *r = mm_overlap_run(hw, &sp, &error);
  ck_assert_msg(r != NULL, "%s", error ? error->message : "");
  return r;
}

/* FiCCO Table I g1..g12 (M, N, K) */
static const int64_t ficco[][3] = {
  {16384, 16384, 131072}, {131072, 16384, 16384}, {53248, 16384, 131072}, {131072, 53248, 16384},
  {8192, 8192, 262144},   {262144, 8192, 8192},   {28672, 8192, 262144},  {262144, 28672, 8192},
  {196608, 18432, 16384}, {196608, 106496, 16384}, {1048576, 10240, 8192}, {1048576, 57344, 8192},
};

/* FiCCO Sec. VI-A: on a full mesh, peer-to-peer shard steps use one link of seven: the
 * communication runs ~7x slower and shard overlap loses to serial where communication matters
 * (every case but the GEMM-dominated g10). */
START_TEST(test_shard_slower_on_mesh)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  for (guint i = 0; i < G_N_ELEMENTS(ficco); i++) {
    if (i == 9) continue; /* g10: the GEMM is 10x the collective and hides even a 7x slower one */
    g_autoptr(MmOverlapResult) r = run_ok(hw, MM_OVERLAP_AG_GEMM, ficco[i][0], ficco[i][1], ficco[i][2], MM_OVERLAP_COMM_DMA);
    ck_assert_msg(r->runs[MM_OVERLAP_SHARD].time_s > r->runs[MM_OVERLAP_SERIAL].time_s, "g%u: shard %g <= serial %g",
                  i + 1, r->runs[MM_OVERLAP_SHARD].time_s, r->runs[MM_OVERLAP_SERIAL].time_s);
    ck_assert_double_gt(r->runs[MM_OVERLAP_SHARD].comm_dil, 6.5); /* 7 links -> 1 */
    /* while FiCCO's all-to-all steps keep the mesh busy and win */
    ck_assert_double_gt(r->runs[r->oracle].speedup, 1.0);
  }
  /* on a switch one peer gets the whole port: shard overlap is not penalized there */
  g_autoptr(MmHardware) sw = load_hw("hardware/a800-8.json");
  g_autoptr(MmOverlapResult) r = run_ok(sw, MM_OVERLAP_AG_GEMM, 4096, 49152, 12288, MM_OVERLAP_COMM_DMA);
  ck_assert_double_lt(r->runs[MM_OVERLAP_SHARD].comm_dil, 1.2);
}
END_TEST

/* DMA engines leave the SMs to the GEMM: less GEMM slowdown (CIL) than compute-unit copies,
 * and so a faster FiCCO schedule (FiCCO Sec. IV-D1). */
START_TEST(test_dma_less_cil_than_cu)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  for (guint i = 0; i < G_N_ELEMENTS(ficco); i++) {
    g_autoptr(MmOverlapResult) d = run_ok(hw, MM_OVERLAP_AG_GEMM, ficco[i][0], ficco[i][1], ficco[i][2], MM_OVERLAP_COMM_DMA);
    g_autoptr(MmOverlapResult) c = run_ok(hw, MM_OVERLAP_AG_GEMM, ficco[i][0], ficco[i][1], ficco[i][2], MM_OVERLAP_COMM_CU);
    const MmOverlapSchedule s = MM_OVERLAP_UNIFORM_FUSED_1D;
    ck_assert_msg(d->runs[s].gemm_cil < c->runs[s].gemm_cil, "g%u: dma CIL %g, cu %g", i + 1, d->runs[s].gemm_cil,
                  c->runs[s].gemm_cil);
    ck_assert_double_ge(d->runs[s].gemm_cil, 1.0);
    ck_assert_double_le(d->runs[s].time_s, c->runs[s].time_s);
    /* the serial baseline is the library's collective either way */
    ck_assert_double_eq(d->runs[MM_OVERLAP_SERIAL].time_s, c->runs[MM_OVERLAP_SERIAL].time_s);
  }
}
END_TEST

/* FiCCO Sec. IV-C1, V-C: when M < K, row pieces lose more than K pieces: the 2D schedule beats the
 * 1D one of the same uniformity and fusion, and where row pieces get small (g5) every 1D one. */
START_TEST(test_2d_beats_1d_when_m_lt_k)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  guint n = 0;
  for (guint i = 0; i < G_N_ELEMENTS(ficco); i++) {
    if (ficco[i][0] >= ficco[i][2]) continue;
    n++;
    g_autoptr(MmOverlapResult) r = run_ok(hw, MM_OVERLAP_AG_GEMM, ficco[i][0], ficco[i][1], ficco[i][2], MM_OVERLAP_COMM_DMA);
    ck_assert_msg(r->runs[MM_OVERLAP_UNIFORM_FUSED_2D].time_s < r->runs[MM_OVERLAP_UNIFORM_FUSED_1D].time_s, "g%u", i + 1);
    ck_assert_double_lt(r->runs[MM_OVERLAP_UNIFORM_FUSED_2D].gemm_dil, r->runs[MM_OVERLAP_UNIFORM_FUSED_1D].gemm_dil);
    ck_assert_int_eq(r->heuristic, MM_OVERLAP_UNIFORM_FUSED_2D);
    if (i == 4) ck_assert_int_eq(r->oracle, MM_OVERLAP_UNIFORM_FUSED_2D);
  }
  ck_assert_uint_eq(n, 4); /* g1, g3, g5, g7 */
}
END_TEST

/* FiCCO Sec. IV-C1 (Fig. 7): row pieces (8-way by M) lose more than column pieces (8-way by K,
 * accumulating) exactly when M < K, and column pieces more when M > K: there the K pieces' C read
 * + write in their epilogues (2 MN each) makes the 2D schedule the slower one. Where M < K, 2D is
 * at most 8% behind the fastest FiCCO schedule (hetero-fused-1d hides its first step behind the
 * local shard; docs/overlap.md). */
START_TEST(test_dil_row_vs_col)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  for (guint i = 0; i < G_N_ELEMENTS(ficco); i++) {
    g_autoptr(MmOverlapResult) r = run_ok(hw, MM_OVERLAP_AG_GEMM, ficco[i][0], ficco[i][1], ficco[i][2], MM_OVERLAP_COMM_DMA);
    const MmOverlapRun *row = &r->runs[MM_OVERLAP_UNIFORM_FUSED_1D], *col = &r->runs[MM_OVERLAP_UNIFORM_FUSED_2D];
    const gboolean m_lt_k = ficco[i][0] < ficco[i][2];
    ck_assert_msg((row->gemm_dil > col->gemm_dil) == m_lt_k, "g%u: row DIL %g, column DIL %g", i + 1, row->gemm_dil,
                  col->gemm_dil);
    ck_assert_double_ge(col->gemm_dil, 1.0);
    if (m_lt_k) {
      ck_assert_msg(col->time_s <= 1.08 * r->runs[r->oracle].time_s, "g%u: 2D %g, oracle %g", i + 1, col->time_s,
                    r->runs[r->oracle].time_s);
    } else {
      ck_assert_msg(col->time_s > row->time_s, "g%u: 2D %g <= 1D %g", i + 1, col->time_s, row->time_s);
      ck_assert_double_gt(col->gemm_dil, 1.1); /* 8 epilogues of C read + write */
    }
  }
}
END_TEST

/* No schedule beats max(the GEMM's roofline, the collective's busiest link); DIL never below 1;
 * the serial schedule is exactly GEMM + collective alone. */
START_TEST(test_lower_bound)
{
  static const char *const systems[] = {"hardware/mi300x-8.json", "hardware/a800-8.json", "hardware/h800-2048.json"};
  for (guint h = 0; h < G_N_ELEMENTS(systems); h++) {
    g_autoptr(MmHardware) hw = load_hw(systems[h]);
    for (int op = 0; op < MM_OVERLAP_OP_COUNT; op++) {
      for (guint i = 0; i < G_N_ELEMENTS(ficco); i += 3) {
        for (int comm = 0; comm < MM_OVERLAP_COMM_COUNT; comm++) {
          g_autoptr(MmOverlapResult) r =
            run_ok(hw, (MmOverlapOp)op, ficco[i][0] / 8, ficco[i][1], ficco[i][2] / 4, (MmOverlapComm)comm);
          ck_assert_double_eq_tol(r->runs[MM_OVERLAP_SERIAL].time_s, r->gemm_s + r->comm_s, 1e-9);
          for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++) {
            const MmOverlapRun *u = &r->runs[s];
            ck_assert_int_eq(u->applies, mm_overlap_applies((MmOverlapOp)op, (MmOverlapSchedule)s));
            if (!u->applies) continue;
            ck_assert_msg(u->time_s >= r->lower_bound_s * (1 - 1e-9), "%s %s: %g < bound %g", systems[h],
                          mm_overlap_schedule_names[s], u->time_s, r->lower_bound_s);
            ck_assert_double_ge(u->gemm_dil, 1.0 - 1e-9);
            ck_assert_double_ge(u->gemm_cil, 1.0 - 1e-9);
            ck_assert_double_ge(u->exposed_comm_s, 0);
            ck_assert_double_le(u->exposed_comm_s, u->time_s);
          }
        }
      }
    }
  }
}
END_TEST

/* FiCCO Sec. V-C: 2D unless M > K; else OTB x MT against the machine's: < 1x uniform-fused-1d,
 * > 5x hetero-unfused-1d, between hetero-fused-1d. */
START_TEST(test_heuristic_thresholds)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  const double peak = hw->device.peak_flops[MM_DTYPE_BF16];
  const int64_t m = 65537, k = 65536;
  static const struct {
    double target;
    MmOverlapSchedule want;
  } rows[] = {{0.5, MM_OVERLAP_UNIFORM_FUSED_1D}, {0.99, MM_OVERLAP_UNIFORM_FUSED_1D}, {1.01, MM_OVERLAP_HETERO_FUSED_1D},
              {4.9, MM_OVERLAP_HETERO_FUSED_1D},  {5.1, MM_OVERLAP_HETERO_UNFUSED_1D}, {50, MM_OVERLAP_HETERO_UNFUSED_1D}};
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
    const int64_t n = (int64_t)(rows[i].target * peak / (2.0 * (double)m * (double)k));
    const MmOverlapSpec sp = {MM_OVERLAP_AG_GEMM, m, n, k, 8, MM_DTYPE_BF16, MM_OVERLAP_COMM_DMA};
    double score = 0;
    ck_assert_int_eq(mm_overlap_heuristic(&hw->device, &sp, &score), rows[i].want);
    ck_assert_double_eq_tol(score, rows[i].target, 0.01);
    /* M <= K: 2D whatever the score ("1D if M > K or 2D otherwise") */
    const MmOverlapSpec tall = {MM_OVERLAP_AG_GEMM, k - 1, n, k, 8, MM_DTYPE_BF16, MM_OVERLAP_COMM_DMA};
    ck_assert_int_eq(mm_overlap_heuristic(&hw->device, &tall, NULL), MM_OVERLAP_UNIFORM_FUSED_2D);
    const MmOverlapSpec square = {MM_OVERLAP_AG_GEMM, k, n, k, 8, MM_DTYPE_BF16, MM_OVERLAP_COMM_DMA};
    ck_assert_int_eq(mm_overlap_heuristic(&hw->device, &square, NULL), MM_OVERLAP_UNIFORM_FUSED_2D);
  }
}
END_TEST

/* Collective matmul below XLA's size threshold is not rewritten: it is the serial schedule. */
START_TEST(test_cmm_threshold)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/a800-8.json");
  g_autoptr(MmOverlapResult) small = run_ok(hw, MM_OVERLAP_AG_GEMM, 64, 1024, 1024, MM_OVERLAP_COMM_DMA); /* 128 KiB */
  ck_assert_double_eq(small->runs[MM_OVERLAP_CMM_X1].time_s, small->runs[MM_OVERLAP_SERIAL].time_s);
  g_autoptr(MmOverlapResult) big = run_ok(hw, MM_OVERLAP_AG_GEMM, 4096, 49152, 12288, MM_OVERLAP_COMM_DMA);
  ck_assert_double_ne(big->runs[MM_OVERLAP_CMM_X1].time_s, big->runs[MM_OVERLAP_SERIAL].time_s);
  /* the fused kernel hides most of the collective on NVSwitch (Flux) */
  ck_assert_double_lt(big->runs[MM_OVERLAP_FLUX].exposed_comm_s, 0.25 * big->comm_s);
}
END_TEST

static const struct {
  int64_t m, n, k, ranks;
  int dtype;
} bad_specs[] = {
  {0, 16, 16, 8, MM_DTYPE_BF16},   {16, -1, 16, 8, MM_DTYPE_BF16},  {16, 16, (int64_t)1 << 41, 8, MM_DTYPE_BF16},
  {16, 16, 16, 1, MM_DTYPE_BF16},  {16, 16, 16, 9, MM_DTYPE_BF16},  {16, 16, 16, 8, MM_DTYPE_FP8}, /* the A800 has no FP8 */
};

START_TEST(test_bad_spec)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/a800-8.json");
  const MmOverlapSpec sp = {MM_OVERLAP_AG_GEMM, bad_specs[_i].m, bad_specs[_i].n, bad_specs[_i].k, bad_specs[_i].ranks,
                            (MmDtype)bad_specs[_i].dtype, MM_OVERLAP_COMM_DMA};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmOverlapResult) r = mm_overlap_run(hw, &sp, &error);
  ck_assert_ptr_null(r);
  ck_assert(g_error_matches(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID));
}
END_TEST

/* A node of 2048 GPUs: the programs grow as ranks^2 (4096 ranks took 4 GB), so ranks are bounded. */
START_TEST(test_ranks_bound)
{
  g_autofree char *dev = mm_test_src("hardware/devices/h200.json");
  g_autofree char *text = g_strdup_printf("{\"name\":\"big\",\"device\":\"%s\",\"gpus_per_node\":2048,\"nodes\":1,"
                                          "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":18,"
                                          "\"link_bw_GBps\":25}}", dev);
  g_autofree char *path = mm_test_write("ov-big-node.json", text);
  g_autoptr(GError) lerr = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(path, &lerr);
  ck_assert_msg(hw != NULL, "%s", lerr ? lerr->message : "");
  const MmOverlapSpec sp = {MM_OVERLAP_AG_GEMM, 4096, 4096, 4096, 2048, MM_DTYPE_BF16, MM_OVERLAP_COMM_DMA};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmOverlapResult) r = mm_overlap_run(hw, &sp, &error);
  ck_assert_ptr_null(r);
  ck_assert(g_error_matches(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, "at most 1024") != NULL, "%s", error->message);
}
END_TEST

/* The command line: a table, JSON, the FiCCO cases; bad input is exit 1 with one message. */
START_TEST(test_cli)
{
  const char *one[] = {"op", "ag-gemm", "--m", "131072", "--n", "16384", "--k", "16384", "--hardware",
                       "hardware/mi300x-8.json", "--json", "-", NULL};
  g_autofree char *out = NULL, *out2 = NULL;
  ck_assert_int_eq(mm_test_cli(one, &out, NULL), 0);
  ck_assert_int_eq(mm_test_cli(one, &out2, NULL), 0);
  ck_assert_str_eq(out, out2); /* deterministic */
  g_autoptr(cJSON) doc = cJSON_Parse(out);
  ck_assert_ptr_nonnull(doc);
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(doc, "result");
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "schedules")), MM_OVERLAP_SCHEDULE_COUNT);
  ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(res, "heuristic"));

  const char *rs[] = {"op", "gemm-rs", "--m", "4096", "--n", "12288", "--k", "49152", "--dtype", "fp16", "--hardware",
                      "hardware/a800-8.json", "--schedule", "flux", NULL};
  g_autofree char *rs_out = NULL;
  ck_assert_int_eq(mm_test_cli(rs, &rs_out, NULL), 0);
  ck_assert_ptr_nonnull(strstr(rs_out, "flux"));
  ck_assert_ptr_null(strstr(rs_out, "cmm-x1"));

  const char *cases[] = {"op", "ag-gemm", "--cases", "ficco", "--hardware", "hardware/mi300x-8.json", "--json", "-", NULL};
  g_autofree char *cout = NULL;
  ck_assert_int_eq(mm_test_cli(cases, &cout, NULL), 0);
  g_autoptr(cJSON) cdoc = cJSON_Parse(cout);
  ck_assert_ptr_nonnull(cdoc);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cdoc, "cases")), 16);
  const cJSON *agree = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cdoc, "summary"), "heuristic_agrees");
  ck_assert(cJSON_IsNumber(agree) && agree->valuedouble >= 0 && agree->valuedouble <= 16);

  g_autofree char *trace = g_build_filename(mm_test_tmpdir(), "ov-trace.json", NULL);
  const char *tr[] = {"op", "ag-gemm", "--m", "8192", "--n", "8192", "--k", "8192", "--hardware",
                      "hardware/mi300x-8.json", "--trace", trace, NULL};
  ck_assert_int_eq(mm_test_cli(tr, NULL, NULL), 0);
  g_autofree char *ttext = NULL;
  ck_assert(g_file_get_contents(trace, &ttext, NULL, NULL));
  g_autoptr(cJSON) tdoc = cJSON_Parse(ttext);
  ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(tdoc, "traceEvents")));

  g_autofree char *gp = g_find_program_in_path("gnuplot");
  if (gp) { /* the figure, staged with the other outputs */
    g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "ov-plot", NULL);
    const char *pl[] = {"op", "ag-gemm", "--m", "8192", "--n", "8192", "--k", "8192", "--hardware",
                        "hardware/mi300x-8.json", "--plot", dir, NULL};
    ck_assert_int_eq(mm_test_cli(pl, NULL, NULL), 0);
    g_autofree char *png = g_build_filename(dir, "ag-gemm-timeline.png", NULL);
    ck_assert(g_file_test(png, G_FILE_TEST_IS_REGULAR));
  }

  /* a failed output leaves no --plot directory behind (it was created empty) */
  g_autofree char *plot2 = g_build_filename(mm_test_tmpdir(), "ov-plot-failed", NULL);
  g_autofree char *nojson = g_build_filename(mm_test_tmpdir(), "no-such-dir", "x.json", NULL);
  const char *fl[] = {"op", "ag-gemm", "--m", "512", "--n", "512", "--k", "512", "--hardware", "hardware/mi300x-8.json",
                      "--plot", plot2, "--json", nojson, NULL};
  ck_assert_int_eq(mm_test_cli(fl, NULL, NULL), 1);
  ck_assert(!g_file_test(plot2, G_FILE_TEST_EXISTS));

  const char *help[] = {"op", "ag-gemm", "--help", NULL};
  g_autofree char *hout = NULL;
  ck_assert_int_eq(mm_test_cli(help, &hout, NULL), 0);
  ck_assert_ptr_nonnull(strstr(hout, "uniform-fused-2d"));
}
END_TEST

static const struct {
  const char *args[16];
  const char *says;
} bad_cli[] = {
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--hardware", "hardware/mi300x-8.json", NULL}, "--k"},
  {{"op", "ag-gemm", "--m", "0", "--n", "64", "--k", "64", "--hardware", "hardware/mi300x-8.json", NULL}, "--m"},
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--k", "64", "--schedule", "nope", "--hardware", "hardware/mi300x-8.json", NULL},
   "--schedule nope"},
  {{"op", "gemm-rs", "--m", "64", "--n", "64", "--k", "64", "--schedule", "uniform-fused-1d", "--hardware",
    "hardware/mi300x-8.json", NULL},
   "ag-gemm only"},
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--k", "64", "--comm", "pcie", "--hardware", "hardware/mi300x-8.json", NULL},
   "--comm pcie"},
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--k", "64", "--ranks", "9", "--hardware", "hardware/mi300x-8.json", NULL},
   "--ranks"},
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--k", "64", "--dtype", "fp64", "--hardware", "hardware/mi300x-8.json", NULL},
   "fp64"},
  {{"op", "ag-gemm", "--cases", "mine", "--hardware", "hardware/mi300x-8.json", NULL}, "--cases mine"},
  {{"op", "gemm-rs", "--cases", "ficco", "--hardware", "hardware/mi300x-8.json", NULL}, "ag-gemm"},
  {{"op", "ag-gemm", "--m", "64", "--n", "64", "--k", "64", "--hardware", "no-such.json", NULL}, "no-such.json"},
  /* every size in bounds, the time past the engine's clock: was exit 2 ("should have been rejected") */
  {{"op", "ag-gemm", "--m", "1099511627776", "--n", "1099511627776", "--k", "1099511627776", "--hardware",
    "hardware/mi300x-8.json", NULL}, "too large to simulate"},
  {{"op", "gemm-rs", "--m", "1099511627776", "--n", "1099511627776", "--k", "1099511627776", "--hardware",
    "hardware/mi300x-8.json", NULL}, "too large to simulate"},
};

START_TEST(test_cli_bad_input)
{
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(mm_test_cli(bad_cli[_i].args, &out, &err), 1);
  ck_assert_msg(strstr(err, bad_cli[_i].says) != NULL, "row %d: %s", _i, err);
  ck_assert_str_eq(out, "");
}
END_TEST

/* configs/validation/overlap.json parses and predicts every Flux measurement it lists. */
START_TEST(test_validate_overlap_cases)
{
  g_autofree char *path = mm_test_src("configs/validation/overlap.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(path, &error);
  ck_assert_msg(v != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(v->rows->len, 16); /* 4 cases x (GEMM, collective, serial total, Flux total) */
  for (guint i = 0; i < v->rows->len; i++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, i);
    ck_assert_double_gt(r->predicted, 0);
    ck_assert(isfinite(r->error_frac));
  }
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("fused_overlap");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_prog_sharing);
  tcase_add_test(tc, test_shard_slower_on_mesh);
  tcase_add_test(tc, test_dma_less_cil_than_cu);
  tcase_add_test(tc, test_2d_beats_1d_when_m_lt_k);
  tcase_add_test(tc, test_dil_row_vs_col);
  tcase_add_test(tc, test_lower_bound);
  tcase_add_test(tc, test_heuristic_thresholds);
  tcase_add_test(tc, test_cmm_threshold);
  tcase_add_loop_test(tc, test_bad_spec, 0, (int)G_N_ELEMENTS(bad_specs));
  tcase_add_test(tc, test_ranks_bound);
  tcase_add_test(tc, test_cli);
  tcase_add_loop_test(tc, test_cli_bad_input, 0, (int)G_N_ELEMENTS(bad_cli));
  tcase_add_test(tc, test_validate_overlap_cases);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(suite()); }
