/* check_calib_cpu: the CPU calibration backend (rows and their work formulas) and the fused
 * computation-collective kernels (bitwise equal to their bulk references, the flag protocol). */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/cpu_fused.h"
#include "testutil.h"

/* ---- the harness ------------------------------------------------------------------------- */

static const char *const all_benches[] = {
  "launch",   "copy",     "gemm",     "gemv",     "attention", "lookup", "dil_gemm", "dil_copy",
  "cil_gemm", "cil_copy", "fused_gemv_allreduce", "fused_embedding_alltoall", "fused_gemm_alltoall",
};

static gboolean has_variant(const MmCalibTable *t, const char *bench, const char *variant)
{
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (!strcmp(r->bench, bench) && !strcmp(r->variant, variant)) return TRUE;
  }
  return FALSE;
}

static double rel(double a, double b)
{
  return fabs(a - b) / MAX(1.0, fabs(b));
}

START_TEST(test_quick_run)
{
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  MmCalibCpuOptions opt = {.threads = 2, .quick = TRUE, .reps = 3};
  gint64 t0 = g_get_monotonic_time();
  ck_assert_msg(mm_calib_cpu_run(&opt, t, &error), "%s", error ? error->message : "");
  fprintf(stderr, "calib_cpu: quick run on 2 threads: %u rows in %.2f s\n", t->rows->len,
          (double)(g_get_monotonic_time() - t0) * 1e-6);
  ck_assert(g_str_has_prefix(mm_calib_table_meta(t, "device"), "CPU: "));
  ck_assert_str_eq(mm_calib_table_meta(t, "platform"), "cpu");
  ck_assert_str_eq(mm_calib_table_meta(t, "compute_units"), "2");
  ck_assert_str_eq(mm_calib_table_meta(t, "harness"), "src/calib/cpu.c");
  ck_assert_str_eq(mm_calib_table_meta(t, "reps"), "3");
  ck_assert_ptr_null(mm_calib_table_meta(t, "date"));
  for (guint b = 0; b < G_N_ELEMENTS(all_benches); b++) {
    gboolean found = FALSE;
    for (guint i = 0; i < t->rows->len && !found; i++) found = !strcmp(((MmCalibRow *)t->rows->pdata[i])->bench, all_benches[b]);
    ck_assert_msg(found, "no %s row", all_benches[b]);
  }
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    ck_assert_int_eq(r->reps, 3);
    ck_assert_msg(r->min_s > 0 && r->min_s <= r->median_s && r->median_s <= r->max_s, "%s %s: %g %g %g", r->bench,
                  r->variant, r->min_s, r->median_s, r->max_s);
    ck_assert_str_eq(r->source, "");
    const char *b = r->bench;
    if (!strcmp(b, "gemm") || !strcmp(b, "gemv") || !strcmp(b, "dil_gemm") || !strcmp(b, "cil_gemm")) {
      ck_assert_str_eq(r->kind, !strcmp(b, "gemv") ? "gemv" : "gemm");
      ck_assert_str_eq(r->dtype, "fp32");
      ck_assert(r->batch == 1);
      ck_assert(rel(r->flops, 2 * r->m * r->n * r->k) < 1e-12);
      ck_assert(rel(r->bytes, 4 * (r->m * r->k + r->k * r->n + r->m * r->n)) < 1e-12);
      if (!strcmp(b, "gemm") || !strcmp(b, "gemv")) ck_assert_str_eq(r->variant, "cpu");
      if (!strcmp(b, "gemv")) ck_assert(r->m == 1 || r->m == 4 || r->m == 16);
    } else if (!strcmp(b, "copy") || !strcmp(b, "dil_copy") || !strcmp(b, "cil_copy")) {
      ck_assert_str_eq(r->kind, "elementwise");
      ck_assert_str_eq(r->dtype, "bf16");
      ck_assert(r->bytes == 4 * r->m && r->flops == 0); /* m = size / 2, bytes = 2 size */
      ck_assert(r->m * 2 >= 4096);
    } else if (!strcmp(b, "attention")) {
      ck_assert_str_eq(r->kind, "attention");
      ck_assert_str_eq(r->variant, "flash;fwd;causal=0");
      ck_assert(r->m == r->n);
      ck_assert(rel(r->flops, 4 * r->m * r->n * r->k * r->batch) < 1e-12);
    } else if (!strcmp(b, "lookup") || !strcmp(b, "fused_embedding_alltoall")) {
      ck_assert_str_eq(r->kind, "lookup");
      ck_assert_str_eq(r->dtype, "fp32");
      if (!strcmp(b, "lookup")) {
        unsigned pool = 0;
        ck_assert(sscanf(r->variant, "pool=%u", &pool) == 1 && pool >= 1);
        double batch = r->m / pool; /* m = batch x pool, batch = tables, n = dim */
        ck_assert(rel(r->bytes, (pool + 1.0) * batch * r->batch * r->n * 4) < 1e-12);
      }
      ck_assert(r->flops == 0);
    } else if (!strcmp(b, "launch")) {
      ck_assert_str_eq(r->variant, "stream");
      ck_assert(r->bytes == 0 && r->flops == 0);
    } else if (!strcmp(b, "fused_gemv_allreduce")) {
      ck_assert(r->m == 1 && rel(r->flops, 2 * r->n * r->k) < 1e-12);
    } else if (!strcmp(b, "fused_gemm_alltoall")) {
      ck_assert(rel(r->flops, 2 * r->m * r->n * r->k * r->batch) < 1e-12);
    } else {
      ck_abort_msg("unexpected bench %s", b);
    }
  }
  ck_assert(has_variant(t, "copy", "kernel") && has_variant(t, "copy", "dma"));
  ck_assert(has_variant(t, "dil_gemm", "split_m=1") && has_variant(t, "dil_gemm", "split_m=4") &&
            has_variant(t, "dil_gemm", "split_k=2") && !has_variant(t, "dil_gemm", "split_k=1"));
  ck_assert(has_variant(t, "cil_gemm", "alone") && has_variant(t, "cil_gemm", "with=kernel_copy"));
  ck_assert(has_variant(t, "cil_copy", "kernel;alone") && has_variant(t, "cil_copy", "kernel;with=gemm"));
  static const char *const fused[] = {"fused_gemv_allreduce", "fused_embedding_alltoall", "fused_gemm_alltoall"};
  for (guint f = 0; f < G_N_ELEMENTS(fused); f++) {
    ck_assert(has_variant(t, fused[f], "bulk;ranks=2"));
    gboolean aware = FALSE, oblivious = FALSE;
    for (guint i = 0; i < t->rows->len; i++) {
      const MmCalibRow *r = t->rows->pdata[i];
      if (strcmp(r->bench, fused[f]) || !g_str_has_prefix(r->variant, "fused;slices=")) continue;
      aware |= strstr(r->variant, ";order=aware;ranks=2") != NULL;
      oblivious |= strstr(r->variant, ";order=oblivious;ranks=2") != NULL;
    }
    ck_assert_msg(aware && oblivious, "%s", fused[f]);
  }
  /* the rows survive the CSV */
  g_autofree char *text = mm_calib_csv_text(t);
  g_autofree char *path = mm_test_write("cpu.csv", text);
  g_autoptr(MmCalibTable) back = mm_calib_table_new();
  ck_assert_msg(mm_calib_csv_read(path, back, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(back->rows->len, t->rows->len);
  ck_assert_str_eq(mm_calib_table_meta(back, "platform"), "cpu");
}
END_TEST

/* The same rows, shapes and work in the same order on every run (only the times differ). */
START_TEST(test_structure_is_deterministic)
{
  MmCalibCpuOptions opt = {.threads = 2, .quick = TRUE, .reps = 1};
  g_autoptr(MmCalibTable) a = mm_calib_table_new();
  g_autoptr(MmCalibTable) b = mm_calib_table_new();
  ck_assert(mm_calib_cpu_run(&opt, a, NULL));
  ck_assert(mm_calib_cpu_run(&opt, b, NULL));
  ck_assert_uint_eq(a->rows->len, b->rows->len);
  for (guint i = 0; i < a->rows->len; i++) {
    const MmCalibRow *x = a->rows->pdata[i], *y = b->rows->pdata[i];
    ck_assert_str_eq(x->bench, y->bench);
    ck_assert_str_eq(x->kind, y->kind);
    ck_assert_str_eq(x->dtype, y->dtype);
    ck_assert_str_eq(x->variant, y->variant);
    ck_assert(x->m == y->m && x->n == y->n && x->k == y->k && x->batch == y->batch);
    ck_assert(x->bytes == y->bytes && x->flops == y->flops);
  }
  ck_assert_uint_eq(a->keys->len, b->keys->len);
  for (guint i = 0; i < a->keys->len; i++) {
    ck_assert_str_eq(a->keys->pdata[i], b->keys->pdata[i]);
    ck_assert_str_eq(a->values->pdata[i], b->values->pdata[i]);
  }
}
END_TEST

/* One thread still simulates two ranks; many threads (more than cores) share 8 ranks. */
static const guint thread_counts[] = {1, 3, 12};

START_TEST(test_thread_counts)
{
  MmCalibCpuOptions opt = {.threads = thread_counts[_i], .quick = TRUE, .reps = 1};
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_cpu_run(&opt, t, &error), "%s", error ? error->message : "");
  g_autofree char *cus = g_strdup_printf("%u", opt.threads);
  ck_assert_str_eq(mm_calib_table_meta(t, "compute_units"), cus);
  g_autofree char *bulk = g_strdup_printf("bulk;ranks=%u", CLAMP(opt.threads, 2, 8));
  ck_assert(has_variant(t, "fused_gemm_alltoall", bulk));
}
END_TEST

