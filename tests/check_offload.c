/* check_offload: optimizer offload to the host (memory, copies, CPU step) and HBM-size device variants. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* bf16 dense layers of 1024 x 1024 without activation: P = 1024^2 parameters each. */
#define P1 (1024.0 * 1024.0)
static const char *const mlp1 = "{\"name\":\"mlp\",\"blocks\":[{\"kind\":\"mlp\",\"count\":1,\"width\":1024,\"activation\":false}]}";
static const char *const mlp2 = "{\"name\":\"mlp\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":1024,\"activation\":false}]}";

/* One GPU per node, one node: no collective, so nothing but the backward can hide the copies. */
static char *one_gpu(const char *device, double link_GBps, double mem_GBps)
{
  g_autofree char *dev = mm_test_src(device);
  return g_strdup_printf("{\"name\":\"one\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":1,"
                         "\"host_link_GBps\":%g,\"host_link_efficiency\":1,\"host_mem_GBps\":%g,"
                         "\"host_mem_efficiency\":1}",
                         dev, link_GBps, mem_GBps);
}

static char *cfg(const char *offload, const char *levels)
{
  return g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,"
                         "\"optimizer\":{\"kind\":\"adam\",\"offload\":\"%s\"},\"parallelism\":{\"default\":%s}}",
                         offload, levels);
}

/* Adam with fp32 states and master weights on bf16 weights: 2 x 4 + 4 = 12 bytes per parameter. */
START_TEST(test_memory_drops_by_states_and_master)
{
  static const char *const levels[] = {
    "[{\"strategy\":\"ddp\",\"degree\":8}]",            /* replicated: every rank holds all */
    "[{\"strategy\":\"ddp\",\"degree\":8,\"zero\":2}]", /* ZeRO-2: 1/8 each */
    "[{\"strategy\":\"fsdp\",\"degree\":8}]",           /* FSDP: 1/8 each */
  };
  static const double shards[] = {1, 8, 8};
  g_autofree char *hw = mm_test_node8();
  for (guint i = 0; i < G_N_ELEMENTS(levels); i++) {
    g_autofree char *on = cfg("cpu", levels[i]), *off = cfg("none", levels[i]);
    g_autoptr(MmSimulation) a = mm_test_sim_ok(mlp2, hw, off, 0);
    g_autoptr(MmSimulation) b = mm_test_sim_ok(mlp2, hw, on, 0);
    const double states = 2 * P1 * 12 / shards[i];
    ck_assert_double_eq_tol(a->memory->total.optimizer, states, 0.5);
    ck_assert_double_eq(b->memory->total.optimizer, 0);
    ck_assert_double_eq_tol(a->memory->per_device_bytes - b->memory->per_device_bytes, states, 0.5);
    ck_assert_double_eq(a->memory->total.gradients, b->memory->total.gradients); /* gradients stay */
    ck_assert_double_eq(a->memory->host_bytes, 0);
    ck_assert_double_eq_tol(b->memory->host_bytes, states, 0.5);
  }
}
END_TEST

/* One layer on one GPU: its gradient goes to the host after its backward (nothing left to
 * hide the copy), the CPU step follows, then the weights come back. The device's own step
 * disappears and the forward and backward are unchanged, so
 *   T(offload) = T(device step) - device step + D2H + CPU step + H2D. */
