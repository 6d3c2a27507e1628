/* check_fused_overlap: decomposed compute-communication overlap (shard overlap, FiCCO,
 * collective matmul) in the event engine. */
#include <math.h>
#include <string.h>

#include "fused/fused.h"
#include "testutil.h"

/* A GEMM flow (SMs + HBM) beside a DMA copy (HBM + a link): the copy slows the GEMM only when
 * their HBM traffic together passes the HBM's capacity (contention comes out of the sharing). */
START_TEST(test_prog_sharing)
{
  for (int heavy = 0; heavy <= 1; heavy++) {
    MmFusedProg p;
    mm_fused_prog_init(&p, 2);
    /* resources: 0 a link (1 byte/ps), 1 SMs (1/ps), 2 HBM (2 bytes/ps) */
    const double cap[3] = {1.0, 1.0, 2.0};
    const uint32_t gres[2] = {1, 2}, cres[2] = {0, 2};
    const double gwork[2] = {1000.0, heavy ? 1800.0 : 500.0}; /* 1000 ps alone */
    const double cwork[2] = {1000.0, 1000.0};                 /* 1000 ps alone, 1 byte/ps of HBM */
    const uint32_t gemm = mm_fused_prog_op(&p, 0, 0, NULL, 0, gres, gwork, 2);
    const uint32_t copy = mm_fused_prog_op(&p, 1, 0, NULL, 0, cres, cwork, 2);
    MmEngineProgram prog = mm_fused_prog_view(&p, 3);
    MmEngineClass cls = {0, (const MmTime *)(void *)p.dur->data, 0, cap};
    g_autoptr(GError) error = NULL;
    g_autoptr(MmEngine) e = mm_engine_new(&prog, 1, &cls, 1, &error);
    ck_assert_msg(e, "%s", error ? error->message : "");
    ck_assert(mm_engine_run(e, &error));
    const MmTime g = mm_engine_op_end(e, 0, gemm), c = mm_engine_op_end(e, 0, copy);
    if (!heavy) {
      ck_assert_uint_eq(g, 1000); /* 0.5 + 1 bytes/ps of HBM fit in 2 */
      ck_assert_uint_eq(c, 1000);
    } else {
      /* 1.8 + 1 do not: max-min fair shares give the copy the 1 byte/ps it can use and the GEMM
       * the other 1, so the GEMM runs at 1/1.8 until the copy ends, then alone: 1000 + 445 */
      ck_assert_uint_eq(c, 1000);
      ck_assert_uint_ge(g, 1443);
      ck_assert_uint_le(g, 1446);
    }
    mm_fused_prog_clear(&p);
  }
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("fused_overlap");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_prog_sharing);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(suite()); }
