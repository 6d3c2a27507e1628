/* check_recompute: torchtitan's per-op and every-N-th-layer checkpointing, activation offload to host. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* Four Llama-like layers: h 512, 8 heads of 64, 2 KV heads, SwiGLU FFN 1024, 256 tokens, bf16. */
#define L_ 4.0
#define S_ 256.0
#define H_ 512.0
#define A_ 8.0
#define D_ 64.0
#define G_ 2.0
#define F_ 1024.0
#define E_ 2.0
#define MODEL                                                                                                  \
  "{\"name\":\"t\",\"seq_len\":256,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\",\"name\":\"dec\","       \
  "\"count\":4,\"hidden\":512,\"heads\":8,\"kv_heads\":2,\"ffn\":1024,\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\"}]}"

/* Two samples per device (ddp 8) or the same on a tp level, with the config keys @keys. */
static MmSimulation *run(const char *keys, const char *levels)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":%d,%s%s"
                                         "\"parallelism\":{\"default\":%s}}",
                                         levels ? 2 : 16, keys, *keys ? "," : "",
                                         levels ? levels : "[{\"strategy\":\"ddp\",\"degree\":8}]");
  return mm_test_sim_ok(MODEL, hw, cfg, 0);
}

typedef struct {
  double flops;
  uint32_t kernels, colls[MM_COLL_COUNT];
} Phase;

/* What the first program runs in @phase. */
static Phase phase_sum(const MmSimulation *x, MmPhase phase)
{
  Phase p;
  memset(&p, 0, sizeof p);
  const MmPlanProgram *pr = &x->plan->programs[0];
  for (uint32_t i = 0; i < pr->n_ops; i++) {
    const MmOpInfo *in = &pr->info[i];
    if (in->phase != phase) continue;
    if (in->what == MM_OP_COLLECTIVE) {
      p.colls[in->coll]++;
      continue;
    }
    p.flops += in->flops;
    p.kernels += in->kernels;
  }
  return p;
}

/* torchtitan's op SAC counts the matmuls of a layer: wq (1, saved), wk (2, recomputed), wv (3,
 * saved), wo (4, recomputed), w1 (5, saved), w3 (6, recomputed), w2 (7, saved); attention is
 * saved; the two norms and the SwiGLU product are recomputed. */
START_TEST(test_op_selective_recomputes_every_other_matmul)
{
  g_autoptr(MmSimulation) full = run("\"recompute\":\"full\"", NULL);
  g_autoptr(MmSimulation) op = run("\"recompute\":\"op_selective\"", NULL);
  const double n = 2; /* samples per device */
  const double wk = 2 * S_ * H_ * G_ * D_, wo = 2 * S_ * A_ * D_ * H_, w3 = 2 * S_ * H_ * F_;
  const double norms = 2 * 5 * S_ * H_, swiglu = 6 * S_ * F_; /* rmsnorm 5, gated 6 FLOPs per element */
  const Phase r = phase_sum(op, MM_PHASE_RECOMPUTE);
  ck_assert_double_eq_tol(r.flops, n * L_ * (wk + wo + w3 + norms + swiglu), 1e-6 * r.flops);
  ck_assert_uint_eq(r.kernels, (uint32_t)L_ * 6); /* wk, wo, w3 and three elementwise kernels */
  /* full recompute re-runs the whole forward: it also runs wq, wv, w1, w2 and attention */
  const Phase f = phase_sum(full, MM_PHASE_RECOMPUTE);
  const Phase fw = phase_sum(full, MM_PHASE_FWD);
  ck_assert_double_eq_tol(f.flops, fw.flops, 1e-9 * f.flops);
  ck_assert_double_gt(f.flops - r.flops, n * L_ * (2 * S_ * H_ * (A_ + G_) * D_ + 2 * 2 * S_ * H_ * F_));
  /* the recomputed kernels cost time: op lies between none and full */
  g_autoptr(MmSimulation) none = run("", NULL);
  ck_assert_double_gt(op->metrics.iteration_time_s, none->metrics.iteration_time_s);
  ck_assert_double_lt(op->metrics.iteration_time_s, full->metrics.iteration_time_s);
}
END_TEST

/* Under TP the recomputed attention output projection all-reduces again; the FFN's w2 is saved, so
 * its all-reduce is not repeated. With sequence parallelism the reduce-scatters are saved (in the
 * save list) and the all-gathers before wk and w3 run again. */
