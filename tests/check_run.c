/* check_run: lowering + engine + metrics: collectives per strategy, orderings, invariants over many configs. */
#include <math.h>
#include <string.h>

#include "report/report.h"
#include "testutil.h"

typedef MmSimulation Sim;

static Sim *sim(const char *model, const char *hw, const char *cfg, int64_t nodes)
{
  return mm_test_sim_ok(model, hw, cfg, nodes);
}

/* The iteration time of @x's point with hardware factors, from the same loaded inputs. */
static double at_scale(const Sim *x, double compute, double hbm, double net)
{
  MmPoint pt = x->point;
  pt.scale[MM_SCALE_COMPUTE] = compute;
  pt.scale[MM_SCALE_HBM_BW] = hbm;
  pt.scale[MM_SCALE_INTRA_BW] = pt.scale[MM_SCALE_INTER_BW] = net;
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) y = mm_simulation_new_point(x->inputs, &pt, FALSE, &error);
  ck_assert_msg(y, "%s", error ? error->message : "");
  return y->metrics.iteration_time_s;
}

static guint count_ops(const Sim *x, MmCollKind kind, MmReason reason, int phase)
{
  guint n = 0;
  for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++) {
    const MmOpInfo *in = &x->plan->programs[0].info[i];
    if (in->what == MM_OP_COLLECTIVE && in->coll == kind && in->reason == reason && (phase < 0 || in->phase == phase))
      n++;
  }
  return n;
}

#define TINY_GPT "{\"name\":\"tiny\",\"seq_len\":256,\"blocks\":[{\"kind\":\"transformer\",\"name\":\"dec\"," \
                 "\"count\":2,\"hidden\":512,\"heads\":8,\"ffn\":2048}]}"

static char *cfg(const char *extra, const char *levels)
{
  return g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,%s\"parallelism\":{\"default\":%s}}",
                         extra, levels);
}

/* A block reading 18 blocks, and a block read by 18: dependency sets stay bounded (one op
 * per stream) instead of aborting, and the reader starts after every input is done. */
START_TEST(test_wide_fan_in_and_out)
{
  GString *m = g_string_new("{\"name\":\"wide\",\"blocks\":[{\"kind\":\"mlp\",\"name\":\"src\",\"inputs\":[],"
                            "\"count\":1,\"width\":256,\"input_dim\":64}");
  GString *top = g_string_new("");
  for (int i = 0; i < 18; i++) {
    g_string_append_printf(m, ",{\"kind\":\"mlp\",\"name\":\"b%d\",\"inputs\":[\"src\"],\"count\":2,\"width\":256}", i);
    g_string_append_printf(top, "%s\"b%d\"", i ? "," : "", i);
  }
  g_string_append_printf(m, ",{\"kind\":\"mlp\",\"name\":\"top\",\"inputs\":[%s],\"count\":1,\"width\":256}]}", top->str);
  g_string_free(top, TRUE);
  g_autofree char *model = g_string_free(m, FALSE);
  g_autofree char *hw = mm_test_node8();
  const char *levels[] = {"[{\"strategy\":\"ddp\",\"degree\":8}]", "[{\"strategy\":\"fsdp\",\"degree\":8}]"};
  for (guint v = 0; v < G_N_ELEMENTS(levels); v++) {
    g_autofree char *c = cfg("", levels[v]);
    g_autoptr(MmSimulation) x = sim(model, hw, c, 0);
    ck_assert_double_gt(x->metrics.iteration_time_s, 0);
    const MmPlanProgram *pr = &x->plan->programs[0];
    for (uint32_t i = 0; i < pr->n_ops; i++) ck_assert_uint_le(pr->ops[i].n_deps, MM_STREAM_COUNT);
    /* the top block's forward starts after every b_i forward has ended */
    const guint top_unit = x->graph->block_first_unit[19];
    MmTime inputs_end = 0, top_start = G_MAXUINT64;
    for (uint32_t i = 0; i < pr->n_ops; i++) {
      const MmOpInfo *in = &pr->info[i];
      if (in->what != MM_OP_COMPUTE || in->phase != MM_PHASE_FWD) continue;
      if (in->unit == top_unit) top_start = MIN(top_start, mm_engine_op_start(x->engine, 0, i));
      else if (in->unit > 0) inputs_end = MAX(inputs_end, mm_engine_op_end(x->engine, 0, i));
    }
    ck_assert_uint_ge(top_start, inputs_end);
  }
}
END_TEST

/* A point changes micro-batch and pipeline degree of loaded inputs without reloading them:
 * the same answer as files that say so, and the loaded inputs stay as they were. */
START_TEST(test_point_overrides_match_fresh_files)
{
  g_autofree char *hw = mm_test_node8();
  const char *levels = "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}]";
  g_autofree char *base = cfg("\"micro_batch\":4,", levels);
  g_autofree char *fresh = cfg("\"micro_batch\":2,\"pipeline\":{\"degree\":2},", levels);
  g_autoptr(MmSimulation) a = sim(TINY_GPT, hw, base, 0);
  g_autoptr(MmSimulation) want = sim(TINY_GPT, hw, fresh, 0);
  MmPoint pt = {.micro_batch = 2, .pipeline_degree = 2};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) b = mm_simulation_new_point(a->inputs, &pt, FALSE, &error);
  ck_assert_msg(b, "%s", error ? error->message : "");
  ck_assert_int_eq(b->scenario->pp, 2);
  ck_assert_int_eq(b->scenario->micro_steps, want->scenario->micro_steps);
  ck_assert_double_eq(b->metrics.iteration_time_s, want->metrics.iteration_time_s);
  ck_assert_double_eq(b->memory->per_device_bytes, want->memory->per_device_bytes);
  ck_assert_uint_eq(b->metrics.events, want->metrics.events);
  ck_assert_double_ne(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  /* nothing loaded was edited: the file's point still gives the file's answer */
  ck_assert_int_eq(a->inputs->config->micro_batch, 4);
  ck_assert_int_eq(a->inputs->config->pipeline.degree, 1);
  g_autoptr(MmSimulation) again = mm_simulation_new_point(a->inputs, NULL, FALSE, &error);
  ck_assert_double_eq(again->metrics.iteration_time_s, a->metrics.iteration_time_s);
  /* a hardware factor and a node count go through the same door */
  MmPoint fast = {.scale = {[MM_SCALE_COMPUTE] = 2.0}};
  g_autoptr(MmSimulation) f = mm_simulation_new_point(a->inputs, &fast, FALSE, &error);
  ck_assert_double_lt(f->metrics.iteration_time_s, a->metrics.iteration_time_s);
  ck_assert_double_eq(a->inputs->hardware->device.peak_flops[MM_DTYPE_BF16], again->hardware->device.peak_flops[MM_DTYPE_BF16]);
}
END_TEST