START_TEST(test_exposed_copy_and_cpu_step)
{
  g_autofree char *hw = one_gpu("hardware/devices/a100-80gb.json", 10, 100);
  g_autofree char *off = cfg("none", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autofree char *on = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(mlp1, hw, off, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(mlp1, hw, on, 0);
  const double d2h = P1 * 2 / 10e9;                      /* bf16 gradients at 10 GB/s */
  const double h2d = P1 * 2 / 10e9;                      /* bf16 weights back */
  const double step = P1 * (2 * 2 + 2 + 2 * 12) / 100e9; /* weights r+w, gradient, states + master r+w */
  const double gpu_step = a->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER];
  ck_assert_double_gt(gpu_step, 0);
  ck_assert_double_eq(b->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER], 0);
  ck_assert_double_eq_tol(b->metrics.iteration_time_s, a->metrics.iteration_time_s - gpu_step + d2h + step + h2d, 1e-9);
  ck_assert_double_eq_tol(b->metrics.host_copy_s, d2h + h2d, 1e-9);
  ck_assert_double_eq_tol(b->metrics.host_step_s, step, 1e-9);
  ck_assert_double_eq_tol(b->metrics.host_exposed_s, d2h + step + h2d, 1e-9);
  /* the device computes the same forward and backward */
  ck_assert_double_eq_tol(b->metrics.compute_s, a->metrics.compute_s - gpu_step, 1e-9);
}
END_TEST

/* Halving the host link adds exactly the copies' time again (both cross the link alone). */
START_TEST(test_slower_host_link_is_slower)
{
  g_autofree char *fast = one_gpu("hardware/devices/a100-80gb.json", 10, 100);
  g_autofree char *slow = one_gpu("hardware/devices/a100-80gb.json", 5, 100);
  g_autofree char *on = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autofree char *off = cfg("none", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(mlp1, fast, on, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(mlp1, slow, on, 0);
  ck_assert_double_eq_tol(b->metrics.iteration_time_s - a->metrics.iteration_time_s, 2 * P1 * 2 / 10e9, 1e-9);
  /* without offload the host link carries nothing */
  g_autoptr(MmSimulation) c = mm_test_sim_ok(mlp1, fast, off, 0);
  g_autoptr(MmSimulation) d = mm_test_sim_ok(mlp1, slow, off, 0);
  ck_assert_double_eq(c->metrics.iteration_time_s, d->metrics.iteration_time_s);
  /* a slower host memory slows the CPU step: 30 bytes per parameter at 50 instead of 100 GB/s */
  g_autofree char *slow_mem = one_gpu("hardware/devices/a100-80gb.json", 10, 50);
  g_autoptr(MmSimulation) e = mm_test_sim_ok(mlp1, slow_mem, on, 0);
  ck_assert_double_eq_tol(e->metrics.iteration_time_s - a->metrics.iteration_time_s, P1 * 30 / 100e9, 1e-9);
}
END_TEST

/* Two layers: the last layer's gradient copy runs during the first layer's backward. With a
 * fast link it hides there, and only the first layer's copy, the step and the weights' copy
 * are left with the device idle. */
START_TEST(test_gradient_copies_overlap_backward)
{
  g_autofree char *hw = one_gpu("hardware/devices/a100-80gb.json", 1000, 100);
  g_autofree char *on = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autoptr(MmSimulation) b = mm_test_sim_ok(mlp2, hw, on, 0);
  const double d2h = P1 * 2 / 1000e9, h2d = 2 * P1 * 2 / 1000e9, step = 2 * P1 * 30 / 100e9;
  ck_assert_double_eq_tol(b->metrics.host_copy_s, 2 * d2h + h2d, 1e-9);
  ck_assert_double_eq_tol(b->metrics.host_exposed_s, d2h + step + h2d, 1e-9);
}
END_TEST

/* ZeRO-2 over 8 GPUs: each rank copies its eighth of the reduce-scattered gradients, steps its
 * eighth on its share of the node's host memory bandwidth, copies its eighth of the weights
 * back, then all-gathers them. */
START_TEST(test_zero2_copies_the_shard)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  g_autofree char *hw = g_strdup_printf("{\"name\":\"n8\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":1,"
                                        "\"host_link_GBps\":4,\"host_link_efficiency\":1,\"host_mem_GBps\":80,"
                                        "\"host_mem_efficiency\":1,\"intra_node\":{\"topology\":\"switch\","
                                        "\"links_per_gpu\":12,\"link_bw_GBps\":25}}",
                                        dev);
  g_autofree char *on = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":8,\"zero\":2}]");
  g_autoptr(MmSimulation) b = mm_test_sim_ok(mlp2, hw, on, 0);
  ck_assert_double_eq_tol(b->metrics.host_copy_s, (2 * P1 * 2 / 8) / 4e9 * 2, 1e-9);
  ck_assert_double_eq_tol(b->metrics.host_step_s, (2 * P1 / 8) * 30 / (80e9 / 8), 1e-9);
  ck_assert_double_gt(b->metrics.comm_by_reason_s[MM_REASON_ZERO], 0); /* the gather after the copy back */
  /* every device simulated gives the same answer as one per behaviour */
  MmSimOptions pd = {.per_device = TRUE, .timeline = TRUE};
  g_autoptr(GError) err = NULL;
  g_autoptr(MmSimulation) c = mm_test_sim(mlp2, hw, on, &pd, &err);
  ck_assert_ptr_nonnull(c);
  ck_assert_double_eq(c->metrics.iteration_time_s, b->metrics.iteration_time_s);
  ck_assert_double_eq(c->metrics.host_exposed_s, b->metrics.host_exposed_s);
}
END_TEST