static const MmCalibCpuOptions bad_options[] = {{.threads = 5000}, {.reps = 100000}};

START_TEST(test_bad_options)
{
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert(!mm_calib_cpu_run(&bad_options[_i], t, &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
  ck_assert_uint_eq(t->rows->len, 0);
}
END_TEST

/* ---- the fused kernels ------------------------------------------------------------------- */

/* Small shapes whose sizes divide by nothing in particular. */
static MmFusedSpec small_spec(MmFusedOp op, guint ranks, guint wgs)
{
  MmFusedSpec s = {.op = op, .ranks = ranks, .wgs = wgs};
  switch (op) {
  case MM_FUSED_GEMV_ALLREDUCE: s.n = 203, s.k = 37; break;
  case MM_FUSED_EMBEDDING_ALLTOALL: s.batch = 23, s.tables = 5, s.rows = 50, s.dim = 8, s.pool = 3; break;
  default: s.m = 29, s.n = 17, s.k = 13; break;
  }
  return s;
}

static gsize output_space(const MmFusedSpec *s)
{
  return s->op == MM_FUSED_GEMV_ALLREDUCE ? s->n : s->op == MM_FUSED_EMBEDDING_ALLTOALL ? s->batch : s->m;
}

/* Slices: each rank's contiguous part of the output space cut every @slice units. */
static guint expected_slices(const MmFusedSpec *s, gsize slice)
{
  gsize len = output_space(s);
  guint n = 0;
  for (guint d = 0; d < s->ranks; d++) {
    gsize part = len * (d + 1) / s->ranks - len * d / s->ranks;
    n += (guint)((part + slice - 1) / slice);
  }
  return n;
}

static void assert_same(const MmFused *a, const MmFused *b, guint ranks, const char *what)
{
  for (guint r = 0; r < ranks; r++) {
    gsize la, lb;
    const float *x = mm__fused_output(a, r, &la), *y = mm__fused_output(b, r, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_msg(memcmp(x, y, la * sizeof(float)) == 0, "%s: rank %u differs", what, r);
    for (gsize i = 0; i < la; i++) ck_assert_msg(isfinite(x[i]), "%s: rank %u element %zu never written", what, r, i);
  }
}

static const gsize slice_sizes[] = {1, 7, 16, 64, 100000};

/* Every op, P = 1..4, one and two workgroups per rank, slices that do and do not divide the
 * parts, both orders: bitwise the bulk result; every flag set exactly once. */
START_TEST(test_fused_matches_bulk)
{
  MmFusedOp op = (MmFusedOp)(_i % MM_FUSED_OP_COUNT);
  guint ranks = 1 + (guint)(_i / MM_FUSED_OP_COUNT) % 4, wgs = 1 + (guint)(_i / (MM_FUSED_OP_COUNT * 4));
  MmFusedSpec spec = small_spec(op, ranks, wgs);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmFused) bulk = mm__fused_new(&spec, &error);
  ck_assert_msg(bulk != NULL, "%s", error ? error->message : "");
  MmFusedRun br = {.fused = FALSE, .slice = 5};
  mm__fused_run(bulk, &br);
  MmFusedStats none = mm__fused_stats(bulk);
  ck_assert_uint_eq(none.flags, 0); /* the reference uses no flags */
  for (guint si = 0; si < G_N_ELEMENTS(slice_sizes); si++)
    for (int aware = 0; aware < 2; aware++) {
      g_autoptr(MmFused) f = mm__fused_new(&spec, &error);
      ck_assert_ptr_nonnull(f);
      MmFusedRun run = {.fused = TRUE, .slice = slice_sizes[si], .aware = aware};
      mm__fused_run(f, &run);
      g_autofree char *what = g_strdup_printf("op %d P=%u W=%u slice=%zu %s", op, ranks, wgs, slice_sizes[si],
                                              aware ? "aware" : "oblivious");
      assert_same(f, bulk, ranks, what);
      MmFusedStats st = mm__fused_stats(f);
      guint slices = expected_slices(&spec, slice_sizes[si]);
      guint flags = slices * ranks * (op == MM_FUSED_GEMV_ALLREDUCE ? 2 : 1);
      ck_assert_uint_eq(st.slices, slices);
      ck_assert_uint_eq(mm__fused_n_slices(f, slice_sizes[si]), slices);
      ck_assert_msg(st.flags == flags && st.flags_once == flags, "%s: %u flags, %u set once, %u expected", what,
                    st.flags, st.flags_once, flags);
      ck_assert_uint_eq(st.stray, 0);
      ck_assert_uint_eq(st.puts, flags);  /* one put per flag: only the last-finishing tile puts */
      ck_assert_uint_eq(st.waits, flags); /* every flag is waited on once */
    }
}
END_TEST

/* Calls on one problem, alternating slices and orders, reproduce the first call's bits (flags
 * are reset between calls; nothing leaks from one call into the next). */
START_TEST(test_fused_repeats)
{
  for (int op = 0; op < MM_FUSED_OP_COUNT; op++) {
    MmFusedSpec spec = small_spec((MmFusedOp)op, 3, 2);
    g_autoptr(MmFused) f = mm__fused_new(&spec, NULL);
    g_autoptr(MmFused) ref = mm__fused_new(&spec, NULL);
    MmFusedRun br = {.fused = FALSE, .slice = 1};
    mm__fused_run(ref, &br);
    for (int i = 0; i < 20; i++) {
      MmFusedRun run = {.fused = i % 5 != 4, .slice = slice_sizes[i % G_N_ELEMENTS(slice_sizes)], .aware = i % 2};
      mm__fused_run(f, &run);
      assert_same(f, ref, 3, "repeat");
    }
  }
}
END_TEST

/* The results themselves, computed here serially from the same inputs: the embedding and GEMM
 * outputs do not depend on P at all; GEMV on one rank is the plain k-ordered sum. */
START_TEST(test_fused_values)
{
  for (guint ranks = 1; ranks <= 4; ranks++) {
    MmFusedSpec s = small_spec(MM_FUSED_EMBEDDING_ALLTOALL, ranks, 1);
    g_autoptr(MmFused) f = mm__fused_new(&s, NULL);
    MmFusedRun run = {.fused = TRUE, .slice = 3, .aware = TRUE};
    mm__fused_run(f, &run);
    for (guint d = 0; d < ranks; d++) {
      gsize len, b0 = s.batch * d / ranks, b1 = s.batch * (d + 1) / ranks;
      const float *o = mm__fused_output(f, d, &len);
      ck_assert_uint_eq(len, (b1 - b0) * s.tables * s.dim);
      for (gsize b = b0; b < b1; b++)
        for (gsize t = 0; t < s.tables; t++)
          for (gsize e = 0; e < s.dim; e++) {
            float want = 0.0f;
            for (guint p = 0; p < s.pool; p++) {
              gsize row = mm__cpu_bag_row((guint64)b * s.tables + t, p, s.rows);
              want += mm__cpu_fill_value((t * s.rows + row) * s.dim + e, 41);
            }
            ck_assert(o[((b - b0) * s.tables + t) * s.dim + e] == want);
          }
    }
  }
  for (guint ranks = 1; ranks <= 4; ranks++) {
    MmFusedSpec s = small_spec(MM_FUSED_GEMM_ALLTOALL, ranks, 2);
    g_autoptr(MmFused) f = mm__fused_new(&s, NULL);
    MmFusedRun run = {.fused = TRUE, .slice = 4, .aware = FALSE};
    mm__fused_run(f, &run);
    for (guint d = 0; d < ranks; d++) {
      gsize len, m0 = s.m * d / ranks, m1 = s.m * (d + 1) / ranks;
      const float *o = mm__fused_output(f, d, &len);
      ck_assert_uint_eq(len, ranks * (m1 - m0) * s.n);
      for (guint src = 0; src < ranks; src++)
        for (gsize i = m0; i < m1; i++)
          for (gsize j = 0; j < s.n; j++) {
            float want = 0.0f;
            for (gsize k = 0; k < s.k; k++)
              want += mm__cpu_fill_value(i * s.k + k, 50 + src) * mm__cpu_fill_value(k * s.n + j, 60 + src);
            ck_assert(o[(src * (m1 - m0) + i - m0) * s.n + j] == want);
          }
    }
  }
  for (guint ranks = 1; ranks <= 4; ranks++) {
    MmFusedSpec s = small_spec(MM_FUSED_GEMV_ALLREDUCE, ranks, 1);
    g_autoptr(MmFused) f = mm__fused_new(&s, NULL);
    MmFusedRun run = {.fused = TRUE, .slice = 7, .aware = TRUE};
    mm__fused_run(f, &run);
    for (guint d = 0; d < ranks; d++) {
      gsize len;
      const float *o = mm__fused_output(f, d, &len);
      ck_assert_uint_eq(len, s.n);
      for (gsize j = 0; j < s.n; j++) {
        /* the rank-ordered fold of the k-ordered partial sums */
        float want = 0.0f;
        double exact = 0;
        for (guint r = 0; r < ranks; r++) {
          float partial = 0.0f;
          for (gsize k = s.k * r / ranks; k < s.k * (r + 1) / ranks; k++) {
            float x = mm__cpu_fill_value(k, 31), w = mm__cpu_fill_value(k * s.n + j, 32);
            partial += x * w;
            exact += (double)x * w;
          }
          want = r == 0 ? partial : want + partial;
        }
        ck_assert(o[j] == want);
        ck_assert_double_eq_tol(o[j], exact, 1e-4);
      }
    }
  }
}
END_TEST

static const MmFusedSpec bad_specs[] = {
  {.op = MM_FUSED_GEMV_ALLREDUCE, .ranks = 0, .wgs = 1, .n = 4, .k = 4},
  {.op = MM_FUSED_GEMV_ALLREDUCE, .ranks = 2, .wgs = 0, .n = 4, .k = 4},
  {.op = MM_FUSED_GEMV_ALLREDUCE, .ranks = 2, .wgs = 1, .n = 0, .k = 4},
  {.op = MM_FUSED_EMBEDDING_ALLTOALL, .ranks = 2, .wgs = 1, .batch = 4, .tables = 2, .rows = 0, .dim = 4, .pool = 1},
  {.op = MM_FUSED_GEMM_ALLTOALL, .ranks = 2, .wgs = 1, .m = 4, .n = 4, .k = 0},
};

START_TEST(test_fused_bad_spec)
{
  g_autoptr(GError) error = NULL;
  ck_assert_ptr_null(mm__fused_new(&bad_specs[_i], &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
}
END_TEST

static Suite *calib_cpu_suite(void)
{
  Suite *s = suite_create("calib_cpu");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_quick_run);
  tcase_add_test(tc, test_structure_is_deterministic);
  tcase_add_loop_test(tc, test_thread_counts, 0, G_N_ELEMENTS(thread_counts));
  tcase_add_loop_test(tc, test_bad_options, 0, G_N_ELEMENTS(bad_options));
  tcase_add_loop_test(tc, test_fused_matches_bulk, 0, MM_FUSED_OP_COUNT * 4 * 2);
  tcase_add_test(tc, test_fused_repeats);
  tcase_add_test(tc, test_fused_values);
  tcase_add_loop_test(tc, test_fused_bad_spec, 0, G_N_ELEMENTS(bad_specs));
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(calib_cpu_suite());
}