START_TEST(test_tp_allreduces)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *c = cfg("", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = sim(TINY_GPT, hw, c, 0);
  /* Megatron: forward after attn_out and ffn_down; backward after the input gradients of qkv and ffn_up */
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), 4);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_BWD), 4);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), 0);
  /* activations of 8 samples x 256 tokens x 512 x 2 bytes */
  for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++)
    if (x->plan->programs[0].info[i].what == MM_OP_COLLECTIVE) ck_assert_double_eq_tol(x->plan->programs[0].info[i].bytes, 64.0 * 256 * 512 * 2, 0.5);
  g_autofree char *rc = cfg("\"recompute\":\"full\",", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) y = sim(TINY_GPT, hw, rc, 0);
  ck_assert_uint_eq(count_ops(y, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_RECOMPUTE), 4);
}
END_TEST

START_TEST(test_fsdp_gathers_and_order)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *c = cfg("", "[{\"strategy\":\"fsdp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = sim(TINY_GPT, hw, c, 0);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_FWD), 2);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_BWD), 2);
  ck_assert_uint_eq(count_ops(x, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, MM_PHASE_BWD), 2);
  /* optimized backward order: the gather of layer 0 is issued before the reduce-scatter of layer 1 */
  uint32_t ag0 = UINT32_MAX, rs1 = UINT32_MAX;
  for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++) {
    const MmOpInfo *in = &x->plan->programs[0].info[i];
    if (in->phase != MM_PHASE_BWD || in->what != MM_OP_COLLECTIVE) continue;
    if (in->coll == MM_COLL_ALL_GATHER && in->unit == 0) ag0 = i;
    if (in->coll == MM_COLL_REDUCE_SCATTER && in->unit == 1) rs1 = i;
  }
  ck_assert_uint_lt(ag0, rs1);
  ck_assert_uint_eq(x->plan->programs[0].ops[ag0].stream, x->plan->programs[0].ops[rs1].stream);
}
END_TEST

