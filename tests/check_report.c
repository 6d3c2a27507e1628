/* check_report: what plot makes of traces and results it is given: errors (domain, code and
 * the JSON path at fault), names kept out of gnuplot's script, sizes; outputs: written
 * together, never over what is not a regular file. */
#define _XOPEN_SOURCE 700 /* mknod, symlink, mkfifo */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "report/report.h"
#include "testutil.h"

/* One complete event, enough for a timeline. */
#define EVENT_X "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":5,\"cat\":\"fwd\",\"name\":\"op\"}"

/* A result whose parts sum to its iteration time, with @extra members first. */
#define RESULT(extra, total, idle)                                                                            \
  "{" extra "\"iteration_time_s\":" total ",\"serialized\":{\"compute_by_phase\":{\"fwd\":0.5,\"bwd\":0.25," \
  "\"recompute\":0,\"optimizer\":0.125}},\"exposed_comm_s\":0.0625,\"idle_s\":" idle "}"
#define TRACE(events) "{\"traceEvents\":[" events "]}"
/* A what-if study: the baseline at 100 samples/s, then @system. */
#define WHATIF_BASE                                                                                           \
  "{\"name\":\"baseline\",\"scale\":{\"compute\":1},\"fits\":true,\"best_strategy\":\"fsdp*\","                  \
  "\"samples_per_s\":100,\"speedup\":1}"
#define WHATIF(system) "{\"systems\":[" WHATIF_BASE "," system "]}"

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
  /* what-if studies */
  {MM_PLOT_WHATIF, NULL, NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_WHATIF, "{\"systems\":[", NULL, MM_REPORT_ERROR_READ, ""},
  {MM_PLOT_WHATIF, RESULT("", "1", "0.0625"), NULL, MM_REPORT_ERROR_INPUT, "$.systems"},
  {MM_PLOT_WHATIF, "{\"systems\":[]}", NULL, MM_REPORT_ERROR_INPUT, "$.systems"},
  {MM_PLOT_WHATIF, "{\"systems\":{}}", NULL, MM_REPORT_ERROR_INPUT, "$.systems"},
  {MM_PLOT_WHATIF, "{\"systems\":[3]}", NULL, MM_REPORT_ERROR_INPUT, "$.systems[0]"},
  {MM_PLOT_WHATIF, WHATIF("{\"scale\":{},\"fits\":false}"), NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].name"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":7,\"scale\":{},\"fits\":false}"), NULL, MM_REPORT_ERROR_INPUT,
   "$.systems[1].name"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"fits\":false}"), NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].scale"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{\"compute\":-10},\"fits\":false}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.systems[1].scale.compute"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{\"compute\":\"10\"},\"fits\":false}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.systems[1].scale.compute"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":1}"), NULL, MM_REPORT_ERROR_INPUT,
   "$.systems[1].fits"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"speedup\":1}"), NULL,
   MM_REPORT_ERROR_INPUT, "$.systems[1].samples_per_s"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"samples_per_s\":-5,\"speedup\":1}"),
   NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].samples_per_s"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"samples_per_s\":\"1e9\",\"speedup\":1}"),
   NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].samples_per_s"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"samples_per_s\":200,\"speedup\":1e300}"),
   NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].speedup"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"samples_per_s\":200,\"speedup\":3}"),
   NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].speedup"},
  {MM_PLOT_WHATIF, WHATIF("{\"name\":\"x\",\"scale\":{},\"fits\":true,\"best_strategy\":[],"
                          "\"samples_per_s\":200,\"speedup\":2}"),
   NULL, MM_REPORT_ERROR_INPUT, "$.systems[1].best_strategy"},
  {MM_PLOT_WHATIF, "{\"systems\":[" WHATIF_BASE "],\"joint_over_product_of_singles\":-1}", NULL,
   MM_REPORT_ERROR_INPUT, "$.joint_over_product_of_singles"},
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

/* A sweep's folder (madmax sweep --out): points.csv with the columns plot reads, and
 * summary.json. Point 0 is the FSDP baseline, 1 the best, 2 simulated out of memory, 3 pruned. */
#define CSV_HEAD                                                                                             \
  "point,micro_batch,mlp_strategy,embedding_bag_strategy,status,fits,samples_per_s,memory_per_device_bytes," \
  "memory_capacity_bytes\n"
