/* check_report: what plot makes of traces and results it is given: errors (domain and code). */
#include <string.h>

#include "report/report.h"
#include "testutil.h"

/* One complete event, enough for a timeline. */
#define EVENT_X "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":5,\"cat\":\"fwd\",\"name\":\"op\"}"

static const struct {
  MmPlotKind kind;
  const char *text; /* NULL: the file does not exist */
  const char *out;  /* NULL: a .png */
  int code;         /* in MM_REPORT_ERROR */
} bad_inputs[] = {
  {MM_PLOT_TIMELINE, NULL, NULL, MM_REPORT_ERROR_READ},
  {MM_PLOT_BREAKDOWN, NULL, NULL, MM_REPORT_ERROR_READ},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"X\",", NULL, MM_REPORT_ERROR_READ},
  {MM_PLOT_TIMELINE, "", NULL, MM_REPORT_ERROR_READ},
  {MM_PLOT_TIMELINE, "[1]", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"iteration_time_s\":1}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":{}}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[3]}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"X\"}]}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":\"5\"}]}", NULL,
   MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":-5}]}", NULL,
   MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"a\"}}, " EVENT_X "]}",
   NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[]}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[" EVENT_X "]}", "t.jpg", MM_REPORT_ERROR_INPUT},
  {MM_PLOT_BREAKDOWN, "{\"traceEvents\":[" EVENT_X "]}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1,\"serialized\":3}", NULL, MM_REPORT_ERROR_INPUT},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1,\"serialized\":{\"compute_by_phase\":{\"fwd\":1}}}", NULL,
   MM_REPORT_ERROR_INPUT},
};

START_TEST(test_bad_plot_input)
{
  g_autofree char *name = g_strdup_printf("bad-input-%d.json", _i);
  g_autofree char *path = bad_inputs[_i].text ? mm_test_write(name, bad_inputs[_i].text)
                                              : g_build_filename(mm_test_tmpdir(), name, NULL);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), bad_inputs[_i].out ? bad_inputs[_i].out : "fig.png", NULL);
  const char *inputs[] = {path};
  g_autoptr(GError) error = NULL;
  g_autofree char *script = mm_plot_script(bad_inputs[_i].kind, inputs, 1, out, NULL, &error);
  ck_assert_ptr_null(script);
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, bad_inputs[_i].code), "row %d: got %s %d (%s)", _i,
                error ? g_quark_to_string(error->domain) : "no error", error ? error->code : -1,
                error ? error->message : "");
  /* every message names the file at fault */
  ck_assert_msg(strstr(error->message, bad_inputs[_i].out ? out : path) != NULL, "row %d: %s", _i, error->message);
  /* and the same input fails as well when the caller ignores the error */
  g_autofree char *again = mm_plot_script(bad_inputs[_i].kind, inputs, 1, out, NULL, NULL);
  ck_assert_ptr_null(again);
}
END_TEST

/* Breakdowns of a directory without run results: INPUT; of a path that is not there: READ. */
START_TEST(test_bad_plot_directory)
{
  g_autofree char *missing = g_build_filename(mm_test_tmpdir(), "no-such-dir", "sub", NULL);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.png", NULL);
  g_free(mm_test_write("not-a-result.json", "{\"name\":\"x\"}")); /* skipped: not a result */
  const char *dir[] = {mm_test_tmpdir()};
  g_autoptr(GError) error = NULL;
  g_autofree char *script = mm_plot_script(MM_PLOT_BREAKDOWN, dir, 1, out, NULL, &error);
  ck_assert_ptr_null(script);
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT), "%s", error ? error->message : "");
  g_clear_error(&error);
  const char *gone[] = {missing};
  ck_assert_ptr_null(mm_plot_script(MM_PLOT_BREAKDOWN, gone, 1, out, NULL, &error));
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ), "%s", error ? error->message : "");
}
END_TEST

static Suite *report_suite(void)
{
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_loop_test(tc, test_bad_plot_input, 0, (int)G_N_ELEMENTS(bad_inputs));
  tcase_add_test(tc, test_bad_plot_directory);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(report_suite());
}
