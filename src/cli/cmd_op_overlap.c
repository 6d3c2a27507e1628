/* cmd_op_overlap: `madmax op` for decomposed overlap (in progress). */
#include <stdio.h>

#include "cli.h"

int mm_cmd_op_overlap(int argc, char **argv)
{
  (void)argc;
  fprintf(stderr, "madmax: %s: not built yet\n", argv[0]);
  return MM_EXIT_INPUT;
}
