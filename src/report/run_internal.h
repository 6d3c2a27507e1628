/* run internals shared by run.c and steady.c (not a public header). */
#pragma once

#include "report.h"

/* Serialized sums and busy unions of the compute and communication streams of class @c, added
 * to @r (each sum formed from 0 in op order, then added once: the callers pass @r zeroed); with @win ([win[0], win[1]) ps) only the parts of ops inside it, and the ops that start
 * in it counted (fused groups are not accounted then). */
void mm__class_spans(const MmPlan *p, const MmEngine *e, uint32_t c, const MmTime *win, MmRunMetrics *r);
/* mm__class_spans of ops [@from, @to) only, their times @t0, @t1 (the whole class's, by op): with
 * @win, the ops that run in it must all be among them; without, from 0 to all. */
void mm__class_spans_of(const MmPlan *p, uint32_t c, const MmTime *t0, const MmTime *t1, uint32_t from, uint32_t to,
                        const MmTime *win, MmRunMetrics *r);

/* The figures derived from @r's iteration time and busy times: idle, bubble, exposed fraction,
 * throughput, MFU. */
void mm__run_derived(const MmPlan *p, MmRunMetrics *r);