START_TEST(test_fsdp_prefetch_hides_gathers)
{
  g_autofree char *p0 = g_strdup("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,\"recompute\":\"full\","
                                 "\"fsdp_prefetch\":0,\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}");
  g_autoptr(MmSimulation) a = sim("models/llama2-70b.json", "hardware/dgx-a100-2048.json", p0, 0);
  g_autoptr(MmSimulation) b = sim("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", 0);
  ck_assert_int_eq(b->config->fsdp_prefetch, 1);
  ck_assert_double_gt(a->metrics.exposed_comm_s, 2.0 * b->metrics.exposed_comm_s);
  ck_assert_double_gt(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
  /* MAD-Max Fig. 9: with prefetch most FSDP communication is hidden (98% measured on LLaMA) */
  ck_assert_double_lt(b->metrics.exposed_comm_fraction, 0.1);
}
END_TEST

/* overlap_param_gather: ZeRO's all-gather of the updated weights moves from after the optimizer step
 * into the forward pass, one per layer, each before that layer's first forward; the same bytes, and on
 * a node where it was exposed it now hides behind the forward's compute. */
START_TEST(test_overlap_param_gather)
{
  g_autofree char *hw = mm_test_node8();
  const char *lv = "[{\"strategy\":\"ddp\",\"degree\":8,\"zero\":1}]";
  /* one sequence per device: the gathers are a few percent of the iteration */
  g_autofree char *c0 = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,"
                                        "\"parallelism\":{\"default\":%s}}", lv);
  g_autofree char *c1 = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,"
                                        "\"overlap_param_gather\":true,\"parallelism\":{\"default\":%s}}", lv);
  g_autofree char *cz = cfg("\"overlap_param_gather\":true,", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autofree char *cn = cfg("", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = sim("models/llama3-8b.json", hw, c0, 0);
  g_autoptr(MmSimulation) b = sim("models/llama3-8b.json", hw, c1, 0);
  const MmPlanProgram *pa = &a->plan->programs[0], *pb = &b->plan->programs[0];
  double bytes_a = 0, bytes_b = 0;
  guint fwd_gathers = 0;
  g_autofree MmTime *t0 = g_new(MmTime, 2 * (gsize)pb->n_ops + 1);
  MmTime *t1 = t0 + pb->n_ops;
  mm_engine_class_times(b->engine, 0, t0, t1);
  for (uint32_t i = 0; i < pa->n_ops; i++)
    if (pa->info[i].what == MM_OP_COLLECTIVE && pa->info[i].reason == MM_REASON_ZERO) {
      bytes_a += pa->info[i].bytes;
      ck_assert_int_eq(pa->info[i].phase, MM_PHASE_OPTIMIZER);
    }
  for (uint32_t i = 0; i < pb->n_ops; i++) {
    const MmOpInfo *in = &pb->info[i];
    if (in->what != MM_OP_COLLECTIVE || in->reason != MM_REASON_ZERO) continue;
    bytes_b += in->bytes;
    ck_assert_int_eq(in->phase, MM_PHASE_FWD);
    fwd_gathers++;
    /* every forward compute of its unit in the first micro-batch starts after it */
    for (uint32_t j = 0; j < pb->n_ops; j++)
      if (pb->info[j].what == MM_OP_COMPUTE && pb->info[j].unit == in->unit && pb->info[j].micro == 0 &&
          pb->info[j].phase == MM_PHASE_FWD)
        ck_assert_uint_ge(t0[j], t1[i]);
  }
  ck_assert_double_gt(bytes_a, 0);
  ck_assert_double_eq_tol(bytes_a, bytes_b, 1e-9 * bytes_a);
  ck_assert_uint_ge(fwd_gathers, a->graph->n_units - 2); /* one per unit with parameters */
  ck_assert_double_gt(a->metrics.comm_by_reason_s[MM_REASON_ZERO], 0.01 * a->metrics.iteration_time_s);
  /* the gathers were the iteration's tail; now most of their time is hidden */
  ck_assert_double_lt(b->metrics.iteration_time_s,
                      a->metrics.iteration_time_s - 0.5 * a->metrics.comm_by_reason_s[MM_REASON_ZERO]);
  /* without ZeRO the key changes nothing */
  g_autoptr(MmSimulation) z = sim("models/llama3-8b.json", hw, cz, 0);
  g_autoptr(MmSimulation) n = sim("models/llama3-8b.json", hw, cn, 0);
  ck_assert_double_eq(z->metrics.iteration_time_s, n->metrics.iteration_time_s);
  ck_assert_uint_eq(z->plan->programs[0].n_ops, n->plan->programs[0].n_ops);
}
END_TEST

/* Llama-3-8B (hidden 4096), one sequence per H100 of a node, FSDP, in @precision (inline JSON). */
static MmSimulation *fp8_sim(const char *precision, const char *task)
{
  g_autofree char *c = g_strdup_printf("{\"name\":\"c\",\"task\":\"%s\",\"global_batch\":8,\"precision\":%s,"
                                       "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}",
                                       task, precision);
  return sim("models/llama3-8b.json", "hardware/dgx-h100-2048.json", c, 1);
}

/* The config's attention_kernel picks the implementation's points on H100's curve (Llama-3-8B, 8192
 * tokens, head dim 128, 32 heads per device: the 8k bars exactly): unnamed is FlashAttention-3 (the
 * curve's default, bit for bit), FlashAttention-2 is slowest, cuDNN in between (Figures 5(d), 6(b):
 * 333 / 529 / 602 TFLOP/s forward, 318 / 518 / 559 backward); GEMMs are untouched. */
START_TEST(test_attention_kernel)
{
  static const char *const kernels[] = {NULL, "fa3", "cudnn", "fa2"};
  double t[G_N_ELEMENTS(kernels)], gemm_s[G_N_ELEMENTS(kernels)];
  for (guint i = 0; i < G_N_ELEMENTS(kernels); i++) {
    g_autofree char *ak = kernels[i] ? g_strdup_printf("\"attention_kernel\":\"%s\",", kernels[i]) : g_strdup("");
    g_autofree char *c = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,%s"
                                         "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}",
                                         ak);
    g_autoptr(MmSimulation) r = sim("models/llama3-8b.json", "hardware/dgx-h100-2048.json", c, 1);
    t[i] = r->metrics.iteration_time_s;
    gemm_s[i] = 0;
    const MmScenario *s = r->scenario;
    const MmGraph *g = r->graph;
    gboolean seen = FALSE;
    for (uint32_t li = 0; li < g->n_layers; li++) {
      MmPlacement p;
      mm_plan_place(s, g, li, &p);
      MmPartWork fw;
      MmCostWhy why;
      mm_plan_part_work(s, g, li, MM_PART_FWD, &p, 1.0, &fw, &why);
      if (fw.kernel.kind == MM_KERNEL_GEMM) gemm_s[i] += fw.time_s;
      if (fw.kernel.kind != MM_KERNEL_ATTENTION || fw.flops <= 0 || seen) continue;
      seen = TRUE;
      const MmAttnKernel want = i == 3 ? MM_ATTN_KERNEL_FA2 : i == 2 ? MM_ATTN_KERNEL_CUDNN : i == 1 ? MM_ATTN_KERNEL_FA3
                                                                                                  : MM_ATTN_KERNEL_DEFAULT;
      ck_assert_int_eq(fw.kernel.impl, want);
      ck_assert(fw.kernel.m == 8192 && fw.kernel.k == 128 && fw.kernel.batch == 32 && fw.kernel.causal);
      const double tflops = i == 3 ? 333 : i == 2 ? 529 : 602;
      ck_assert_ptr_nonnull(why.compute.curve);
      ck_assert_double_eq_tol(why.compute.util, tflops / 989.4 * 517.0 / 512.0, 1e-6);
    }
    ck_assert(seen);
  }
  ck_assert(t[0] == t[1] && gemm_s[0] == gemm_s[3] && gemm_s[0] == gemm_s[2]);
  ck_assert_msg(t[1] < t[2] && t[2] < t[3], "fa3 %.6g s, cudnn %.6g s, fa2 %.6g s", t[1], t[2], t[3]);
  ck_assert_msg(t[3] / t[1] > 1.05, "fa2 over fa3: %.4f", t[3] / t[1]);
  /* a model without flash attention: naming a kernel is an error, not a silent no-op */
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) bad =
    mm_test_sim("models/megatron-gpt-1.7b.json", "hardware/dgx-a100-2048.json",
                "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,\"attention_kernel\":\"fa2\","
                "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}",
                NULL, &error);
  ck_assert(bad == NULL && error != NULL);
  ck_assert_msg(strstr(error->message, "$.attention_kernel") != NULL && strstr(error->message, "no flash attention"),
                "%s", error->message);
}
END_TEST

/* FP8 recipes: the linear layers' GEMMs in FP8 with the recipe's casts before them, attention in
 * bf16; the speedup over bf16 lands below the 2x peak ratio and below "everything at FP8". */