#define CSV_ROWS                                              \
  "0,512,fsdp*,mp(table)*,ok,1,100,1e10,4e10\n"               \
  "1,512,ddp*,mp(table)*,ok,1,200,2e10,4e10\n"                \
  "2,1024,tp2>ddp*,mp(table)*,oom_simulated,0,300,5e10,4e10\n" \
  "3,512,ddp*,ddp*,oom,0,,9e10,4e10\n"
#define CSV_ROW(fields) CSV_HEAD fields "\n" CSV_ROWS
#define SUMMARY(base, rest)                                                                                    \
  "{\"inputs\":{\"model\":\"models/m.json\",\"hardware\":\"hardware/h.json\",\"config\":\"configs/c.json\"}," \
  "\"baseline_fsdp\":" base rest "}"
#define BASE0 "{\"point\":0,\"fits\":true,\"samples_per_s\":100}"
#define GOOD_REST ",\"best\":{\"throughput\":{\"point\":1}},\"pareto_memory_throughput\":[{\"point\":0},{\"point\":1}]"

/* A folder @name holding @csv as points.csv and @summary as summary.json (NULL: no such file). */
static char *write_sweep(const char *name, const char *csv, const char *summary)
{
  char *dir = g_build_filename(mm_test_tmpdir(), name, NULL);
  ck_assert_int_eq(g_mkdir_with_parents(dir, 0755), 0);
  const char *files[][2] = {{"points.csv", csv}, {"summary.json", summary}};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *p = g_build_filename(dir, files[i][0], NULL);
    g_unlink(p);
    if (files[i][1]) ck_assert(g_file_set_contents(p, files[i][1], -1, NULL));
  }
  return dir;
}

/* Hostile or broken sweep folders: the CSV line and column or the JSON path named, for both
 * figures that read them. */