START_TEST(test_op_selective_collectives)
{
  g_autoptr(MmSimulation) tp = run("\"recompute\":\"op_selective\"", "[{\"strategy\":\"tp\",\"degree\":8}]");
  const Phase a = phase_sum(tp, MM_PHASE_RECOMPUTE);
  ck_assert_uint_eq(a.colls[MM_COLL_ALL_REDUCE], (uint32_t)L_);
  ck_assert_uint_eq(a.colls[MM_COLL_ALL_GATHER] + a.colls[MM_COLL_REDUCE_SCATTER], 0);
  g_autoptr(MmSimulation) sp = run("\"recompute\":\"op_selective\"", "[{\"strategy\":\"sp\",\"degree\":8}]");
  const Phase b = phase_sum(sp, MM_PHASE_RECOMPUTE);
  ck_assert_uint_eq(b.colls[MM_COLL_ALL_GATHER], 2 * (uint32_t)L_);
  ck_assert_uint_eq(b.colls[MM_COLL_ALL_REDUCE] + b.colls[MM_COLL_REDUCE_SCATTER], 0);
  g_autoptr(MmSimulation) full = run("\"recompute\":\"full\"", "[{\"strategy\":\"tp\",\"degree\":8}]");
  ck_assert_uint_eq(phase_sum(full, MM_PHASE_RECOMPUTE).colls[MM_COLL_ALL_REDUCE], 2 * (uint32_t)L_);
}
END_TEST

/* Memory: a layer keeps its input x and the saved outputs q (wq), v (wv), the attention output o
 * and its fp32 log-sum-exp, w1's output and w2's; one layer is rebuilt whole during its backward.
 * Full keeps x only (and rebuilds one layer): op - full = (L - 1) x (what op keeps beyond x). */
START_TEST(test_op_selective_memory)
{
  g_autoptr(MmSimulation) none = run("", NULL);
  g_autoptr(MmSimulation) full = run("\"recompute\":\"full\"", NULL);
  g_autoptr(MmSimulation) op = run("\"recompute\":\"op_selective\"", NULL);
  const double n = 2;
  const double saved = n * (S_ * E_ * (A_ * D_ + G_ * D_ + A_ * D_ + F_ + H_) + S_ * A_ * 4.0);
  const double in = n * S_ * H_ * E_;
  ck_assert_double_eq_tol(op->memory->total.activations - full->memory->total.activations, (L_ - 1) * saved, 0.5);
  /* none keeps a whole layer per layer: op's rebuilt layer is none's per-layer share */
  const double act = none->memory->total.activations / L_;
  ck_assert_double_eq_tol(op->memory->transient_activations, act - in - saved, 0.5);
  ck_assert_double_eq_tol(op->memory->total.activations, L_ * (in + saved) + act - in - saved, 0.5);
  ck_assert_double_lt(op->memory->per_device_bytes, none->memory->per_device_bytes);
  ck_assert_double_gt(op->memory->per_device_bytes, full->memory->per_device_bytes);
}
END_TEST

/* torchtitan's selective_ac_option N: the N-th, 2N-th, ... layers of a stage are checkpointed whole,
 * the others keep everything. */
START_TEST(test_every_nth_layer)
{
  g_autoptr(MmSimulation) none = run("", NULL);
  g_autoptr(MmSimulation) full = run("\"recompute\":\"full\"", NULL);
  g_autoptr(MmSimulation) e2 = run("\"recompute\":\"full\",\"recompute_method\":\"every\",\"recompute_num_layers\":2", NULL);
  g_autoptr(MmSimulation) e1 = run("\"recompute\":\"full\",\"recompute_method\":\"every\",\"recompute_num_layers\":1", NULL);
  g_autoptr(MmSimulation) e5 = run("\"recompute\":\"full\",\"recompute_method\":\"every\",\"recompute_num_layers\":5", NULL);
  const double rf = phase_sum(full, MM_PHASE_RECOMPUTE).flops;
  ck_assert_double_eq_tol(phase_sum(e2, MM_PHASE_RECOMPUTE).flops, rf / 2, 1e-9 * rf);
  ck_assert_double_eq_tol(phase_sum(e1, MM_PHASE_RECOMPUTE).flops, rf, 1e-9 * rf);
  ck_assert_double_eq(phase_sum(e5, MM_PHASE_RECOMPUTE).flops, 0); /* no 5th layer */
  ck_assert_double_eq(e5->metrics.iteration_time_s, none->metrics.iteration_time_s);
  ck_assert_double_eq(e5->memory->per_device_bytes, none->memory->per_device_bytes);
  /* layers 2 and 4 keep x and rebuild one layer; 1 and 3 keep all */
  const double act = none->memory->total.activations / L_, in = 2 * S_ * H_ * E_;
  ck_assert_double_eq_tol(e2->memory->total.activations, 2 * act + 2 * in + (act - in), 0.5);
  ck_assert_double_eq(e1->memory->total.activations, full->memory->total.activations);
}
END_TEST

