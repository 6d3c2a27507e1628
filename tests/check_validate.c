/* check_validate: validation cases files: their errors (domain and code) and how their paths resolve. */
#include <string.h>

#include "testutil.h"
#include "validate/validate.h"

/* One case that runs in a blink: MPT-7B, FSDP on one DGX A100 node. */
#define CASE_MPT7B(metric)                                                                                        \
  "{\"id\":\"x\",\"source\":\"s\",\"model\":\"models/mpt-7b.json\",\"hardware\":\"hardware/dgx-a100-2048.json\"," \
  "\"nodes\":1,\"config\":\"configs/validation/fsdp.json\",\"metric\":\"" metric "\",\"measured\":1000}"

/* "@ROOT@" in a cases file's text is the (absolute) source directory. */
static char *write_cases(const char *name, const char *text)
{
  g_autofree char *root = mm_test_src(".");
  g_autoptr(GString) s = g_string_new(text);
  g_string_replace(s, "@ROOT@", root, 0);
  return mm_test_write(name, s->str);
}

static const struct {
  const char *text; /* NULL: the file does not exist */
  GQuark (*domain)(void);
  int code;
} bad_cases[] = {
  {NULL, mm_validate_error_quark, MM_VALIDATE_ERROR_IO},
  {"{\"name\":\"t\",\"cases\":[", mm_validate_error_quark, MM_VALIDATE_ERROR_PARSE},
  {"[1]", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"cases\":[]}", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"cazes\":[]}", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"cases\":[3]}", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"cases\":[{\"id\":\"x\"}]}", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"cases\":[" CASE_MPT7B("latency") "]}", mm_validate_error_quark,
   MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"collective_cases\":[{\"id\":\"c\",\"source\":\"s\","
   "\"hardware\":\"hardware/dgx-a100-2048.json\",\"kind\":\"all_reduce\",\"ranks\":8,\"points\":[[-1,5]]}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  /* collective points out of range: a size that overflows to infinity (found by fuzz_validate), a
   * bandwidth likewise, a per-point rank count past the curve field's bound */
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"collective_cases\":[{\"id\":\"c\",\"source\":\"s\","
   "\"hardware\":\"hardware/dgx-a100-2048.json\",\"kind\":\"all_reduce\",\"ranks\":8,\"points\":[[13421E728,5]]}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"collective_cases\":[{\"id\":\"c\",\"source\":\"s\","
   "\"hardware\":\"hardware/dgx-a100-2048.json\",\"kind\":\"all_reduce\",\"ranks\":8,\"points\":[[1e6,1e999]]}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"collective_cases\":[{\"id\":\"c\",\"source\":\"s\","
   "\"hardware\":\"hardware/dgx-a100-2048.json\",\"kind\":\"all_reduce\",\"ranks\":0,\"points\":[[1e6,5,1e30]]}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"skipped\":[{\"id\":\"a\"}]}", mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  /* a serving metric of a training config: the case's fault, not an internal error */
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"cases\":[" CASE_MPT7B("decode_latency_s_per_token") "]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_METRIC},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"cases\":[" CASE_MPT7B("request_latency_s") "]}", mm_validate_error_quark,
   MM_VALIDATE_ERROR_METRIC},
  /* overlap-kernel cases: a schedule the op cannot take, an unknown op, a size out of range */
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"overlap_cases\":[{\"id\":\"o\",\"source\":\"s\","
   "\"hardware\":\"hardware/a800-8.json\",\"op\":\"gemm-rs\",\"m\":64,\"n\":64,\"k\":64,\"ranks\":8,"
   "\"schedule\":\"uniform-fused-1d\",\"overlap_total_ms\":1}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"overlap_cases\":[{\"id\":\"o\",\"source\":\"s\","
   "\"hardware\":\"hardware/a800-8.json\",\"op\":\"gemm-ar\",\"m\":64,\"n\":64,\"k\":64,\"ranks\":8}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"overlap_cases\":[{\"id\":\"o\",\"source\":\"s\","
   "\"hardware\":\"hardware/a800-8.json\",\"op\":\"ag-gemm\",\"m\":64,\"n\":64,\"k\":64,\"ranks\":16}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  /* sizes in bounds whose time passes the engine's clock: an invalid case (mm_overlap_run: too large to simulate) */
  {"{\"name\":\"t\",\"root\":\"@ROOT@\",\"overlap_cases\":[{\"id\":\"o\",\"source\":\"s\","
   "\"hardware\":\"hardware/a800-8.json\",\"op\":\"ag-gemm\",\"m\":1099511627776,\"n\":1099511627776,"
   "\"k\":1099511627776,\"ranks\":8,\"overlap_total_ms\":1}]}",
   mm_validate_error_quark, MM_VALIDATE_ERROR_INVALID},
  /* the files a case names are config files: their errors stay config errors */
  {"{\"name\":\"t\",\"root\":\"@ROOT@/no-such-dir\",\"cases\":[" CASE_MPT7B("mfu") "]}", mm_config_error_quark,
   MM_CONFIG_ERROR_IO},
  {"{\"name\":\"t\",\"root\":\"@ROOT@/no-such-dir\",\"collective_cases\":[{\"id\":\"c\",\"source\":\"s\","
   "\"hardware\":\"hardware/dgx-a100-2048.json\",\"kind\":\"all_reduce\",\"ranks\":8,\"points\":[[1e6,5]]}]}",
   mm_config_error_quark, MM_CONFIG_ERROR_IO},
  {"{\"name\":\"t\",\"root\":\"@ROOT@/no-such-dir\",\"overlap_cases\":[{\"id\":\"o\",\"source\":\"s\","
   "\"hardware\":\"hardware/a800-8.json\",\"op\":\"ag-gemm\",\"m\":64,\"n\":64,\"k\":64,\"ranks\":8}]}",
   mm_config_error_quark, MM_CONFIG_ERROR_IO},
};