START_TEST(test_bad_offload_rejected)
{
  g_autofree char *hw = mm_test_node8();
  const char *sparse = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,"
                       "\"sparse_optimizer\":{\"kind\":\"rowwise_adagrad\",\"offload\":\"cpu\"},"
                       "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  g_autoptr(GError) err = NULL;
  g_autoptr(MmSimulation) x = mm_test_sim(mlp2, hw, sparse, NULL, &err);
  ck_assert_ptr_null(x);
  ck_assert_int_eq(err->code, MM_CONFIG_ERROR_INCONSISTENT);
  ck_assert_ptr_nonnull(strstr(err->message, "$.sparse_optimizer.offload"));
  g_autofree char *gpu = cfg("gpu", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(GError) err2 = NULL;
  g_autoptr(MmSimulation) y = mm_test_sim(mlp2, hw, gpu, NULL, &err2);
  ck_assert_ptr_null(y);
  ck_assert_int_eq(err2->code, MM_CONFIG_ERROR_UNKNOWN_VALUE);
  ck_assert_ptr_nonnull(strstr(err2->message, "$.optimizer.offload"));
  /* the host's memory bandwidth must be positive */
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  g_autofree char *bad = g_strdup_printf("{\"name\":\"one\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":1,"
                                         "\"host_mem_GBps\":0}",
                                         dev);
  g_autofree char *ok = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autoptr(GError) err3 = NULL;
  g_autoptr(MmSimulation) z = mm_test_sim(mlp2, bad, ok, NULL, &err3);
  ck_assert_ptr_null(z);
  ck_assert_int_eq(err3->code, MM_CONFIG_ERROR_RANGE);
  ck_assert_ptr_nonnull(strstr(err3->message, "$.host_mem_GBps"));
}
END_TEST

/* 80 bf16 layers of 8192 x 8192 on one GPU: 16 bytes per parameter (weights 2, gradients 2,
 * Adam 12) make 16 x 80 x 2^26 = 80 GiB, plus one sample's activations (each layer keeps its
 * 8192-wide bf16 input): over H100 SXM's 80 GiB, inside H100 NVL's 94 GB (87.5 GiB); with the
 * optimizer offloaded it fits on 80 GiB too. */
START_TEST(test_hbm_variant_changes_fit)
{
  const char *model = "{\"name\":\"big\",\"blocks\":[{\"kind\":\"mlp\",\"count\":80,\"width\":8192,\"activation\":false}]}";
  const char *c = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1,"
                  "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":1}]}}";
  const char *c_off = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1,\"optimizer\":{\"kind\":\"adam\","
                      "\"offload\":\"cpu\"},\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":1}]}}";
  g_autofree char *sxm = one_gpu("hardware/devices/h100-sxm.json", 32, 614.4);
  g_autofree char *nvl = one_gpu("hardware/devices/h100-nvl.json", 32, 614.4);
  g_autoptr(MmSimulation) a = mm_test_sim_ok(model, sxm, c, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(model, nvl, c, 0);
  g_autoptr(MmSimulation) o = mm_test_sim_ok(model, sxm, c_off, 0);
  const double P = 80.0 * 8192 * 8192, GiB = 1024.0 * 1024 * 1024;
  const double need = 16 * P + 1 * 80 * 8192 * 2.0;
  ck_assert_double_eq_tol(a->memory->per_device_bytes, need, 0.5);
  ck_assert_double_eq(b->memory->per_device_bytes, a->memory->per_device_bytes);
  ck_assert_double_eq(a->memory->capacity_bytes, 80 * GiB);
  ck_assert_double_eq(b->memory->capacity_bytes, 87.5 * GiB);
  ck_assert(!a->memory->fits);
  ck_assert(b->memory->fits);
  ck_assert_double_eq_tol(o->memory->per_device_bytes, need - 12 * P, 0.5);
  ck_assert(o->memory->fits);
  /* the NVL part: its own peaks and HBM bandwidth (datasheet) */
  ck_assert_double_eq_tol(b->scenario->hw->device.hbm_bw_Bps, 3.9e12, 1);
  ck_assert_double_eq_tol(b->scenario->hw->device.peak_flops[MM_DTYPE_BF16], 835.5e12, 1);
}
END_TEST