/* The test node with a host link of @GBps at full efficiency. */
static char *node_host(double GBps)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  return g_strdup_printf("{\"name\":\"n8\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":1,"
                         "\"host_link_GBps\":%g,\"host_link_efficiency\":1,"
                         "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":12,\"link_bw_GBps\":25}}",
                         dev, GBps);
}

static MmSimulation *run_host(const char *keys, double GBps)
{
  g_autofree char *hw = node_host(GBps);
  g_autofree char *cfg = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":16,%s%s"
                                         "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}",
                                         keys, *keys ? "," : "");
  return mm_test_sim_ok(MODEL, hw, cfg, 0);
}

/* Activation offload (Megatron-Core cpu_offloading_num_layers): the first N layers' activations
 * leave the device; two of them stay as the double buffer (one copied while the next computes). */
START_TEST(test_offload_memory)
{
  g_autoptr(MmSimulation) none = run_host("", 32);
  g_autoptr(MmSimulation) o1 = run_host("\"offload_num_layers\":1", 32);
  g_autoptr(MmSimulation) o3 = run_host("\"offload_num_layers\":3", 32);
  g_autoptr(MmSimulation) o4 = run_host("\"offload_num_layers\":4", 32);
  /* one micro-batch in flight: its peak is the larger of the layers it keeps (L - N) and the two
   * offloaded layers the copies double-buffer while the first layers run (min(N, 2)) */
  const double act = none->memory->total.activations / L_;
  ck_assert_double_eq_tol(none->memory->total.activations - o1->memory->total.activations, act, 0.5);
  ck_assert_double_eq_tol(o1->memory->transient_activations, 0, 0.5);
  ck_assert_double_eq_tol(none->memory->total.activations - o3->memory->total.activations, 2 * act, 0.5);
  ck_assert_double_eq_tol(o3->memory->transient_activations, act, 0.5);
  ck_assert_double_eq_tol(none->memory->total.activations - o4->memory->total.activations, 2 * act, 0.5);
  ck_assert_double_eq_tol(o4->memory->transient_activations, 2 * act, 0.5);
  /* weights, gradients, optimizer states and buffers stay */
  ck_assert_double_eq_tol(none->memory->per_device_bytes - o4->memory->per_device_bytes, 2 * act, 0.5);
}
END_TEST

/* The copies run on their own streams over the host link: on a fast link they hide behind the
 * compute, on a slow one the compute waits for them. */
START_TEST(test_offload_time)
{
  g_autoptr(MmSimulation) none = run_host("", 32);
  g_autoptr(MmSimulation) fast = run_host("\"offload_num_layers\":4", 1e6);
  g_autoptr(MmSimulation) slow = run_host("\"offload_num_layers\":4", 0.5);
  const double t0 = none->metrics.iteration_time_s, act = none->memory->total.activations / L_;
  /* 4 copies out and 4 back of one micro-batch (two samples) */
  const MmPlanProgram *pr = &fast->plan->programs[0];
  uint32_t copies = 0;
  double bytes = 0;
  for (uint32_t i = 0; i < pr->n_ops; i++)
    if (pr->info[i].what == MM_OP_COPY) copies++, bytes += pr->info[i].bytes;
  ck_assert_uint_eq(copies, 2 * 4);
  ck_assert_double_eq_tol(bytes, 2 * 4 * act, 1e-6 * bytes); /* each layer's activations out and back */
  ck_assert_double_ge(fast->metrics.iteration_time_s, t0);
  /* fast: what stays exposed is the last layer's copy out and back, between its forward and its
   * backward (nothing else runs there): 2 x act / 10^15 B/s, a few nanoseconds */
  ck_assert_double_le(fast->metrics.iteration_time_s - t0, 2 * act / 1e15 + 1e-11);
  /* slow: the copies out go one after another on their stream, the copies back too, and the
   * first copy back (the last layer's) waits for its copy out: at least 8 copies end to end */
  const double copy_s = act / 0.5e9;
  ck_assert_double_gt(slow->metrics.iteration_time_s, 2 * 4 * copy_s);
  ck_assert_double_gt(slow->metrics.iteration_time_s, t0 + copy_s);
  ck_assert_double_eq(slow->memory->per_device_bytes, fast->memory->per_device_bytes);
}
END_TEST

Suite *recompute_suite(void);
Suite *recompute_suite(void)
{
  Suite *s = suite_create("recompute");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_op_selective_recomputes_every_other_matmul);
  tcase_add_test(tc, test_op_selective_collectives);
  tcase_add_test(tc, test_op_selective_memory);
  tcase_add_test(tc, test_every_nth_layer);
  tcase_add_test(tc, test_offload_memory);
  tcase_add_test(tc, test_offload_time);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(recompute_suite()); }