START_TEST(test_fp8_recipes)
{
  g_autoptr(MmSimulation) bf = fp8_sim("{\"compute\":\"bf16\"}", "pretrain");
  g_autoptr(MmSimulation) del = fp8_sim("{\"compute\":\"fp8\"}", "pretrain");
  g_autoptr(MmSimulation) tw = fp8_sim("{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\"}", "pretrain");
  g_autoptr(MmSimulation) all = fp8_sim("{\"compute\":\"fp8\",\"fp8_recipe\":\"all\"}", "pretrain");
  ck_assert_int_eq(del->config->fp8_recipe, MM_FP8_DELAYED); /* the default */
  const double t = bf->metrics.iteration_time_s;
  const double s_del = t / del->metrics.iteration_time_s, s_tw = t / tw->metrics.iteration_time_s,
               s_all = t / all->metrics.iteration_time_s;
  ck_assert_msg(s_del > 1.2 && s_del < 1.6, "delayed scaling: %.3fx over bf16", s_del);
  ck_assert_msg(s_tw > 1.2 && s_tw < s_del, "tensorwise %.3fx (an amax pass more than delayed %.3fx)", s_tw, s_del);
  ck_assert_msg(s_all > s_del + 0.1, "everything at the FP8 peak %.3fx vs delayed %.3fx", s_all, s_del);

  /* kernels: GEMMs fp8 with the casts of their operands, attention bf16 */
  const MmScenario *s = del->scenario;
  const MmGraph *g = del->graph;
  gboolean seen_gemm = FALSE, seen_attn = FALSE;
  for (uint32_t li = 0; li < g->n_layers; li++) {
    const MmLayer *l = &g->layers[li];
    MmPlacement p;
    mm_plan_place(s, g, li, &p);
    MmPartWork fw, bi, bw;
    mm_plan_part_work(s, g, li, MM_PART_FWD, &p, 1.0, &fw, NULL);
    mm_plan_part_work(s, g, li, MM_PART_BWD_INPUT, &p, 1.0, &bi, NULL);
    mm_plan_part_work(s, g, li, MM_PART_BWD_WEIGHT, &p, 1.0, &bw, NULL);
    if (l->kernel.kind == MM_KERNEL_ATTENTION && fw.flops > 0) {
      seen_attn = TRUE;
      ck_assert_int_eq(fw.kernel.dtype, MM_DTYPE_BF16);
      ck_assert_double_eq(fw.cast_bytes, 0);
    }
    if (l->kernel.kind == MM_KERNEL_GEMM && fw.flops > 0 && fw.kernel.kind == MM_KERNEL_GEMM) {
      seen_gemm = TRUE;
      ck_assert_int_eq(fw.kernel.dtype, MM_DTYPE_FP8);
      /* delayed: x cast and transposed (2 read + 1 + 1 written per element), W likewise once per
       * iteration; dY the same in the backward; the weight gradient's operands come ready */
      const MmKernel *k = &fw.kernel;
      const double want = 4.0 * k->m * k->k * k->batch + 4.0 * k->k * k->n * k->batch / (double)s->micro_steps;
      ck_assert_double_eq_tol(fw.cast_bytes, want, 1e-9 * want);
      ck_assert_double_eq_tol(bi.cast_bytes, 4.0 * bi.kernel.m * bi.kernel.k * bi.kernel.batch, 1e-6 * want);
      ck_assert_double_eq(bw.cast_bytes, 0);
      ck_assert_double_gt(fw.cast_s, 0);
    }
  }
  ck_assert(seen_gemm && seen_attn);
  /* delayed scaling caches each GEMM weight in FP8 and transposed: 2 bytes per parameter more */
  /* (bf16 weights: 2 bytes per parameter too; the token embedding, 6.5% of Llama-3-8B, is no GEMM) */
  const double extra = del->memory->total.weights - tw->memory->total.weights;
  ck_assert_double_lt(extra, tw->memory->total.weights);
  ck_assert_double_gt(extra, 0.9 * tw->memory->total.weights);
  /* serving is untouched by training recipes */
  g_autoptr(MmSimulation) i1 = fp8_sim("{\"compute\":\"fp8\"}", "inference");
  g_autoptr(MmSimulation) i2 = fp8_sim("{\"compute\":\"fp8\",\"fp8_recipe\":\"all\"}", "inference");
  ck_assert_double_eq(i1->metrics.iteration_time_s, i2->metrics.iteration_time_s);
}
END_TEST

/* Llama-3-70B, 4 stages of 20 layers, TP 8 + SP, with the config keys @rec. */
static MmSimulation *rec_sim(const char *rec)
{
  g_autofree char *c = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,%s,"
                                       "\"pipeline\":{\"degree\":4},\"parallelism\":{\"default\":[{\"strategy\":\"sp\","
                                       "\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}",
                                       rec);
  return sim("models/llama3-70b.json", "hardware/dgx-h100-2048.json", c, 4);
}

/* Megatron's partial full recompute: block recomputes the first N layers of each stage (time and
 * memory between none and full), uniform checkpoints every N layers (full's time, less memory). */
START_TEST(test_recompute_num_layers)
{
  g_autoptr(MmSimulation) none = rec_sim("\"recompute\":\"none\"");
  g_autoptr(MmSimulation) full = rec_sim("\"recompute\":\"full\"");
  g_autoptr(MmSimulation) b4 = rec_sim("\"recompute\":\"full\",\"recompute_method\":\"block\",\"recompute_num_layers\":4");
  g_autoptr(MmSimulation) b20 = rec_sim("\"recompute\":\"full\",\"recompute_method\":\"block\",\"recompute_num_layers\":20");
  g_autoptr(MmSimulation) u4 = rec_sim("\"recompute\":\"full\",\"recompute_method\":\"uniform\",\"recompute_num_layers\":4");
  const double rf = full->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE];
  const double r4 = b4->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE];
  ck_assert_double_eq(none->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE], 0);
  /* 4 of each stage's 20 layers (the first and last stages' embedding and head recompute too) */
  ck_assert_msg(r4 >= 0.2 * rf * (1 - 1e-9) && r4 < 0.25 * rf, "block 4: %g of full %g", r4, rf);
  ck_assert_double_gt(b4->metrics.iteration_time_s, none->metrics.iteration_time_s);
  ck_assert_double_lt(b4->metrics.iteration_time_s, full->metrics.iteration_time_s);
  ck_assert_double_gt(b4->memory->per_device_bytes, full->memory->per_device_bytes);
  ck_assert_double_lt(b4->memory->per_device_bytes, none->memory->per_device_bytes);
  /* every layer of a stage: full recompute itself */
  ck_assert_double_eq(b20->metrics.iteration_time_s, full->metrics.iteration_time_s);
  ck_assert_double_eq(b20->memory->per_device_bytes, full->memory->per_device_bytes);
  /* uniform groups of 4: the same recompute, one checkpoint per 4 layers */
  ck_assert_double_eq(u4->metrics.iteration_time_s, full->metrics.iteration_time_s);
  ck_assert_double_lt(u4->memory->total.activations - u4->memory->transient_activations,
                      full->memory->total.activations - full->memory->transient_activations);
}
END_TEST

