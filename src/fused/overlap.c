/* overlap: (in progress) */
#include "fused.h"
int mm__fused_overlap_placeholder(void);
int mm__fused_overlap_placeholder(void) { return 0; }
