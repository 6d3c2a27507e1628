/* check_report: what plot makes of traces and results it is given: errors (domain, code and
 * the JSON path at fault), names kept out of gnuplot's script, sizes. */
#include <glib/gstdio.h>
#include <string.h>

#include "report/report.h"
#include "testutil.h"

/* One complete event, enough for a timeline. */
#define EVENT_X "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":5,\"cat\":\"fwd\",\"name\":\"op\"}"

/* A result whose parts sum to its iteration time, with @extra members first. */
#define RESULT(extra, total, idle)                                                                            \
  "{" extra "\"iteration_time_s\":" total ",\"serialized\":{\"compute_by_phase\":{\"fwd\":0.5,\"bwd\":0.25," \
  "\"recompute\":0,\"optimizer\":0.125}},\"exposed_comm_s\":0.0625,\"idle_s\":" idle "}"
#define TRACE(events) "{\"traceEvents\":[" events "]}"

static const struct {
  MmPlotKind kind;
  const char *text;  /* NULL: the file does not exist */
  const char *out;   /* NULL: a .png */
  int code;          /* in MM_REPORT_ERROR */
  const char *where; /* in the message, besides the file: the JSON path at fault */
} bad_inputs[] = {
  {MM_PLOT_TIMELINE, NULL, NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_BREAKDOWN, NULL, NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":[{\"ph\":\"X\",", NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_TIMELINE, "", NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_TIMELINE, "[1]", NULL, MM_REPORT_ERROR_INPUT, ""},
  {MM_PLOT_TIMELINE, "{\"iteration_time_s\":1}", NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents"},
  {MM_PLOT_TIMELINE, TRACE(""), NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents"},
  {MM_PLOT_TIMELINE, "{\"traceEvents\":{}}", NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents"},
  {MM_PLOT_TIMELINE, TRACE("3"), NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents[0]"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\"}"), NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":\"5\"}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].dur"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":-5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].dur"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"M\",\"pid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"a\"}}, " EVENT_X),
   NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents[0].tid"},
  {MM_PLOT_TIMELINE, TRACE(EVENT_X), "t.jpg", MM_REPORT_ERROR_INPUT, ""},
  {MM_PLOT_BREAKDOWN, TRACE(EVENT_X), NULL, MM_REPORT_ERROR_INPUT, "$.iteration_time_s"},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1}", NULL, MM_REPORT_ERROR_INPUT, "$.serialized"},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1,\"serialized\":3}", NULL, MM_REPORT_ERROR_INPUT, "$.serialized"},
  {MM_PLOT_BREAKDOWN, "{\"iteration_time_s\":1,\"serialized\":{\"compute_by_phase\":{\"fwd\":1}}}", NULL,
   MM_REPORT_ERROR_INPUT, "$.serialized.compute_by_phase.bwd"},

  /* hostile traces (issue 10, defect 9): ids past what a float converts to or a shift holds,
   * times that overflow, negative or fractional ids, sub-picosecond durations */
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":1e300,\"tid\":0,\"ts\":0,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":9007199254740992,\"tid\":0,\"ts\":0,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":-1,\"tid\":0,\"ts\":0,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0.5,\"tid\":0,\"ts\":0,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":1e300,\"ts\":0,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].tid"},
  {MM_PLOT_TIMELINE,
   TRACE("{\"ph\":\"M\",\"pid\":1e300,\"name\":\"process_name\",\"args\":{\"name\":\"a\"}}, " EVENT_X), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].pid"},
  {MM_PLOT_TIMELINE,
   TRACE("{\"ph\":\"M\",\"pid\":0,\"tid\":1e300,\"name\":\"thread_name\",\"args\":{\"name\":\"a\"}}, " EVENT_X),
   NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents[0].tid"},
  {MM_PLOT_TIMELINE,
   TRACE("{\"ph\":\"M\",\"pid\":0,\"tid\":-3,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":1}}, " EVENT_X),
   NULL, MM_REPORT_ERROR_INPUT, "$.traceEvents[0].tid"},
  {MM_PLOT_TIMELINE,
   TRACE("{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":7}}, " EVENT_X), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].args.name"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":1e308,\"dur\":1e308}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].ts"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1e308}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].dur"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":-5,\"dur\":5}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].ts"},
  {MM_PLOT_TIMELINE, TRACE("{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1e-300}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.traceEvents[0].dur"},
  {MM_PLOT_TIMELINE, "{\"otherData\":5,\"traceEvents\":[" EVENT_X "]}", NULL, MM_REPORT_ERROR_INPUT,
   "$.otherData"},
  {MM_PLOT_TIMELINE, "{\"otherData\":{\"model\":{\"name\":[]}},\"traceEvents\":[" EVENT_X "]}", NULL,
   MM_REPORT_ERROR_INPUT, "$.otherData.model.name"},
  /* hostile results: a negative, zero or overflowing iteration, parts below zero, above the
   * iteration or not summing to it, names that are not strings */
  {MM_PLOT_BREAKDOWN, RESULT("", "-1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.iteration_time_s"},
  {MM_PLOT_BREAKDOWN, RESULT("", "0", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.iteration_time_s"},
  {MM_PLOT_BREAKDOWN, RESULT("", "1e308", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.iteration_time_s"},
  {MM_PLOT_BREAKDOWN, RESULT("", "1", "-0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.idle_s"},
  {MM_PLOT_BREAKDOWN, RESULT("", "1", "1e308"), NULL, MM_REPORT_ERROR_INPUT, "$.idle_s"},
  {MM_PLOT_BREAKDOWN, RESULT("", "2", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "iteration_time_s"},
  {MM_PLOT_BREAKDOWN, RESULT("\"model\":3,", "1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.model"},
  {MM_PLOT_BREAKDOWN, RESULT("\"config\":{\"name\":false},", "1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT,
   "$.config.name"},
  {MM_PLOT_BREAKDOWN, RESULT("\"hardware\":{\"devices\":-8},", "1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT,
   "$.hardware.devices"},
  {MM_PLOT_BREAKDOWN, RESULT("\"decode_step\":[],", "1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.decode_step"},
};

START_TEST(test_bad_plot_input)
{
  g_autofree char *name = g_strdup_printf("bad-input-%d.json", _i);
  g_autofree char *path = bad_inputs[_i].text ? mm_test_write(name, bad_inputs[_i].text)
                                              : g_build_filename(mm_test_tmpdir(), name, NULL);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), bad_inputs[_i].out ? bad_inputs[_i].out : "fig.png", NULL);
  const char *inputs[] = {path};
  g_autoptr(GError) error = NULL;
  char *data = NULL;
  g_autofree char *script = mm_plot_script(bad_inputs[_i].kind, inputs, 1, out, NULL, &data, &error);
  ck_assert_ptr_null(script);
  ck_assert_ptr_null(data);
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, bad_inputs[_i].code), "row %d: got %s %d (%s)", _i,
                error ? g_quark_to_string(error->domain) : "no error", error ? error->code : -1,
                error ? error->message : "");
  /* every message names the file at fault, and the JSON path */
  ck_assert_msg(strstr(error->message, bad_inputs[_i].out ? out : path) != NULL, "row %d: %s", _i, error->message);
  ck_assert_msg(strstr(error->message, bad_inputs[_i].where) != NULL, "row %d: '%s' lacks '%s'", _i, error->message,
                bad_inputs[_i].where);
  /* and the same input fails as well when the caller ignores the error */
  g_autofree char *again = mm_plot_script(bad_inputs[_i].kind, inputs, 1, out, NULL, &data, NULL);
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
  char *data = NULL;
  g_autofree char *script = mm_plot_script(MM_PLOT_BREAKDOWN, dir, 1, out, NULL, &data, &error);
  ck_assert_ptr_null(script);
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT), "%s", error ? error->message : "");
  g_clear_error(&error);
  const char *gone[] = {missing};
  ck_assert_ptr_null(mm_plot_script(MM_PLOT_BREAKDOWN, gone, 1, out, NULL, &data, &error));
  ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ), "%s", error ? error->message : "");
}
END_TEST

/* No text from an input reaches the script (issue 10, defect 1): names in a result, a file
 * name and a title that each try to end a block, start a command or run `system` are data:
 * quoted fields on one line of the data file, cleaned of what gnuplot would act on. */
START_TEST(test_plot_names_stay_data)
{
  static const char *const evil = "x\\n\\nEOD\\nsystem \\\"touch PWNED\\\"\\n$j << EOD\\r`touch PWNED` @PWNED \\\\";
  g_autofree char *names = g_strdup_printf("\"model\":{\"name\":\"%s\"},\"config\":{\"name\":\"%s\\u0000\u00e9\"},"
                                           "\"hardware\":{\"device\":\"%s\",\"devices\":8},", evil, evil, evil);
  g_autofree char *text = g_strdup_printf(RESULT("%s", "1", "0.0625"), names);
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "x\nEOD\nsystem \"touch PWNED\"\n$j << EOD", NULL);
  ck_assert_int_eq(g_mkdir_with_parents(dir, 0755), 0);
  g_autofree char *path = g_build_filename(dir, "x\nEOD\nsystem \"touch PWNED\"\n$j << EOD\n.json", NULL);
  ck_assert(g_file_set_contents(path, text, -1, NULL));
  g_autofree char *trace = mm_test_write("evil-trace.json", "{\"otherData\":{\"model\":{\"name\":\"m\\nsystem 'touch PWNED'\"}},"
                                         "\"traceEvents\":[{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"thread_name\","
                                         "\"args\":{\"name\":\"t\\nEOD\\nsystem 'touch PWNED'\"}}, " EVENT_X "]}");
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.pdf", NULL);
  static const char *const titles[] = {NULL, "t'\nsystem 'touch PWNED'\n#\\"};
  for (guint k = 0; k < 2 * G_N_ELEMENTS(titles); k++) {
    MmPlotOptions o = {.title = titles[k % 2]};
    const char *inputs[] = {k < 2 ? path : trace};
    const char *by_dir[] = {dir};
    g_autoptr(GError) error = NULL;
    g_autofree char *data = NULL;
    g_autofree char *script =
      mm_plot_script(k < 2 ? MM_PLOT_BREAKDOWN : MM_PLOT_TIMELINE, k == 1 ? by_dir : inputs, 1, out, &o, &data, &error);
    ck_assert_msg(script != NULL, "%u: %s", k, error ? error->message : "");
    ck_assert_msg(!strstr(script, "PWNED") && !strstr(script, "system") && !strstr(script, "EOD"), "%u: %s", k, script);
    /* in the data, the names are there, inert: one quoted field per line, no control
     * character, no quote or backslash gnuplot would act on */
    ck_assert_msg(strstr(data, "PWNED") != NULL, "%u: the names are missing: %s", k, data);
    ck_assert(g_utf8_validate(data, -1, NULL));
    g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
      if (!strstr(lines[i], "PWNED")) continue;
      ck_assert_msg(!g_str_has_prefix(lines[i], "EOD") && !g_str_has_prefix(lines[i], "system"), "%u: %s", k, lines[i]);
      guint quotes = 0;
      for (const char *c = lines[i]; *c; c++) {
        ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f, "%u: a control character in %s", k, lines[i]);
        quotes += *c == '"';
        if (*c == '\\') ck_assert_msg(c[1] == '\\', "%u: a lone backslash in %s", k, lines[i]), c++;
      }
      ck_assert_msg(quotes % 2 == 0, "%u: %s", k, lines[i]);
    }
  }
  /* a figure name the data cannot carry unchanged is refused, not altered */
  g_autofree char *bad_out = g_build_filename(mm_test_tmpdir(), "a\"b\n.png", NULL);
  const char *inputs[] = {path};
  g_autoptr(GError) error = NULL;
  char *data = NULL;
  ck_assert_ptr_null(mm_plot_script(MM_PLOT_BREAKDOWN, inputs, 1, bad_out, NULL, &data, &error));
  ck_assert(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT));
  ck_assert_ptr_null(data);
  g_unlink(path);
  g_rmdir(dir);
}
END_TEST

