/* cmd_validate: `madmax validate`: predicted vs measured on the project's validation cases. */
#include <stdio.h>

#include "cli.h"
#include "report/report.h"
#include "validate/validate.h"

/* A default cases file: in the working directory, else in the source tree madmax was built from. */
static char *default_cases(const char *rel)
{
  if (g_file_test(rel, G_FILE_TEST_IS_REGULAR)) return g_strdup(rel);
  return g_build_filename(MM_DATA_DIR, rel, NULL);
}

int mm_cmd_validate(int argc, char **argv)
{
  g_autofree char *json_path = NULL;
  gboolean markdown = FALSE, calibrated = FALSE;
  GOptionEntry entries[] = {
    {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Write the table as JSON to OUT ('-' = stdout)", "OUT"},
    {"markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "Print a Markdown table (the README's)", NULL},
    {"calibrated", 0, 0, G_OPTION_ARG_NONE, &calibrated,
     "Use each device's calibrated file (devices/X-calibrated.json, from madmax calibrate) where one exists", NULL},
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("[CASES.json] - compare predictions with published measurements");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx,
    "Runs every case of a validation file (default: configs/validation/training.json, end-to-end\n"
    "training runs; configs/validation/inference.json, serving latencies; then\n"
    "configs/validation/collectives.json, collective bandwidth curves; configs/validation/overlap.json,\n"
    "GEMM + collective kernels serial and overlapped): each names a\n"
    "model, a system and node count, a config, and a value a publication measured (iteration time,\n"
    "tokens/s per GPU, TFLOP/s per GPU in the source's own FLOP count, ...). Prints measured,\n"
    "predicted and the error of each, then the median, 90th percentile and worst absolute error.\n"
    "Every case on a platform uses that platform's one hardware file: nothing is tuned per case.\n"
    "The measurements the current features cannot express are listed with the reason.");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (argc > 2) {
    fprintf(stderr, "madmax: one cases file at most\nTry 'madmax validate --help'.\n");
    return MM_EXIT_INPUT;
  }
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  if (argc == 2) {
    g_ptr_array_add(paths, g_strdup(argv[1]));
  } else {
    g_ptr_array_add(paths, default_cases("configs/validation/training.json"));
    g_ptr_array_add(paths, default_cases("configs/validation/inference.json"));
    g_ptr_array_add(paths, default_cases("configs/validation/collectives.json"));
    g_ptr_array_add(paths, default_cases("configs/validation/overlap.json"));
  }
  g_autoptr(GError) error = NULL;
  const MmPathArg outputs[] = {{"--json", json_path}, {NULL, NULL}};
  g_autoptr(GArray) inputs = g_array_new(TRUE, TRUE, sizeof(MmPathArg)); /* the cases files */
  for (guint i = 0; i < paths->len; i++) g_array_append_val(inputs, ((MmPathArg){"CASES.json", g_ptr_array_index(paths, i)}));
  /* and the files the cases name: their models, systems (and the files those name), configs */
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free), files = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; json_path && i < paths->len; i++)
    mm_validation_inputs(g_ptr_array_index(paths, i), calibrated, labels, files);
  for (guint i = 0; i < files->len; i++)
    g_array_append_val(inputs, ((MmPathArg){g_ptr_array_index(labels, i), g_ptr_array_index(files, i)}));
  if (!mm_outputs_check(outputs, (const MmPathArg *)(void *)inputs->data, &error)) return mm_cli_fail(error);
  g_autoptr(cJSON) all = cJSON_CreateArray();
  for (guint i = 0; i < paths->len; i++) {
    g_autoptr(MmValidation) v = mm_validation_run_calibrated(g_ptr_array_index(paths, i), calibrated, &error);
    if (!v) return mm_cli_fail(error);
    cJSON_AddItemToArray(all, mm_validation_json(v));
    if (!json_path || g_strcmp0(json_path, "-") != 0) {
      if (i > 0) printf("\n");
      mm_validation_text(stdout, v, markdown);
    }
  }
  if (json_path) {
    /* one file: its document; several: {"validations": [...]} */
    cJSON *doc = paths->len == 1 ? cJSON_DetachItemFromArray(all, 0) : NULL;
    if (!doc) {
      doc = cJSON_CreateObject();
      cJSON_AddItemToObject(doc, "validations", cJSON_Duplicate(all, TRUE));
    }
    g_autoptr(cJSON) owned = doc;
    g_autoptr(MmOutputs) outs = mm_outputs_new();
    mm_outputs_add_json(outs, "--json", json_path, owned);
    if (!mm_outputs_commit(outs, &error)) return mm_cli_fail(error);
  }
  return MM_EXIT_OK;
}