static const struct {
  const char *csv;     /* NULL: the good one */
  const char *summary; /* NULL: the good one; "": none */
  int code;
  const char *where; /* after the file's name: "line N: column" in points.csv, or "$..." in summary.json */
} bad_sweeps[] = {
  {"", NULL, MM_REPORT_ERROR_INPUT, "line 1"},
  {"point,mlp_strategy,status,fits\n0,fsdp*,ok,1\n", NULL, MM_REPORT_ERROR_INPUT, "line 1: no column 'samples_per_s'"},
  {"point,status,fits,samples_per_s,memory_per_device_bytes,memory_capacity_bytes\n0,ok,1,1,1,1\n", NULL,
   MM_REPORT_ERROR_INPUT, "line 1: no KIND_strategy column"},
  {"point,point,mlp_strategy,status,fits,samples_per_s,memory_per_device_bytes,memory_capacity_bytes\n", NULL,
   MM_REPORT_ERROR_INPUT, "line 1: column 'point' twice"},
  {CSV_HEAD, NULL, MM_REPORT_ERROR_INPUT, "line 2: no points"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,100,1e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: 8 fields"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,100,1e10,4e10,5"), NULL, MM_REPORT_ERROR_INPUT, "line 2: 10 fields"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,fast,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,-5,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,nan,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,inf,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,0x10,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,1e400,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1, 100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: samples_per_s"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,100,-1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT,
   "line 2: memory_per_device_bytes"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,ok,1,100,1e10,0"), NULL, MM_REPORT_ERROR_INPUT, "line 2: memory_capacity_bytes"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,done,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: status"},
  {CSV_ROW("0,512,fsdp*,mp(table)*,oom,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: fits"},
  {CSV_ROW("0.5,512,fsdp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: point"},
  {CSV_ROW("-1,512,fsdp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: point"},
  {CSV_ROW("1,512,fsdp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 4: point: 1 again"},
  {CSV_ROW("9,big,fsdp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: micro_batch"},
  {CSV_ROW("9,512,,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: column 3"},
  {CSV_ROW("9,512,fs\001dp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT,
   "line 2: a control character"},
  {CSV_ROW("9,512,fs\xff" "dp*,mp(table)*,ok,1,100,1e10,4e10"), NULL, MM_REPORT_ERROR_INPUT, "line 2: not UTF-8"},
  {CSV_HEAD CSV_ROWS "\n9,512,ddp*,ddp*,oom,0,,9e10,4e10\n", NULL, MM_REPORT_ERROR_INPUT, "line 6: empty"},
  /* the summary */
  {NULL, "", MM_REPORT_ERROR_READ, "cannot read"},
  {NULL, "{\"baseline_fsdp\":", MM_REPORT_ERROR_READ, ""},
  {NULL, "[]", MM_REPORT_ERROR_INPUT, ""},
  {NULL, "{}", MM_REPORT_ERROR_INPUT, "$.baseline_fsdp"},
  {NULL, SUMMARY("7", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp"},
  {NULL, SUMMARY("{\"point\":9,\"fits\":true}", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp.point"},
  {NULL, SUMMARY("{\"point\":-1,\"fits\":true}", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp.point"},
  {NULL, SUMMARY("{\"point\":2,\"fits\":true}", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp.point"},
  {NULL, SUMMARY("{\"point\":0,\"fits\":false,\"samples_per_s\":1}", ""), MM_REPORT_ERROR_INPUT,
   "$.baseline_fsdp.point"},
  {NULL, SUMMARY("{\"point\":0,\"fits\":\"yes\"}", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp.fits"},
  {NULL, SUMMARY("{\"point\":3,\"fits\":false}", ""), MM_REPORT_ERROR_INPUT, "$.baseline_fsdp.samples_per_s"},
  {NULL, SUMMARY("{\"point\":3,\"fits\":false,\"samples_per_s\":-1}", ""), MM_REPORT_ERROR_INPUT,
   "$.baseline_fsdp.samples_per_s"},
  {NULL, SUMMARY(BASE0, ",\"best\":[]"), MM_REPORT_ERROR_INPUT, "$.best"},
  {NULL, SUMMARY(BASE0, ",\"best\":{\"throughput\":{\"point\":2}}"), MM_REPORT_ERROR_INPUT, "$.best.throughput.point"},
  {NULL, SUMMARY(BASE0, ",\"best\":{\"throughput\":{\"point\":\"1\"}}"), MM_REPORT_ERROR_INPUT,
   "$.best.throughput.point"},
  {NULL, SUMMARY(BASE0, ",\"pareto_memory_throughput\":{}"), MM_REPORT_ERROR_INPUT, "$.pareto_memory_throughput"},
  {NULL, SUMMARY(BASE0, ",\"pareto_memory_throughput\":[5]"), MM_REPORT_ERROR_INPUT, "$.pareto_memory_throughput[0]"},
  {NULL, SUMMARY(BASE0, ",\"pareto_memory_throughput\":[{\"point\":0},{\"point\":3}]"), MM_REPORT_ERROR_INPUT,
   "$.pareto_memory_throughput[1].point"},
  {NULL, "{\"inputs\":{\"model\":3},\"baseline_fsdp\":null}", MM_REPORT_ERROR_INPUT, "$.inputs.model"},
};

START_TEST(test_bad_plot_sweep)
{
  g_autofree char *name = g_strdup_printf("bad-sweep-%d", _i);
  const char *summary = bad_sweeps[_i].summary ? bad_sweeps[_i].summary : SUMMARY(BASE0, GOOD_REST);
  g_autofree char *dir = write_sweep(name, bad_sweeps[_i].csv ? bad_sweeps[_i].csv : CSV_HEAD CSV_ROWS,
                                     *summary ? summary : NULL);
  const gboolean in_csv = bad_sweeps[_i].summary == NULL;
  g_autofree char *file = g_build_filename(dir, in_csv ? "points.csv" : "summary.json", NULL);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.png", NULL);
  const char *inputs[] = {dir};
  for (MmPlotKind k = MM_PLOT_RANKING; k <= MM_PLOT_PARETO; k++) {
    g_autoptr(GError) error = NULL;
    char *data = NULL;
    g_autofree char *script = mm_plot_script(k, inputs, 1, out, NULL, &data, &error);
    ck_assert_ptr_null(script);
    ck_assert_ptr_null(data);
    ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, bad_sweeps[_i].code), "row %d: got %s", _i,
                  error ? error->message : "no error");
    /* "FILE: line N: column: ..." or "FILE: $.path: ..." */
    g_autofree char *at =
      *bad_sweeps[_i].where ? g_strdup_printf("%s: %s", file, bad_sweeps[_i].where) : g_strdup(file);
    ck_assert_msg(strstr(error->message, at) != NULL, "row %d: '%s' lacks '%s'", _i, error->message, at);
  }
}
END_TEST

/* A sweep's folder, its points.csv or its summary.json names the sweep; other paths do not. */
START_TEST(test_plot_sweep_paths)
{
  g_autofree char *dir = write_sweep("sweep-paths", CSV_HEAD CSV_ROWS, SUMMARY(BASE0, GOOD_REST));
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL), *sum = g_build_filename(dir, "summary.json", NULL);
  g_autofree char *other = mm_test_write("not-a-sweep.json", "{}");
  g_autofree char *gone = g_build_filename(mm_test_tmpdir(), "no-such-sweep", NULL);
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.svg", NULL);
  const struct {
    const char *input;
    int code; /* -1: fine */
  } cases[] = {{dir, -1}, {csv, -1}, {sum, -1}, {other, MM_REPORT_ERROR_INPUT}, {gone, MM_REPORT_ERROR_READ}};
  g_autofree char *first = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const char *inputs[] = {cases[i].input};
    g_autoptr(GError) error = NULL;
    g_autofree char *data = NULL;
    g_autofree char *script = mm_plot_script(MM_PLOT_RANKING, inputs, 1, out, NULL, &data, &error);
    if (cases[i].code < 0) {
      ck_assert_msg(script != NULL, "%s: %s", cases[i].input, error ? error->message : "");
      if (!first) first = g_strdup(data);
      ck_assert_str_eq(data, first); /* the same figure */
    } else {
      ck_assert_msg(g_error_matches(error, MM_REPORT_ERROR, cases[i].code), "%s: %s", cases[i].input,
                    error ? error->message : "no error");
      ck_assert_ptr_nonnull(strstr(error->message, cases[i].input));
    }
  }
  /* one sweep per figure */
  const char *two[] = {dir, dir};
  g_autoptr(GError) error = NULL;
  char *data = NULL;
  ck_assert_ptr_null(mm_plot_script(MM_PLOT_PARETO, two, 2, out, NULL, &data, &error));
  ck_assert(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT));
}
END_TEST

/* The data lines of the block whose header ("# [K] WHAT") starts with @what. (transfer full) */
static GStrv block_lines(const char *data, const char *what)
{
  g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
  GPtrArray *rows = g_ptr_array_new();
  gboolean in = FALSE;
  for (guint i = 0; lines[i]; i++) {
    if (g_str_has_prefix(lines[i], "# [")) {
      const char *sp = strchr(lines[i], ']');
      in = sp && g_str_has_prefix(sp + 2, what);
    } else if (in && lines[i][0] && lines[i][0] != '#') {
      g_ptr_array_add(rows, g_strdup(lines[i]));
    }
  }
  g_ptr_array_add(rows, NULL);
  return (GStrv)g_ptr_array_free(rows, FALSE);
}

/* What the sweep figures draw of the small sweep: the ranking's rows (by samples/s, the
 * pruned point listed), the Pareto front in memory order, a baseline that does not fit drawn
 * from the summary's reference run, and a sweep with nothing simulated. */
START_TEST(test_plot_sweep_shapes)
{
  g_autofree char *dir = write_sweep("sweep-shapes", CSV_HEAD CSV_ROWS, SUMMARY(BASE0, GOOD_REST));
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.png", NULL);
  const char *inputs[] = {dir};
  g_autofree char *data = NULL;
  g_autofree char *script = mm_plot_script(MM_PLOT_RANKING, inputs, 1, out, NULL, &data, NULL);
  ck_assert_ptr_nonnull(script);
  /* samples/s 300 (out of memory), 200, 100 (the baseline): classes 2, 0, 1 */
  g_auto(GStrv) bars = block_lines(data, "bars");
  ck_assert_uint_eq(g_strv_length(bars), 3);
  ck_assert_str_eq(bars[0], "0 300 2");
  ck_assert_str_eq(bars[1], "1 200 0");
  ck_assert_str_eq(bars[2], "2 100 1");
  g_auto(GStrv) values = block_lines(data, "values");
  ck_assert_uint_eq(g_strv_length(values), 4);
  ck_assert_str_eq(values[0], "0 300 \"3.00x, OOM\" ");
  ck_assert_str_eq(values[1], "1 200 \"2.00x\" ");
  ck_assert_str_eq(values[2], "2 100 \"1.00x\" ");
  ck_assert_str_eq(values[3], "3 0 \"OOM: 83.8 of 37.3 GiB\" "); /* the pruned point, listed */
  g_auto(GStrv) table = block_lines(data, "table");
  ck_assert_str_eq(table[0], "0 \"1\" \"tp2>ddp*\" \"mp(table)*\" \"1024\" ");
  ck_assert_str_eq(table[3], "3 \"\u2013\" \"ddp*\" \"ddp*\" \"512\" ");
  ck_assert_ptr_nonnull(strstr(data, "\"m on h: c\""));
  g_clear_pointer(&data, g_free);
  g_clear_pointer(&script, g_free);
  script = mm_plot_script(MM_PLOT_PARETO, inputs, 1, out, NULL, &data, NULL);
  ck_assert_ptr_nonnull(script);
  g_auto(GStrv) pts = block_lines(data, "points");
  ck_assert_uint_eq(g_strv_length(pts), 3); /* the pruned one has no time */
  g_auto(GStrv) front = block_lines(data, "front");
  ck_assert_uint_eq(g_strv_length(front), 2);
  ck_assert(g_str_has_prefix(front[0], "9.31322575 100"));
  ck_assert_ptr_nonnull(strstr(script, "set arrow from 37.252903, graph 0")); /* the capacity */
  g_clear_pointer(&data, g_free);
  g_clear_pointer(&script, g_free);

  /* a baseline out of memory, simulated for reference: ranked, hatched in its colour */
  g_autofree char *oom = write_sweep("sweep-oom-base", CSV_HEAD CSV_ROWS,
                                     SUMMARY("{\"point\":3,\"fits\":false,\"samples_per_s\":50}", ""));
  const char *oom_in[] = {oom};
  script = mm_plot_script(MM_PLOT_RANKING, oom_in, 1, out, NULL, &data, NULL);
  ck_assert_ptr_nonnull(script);
  g_auto(GStrv) bars2 = block_lines(data, "bars");
  ck_assert_uint_eq(g_strv_length(bars2), 4);
  ck_assert_str_eq(bars2[3], "3 50 3");
  ck_assert_ptr_null(strstr(data, "OOM: ")); /* nothing left to list */
  g_clear_pointer(&data, g_free);
  g_clear_pointer(&script, g_free);

  /* nothing simulated: ranked as a list, no scatter */
  g_autofree char *none = write_sweep("sweep-none", CSV_HEAD "3,512,ddp*,ddp*,oom,0,,9e10,4e10\n",
                                      "{\"baseline_fsdp\":null}");
  const char *none_in[] = {none};
  script = mm_plot_script(MM_PLOT_RANKING, none_in, 1, out, NULL, &data, NULL);
  ck_assert_ptr_nonnull(script);
  g_auto(GStrv) bars3 = block_lines(data, "bars");
  ck_assert_uint_eq(g_strv_length(bars3), 0);
  g_clear_pointer(&data, g_free);
  g_autoptr(GError) error = NULL;
  ck_assert_ptr_null(mm_plot_script(MM_PLOT_PARETO, none_in, 1, out, NULL, &data, &error));
  ck_assert(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT));
}
END_TEST

/* @script holds none of the hostile names; @data holds them inert: quoted fields, no control
 * character, no quote or backslash gnuplot would act on. */
static void assert_inert(const char *script, const char *data, guint k)
{
  ck_assert_msg(!strstr(script, "PWNED") && !strstr(script, "system") && !strstr(script, "EOD"), "%u: %s", k, script);
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

/* No text from an input reaches the script (issue 10, defect 1): names in a result, a file
 * name and a title that each try to end a block, start a command or run `system` are data:
 * quoted fields on one line of the data file, cleaned of what gnuplot would act on. */
START_TEST(test_plot_names_stay_data)
{
  /* control characters inside JSON strings are rejected at load (defect 7): the names carry
   * the rest of the attack, the file name and the title carry newlines */
  static const char *const evil = "x EOD system \\\"touch PWNED\\\" $j << EOD `touch PWNED` @PWNED \\\\";
  g_autofree char *names = g_strdup_printf("\"model\":{\"name\":\"%s\"},\"config\":{\"name\":\"%s \u00e9\"},"
                                           "\"hardware\":{\"device\":\"%s\",\"devices\":8},", evil, evil, evil);
  g_autofree char *text = g_strdup_printf(RESULT("%s", "1", "0.0625"), names);
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "x\nEOD\nsystem \"touch PWNED\"\n$j << EOD", NULL);
  ck_assert_int_eq(g_mkdir_with_parents(dir, 0755), 0);
  g_autofree char *path = g_build_filename(dir, "x\nEOD\nsystem \"touch PWNED\"\n$j << EOD\n.json", NULL);
  ck_assert(g_file_set_contents(path, text, -1, NULL));
  g_autofree char *trace = mm_test_write("evil-trace.json", "{\"otherData\":{\"model\":{\"name\":\"m system 'touch PWNED'\"}},"
                                         "\"traceEvents\":[{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"thread_name\","
                                         "\"args\":{\"name\":\"t EOD system 'touch PWNED'\"}}, " EVENT_X "]}");
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
    assert_inert(script, data, k);
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

/* The same for the studies' inputs: strategies, a kind's column name and the inputs' file
 * names in a sweep's folder, systems' names and strategies in a what-if study. */
START_TEST(test_plot_study_names_stay_data)
{
  /* CSV fields cannot hold a comma or a line break; they may hold the rest */
  const char *csv = "point,micro_batch,x\" EOD system \"touch PWNED\" $j << EOD \\_strategy,status,fits,samples_per_s,"
                    "memory_per_device_bytes,memory_capacity_bytes\n"
                    "0,512,fsdp* EOD system \"touch PWNED\" `touch PWNED` @PWNED \\,ok,1,100,1e10,4e10\n"
                    "1,512,ddp*\" system 'touch PWNED',oom_simulated,0,300,5e10,4e10\n";
  const char *summary = "{\"inputs\":{\"model\":\"m EOD system \\\"touch PWNED\\\".json\"},"
                        "\"baseline_fsdp\":{\"point\":0,\"fits\":true},\"best\":{\"throughput\":{\"point\":0}},"
                        "\"pareto_memory_throughput\":[{\"point\":0},{\"point\":1}]}";
  g_autofree char *dir = write_sweep("sweep-evil", csv, summary);
  g_autofree char *whatif = mm_test_write(
    "evil-whatif.json",
    "{\"systems\":[{\"name\":\"base EOD system \\\"touch PWNED\\\" \\\\\",\"scale\":{\"compute\":1},\"fits\":true,"
    "\"best_strategy\":\"fsdp* `touch PWNED` @PWNED\",\"samples_per_s\":100,\"speedup\":1},"
    "{\"name\":\"x EOD\",\"scale\":{\"system('touch PWNED')\":10},\"fits\":false}],"
    "\"joint_over_product_of_singles\":2}");
  g_autofree char *out = g_build_filename(mm_test_tmpdir(), "fig.pdf", NULL);
  const struct {
    MmPlotKind kind;
    const char *input;
  } cases[] = {{MM_PLOT_RANKING, dir}, {MM_PLOT_PARETO, dir}, {MM_PLOT_WHATIF, whatif}};
  for (guint k = 0; k < G_N_ELEMENTS(cases); k++) {
    const char *inputs[] = {cases[k].input};
    g_autoptr(GError) error = NULL;
    g_autofree char *data = NULL;
    g_autofree char *script = mm_plot_script(cases[k].kind, inputs, 1, out, NULL, &data, &error);
    ck_assert_msg(script != NULL, "%u: %s", k, error ? error->message : "");
    assert_inert(script, data, k);
  }
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

/* ---- outputs --------------------------------------------------------------- */

/* The names in the test directory that start with @prefix (temporaries left behind). */
static guint leftovers(const char *prefix)
{
  g_autoptr(GDir) d = g_dir_open(mm_test_tmpdir(), 0, NULL);
  guint n = 0;
  for (const char *nm; (nm = g_dir_read_name(d));) n += g_str_has_prefix(nm, prefix);
  return n;
}

static char *slurp(const char *path)
{
  char *text = NULL;
  ck_assert_msg(g_file_get_contents(path, &text, NULL, NULL), "cannot read %s", path);
  return text;
}

/* A regular file is replaced whole and keeps its permissions; a new one appears; a symlink
 * stays a link and the file it leads to gets the content. */
START_TEST(test_outputs_files_and_links)
{
  g_autofree char *old = mm_test_write("out-old.txt", "old");
  ck_assert_int_eq(g_chmod(old, 0640), 0);
  g_autofree char *fresh = g_build_filename(mm_test_tmpdir(), "out-new.txt", NULL);
  g_autofree char *real = mm_test_write("out-real.txt", "old");
  g_autofree char *link = g_build_filename(mm_test_tmpdir(), "out-link.txt", NULL);
  ck_assert_int_eq(symlink("out-real.txt", link), 0);
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add(outs, "--a", old, g_strdup("A"), 1);
  mm_outputs_add(outs, "--b", fresh, g_strdup("B"), 1);
  mm_outputs_add(outs, "--c", link, g_strdup("C"), 1);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_outputs_commit(outs, &error), "%s", error ? error->message : "");
  g_autofree char *a = slurp(old), *b = slurp(fresh), *c = slurp(real);
  ck_assert_str_eq(a, "A");
  ck_assert_str_eq(b, "B");
  ck_assert_str_eq(c, "C");
  GStatBuf st;
  ck_assert_int_eq(g_stat(old, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0640);
  ck_assert_int_eq(g_lstat(link, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  ck_assert_uint_eq(leftovers(".out-"), 0);
}
END_TEST

/* A character device (a private /dev/null) is written in place, not replaced by a file. */
START_TEST(test_outputs_device)
{
  g_autofree char *dev = g_build_filename(mm_test_tmpdir(), "out-null", NULL);
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) return; /* not root: nothing to check */
  int fd = g_open(dev, O_WRONLY, 0);
  if (fd < 0) return; /* a nodev mount */
  close(fd);
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add(outs, "--json", dev, g_strdup("{}\n"), 3);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_outputs_commit(outs, &error), "%s", error ? error->message : "");
  GStatBuf st;
  ck_assert_int_eq(g_lstat(dev, &st), 0);
  ck_assert_msg(S_ISCHR(st.st_mode), "the device was replaced");
  ck_assert_uint_eq(leftovers(".out-null"), 0);
}
END_TEST

/* A FIFO gets the content through itself and stays a FIFO; so does a staged file (what
 * gnuplot writes) sent to one. */
START_TEST(test_outputs_fifo)
{
  g_autofree char *fifo = g_build_filename(mm_test_tmpdir(), "out-fifo", NULL);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  for (int staged = 0; staged < 2; staged++) {
    int reader = mm_test_fifo_reader(fifo);
    g_autoptr(MmOutputs) outs = mm_outputs_new();
    g_autoptr(GError) error = NULL;
    if (staged) {
      const char *tmp = mm_outputs_stage_file(outs, "--out", fifo, &error);
      ck_assert_msg(tmp != NULL, "%s", error ? error->message : "");
      ck_assert(g_file_set_contents(tmp, "through a FIFO", -1, NULL));
    } else {
      mm_outputs_add(outs, "--json", fifo, g_strdup("through a FIFO"), 14);
    }
    ck_assert_msg(mm_outputs_commit(outs, &error), "%s", error ? error->message : "");
    g_autofree char *got = mm_test_fifo_drain(reader);
    ck_assert_str_eq(got, "through a FIFO");
    GStatBuf st;
    ck_assert_int_eq(g_lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
  }
}
END_TEST

/* A file an external program writes: a temporary beside the target until the commit. */
START_TEST(test_outputs_staged)
{
  g_autofree char *fig = g_build_filename(mm_test_tmpdir(), "out-fig.png", NULL);
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  g_autoptr(GError) error = NULL;
  const char *tmp = mm_outputs_stage_file(outs, "--out", fig, &error);
  ck_assert_ptr_nonnull(tmp);
  g_autofree char *dir = g_path_get_dirname(tmp);
  ck_assert_str_eq(dir, mm_test_tmpdir());
  ck_assert(g_file_set_contents(tmp, "PNG", -1, NULL));
  ck_assert(!g_file_test(fig, G_FILE_TEST_EXISTS));
  ck_assert(mm_outputs_commit(outs, &error));
  g_autofree char *got = slurp(fig);
  ck_assert_str_eq(got, "PNG");
  ck_assert_uint_eq(leftovers(".out-fig"), 0);
  /* not committed: nothing appears, the temporary goes */
  g_autofree char *gone = g_build_filename(mm_test_tmpdir(), "out-gone.png", NULL);
  MmOutputs *dropped = mm_outputs_new();
  ck_assert_ptr_nonnull(mm_outputs_stage_file(dropped, "--out", gone, &error));
  mm_outputs_free(dropped);
  ck_assert(!g_file_test(gone, G_FILE_TEST_EXISTS));
  ck_assert_uint_eq(leftovers(".out-gone"), 0);
}
END_TEST

/* One output that cannot be written: none is, nothing is left, and the message names the
 * option and the path as given (not a temporary's name). */
static const struct {
  const char *name;  /* under the test directory; "-" as is */
  const char *setup; /* "dir", "dangling", "" */
  const char *msg;
} bad_outputs[] = {
  {"no-such-dir/x.json", "", "No such file or directory"},
  {"out-dir", "dir", "is a directory"},
  {"out-dangling", "dangling", "symbolic link to a missing file"},
  {"", "", "expected a file name"},
};

START_TEST(test_outputs_failure_writes_nothing)
{
  const char *name = bad_outputs[_i].name;
  g_autofree char *bad = *name ? g_build_filename(mm_test_tmpdir(), name, NULL) : g_strdup("");
  if (strcmp(bad_outputs[_i].setup, "dir") == 0) g_mkdir(bad, 0755);
  if (strcmp(bad_outputs[_i].setup, "dangling") == 0) ck_assert_int_eq(symlink("missing", bad), 0);
  g_autofree char *good = g_build_filename(mm_test_tmpdir(), "out-good.json", NULL);
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add(outs, "--json", good, g_strdup("{}"), 2);
  mm_outputs_add(outs, "--trace", bad, g_strdup("{}"), 2);
  g_autoptr(GError) error = NULL;
  ck_assert(!mm_outputs_commit(outs, &error));
  ck_assert(g_error_matches(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO));
  g_autofree char *want = g_strdup_printf("--trace %s: ", *name ? bad : "''");
  ck_assert_msg(g_str_has_prefix(error->message, want), "%s", error->message);
  ck_assert_msg(strstr(error->message, bad_outputs[_i].msg), "%s", error->message);
  ck_assert_msg(!strstr(error->message, "XXXXXX") && !strstr(error->message, "/."), "%s", error->message);
  ck_assert(!g_file_test(good, G_FILE_TEST_EXISTS));
  ck_assert_uint_eq(leftovers(".out-good"), 0);
  if (strcmp(bad_outputs[_i].setup, "dir") == 0) g_rmdir(bad);
}
END_TEST

/* Two outputs on one destination would overwrite each other. */
START_TEST(test_outputs_same_destination)
{
  g_autofree char *p = g_build_filename(mm_test_tmpdir(), "out-same.json", NULL);
  static const char *const pairs[][2] = {{"-", "-"}, {NULL, NULL}};
  for (guint i = 0; i < G_N_ELEMENTS(pairs); i++) {
    g_autoptr(MmOutputs) outs = mm_outputs_new();
    mm_outputs_add(outs, "--json", pairs[i][0] ? pairs[i][0] : p, g_strdup("a"), 1);
    mm_outputs_add(outs, "--trace", pairs[i][1] ? pairs[i][1] : p, g_strdup("b"), 1);
    g_autoptr(GError) error = NULL;
    ck_assert(!mm_outputs_commit(outs, &error));
    ck_assert_msg(strstr(error->message, "same place"), "%s", error->message);
  }
  ck_assert(!g_file_test(p, G_FILE_TEST_EXISTS));
}
END_TEST


static Suite *report_suite(void)
{
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_loop_test(tc, test_bad_plot_input, 0, (int)G_N_ELEMENTS(bad_inputs));
  tcase_add_test(tc, test_bad_plot_directory);
  tcase_add_loop_test(tc, test_bad_plot_sweep, 0, (int)G_N_ELEMENTS(bad_sweeps));
  tcase_add_test(tc, test_plot_sweep_paths);
  tcase_add_test(tc, test_plot_sweep_shapes);
  tcase_add_test(tc, test_plot_names_stay_data);
  tcase_add_test(tc, test_plot_study_names_stay_data);
  tcase_add_test(tc, test_plot_sizes);
  suite_add_tcase(s, tc);
  TCase *out = tcase_create("outputs");
  tcase_add_test(out, test_outputs_files_and_links);
  tcase_add_test(out, test_outputs_device);
  tcase_add_test(out, test_outputs_fifo);
  tcase_add_test(out, test_outputs_staged);
  tcase_add_loop_test(out, test_outputs_failure_writes_nothing, 0, (int)G_N_ELEMENTS(bad_outputs));
  tcase_add_test(out, test_outputs_same_destination);
  suite_add_tcase(s, out);
  return s;
}

int main(void)
{
  return mm_test_main(report_suite());
}
