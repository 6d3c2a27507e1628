/* cli: subcommands of the madmax program (private to src/cli). */
#pragma once

#include <glib.h>

#include "plan/plan.h"
#include "sweep/sweep.h"

/* Exit codes of the command-line contract (DESIGN.md). */
enum { MM_EXIT_OK = 0, MM_EXIT_INPUT = 1, MM_EXIT_INTERNAL = 2 };

/* Each subcommand gets argv with argv[0] = "madmax SUBCOMMAND". */
int mm_cmd_describe(int argc, char **argv);
int mm_cmd_schema(int argc, char **argv);

int mm_cmd_run(int argc, char **argv);
int mm_cmd_validate(int argc, char **argv);
int mm_cmd_op(int argc, char **argv);
/* madmax op emb-a2a | gemv-ar | gemm-a2a (cmd_op_kernel.c); ag-gemm | gemm-rs (cmd_op_overlap.c):
 * argv[0] is "madmax op KIND" */
int mm_cmd_op_kernel(int argc, char **argv);
int mm_cmd_op_overlap(int argc, char **argv);
int mm_cmd_plot(int argc, char **argv);
int mm_cmd_sweep(int argc, char **argv);
int mm_cmd_whatif(int argc, char **argv);
int mm_cmd_calibrate(int argc, char **argv);

/* The input options every simulating command takes. */
typedef struct {
  char *model, *hardware, *config;
  gint64 nodes;
  GPtrArray *hardware_list; /* set by the command before parsing (sweep): every --hardware, in order */
} MmInputPaths;

/* Adds --model/-m, --hardware/-H, --config/-c and --nodes/-n to @ctx's main group (call it
 * before adding the command's own entries). Empty file names and --nodes < 1 are option errors. */
void mm_cli_add_input_options(GOptionContext *ctx, MmInputPaths *paths);

/* The loaded inputs of a command (each may be NULL when not asked for). */
typedef struct {
  MmModel *model;
  MmHardware *hardware;
  MmParallelConfig *config;
  MmScenario *scenario;
} MmCliInputs;

/* Loads the model, and with @hardware the system (resized to @nodes when > 0), the
 * config and their scenario. On failure @in holds what loaded; clear it. */
gboolean mm_cli_inputs_load(MmCliInputs *in, const char *model, const char *hardware, const char *config, int64_t nodes,
                        GError **error);
void mm_cli_inputs_clear(MmCliInputs *in);

/* Parses @text, the value of @option, as an integer in [@min, @max] (strictly: no sign
 * where none is allowed, no trailing text); a G_OPTION_ERROR naming the option otherwise. */
gboolean mm_cli_parse_int(const char *option, const char *text, gint64 min, gint64 max, gint64 *out, GError **error);

/* The inputs of a study command (sweep, whatif): the three files, resized to --nodes, and the
 * sweep space (@space NULL: the default). FALSE with @error set on bad input. */
gboolean mm_cli_study_load(const MmInputPaths *paths, const char *space, MmInputs **in, MmSweepSpace **sp,
                           GError **error);

/* mm_outputs_check of @outputs against @inputs and the files each system among them (option
 * "--hardware") names: its device file, its networks' fit files (mm_hardware_list_files), labelled
 * "--hardware's device" and so on. A system that does not load adds none (the command's own load
 * reports why). */
gboolean mm_cli_outputs_check(const MmPathArg *outputs, const MmPathArg *inputs, GError **error);

/* Parses options; on failure prints the error and "Try --help" and returns FALSE. */
gboolean mm_cli_parse(GOptionContext *ctx, int *argc, char ***argv);

/* Prints "madmax: MESSAGE" and maps the error to an exit code: bad input (model, hardware,
 * config, validation cases, plot inputs, options, output paths) -> 1, anything else -> 2. */
int mm_cli_fail(const GError *error);