/* FSDP2 reshard_after_forward=False: each layer gathered once per iteration (its first forward),
 * kept gathered across micro-batches and the backward; reduce-scatters unchanged. */
START_TEST(test_fsdp_no_reshard)
{
  g_autofree char *hw = mm_test_node8();
#define RESHARD_CFG(r)                                                                                          \
  "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":32,\"micro_batch\":1,\"fsdp_reshard_after_forward\":" r \
  ",\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":8}]}}"
  const char *ct = RESHARD_CFG("true"), *cf = RESHARD_CFG("false");
  const char *model = "{\"name\":\"gpt8\",\"seq_len\":256,\"blocks\":[{\"kind\":\"transformer\",\"name\":\"dec\","
                      "\"count\":8,\"hidden\":512,\"heads\":8,\"ffn\":2048}]}";
  g_autoptr(MmSimulation) a = sim(model, hw, ct, 0);
  g_autoptr(MmSimulation) b = sim(model, hw, cf, 0);
  ck_assert_int_eq(a->scenario->micro_steps, 4);
  guint units = 0;
  for (uint32_t u = 0; u < a->graph->n_units; u++) units += a->graph->units[u].cost.params > 0;
  /* resharding: a forward and a backward gather per unit and micro-batch (the first trained unit's
   * backward included); once: one per unit */
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), units);
  ck_assert_uint_eq(count_ops(a, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_FWD), 4 * units);
  ck_assert_uint_gt(count_ops(a, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_BWD), 3 * units);
  ck_assert_uint_eq(count_ops(a, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1),
                    count_ops(b, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1));
  ck_assert_double_lt(b->metrics.comm_by_reason_s[MM_REASON_FSDP], a->metrics.comm_by_reason_s[MM_REASON_FSDP]);
  ck_assert_double_gt(b->memory->total.comm_buffers, a->memory->total.comm_buffers);
}
END_TEST

/* Serving with sliding-window layers: they cache their window, the global ones the whole context. */
START_TEST(test_sliding_window_kv_cache)
{
  g_autofree char *hw = mm_test_node8();
#define SWA_MODEL(extra)                                                                                        \
  "{\"name\":\"t\",\"seq_len\":4096,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,\"hidden\":1024,\"heads\":8," \
  "\"ffn\":4096" extra "}]}"
  const char *cfg8 = "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":8,\"inference\":{\"prompt_tokens\":4096,"
                     "\"output_tokens\":512},\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}";
  g_autoptr(MmSimulation) f = sim(SWA_MODEL(""), hw, cfg8, 0);
  g_autoptr(MmSimulation) w = sim(SWA_MODEL(",\"sliding_window\":512,\"global_every\":2"), hw, cfg8, 0);
#undef SWA_MODEL
  /* two layers keep 512 of the 4608 tokens, two keep all */
  const double want = (2.0 * 512 + 2.0 * 4608) / (4.0 * 4608);
  ck_assert_double_gt(f->memory->total.kv_cache, 0);
  ck_assert_double_eq_tol(w->memory->total.kv_cache / f->memory->total.kv_cache, want, 1e-9);
  ck_assert_double_lt(w->serving.tpot_s, f->serving.tpot_s);
}
END_TEST

/* LAMB keeps Adam's states and reads weights and update again in its step; Adafactor keeps a row and a
 * column per matrix (about 2 / hidden states per parameter). */
START_TEST(test_lamb_adafactor)
{
#define OPT_CFG(opt)                                                                                            \
  "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,\"optimizer\":{\"kind\":\"" opt "\"},"                \
  "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}"
  g_autoptr(MmSimulation) adam = sim("models/llama3-8b.json", "hardware/dgx-h100-2048.json", OPT_CFG("adam"), 1);
  g_autoptr(MmSimulation) lamb = sim("models/llama3-8b.json", "hardware/dgx-h100-2048.json", OPT_CFG("lamb"), 1);
  g_autoptr(MmSimulation) af = sim("models/llama3-8b.json", "hardware/dgx-h100-2048.json", OPT_CFG("adafactor"), 1);
#undef OPT_CFG
  ck_assert_double_eq(lamb->memory->total.optimizer, adam->memory->total.optimizer);
  const double oa = adam->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER], ol = lamb->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER];
  /* adam's step moves 2 e + g + 2 (2 x 4 + 4) = 32 bytes per parameter (bf16 weights, fp32 grads, master copy);
   * lamb 6 more */
  ck_assert_double_eq_tol(ol / oa, 38.0 / 32.0, 0.02);
  /* fp32 master weights (4 bytes per parameter) remain; the factored moments are 2 x 4 / 4096 */
  const double params = adam->memory->total.optimizer / 12.0;
  ck_assert_double_eq_tol(af->memory->total.optimizer, params * (4.0 + 8.0 / 4096.0), 0.01 * params);
  ck_assert_double_lt(af->memory->total.optimizer, 0.4 * adam->memory->total.optimizer);
}
END_TEST