START_TEST(test_bad_cases_file)
{
  g_autofree char *name = g_strdup_printf("bad-cases-%d.json", _i);
  g_autofree char *path =
    bad_cases[_i].text ? write_cases(name, bad_cases[_i].text) : g_build_filename(mm_test_tmpdir(), name, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(path, &error);
  ck_assert_ptr_null(v);
  ck_assert_ptr_nonnull(error);
  ck_assert_msg(error->domain == bad_cases[_i].domain() && error->code == bad_cases[_i].code,
                "row %d: got %s %d (%s)", _i, g_quark_to_string(error->domain), error->code, error->message);
  /* every message names the cases file */
  ck_assert_msg(strstr(error->message, path) != NULL, "row %d: %s", _i, error->message);
}
END_TEST

/* An absolute "root" is used as it is, not joined under the cases file's directory. */
START_TEST(test_absolute_root)
{
  g_autofree char *path =
    write_cases("abs-root.json", "{\"name\":\"t\",\"root\":\"@ROOT@\",\"cases\":[" CASE_MPT7B("mfu") "]}");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(path, &error);
  ck_assert_msg(v != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(v->rows->len, 1);
  const MmValidationRow *r = g_ptr_array_index(v->rows, 0);
  ck_assert_str_eq(r->metric, "mfu");
  ck_assert_double_gt(r->predicted, 0);
}
END_TEST

/* Absolute case paths likewise, whatever the root; a relative root is relative to the cases file. */
START_TEST(test_absolute_case_paths)
{
  g_autofree char *model = mm_test_src("models/mpt-7b.json");
  g_autofree char *hw = mm_test_src("hardware/dgx-a100-2048.json");
  g_autofree char *cfg = mm_test_src("configs/validation/fsdp.json");
  g_autofree char *text = g_strdup_printf(
    "{\"name\":\"t\",\"root\":\"no-such-dir\",\"cases\":[{\"id\":\"x\",\"source\":\"s\",\"model\":\"%s\","
    "\"hardware\":\"%s\",\"nodes\":1,\"config\":\"%s\",\"metric\":\"mfu\",\"measured\":0.5}]}",
    model, hw, cfg);
  g_autofree char *path = mm_test_write("abs-paths.json", text);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(path, &error);
  ck_assert_msg(v != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(v->rows->len, 1);

  /* the same case, relative to a root relative to the cases file: the tmp directory has no
   * models/, so the case's model is not found there */
  g_autofree char *rel = write_cases("rel-root.json", "{\"name\":\"t\",\"root\":\".\",\"cases\":[" CASE_MPT7B("mfu") "]}");
  g_autoptr(GError) rerr = NULL;
  g_autoptr(MmValidation) none = mm_validation_run(rel, &rerr);
  ck_assert_ptr_null(none);
  ck_assert(g_error_matches(rerr, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO));
  g_autofree char *dir = g_path_get_dirname(rel);
  ck_assert_msg(strstr(rerr->message, dir) != NULL, "%s", rerr->message);
}
END_TEST

static Suite *validate_suite(void)
{
  Suite *s = suite_create("validate");
  TCase *tc = tcase_create("validate");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_bad_cases_file, 0, (int)G_N_ELEMENTS(bad_cases));
  tcase_add_test(tc, test_absolute_root);
  tcase_add_test(tc, test_absolute_case_paths);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(validate_suite());
}
