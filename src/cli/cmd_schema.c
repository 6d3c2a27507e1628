/* cmd_schema: `madmax schema` prints the input-file reference generated from the schema tables. */
#include <stdio.h>

#include "cli.h"
#include "config/config.h"
#include "sweep/sweep.h"

int mm_cmd_schema(int argc, char **argv)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new("- print the reference of every input file");
  g_option_context_set_description(ctx, "The output is docs/SCHEMA.md; a test keeps the two equal.\n");
  if (!mm_cli_parse(ctx, &argc, &argv)) return MM_EXIT_INPUT;
  if (argc > 1) {
    fprintf(stderr, "madmax: unexpected argument '%s'\nTry 'madmax schema --help'.\n", argv[1]);
    return MM_EXIT_INPUT;
  }
  mm_config_write_schema_markdown(stdout);
  mm_sweep_space_write_schema(stdout);
  return MM_EXIT_OK;
}