START_TEST(test_ddp_buckets)
{
  g_autofree char *hw = mm_test_node8();
  const char *model = "{\"name\":\"mlp\",\"dtype\":\"fp32\",\"blocks\":[{\"kind\":\"mlp\",\"count\":4,\"width\":1024}]}";
  g_autofree char *c5 = cfg("\"ddp_bucket_MB\":5,", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autofree char *c1 = cfg("\"ddp_bucket_MB\":1,", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = sim(model, hw, c5, 0);
  g_autoptr(MmSimulation) b = sim(model, hw, c1, 0);
  /* 4 layers x 4 MiB of fp32 gradients: 5 MB buckets close after every second layer */
  ck_assert_uint_eq(count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 2);
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 4);
}
END_TEST

START_TEST(test_single_device_closed_form)
{
  /* one GPU, one dense fp32 layer with TF32 math: iteration = forward + input grad + weight grad
   * + optimizer, each max(FLOPs / (peak x util), bytes / (bw x util)) + launch */
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  g_autofree char *hw = g_strdup_printf("{\"name\":\"one\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":1}", dev);
  const char *model = "{\"name\":\"m\",\"dtype\":\"fp32\",\"blocks\":[{\"kind\":\"mlp\",\"count\":1,\"width\":4096,"
                      "\"activation\":false,\"compute_dtype\":\"tf32\"}]}";
  const char *c = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8192,\"parallelism\":{\"default\":"
                  "[{\"strategy\":\"ddp\",\"degree\":1}]}}";
  g_autoptr(MmSimulation) x = sim(model, hw, c, 0);
  double f = 2.0 * 8192 * 4096 * 4096, peak = 156e12 * 0.705, launch = 3e-6;
  double bw = 2039e9 * 0.834, w = 4096.0 * 4096 * 4;
  double fwd = MAX(f / peak, (8192.0 * 4096 * 2 * 4 + w) / bw) + launch;
  double bwd_in = MAX(f / peak, (8192.0 * 4096 * 2 * 4 + w) / bw) + launch; /* the first layer's input gradient is skipped */
  (void)bwd_in;
  double bwd_w = MAX(f / peak, (8192.0 * 4096 * 2 * 4 + w) / bw) + launch;
  double opt = (4096.0 * 4096) * (2 * 4 + 4 + 2 * 8) / bw + launch; /* adam fp32, no master copy for fp32 */
  ck_assert_double_eq_tol(x->metrics.iteration_time_s, fwd + bwd_w + opt, 1e-9);
  ck_assert_double_eq(x->metrics.comm_s, 0);
  /* MFU: model FLOPs 3 x f (no input-grad skipping in the count) over the TF32 peak */
  ck_assert_double_eq_tol(x->metrics.mfu, 3.0 * f / (x->metrics.iteration_time_s * 156e12), 1e-9);
}
END_TEST

START_TEST(test_hierarchy_order_matters)
{
  const char *model = "{\"name\":\"gpt-1.7b\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":51200,"
                      "\"hidden\":2304},{\"kind\":\"transformer\",\"count\":24,\"hidden\":2304,\"heads\":24,\"ffn\":9216},"
                      "{\"kind\":\"lm_head\",\"vocab\":51200,\"hidden\":2304,\"tied\":true}]}";
  g_autofree char *tp_ddp = cfg("", "[{\"strategy\":\"tp\",\"degree\":\"node\"},{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  g_autofree char *ddp_tp = cfg("", "[{\"strategy\":\"ddp\",\"degree\":\"node\"},{\"strategy\":\"tp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) a = sim(model, "hardware/dgx-a100-2048.json", tp_ddp, 2);
  g_autoptr(MmSimulation) b = sim(model, "hardware/dgx-a100-2048.json", ddp_tp, 2);
  /* ((TP),(DDP)): activations on NVLink; ((DDP),(TP)): activations cross nodes (MAD-Max insight 3) */
  ck_assert_double_lt(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
  for (uint32_t i = 0; i < a->plan->programs[0].n_ops; i++)
    if (a->plan->programs[0].info[i].what == MM_OP_COLLECTIVE)
      ck_assert_uint_eq(a->plan->programs[0].ops[i].stream,
                        a->plan->programs[0].info[i].reason == MM_REASON_TP ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER);
  for (uint32_t i = 0; i < b->plan->programs[0].n_ops; i++)
    if (b->plan->programs[0].info[i].what == MM_OP_COLLECTIVE)
      ck_assert_uint_eq(b->plan->programs[0].ops[i].stream,
                        b->plan->programs[0].info[i].reason == MM_REASON_TP ? MM_STREAM_COMM_INTER : MM_STREAM_COMM_INTRA);
}
END_TEST

START_TEST(test_finetune_and_inference)
{
  g_autoptr(MmSimulation) pre = sim("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", 0);
  g_autoptr(MmSimulation) ft = sim("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-finetune.json", 0);
  /* frozen embedding and head: no weight gradients, no reduce-scatter for them */
  ck_assert_uint_eq(count_ops(pre, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1),
                    count_ops(ft, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1) + 2);
  ck_assert_double_lt(ft->metrics.compute_by_phase_s[MM_PHASE_BWD], pre->metrics.compute_by_phase_s[MM_PHASE_BWD]);
  ck_assert_double_lt(ft->metrics.model_flops, pre->metrics.model_flops);

  g_autoptr(MmSimulation) inf = sim("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-inference-tp.json", 0);
  for (uint32_t i = 0; i < inf->plan->programs[0].n_ops; i++) ck_assert_int_eq(inf->plan->programs[0].info[i].phase, MM_PHASE_FWD);
  ck_assert_double_eq_tol(inf->metrics.model_flops, 256.0 * inf->graph->total.fwd_flops, 1);
}
END_TEST

START_TEST(test_dlrm_all_to_all)
{
  g_autoptr(MmSimulation) x = sim("models/dlrm-a.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-fsdp-mp.json", 0);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_TO_ALL, MM_REASON_MP, MM_PHASE_FWD), 1);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_TO_ALL, MM_REASON_MP, MM_PHASE_BWD), 1);
  /* each GPU sends the pooled outputs of its 32 tables for the 65536-sample batch */
  for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++)
    if (x->plan->programs[0].info[i].what == MM_OP_COLLECTIVE && x->plan->programs[0].info[i].coll == MM_COLL_ALL_TO_ALL)
      ck_assert_double_eq_tol(x->plan->programs[0].info[i].bytes, 65536.0 * 32 * 94 * 2, 1);
  /* the bottom MLP runs while the forward All2All is in flight */
  ck_assert_double_gt(x->metrics.hidden_comm_s, 0);
  ck_assert_double_gt(x->metrics.embedding_s, 0);
}
END_TEST

