/* main: the madmax command line; dispatches to one file per subcommand. */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config/config.h"
#include "report/report.h"
#include "calib/calib.h"
#include "validate/validate.h"
#include "sweep/sweep.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
  {"run", mm_cmd_run, "simulate one iteration: time, throughput, MFU, exposed communication, memory"},
  {"describe", mm_cmd_describe, "per-layer costs and, with hardware + config, per-device memory"},
  {"op", mm_cmd_op, "one operation alone: a collective on a system, sparse gradient synchronization"},
  {"sweep", mm_cmd_sweep, "rank every valid parallelization of a model on a system (points.csv, summary.json)"},
  {"whatif", mm_cmd_whatif, "scale hardware components, re-optimize the strategy, report speedups"},
  {"calibrate", mm_cmd_calibrate, "measure kernels (CPU, GPU harness) or read measurements, fit efficiency, write a device"},
  {"validate", mm_cmd_validate, "predicted vs measured on published runs (configs/validation/)"},
  {"plot", mm_cmd_plot, "gnuplot figures: a run's timeline (trace), iteration breakdowns (results)"},
  {"schema", mm_cmd_schema, "print the reference of every input file (docs/SCHEMA.md)"},
};

static void usage(FILE *out)
{
  fprintf(out,
          "madmax %s: performance model of distributed ML training and inference\n\n"
          "usage: madmax COMMAND [OPTIONS]   (madmax COMMAND --help for its options)\n\ncommands:\n",
          MM_VERSION);
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\ninputs: models/*.json (layer blocks), hardware/*.json (systems; devices in hardware/devices/),\n"
          "        configs/*.json (task + parallelism). docs/SCHEMA.md lists every key.\n"
          "example: madmax run --model models/llama2-70b.json \\\n"
          "           --hardware hardware/dgx-a100-2048.json --config configs/llm-pretrain-tp-fsdp.json\n"
          "exit codes: 0 ok, 1 bad input, 2 internal error\n");
}

gboolean mm_cli_parse(GOptionContext *ctx, int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(ctx, argc, argv, &error)) {
    g_autofree char *msg = mm_config_printable(error->message); /* it quotes the arguments */
    fprintf(stderr, "madmax: %s\nTry '%s --help'.\n", msg, (*argv)[0]);
    return FALSE;
  }
  return TRUE;
}

/* Exit code per error: a domain and one of its codes (-1: every code); the first row that
 * matches wins. Input files, options and output paths are the user's (1); anything not
 * listed (an engine invariant) is internal (2). */
static const struct {
  GQuark (*domain)(void);
  int code;
  int exit;
} exit_codes[] = {
  {mm_report_error_quark, MM_REPORT_ERROR_TOOL, MM_EXIT_INTERNAL}, /* gnuplot missing or failed */
  {mm_config_error_quark, -1, MM_EXIT_INPUT},   /* model, hardware, config files */
  {mm_validate_error_quark, -1, MM_EXIT_INPUT}, /* validation cases files */
  {mm_calib_error_quark, MM_CALIB_ERROR_BACKEND, MM_EXIT_INTERNAL}, /* a measuring backend failed */
  {mm_calib_error_quark, -1, MM_EXIT_INPUT},    /* measurement files, too few to fit */
  {mm_report_error_quark, -1, MM_EXIT_INPUT},   /* traces and results given to plot; outputs */
  {g_option_error_quark, -1, MM_EXIT_INPUT},
  {g_file_error_quark, -1, MM_EXIT_INPUT},
};

int mm_cli_fail(const GError *error)
{
  /* messages quote paths and values: control characters are shown, never sent to the terminal */
  g_autofree char *msg = mm_config_printable(error->message);
  fprintf(stderr, "madmax: %s\n", msg);
  for (guint i = 0; i < G_N_ELEMENTS(exit_codes); i++)
    if (error->domain == exit_codes[i].domain() && (exit_codes[i].code < 0 || error->code == exit_codes[i].code))
      return exit_codes[i].exit;
  return MM_EXIT_INTERNAL;
}

int main(int argc, char **argv)
{
  setlocale(LC_ALL, "C"); /* numbers in JSON and tables never use a locale's decimal comma */
  mm_simulation_tune_allocator();
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? MM_EXIT_INPUT : MM_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("madmax %s\n", MM_VERSION);
    return MM_EXIT_OK;
  }
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
    if (strcmp(argv[1], commands[i].name) == 0) {
      g_autofree char *name = g_strdup_printf("madmax %s", commands[i].name);
      char **sub = g_new0(char *, (gsize)argc);
      sub[0] = name;
      for (int k = 2; k < argc; k++) sub[k - 1] = argv[k];
      int rc = commands[i].run(argc - 1, sub);
      g_free(sub);
      return rc;
    }
  }
  fprintf(stderr, "madmax: unknown command '%s'\nTry 'madmax --help'.\n", argv[1]);
  return MM_EXIT_INPUT;
}