/* --size: presets and WxH inches; anything else is refused. */
START_TEST(test_plot_sizes)
{
  static const struct {
    const char *s;
    double w, h, font;
  } good[] = {{"column", 3.5, 2.4, 7}, {"page", 7, 3.5, 8}, {"slide", 10, 5.6, 16}, {"6x3", 6, 3, 8},
              {"4.5X2in", 4.5, 2, 7}, {"1x40", 1, 40, 7}};
  for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
    MmPlotOptions o = {0};
    ck_assert_msg(mm_plot_parse_size(good[i].s, &o), "%s", good[i].s);
    ck_assert_double_eq(o.width_in, good[i].w);
    ck_assert_double_eq(o.height_in, good[i].h);
    ck_assert_double_eq(o.font_pt, good[i].font);
  }
  static const char *const bad[] = {"", "x", "6", "6x", "x3", "0x3", "6x0.5", "41x3", "6x3cm", "6x3 ", "nanx3",
                                    "infx3", "-6x3", "6x3x2", "Page"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    MmPlotOptions o = {0};
    ck_assert_msg(!mm_plot_parse_size(bad[i], &o), "'%s' was taken", bad[i]);
  }
}
END_TEST

static Suite *report_suite(void)
{
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_loop_test(tc, test_bad_plot_input, 0, (int)G_N_ELEMENTS(bad_inputs));
  tcase_add_test(tc, test_bad_plot_directory);
  tcase_add_test(tc, test_plot_names_stay_data);
  tcase_add_test(tc, test_plot_sizes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(report_suite());
}