START_TEST(test_per_device_agrees)
{
  static const char *const cases[][4] = {
    {"models/gpt3-175b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-tp-fsdp.json", "4"},
    {"models/dlrm-a.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-tp-ddp-mp.json", "0"},
    {"models/dlrm-a-moe.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-tp-ddp-mp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-inference-tp.json", "2"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    int64_t nodes = g_ascii_strtoll(cases[i][3], NULL, 10);
    g_autoptr(GError) error = NULL;
    MmSimOptions sym = {.nodes = nodes}, per = {.nodes = nodes, .per_device = TRUE};
    g_autoptr(MmSimulation) a = mm_test_sim(cases[i][0], cases[i][1], cases[i][2], &sym, &error);
    g_autoptr(MmSimulation) b = mm_test_sim(cases[i][0], cases[i][1], cases[i][2], &per, &error);
    ck_assert(a && b);
    ck_assert_uint_eq(b->plan->n_classes, (uint32_t)b->scenario->devices);
    ck_assert_double_eq(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
    /* the symmetric run may be a shorter one standing for the whole (mm_plan_cut): its sums in
     * another order */
    ck_assert_double_eq_tol(a->metrics.exposed_comm_s, b->metrics.exposed_comm_s, 1e-9 * b->metrics.exposed_comm_s);
    ck_assert_uint_eq(b->metrics.events, a->metrics.events * (uint64_t)b->scenario->devices);
  }
}
END_TEST

/* Every op's duration scaled down can only move every start and end earlier. */
static const char *const inv_models[] = {
  "models/llama2-70b.json", "models/gpt3-175b.json", "models/llama-65b.json", "models/dlrm-a.json",
  "models/dlrm-b.json", "models/dlrm-a-moe.json", "models/dlrm-a-transformer.json", TINY_GPT,
};
static const char *const inv_hw[] = {"hardware/dgx-a100-2048.json", "hardware/zionex-a100-128.json",
                                     "hardware/mi300x-8.json", "hardware/h100-superpod-256.json",
                                     "hardware/gaudi2-128.json"};
static const int64_t inv_nodes[] = {0, 1, 0, 0, 4};
static const char *const inv_cfgs[] = {
  "configs/llm-pretrain-fsdp.json", "configs/llm-pretrain-tp-fsdp.json", "configs/llm-pretrain-tp-ddp.json",
  "configs/llm-inference-tp.json", "configs/llm-finetune.json", "configs/dlrm-pretrain-fsdp-mp.json",
  "configs/dlrm-pretrain-tp-ddp-mp.json", "configs/llm-pretrain-ddp.json",
  /* pipeline: 2 interleaved stages of TP x data parallel, 8 micro-batches per replica */
  "{\"name\":\"pp\",\"task\":\"pretrain\",\"global_batch\":1024,\"micro_batch\":1,\"recompute\":\"selective\","
  "\"pipeline\":{\"degree\":2,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":2},"
  "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":\"node\"},{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]}}",
};

START_TEST(test_invariants)
{
  guint valid = 0;
  for (guint mi = 0; mi < G_N_ELEMENTS(inv_models); mi++) {
    for (guint hi = 0; hi < G_N_ELEMENTS(inv_hw); hi++) {
      for (guint ci = 0; ci < G_N_ELEMENTS(inv_cfgs); ci++) {
        g_autoptr(GError) error = NULL;
        MmSimOptions opt = {.nodes = inv_nodes[hi]};
        g_autoptr(MmSimulation) x = mm_test_sim(inv_models[mi], inv_hw[hi], inv_cfgs[ci], &opt, &error);
        if (!x) {
          ck_assert_msg(error->domain == MM_CONFIG_ERROR, "%s", error->message); /* rejected as input: fine */
          continue;
        }
        valid++;
        const MmRunMetrics *r = &x->metrics;
        const char *what = inv_cfgs[ci];
        double it = r->iteration_time_s, eps = 1e-9 * it + 1e-12;
        /* at least the compute stream's serial work and any one stream's busy time */
        ck_assert_msg(it + eps >= r->compute_s + r->embedding_s, "%s: below compute", what);
        for (int s = 0; s < MM_STREAM_COUNT; s++) ck_assert_msg(it + eps >= r->stream_busy_s[s], "%s: below a stream", what);
        /* at most everything serialized */
        ck_assert_msg(it <= r->compute_s + r->embedding_s + r->comm_s + eps, "%s: above serialized", what);
        ck_assert(r->exposed_comm_fraction >= 0 && r->exposed_comm_fraction <= 1);
        ck_assert(r->exposed_comm_s <= r->comm_s + eps);
        ck_assert(r->mfu > 0 && r->mfu < 1);
        /* more bandwidth or FLOP/s never makes an iteration slower */
        double base = it;
        const double c2 = at_scale(x, 2.0, 1.0, 1.0);
        ck_assert_msg(c2 <= base + eps, "%s: faster compute slowed it", what);
        const double n2 = at_scale(x, 2.0, 1.0, 2.0);
        ck_assert_msg(n2 <= c2 + eps, "%s: more bandwidth slowed it", what);
        const double h2 = at_scale(x, 2.0, 2.0, 2.0);
        ck_assert_msg(h2 <= n2 + eps, "%s: faster HBM slowed it", what);
      }
    }
  }
  ck_assert_msg(valid >= 40, "only %u valid scenarios", valid);
  fprintf(stderr, "invariants checked on %u scenarios\n", valid);
}
END_TEST

START_TEST(test_cli_run_json_deterministic)
{
  const char *args[] = {"run", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                        "configs/dlrm-pretrain-fsdp-mp.json", "--json", "-", NULL};
  g_autofree char *o1 = NULL, *o2 = NULL;
  ck_assert_int_eq(mm_test_cli(args, &o1, NULL), 0);
  ck_assert_int_eq(mm_test_cli(args, &o2, NULL), 0);
  ck_assert_str_eq(o1, o2);
  cJSON *root = cJSON_Parse(o1);
  ck_assert_ptr_nonnull(root);
  static const char *const keys[] = {"iteration_time_s", "mfu", "exposed_comm_s", "exposed_comm_fraction"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, keys[i])), "missing %s", keys[i]);
  const cJSON *se = cJSON_GetObjectItemCaseSensitive(root, "serialized");
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(se, "embedding_s")));
  const cJSON *bk = cJSON_GetObjectItemCaseSensitive(se, "comm_by_kind");
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(bk, "p2p")));
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "throughput"),
                                                            "samples_per_s")));
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "overlap"),
                                                            "hidden_comm_s")));
  ck_assert(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "memory"), "fits")));
  cJSON_Delete(root);
}
END_TEST