/* The offload run names the host stream and reports its copies; a run without it does not. */
START_TEST(test_cli_reports_offload)
{
  g_autofree char *hwj = one_gpu("hardware/devices/a100-80gb.json", 10, 100);
  g_autofree char *on = cfg("cpu", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autofree char *off = cfg("none", "[{\"strategy\":\"ddp\",\"degree\":1}]");
  g_autofree char *mp = mm_test_write("mlp1.json", mlp1), *hp = mm_test_write("one.json", hwj);
  g_autofree char *cp_on = mm_test_write("on.json", on), *cp_off = mm_test_write("off.json", off);
  const char *args_on[] = {"run", "-m", mp, "-H", hp, "-c", cp_on, "-j", "-", NULL};
  const char *args_off[] = {"run", "-m", mp, "-H", hp, "-c", cp_off, "-j", "-", NULL};
  g_autofree char *out_on = NULL, *out_off = NULL;
  ck_assert_int_eq(mm_test_cli(args_on, &out_on, NULL), 0);
  ck_assert_int_eq(mm_test_cli(args_off, &out_off, NULL), 0);
  ck_assert_ptr_nonnull(strstr(out_on, "\"offload\""));
  ck_assert_ptr_nonnull(strstr(out_on, "\"host_bytes_per_device\""));
  ck_assert_ptr_nonnull(strstr(out_on, "\"name\":\t\"host\""));
  ck_assert_ptr_null(strstr(out_off, "\"offload\""));
  ck_assert_ptr_null(strstr(out_off, "\"host\""));
  /* same inputs, same bytes */
  g_autofree char *again = NULL;
  ck_assert_int_eq(mm_test_cli(args_on, &again, NULL), 0);
  ck_assert_str_eq(again, out_on);
}
END_TEST

static Suite *offload_suite(void)
{
  Suite *s = suite_create("offload");
  TCase *t = tcase_create("core");
  tcase_add_test(t, test_memory_drops_by_states_and_master);
  tcase_add_test(t, test_exposed_copy_and_cpu_step);
  tcase_add_test(t, test_slower_host_link_is_slower);
  tcase_add_test(t, test_gradient_copies_overlap_backward);
  tcase_add_test(t, test_zero2_copies_the_shard);
  tcase_add_test(t, test_bad_offload_rejected);
  tcase_add_test(t, test_hbm_variant_changes_fit);
  tcase_add_test(t, test_cli_reports_offload);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return mm_test_main(offload_suite()); }
