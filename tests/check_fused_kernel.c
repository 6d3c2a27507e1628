/* check_fused_kernel: fused compute-collective kernels (slice puts) and the device coefficients
 * they read. */
#include <math.h>
#include <string.h>

#include "fused/fused.h"
#include "testutil.h"

#define DEV_HEAD "{\"name\": \"d\", \"peak_tflops\": {\"bf16\": 100}, \"hbm_GiB\": 16, \"hbm_bw_GBps\": 1000, " \
                 "\"utilization\": {\"gemm\": {\"value\": 0.5, \"provenance\": \"estimate\"}, " \
                 "\"hbm\": {\"value\": 0.8, \"provenance\": \"estimate\"}}"

static gboolean parse_dev(const char *text, MmDevice *d, GError **error)
{
  return mm_device_parse("dev.json", text, strlen(text), d, error);
}

/* Absent coefficients take their defaults, with the default's source; given ones are read with
 * theirs; unknown keys and out-of-range values name the file and JSON path. */
START_TEST(test_fused_coefficients)
{
  g_auto(MmDevice) d = {0};
  g_autoptr(GError) error = NULL;
  ck_assert_msg(parse_dev(DEV_HEAD "}", &d, &error), "%s", error ? error->message : "");
  ck_assert_double_eq(d.fused.compute_units.value, 104);
  ck_assert_ptr_nonnull(d.fused.compute_units.source);
  mm_device_clear(&d);

  ck_assert(parse_dev(DEV_HEAD ", \"fused\": {\"compute_units\": {\"value\": 304, \"provenance\": \"datasheet\", "
                      "\"source\": \"MI300X\"}}}", &d, &error));
  ck_assert_double_eq(d.fused.compute_units.value, 304);
  ck_assert_str_eq(d.fused.compute_units.source, "MI300X");
  mm_device_clear(&d);

  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": {\"cus\": 3}}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "dev.json: $.fused.cus"));
  g_clear_error(&error);
  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": {\"compute_units\": {\"value\": -1, \"provenance\": \"paper\", "
                       "\"source\": \"x\"}}}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "$.fused.compute_units.value"));
  g_clear_error(&error);
  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": 3}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "$.fused"));
}
END_TEST

/* The resources: links as src/comm gives them, then SMs (one unit per ps) and HBM at the
 * achievable bandwidth. */
START_TEST(test_resources)
{
  g_autofree char *path = mm_test_src("hardware/mi210-4.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(path, &error);
  ck_assert_msg(hw, "%s", error ? error->message : "");
  MmFusedRes r;
  mm_fused_res_init(hw, &r);
  ck_assert_uint_eq(r.links.n_intra, 3);
  ck_assert_uint_eq(r.sm, r.links.n);
  ck_assert_uint_eq(r.n, r.links.n + 2);
  ck_assert_double_eq(r.cap[r.sm], 1.0);
  ck_assert_double_eq_tol(r.cap[r.hbm], hw->device.hbm_bw_Bps * hw->device.util_hbm.value / 1e12, 1e-12);
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("fused_kernel");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fused_coefficients);
  tcase_add_test(tc, test_resources);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(suite()); }