START_TEST(test_cli_trace_and_oom)
{
  g_autofree char *tp = g_build_filename(mm_test_tmpdir(), "trace.json", NULL);
  const char *args[] = {"run", "-m", "models/gpt3-175b.json", "-H", "hardware/zionex-a100-128.json", "-c",
                        "configs/llm-pretrain-ddp.json", "--trace", tp, NULL};
  g_autofree char *out = NULL, *err = NULL;
  /* DDP of GPT-3 on 40 GB GPUs: out of memory, still a result (exit 0) and said loudly */
  ck_assert_int_eq(mm_test_cli(args, &out, &err), 0);
  ck_assert_ptr_nonnull(strstr(out, "OUT OF MEMORY"));
  ck_assert_ptr_nonnull(strstr(err, "OUT OF MEMORY"));
  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(tp, &text, NULL, NULL));
  cJSON *root = cJSON_Parse(text);
  ck_assert_msg(root != NULL, "trace is not JSON");
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  ck_assert_int_gt(cJSON_GetArraySize(ev), 100);
  gboolean named = FALSE;
  for (const cJSON *e = ev->child; e; e = e->next) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, "all_reduce ddp bwd") == 0) named = TRUE;
    if (cJSON_IsString(n) && strcmp(n->valuestring, "decoder.5 fwd") == 0) named = TRUE;
  }
  ck_assert(named);
  cJSON_Delete(root);
}
END_TEST

/* The examples the README and the issue name: each runs and reports a time. */
START_TEST(test_shipped_examples_run)
{
  static const char *const ex[][4] = {
    {"models/dlrm-a.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-fsdp-mp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-tp-fsdp.json", "0"},
    {"models/gpt3-175b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", "0"},
    {"models/gpt3-175b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-tp-fsdp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-inference-tp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-finetune.json", "0"},
    {"models/llama3-8b.json", "hardware/dgx-h100-2048.json", "configs/llama3-8b-pretrain.json", "8"},
    {"models/llama3-70b.json", "hardware/dgx-h100-2048.json", "configs/llama3-70b-pretrain.json", "64"},
    {"models/llama3-70b.json", "hardware/dgx-h100-2048.json", "configs/llama3-70b-serving-tp8.json", "1"},
    {"models/llama3-405b.json", "hardware/dgx-h100-2048.json", "configs/llama3-405b-pretrain.json", "2048"},
    {"models/llama3-405b.json", "hardware/dgx-h100-2048.json", "configs/llama3-405b-long-context.json", "2048"},
    {"models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", "configs/mixtral-pretrain-ep.json", "8"},
    {"models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", "configs/mixtral-serving-tp2.json", "1"},
    {"models/deepseek-v3.json", "hardware/h800-2048.json", "configs/deepseek-v3-pretrain.json", "0"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(ex); i++) {
    const char *args[] = {"run", "-m", ex[i][0], "-H", ex[i][1], "-c", ex[i][2], "--nodes", ex[i][3], "--json", "-", NULL};
    if (strcmp(ex[i][3], "0") == 0) args[7] = "--json", args[8] = "-", args[9] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(mm_test_cli(args, &out, &err) == 0, "%s %s %s: %s", ex[i][0], ex[i][1], ex[i][2], err);
    cJSON *root = cJSON_Parse(out);
    ck_assert_ptr_nonnull(root);
    double t = cJSON_GetObjectItemCaseSensitive(root, "iteration_time_s")->valuedouble;
    ck_assert_msg(t > 0 && t < 3600, "%s: %g s", ex[i][2], t);
    cJSON_Delete(root);
  }
}
END_TEST

START_TEST(test_validate_runs)
{
  const char *args[] = {"validate", "configs/validation/training.json", "--json", "-", NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_msg(mm_test_cli(args, &out, &err) == 0, "%s", err);
  cJSON *root = cJSON_Parse(out);
  ck_assert_ptr_nonnull(root);
  const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
  ck_assert_int_ge(cJSON_GetArraySize(cases), 30);
  for (const cJSON *c = cases->child; c; c = c->next) {
    double pred = cJSON_GetObjectItemCaseSensitive(c, "predicted")->valuedouble;
    ck_assert(pred > 0 && isfinite(pred));
  }
  ck_assert_int_gt(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "skipped")), 0);
  cJSON_Delete(root);
}
END_TEST

static Suite *run_suite(void)
{
  Suite *s = suite_create("run");
  TCase *tc = tcase_create("run");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_tp_allreduces);
  tcase_add_test(tc, test_fsdp_gathers_and_order);
  tcase_add_test(tc, test_fsdp_prefetch_hides_gathers);
  tcase_add_test(tc, test_ddp_buckets);
  tcase_add_test(tc, test_overlap_param_gather);
  tcase_add_test(tc, test_fp8_recipes);
  tcase_add_test(tc, test_attention_kernel);
  tcase_add_test(tc, test_recompute_num_layers);
  tcase_add_test(tc, test_fsdp_no_reshard);
  tcase_add_test(tc, test_sliding_window_kv_cache);
  tcase_add_test(tc, test_lamb_adafactor);
  tcase_add_test(tc, test_single_device_closed_form);
  tcase_add_test(tc, test_hierarchy_order_matters);
  tcase_add_test(tc, test_finetune_and_inference);
  tcase_add_test(tc, test_dlrm_all_to_all);
  tcase_add_test(tc, test_per_device_agrees);
  tcase_add_test(tc, test_invariants);
  tcase_add_test(tc, test_wide_fan_in_and_out);
  tcase_add_test(tc, test_point_overrides_match_fresh_files);
  tcase_add_test(tc, test_cli_run_json_deterministic);
  tcase_add_test(tc, test_cli_trace_and_oom);
  tcase_add_test(tc, test_shipped_examples_run);
  tcase_add_test(tc, test_validate_runs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(run_suite());
}
