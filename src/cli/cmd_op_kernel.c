/* cmd_op_kernel: `madmax op` for fused kernels (in progress). */
#include <stdio.h>

#include "cli.h"

int mm_cmd_op_kernel(int argc, char **argv)
{
  (void)argc;
  fprintf(stderr, "madmax: %s: not built yet\n", argv[0]);
  return MM_EXIT_INPUT;
}
