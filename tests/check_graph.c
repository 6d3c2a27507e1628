/* check_graph: parameters, FLOPs, bytes and activations of the layer graph against closed forms. */
#include <math.h>
#include <string.h>

#include "graph/graph.h"
#include "testutil.h"

static MmModel *load_model(const char *rel)
{
  g_autofree char *p = mm_test_src(rel);
  g_autoptr(GError) error = NULL;
  MmModel *m = mm_model_load(p, &error);
  ck_assert_msg(m != NULL, "%s", error ? error->message : "");
  return m;
}

static MmModel *parse_model(const char *text)
{
  g_autoptr(GError) error = NULL;
  MmModel *m = mm_model_parse("inline.json", text, strlen(text), &error);
  ck_assert_msg(m != NULL, "%s", error ? error->message : "");
  return m;
}

START_TEST(test_gpt3_params)
{
  g_autoptr(MmModel) m = load_model("models/gpt3-175b.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  /* 12 L h^2 + 13 L h (layers) + (V + s) h (embeddings, head tied) + 2h (final norm) */
  double L = 96, h = 12288, V = 50257, s = 2048;
  double expect = 12 * L * h * h + 13 * L * h + (V + s) * h + 2 * h;
  ck_assert_double_eq_tol((double)g->total_params, expect, 0.5);
  ck_assert_double_eq_tol((double)g->total_params / 174.6e9, 1.0, 0.01);
}
END_TEST

START_TEST(test_llama2_params)
{
  g_autoptr(MmModel) m = load_model("models/llama2-70b.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  ck_assert_double_eq_tol((double)g->total_params / 69.0e9, 1.0, 0.01);
  /* GQA: the QKV projection is h x (h + 2 kv dh) with dh = h / heads */
  const MmLayer *qkv = mm_test_layer(g, 1, MM_ROLE_QKV);
  ck_assert_int_eq(qkv->cost.params, 8192LL * (8192 + 2 * 8 * 128));
  /* SwiGLU: three matrices of h x ffn */
  const MmLayer *up = mm_test_layer(g, 1, MM_ROLE_FFN_UP);
  const MmLayer *down = mm_test_layer(g, 1, MM_ROLE_FFN_DOWN);
  ck_assert_int_eq(up->cost.params + down->cost.params, 3LL * 8192 * 28672);
  ck_assert_uint_eq(g->n_units, 82);
}
END_TEST

/* Training FLOPs per token against the usual closed form 6N + 12 L s h. */
static void check_six_n(const char *rel, double L, double s, double h)
{
  g_autoptr(MmModel) m = load_model(rel);
  g_autoptr(MmGraph) g = mm_graph_new(m);
  double per_token = mm_graph_train_flops_per_sample(g) / g->tokens_per_sample;
  double closed = 6.0 * (double)g->total_params + 12.0 * L * s * h;
  ck_assert_msg(fabs(per_token / closed - 1.0) < 0.02, "%s: %.4g vs closed form %.4g (%.2f%%)", rel, per_token,
                closed, 100.0 * (per_token / closed - 1.0));
}

START_TEST(test_six_n_plus_attention)
{
  check_six_n("models/gpt3-175b.json", 96, 2048, 12288);
  check_six_n("models/llama2-70b.json", 80, 4096, 8192);
  check_six_n("models/llama-65b.json", 80, 2048, 8192);
}
END_TEST

START_TEST(test_attention_seq_squared)
{
#define TMPL "{\"name\":\"t\",\"seq_len\":%d,\"blocks\":[{\"kind\":\"transformer\",\"count\":1," \
             "\"hidden\":256,\"heads\":8,\"ffn\":1024}]}"
  g_autofree char *t1 = g_strdup_printf(TMPL, 512);
  g_autofree char *t2 = g_strdup_printf(TMPL, 1024);
#undef TMPL
  g_autoptr(MmModel) m1 = parse_model(t1);
  g_autoptr(MmModel) m2 = parse_model(t2);
  g_autoptr(MmGraph) g1 = mm_graph_new(m1);
  g_autoptr(MmGraph) g2 = mm_graph_new(m2);
  const MmLayer *a1 = mm_test_layer(g1, 0, MM_ROLE_ATTN_CORE);
  const MmLayer *a2 = mm_test_layer(g2, 0, MM_ROLE_ATTN_CORE);
  double s = 512, h = 256, heads = 8;
  /* QK^T and AV: 2 s^2 h each, softmax 5 flops per score */
  ck_assert_double_eq_tol(a1->cost.fwd_flops, 4 * s * s * h + 5 * heads * s * s, 1);
  ck_assert_double_eq_tol(a2->cost.fwd_flops / a1->cost.fwd_flops, 4.0, 1e-12);
  /* backward of the core has no weights and costs twice the forward */
  ck_assert_double_eq_tol(a1->cost.bwd_input_flops, 2 * a1->cost.fwd_flops, 1);
  ck_assert_double_eq(a1->cost.bwd_weight_flops, 0);
  /* causal flash kernels execute half the forward */
  ck_assert_double_eq_tol(a1->cost.fwd_exec_flops, 0.5 * a1->cost.fwd_flops, 1);
  /* projections are linear in s */
  const MmLayer *q1 = mm_test_layer(g1, 0, MM_ROLE_QKV);
  const MmLayer *q2 = mm_test_layer(g2, 0, MM_ROLE_QKV);
  ck_assert_double_eq_tol(q2->cost.fwd_flops / q1->cost.fwd_flops, 2.0, 1e-12);
  ck_assert_double_eq_tol(q1->cost.fwd_flops, 2 * s * h * 3 * h, 1);
}
END_TEST

/* Sliding-window attention: a windowed layer's core counts s x w (model FLOPs) and executes the causal
 * band s w - w (w - 1) / 2; every global_every-th layer attends to everything; decode reads the window. */
START_TEST(test_sliding_window)
{
  const char *full = "{\"name\":\"t\",\"seq_len\":4096,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
                     "\"hidden\":256,\"heads\":8,\"ffn\":1024}]}";
  const char *swa = "{\"name\":\"t\",\"seq_len\":4096,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
                    "\"hidden\":256,\"heads\":8,\"ffn\":1024,\"sliding_window\":512,\"global_every\":2}]}";
  g_autoptr(MmModel) mf = parse_model(full);
  g_autoptr(MmModel) ms = parse_model(swa);
  g_autoptr(MmGraph) gf = mm_graph_new(mf);
  g_autoptr(MmGraph) gs = mm_graph_new(ms);
  const double s = 4096, w = 512;
  const MmLayer *f0 = mm_test_layer(gf, 0, MM_ROLE_ATTN_CORE);
  for (guint u = 0; u < 4; u++) {
    const MmLayer *l = mm_test_layer(gs, u, MM_ROLE_ATTN_CORE);
    if (u % 2 == 1) { /* layers 2 and 4: global */
      ck_assert_double_eq(l->cost.fwd_flops, f0->cost.fwd_flops);
      ck_assert_double_eq(l->cost.fwd_exec_flops, f0->cost.fwd_exec_flops);
      continue;
    }
    ck_assert_double_eq_tol(l->cost.fwd_flops, f0->cost.fwd_flops * w / s, 1e-9 * f0->cost.fwd_flops);
    ck_assert_double_eq_tol(l->cost.fwd_exec_flops, l->cost.fwd_flops * (s * w - w * (w - 1) / 2) / (s * w),
                            1e-9 * l->cost.fwd_flops);
    ck_assert_double_eq(l->kernel.n, w); /* the kernel's keys */
  }
  /* projections do not change */
  ck_assert_double_eq(mm_test_layer(gs, 0, MM_ROLE_QKV)->cost.fwd_flops, mm_test_layer(gf, 0, MM_ROLE_QKV)->cost.fwd_flops);
  /* a decode step at 4096 tokens of context: a windowed layer reads 512 cached tokens */
  MmGraphPass step = {1, 4096, TRUE, TRUE, TRUE, TRUE, FALSE};
  g_autoptr(MmGraph) df = mm_graph_new_pass(mf, &step);
  g_autoptr(MmGraph) ds = mm_graph_new_pass(ms, &step);
  const MmLayer *dl = mm_test_layer(ds, 0, MM_ROLE_ATTN_CORE), *dg = mm_test_layer(ds, 1, MM_ROLE_ATTN_CORE);
  const MmLayer *dfull = mm_test_layer(df, 0, MM_ROLE_ATTN_CORE);
  ck_assert_double_eq(dg->cost.fwd_bytes, dfull->cost.fwd_bytes);
  ck_assert_double_lt(dl->cost.fwd_bytes, 0.2 * dfull->cost.fwd_bytes);
  ck_assert_double_eq_tol(dl->cost.fwd_flops, dfull->cost.fwd_flops * w / s, 1e-9 * dfull->cost.fwd_flops);
}
END_TEST

START_TEST(test_eager_attention_keeps_scores)
{
#define BASE "{\"name\":\"t\",\"seq_len\":1024,\"blocks\":[{\"kind\":\"transformer\",\"count\":1," \
             "\"hidden\":256,\"heads\":8,\"ffn\":1024,\"attention\":\"%s\"}]}"
  g_autofree char *tf = g_strdup_printf(BASE, "flash");
  g_autofree char *te = g_strdup_printf(BASE, "eager");
#undef BASE
  g_autoptr(MmModel) mf = parse_model(tf);
  g_autoptr(MmModel) me = parse_model(te);
  g_autoptr(MmGraph) gf = mm_graph_new(mf);
  g_autoptr(MmGraph) ge = mm_graph_new(me);
  double diff = mm_test_layer(ge, 0, MM_ROLE_ATTN_CORE)->cost.act_bytes - mm_test_layer(gf, 0, MM_ROLE_ATTN_CORE)->cost.act_bytes;
  ck_assert_double_eq_tol(diff, 8.0 * 1024 * 1024 * 2, 0.5); /* heads x s^2 x 2 bytes */
}
END_TEST

START_TEST(test_moe_counts)
{
  const char *dense = "{\"name\":\"d\",\"seq_len\":128,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,"
                      "\"hidden\":256,\"heads\":8,\"ffn\":1024}]}";
  const char *moe = "{\"name\":\"m\",\"seq_len\":128,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,"
                    "\"hidden\":256,\"heads\":8,\"ffn\":1024,\"experts\":8,\"top_k\":2}]}";
  g_autoptr(MmModel) md = parse_model(dense);
  g_autoptr(MmModel) mm = parse_model(moe);
  g_autoptr(MmGraph) gd = mm_graph_new(md);
  g_autoptr(MmGraph) gm = mm_graph_new(mm);
  const MmLayer *ud = mm_test_layer(gd, 0, MM_ROLE_FFN_UP), *um = mm_test_layer(gm, 0, MM_ROLE_FFN_UP);
  /* all experts for parameters, top_k experts for FLOPs */
  ck_assert_int_eq(um->cost.params, 8 * ud->cost.params);
  ck_assert_double_eq_tol(um->cost.fwd_flops, 2 * ud->cost.fwd_flops, 1);
  ck_assert(um->expert && !ud->expert);
  /* the router: h x experts */
  ck_assert_int_eq(mm_test_layer(gm, 0, MM_ROLE_ROUTER)->cost.params, 256 * 8);
  /* active params: dense part + 2 of 8 experts */
  double expert = 2.0 * (double)(um->cost.params + mm_test_layer(gm, 0, MM_ROLE_FFN_DOWN)->cost.params);
  ck_assert_double_eq_tol(gm->active_params, (double)gm->total_params - expert * 6.0 / 8.0, 1);
}
END_TEST

START_TEST(test_dlrm_a)
{
  g_autoptr(MmModel) m = load_model("models/dlrm-a.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  /* 4096 x 2.08M x 94 tables + 20 x 3994^2 MLP weights = 801.17 B (MAD-Max artifact) */
  ck_assert_int_eq(g->total_params, 4096LL * 2080000 * 94 + 20LL * 3994 * 3994);
  /* MLP forward: 2 x 20 x 3994^2 = 638.08 MFLOP per sample (MAD-Max Table II) */
  double mlp = 0;
  for (guint l = 0; l < g->n_layers; l++)
    if (g->layers[l].role == MM_ROLE_MLP_FC) mlp += g->layers[l].cost.fwd_flops;
  ck_assert_double_eq_tol(mlp, 638.08e6, 0.01e6);
  /* lookup bytes per sample: 4096 tables x 15 lookups x 94 x 2 bytes = 11.55 MB */
  const MmLayer *lk = mm_test_layer(g, 0, MM_ROLE_EMB_LOOKUP);
  ck_assert_double_eq_tol(lk->cost.fwd_bytes - lk->cost.out_bytes, 4096.0 * 15 * 94 * 2, 1);
  ck_assert_double_eq_tol(lk->cost.out_bytes, 4096.0 * 94 * 2, 1);
}
END_TEST

START_TEST(test_interaction_dot)
{
  const char *text = "{\"name\":\"t\",\"dtype\":\"fp32\",\"blocks\":["
                     "{\"kind\":\"embedding_bag\",\"tables\":26,\"rows\":1000,\"dim\":64,\"pooling\":1},"
                     "{\"kind\":\"mlp\",\"count\":3,\"width\":64,\"input_dim\":13},"
                     "{\"kind\":\"interaction\",\"op\":\"dot\"},"
                     "{\"kind\":\"mlp\",\"count\":2,\"width\":512,\"input_dim\":415,\"output_dim\":1}]}";
  g_autoptr(MmModel) m = parse_model(text);
  ck_assert_int_eq(m->blocks[2].features, 27); /* 26 tables + the dense vector */
  ck_assert_int_eq(m->blocks[2].dim, 64);
  g_autoptr(MmGraph) g = mm_graph_new(m);
  const MmLayer *ix = mm_test_layer(g, 4, MM_ROLE_INTERACT);
  ck_assert_double_eq_tol(ix->cost.fwd_flops, 2.0 * 27 * 27 * 64, 0.5);
  /* first layer 13 -> 64, last 512 -> 1 */
  ck_assert_int_eq(mm_test_layer(g, 1, MM_ROLE_MLP_FC)->cost.params, 13 * 64);
  ck_assert_int_eq(mm_test_layer(g, 6, MM_ROLE_MLP_FC)->cost.params, 512 * 1);
}
END_TEST

START_TEST(test_frozen_parts_are_separate)
{
  g_autoptr(MmModel) m = load_model("models/llama2-70b.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  for (guint l = 0; l < g->n_layers; l++) {
    const MmLayer *ly = &g->layers[l];
    if (ly->cls != MM_LAYER_GEMM) continue;
    /* a GEMM's weight-gradient equals its forward; a frozen layer drops exactly this part */
    ck_assert_double_eq_tol(ly->cost.bwd_weight_flops, ly->cost.fwd_flops, 1e-6 * ly->cost.fwd_flops);
    ck_assert_double_eq_tol(ly->cost.bwd_input_flops, ly->cost.fwd_flops, 1e-6 * ly->cost.fwd_flops);
  }
}
END_TEST

START_TEST(test_names)
{
  g_autoptr(MmModel) m = load_model("models/llama2-70b.json");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  g_autofree char *u = mm_graph_unit_name(g, 18);
  g_autofree char *l = mm_graph_layer_name(g, g->units[18].first_layer + 1);
  ck_assert_str_eq(u, "decoder.17");
  ck_assert_str_eq(l, "decoder.17.qkv");
  g_autofree char *e = mm_graph_unit_name(g, 0);
  ck_assert_str_eq(e, "embed");
}
END_TEST


/* ---- parallel attention + MLP blocks ----------------------------------------------- */

/* A GPT-J-like stack (layernorm, gelu, bf16): s 2048, h 4096, 16 heads, ffn 16384, 4 layers. */
static char *pblock_model(const char *kind)
{
  return g_strdup_printf("{\"name\":\"pj\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
                         "\"hidden\":4096,\"heads\":16,\"ffn\":16384,\"parallel_block\":\"%s\"}]}", kind);
}

START_TEST(test_parallel_block_graph)
{
  g_autofree char *ts = pblock_model("none"), *tsh = pblock_model("shared_norm"), *t2 = pblock_model("two_norms");
  g_autoptr(MmModel) ms = parse_model(ts);
  g_autoptr(MmModel) msh = parse_model(tsh);
  g_autoptr(MmModel) m2 = parse_model(t2);
  g_autoptr(MmGraph) gs = mm_graph_new(ms);
  g_autoptr(MmGraph) gsh = mm_graph_new(msh);
  g_autoptr(MmGraph) g2 = mm_graph_new(m2);
  const double L = 4, s = 2048, h = 4096, e = 2;
  /* GPT-NeoX's two norms: the same ops as the sequential block, so the same costs, except the
   * residual adds: one of both branches per layer (read 3 s x h, write 1) for two of one each
   * (read 2, write 1, twice), forward and backward */
  ck_assert_uint_eq(g2->n_layers, gs->n_layers);
  ck_assert_int_eq(g2->total_params, gs->total_params);
  ck_assert_double_eq_tol(gs->total.fwd_bytes - g2->total.fwd_bytes, L * 2 * s * h * e, 1);
  ck_assert_double_eq_tol(gs->total.bwd_input_bytes - g2->total.bwd_input_bytes, L * 2 * s * h * e, 1);
  MmCost same = g2->total;
  same.fwd_bytes = gs->total.fwd_bytes, same.bwd_input_bytes = gs->total.bwd_input_bytes;
  ck_assert(memcmp(&same, &gs->total, sizeof(MmCost)) == 0);
  /* one shared layernorm: per layer one norm fewer (2h params, 8 FLOPs per element forward, 16
   * backward, 2 per element for its weight gradient), and two s x h inputs fewer kept: the
   * second norm's and the up-projection's (it reads qkv's, kept once) */
  ck_assert_uint_eq(gsh->n_layers, gs->n_layers - 4);
  ck_assert_uint_eq(gsh->units[0].n_layers, 7);
  ck_assert_int_eq(gs->total_params - gsh->total_params, (int64_t)(L * 2 * h));
  ck_assert_double_eq_tol(gs->total.fwd_flops - gsh->total.fwd_flops, L * 8 * s * h, 1e-3);
  ck_assert_double_eq_tol(gs->total.bwd_input_flops - gsh->total.bwd_input_flops, L * 16 * s * h, 1e-3);
  ck_assert_double_eq_tol(gs->total.bwd_weight_flops - gsh->total.bwd_weight_flops, L * 2 * s * h, 1e-3);
  ck_assert_double_eq_tol(gs->total.act_bytes - gsh->total.act_bytes, L * 2 * s * h * e, 1e-3);
  /* the GEMMs are untouched */
  const MmLayer *up = mm_test_layer(gsh, 0, MM_ROLE_FFN_UP), *up0 = mm_test_layer(gs, 0, MM_ROLE_FFN_UP);
  ck_assert_double_eq(up->cost.fwd_flops, up0->cost.fwd_flops);
  ck_assert_double_eq(up->cost.act_bytes, 0);
}
END_TEST

/* The residual adds: a pre-norm layer's two (x + attention, then + MLP) each read two s x h tensors
 * and write one, forward and backward, charged to the MLP's norm; the attention's norm is a norm
 * alone (read one, write one); a shared-norm parallel block's one add of both branches (read three,
 * write one) goes to its one norm. Their bytes change no FLOP count and keep nothing. */
START_TEST(test_residual_adds)
{
  g_autofree char *ts = pblock_model("none"), *tsh = pblock_model("shared_norm");
  g_autoptr(MmModel) ms = parse_model(ts);
  g_autoptr(MmModel) msh = parse_model(tsh);
  g_autoptr(MmGraph) gs = mm_graph_new(ms);
  g_autoptr(MmGraph) gsh = mm_graph_new(msh);
  const double s = 2048, h = 4096, e = 2, x = s * h * e;
  const MmLayer *na = mm_test_layer(gs, 0, MM_ROLE_NORM_ATTN), *nf = mm_test_layer(gs, 0, MM_ROLE_NORM_FFN);
  ck_assert_double_eq(na->cost.fwd_bytes, 2 * x);
  ck_assert_double_eq(na->cost.bwd_input_bytes, 3 * x);
  ck_assert_double_eq(nf->cost.fwd_bytes, 2 * x + 2 * 3 * x);
  ck_assert_double_eq(nf->cost.bwd_input_bytes, 3 * x + 2 * 3 * x);
  ck_assert_double_eq(nf->cost.fwd_flops, na->cost.fwd_flops);
  ck_assert_double_eq(nf->cost.act_bytes, na->cost.act_bytes);
  const MmLayer *one = mm_test_layer(gsh, 0, MM_ROLE_NORM_ATTN);
  ck_assert_double_eq(one->cost.fwd_bytes, 2 * x + 4 * x);
  ck_assert_double_eq(one->cost.bwd_input_bytes, 3 * x + 4 * x);
  for (guint l = gsh->units[0].first_layer; l < gsh->units[0].first_layer + gsh->units[0].n_layers; l++)
    ck_assert(gsh->layers[l].role != MM_ROLE_NORM_FFN);
  /* dropout on both branches (Megatron's fused bias-dropout-add): each add also writes a 1-byte
   * mask, and backward each branch's gradient reads its output gradient and mask and writes its
   * input gradient; the masks are kept by the branches' GEMMs, whose bytes do not change */
  g_autofree char *td = g_strdup_printf("{\"name\":\"pd\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"transformer\","
                                        "\"count\":4,\"hidden\":4096,\"heads\":16,\"ffn\":16384,\"dropout\":true}]}");
  g_autoptr(MmModel) md = parse_model(td);
  g_autoptr(MmGraph) gd = mm_graph_new(md);
  const double n = s * h;
  const MmLayer *nfd = mm_test_layer(gd, 0, MM_ROLE_NORM_FFN);
  ck_assert_double_eq(nfd->cost.fwd_bytes, 2 * x + 2 * (3 * x + n));
  ck_assert_double_eq(nfd->cost.bwd_input_bytes, 3 * x + 2 * (3 * x + 2 * x + n));
  ck_assert_double_eq(mm_test_layer(gd, 0, MM_ROLE_ATTN_OUT)->cost.fwd_bytes,
                      mm_test_layer(gs, 0, MM_ROLE_ATTN_OUT)->cost.fwd_bytes);
  ck_assert_double_eq(mm_test_layer(gd, 0, MM_ROLE_ATTN_OUT)->cost.act_bytes,
                      mm_test_layer(gs, 0, MM_ROLE_ATTN_OUT)->cost.act_bytes + n);
  /* inference runs in eval mode: the dropout model's forward costs and keeps what the plain one does */
  const MmGraphPass eval = {.inference = TRUE};
  g_autoptr(MmGraph) ge = mm_graph_new_pass(md, &eval);
  ck_assert(memcmp(&ge->total, &gs->total, sizeof(MmCost)) == 0);
  /* a MoE layer's one MLP dropout: on the routed experts' output, not also on its shared experts' */
  static const char *const moe_fmt = "{\"name\":\"m\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"transformer\","
                                     "\"count\":1,\"hidden\":1024,\"heads\":8,\"ffn\":512,\"experts\":8,"
                                     "\"top_k\":2,\"shared_experts\":1,\"dropout\":%s}]}";
  g_autofree char *tm = g_strdup_printf(moe_fmt, "true");
  g_autofree char *tn = g_strdup_printf(moe_fmt, "false");
  g_autoptr(MmModel) mmd = parse_model(tm);
  g_autoptr(MmModel) mmn = parse_model(tn);
  g_autoptr(MmGraph) gmd = mm_graph_new(mmd);
  g_autoptr(MmGraph) gmn = mm_graph_new(mmn);
  /* two masks of s x h bytes in the layer (attention's, the MLP's), however many FFNs it has */
  ck_assert_double_eq(gmd->total.act_bytes - gmn->total.act_bytes, 2 * 2048.0 * 1024);
  /* a serving pass fuses each add into the norm after it (read 2, write 2 in all): 2 s h more each */
  const MmGraphPass prefill = {.tokens = 2048, .context = 2048, .kv_cache = TRUE};
  g_autoptr(MmGraph) gp = mm_graph_new_pass(ms, &prefill);
  ck_assert_double_eq(mm_test_layer(gp, 0, MM_ROLE_NORM_FFN)->cost.fwd_bytes, 2 * x + 2 * 2 * x);
}
END_TEST

/* ---- DeepSeek-V3 multi-token prediction ---------------------------------------------- */

/* A small DeepSeek-like model: embedding, one MoE block of 2 layers, rmsnorm head. */
static char *mtp_model(int depth, const char *head)
{
  return g_strdup_printf(
    "{\"name\":\"ds\",\"seq_len\":1024,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":32000,\"hidden\":1024},"
    "{\"kind\":\"transformer\",\"name\":\"moe\",\"count\":2,\"hidden\":1024,\"heads\":8,\"ffn\":512,"
    "\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\",\"experts\":16,\"top_k\":2,\"shared_experts\":1,\"mtp_depth\":%d}%s]}",
    depth, head);
}

static const char *const RMS_HEAD = ",{\"kind\":\"lm_head\",\"vocab\":32000,\"hidden\":1024,\"norm\":\"rmsnorm\"}";

START_TEST(test_mtp_graph)
{
  g_autofree char *t0 = mtp_model(0, RMS_HEAD), *t1 = mtp_model(1, RMS_HEAD), *t2 = mtp_model(2, RMS_HEAD);
  g_autoptr(MmModel) m0 = parse_model(t0);
  g_autoptr(MmModel) m1 = parse_model(t1);
  g_autoptr(MmModel) m2 = parse_model(t2);
  g_autoptr(MmGraph) g0 = mm_graph_new(m0);
  g_autoptr(MmGraph) g1 = mm_graph_new(m1);
  g_autoptr(MmGraph) g2 = mm_graph_new(m2);
  /* the modules are one block appended after the head, a unit per depth, on no stage's split */
  ck_assert_uint_eq(m1->n_blocks, m0->n_blocks + 1);
  const MmBlock *mb = &m1->blocks[m1->n_blocks - 1];
  ck_assert_str_eq(mb->name, "moe_mtp");
  ck_assert(mb->mtp && mb->mtp_source == 1 && mb->count == 1 && !mm_block_is_layers(mb));
  ck_assert_int_eq(m2->blocks[m2->n_blocks - 1].count, 2);
  /* parameters: two RMSNorms (h each), the 2h x h projection, one layer of the MoE block, the
   * head's own RMSNorm (h); the embedding and the output matrix are shared */
  const double s = 1024, h = 1024, V = 32000;
  const MmCost *moe = &g0->block_cost[1], *head = &g0->block_cost[2];
  const double layer_params = (double)moe->params / 2;
  const double extra = 2 * h + 2 * h * h + layer_params + h;
  ck_assert_double_eq((double)(g1->total_params - g0->total_params), extra);
  ck_assert_double_eq((double)(g2->total_params - g0->total_params), 2 * extra);
  /* FLOPs per sample: one layer + the projection (2 s 2h h) + the head (norm, s x h x V logits,
   * loss) + the two norms (5 per element of 2 s h), and the shared lookup (no forward FLOPs) */
  const double fwd = moe->fwd_flops / 2 + 2 * s * 2 * h * h + head->fwd_flops + 5 * 2 * s * h;
  ck_assert_double_eq_tol(g1->total.fwd_flops - g0->total.fwd_flops, fwd, 1e-9 * fwd);
  const double bwd_in = moe->bwd_input_flops / 2 + 2 * s * 2 * h * h + head->bwd_input_flops + 10 * 2 * s * h;
  ck_assert_double_eq_tol(g1->total.bwd_input_flops - g0->total.bwd_input_flops, bwd_in, 1e-9 * bwd_in);
  ck_assert_double_eq_tol(head->fwd_flops, 5 * s * h + 2 * s * h * V + 5 * V * s, 1e-9 * head->fwd_flops);
  /* the MTP head's logits read the shared matrix: no parameters, the same work */
  const MmLayer *lg = mm_test_layer(g1, g1->n_units - 1, MM_ROLE_LOGITS);
  ck_assert_int_eq(lg->cost.params, 0);
  ck_assert_double_eq(lg->cost.fwd_flops, 2 * s * h * V);
}
END_TEST

START_TEST(test_bad_blocks)
{
  /* mtp_depth needs the lm_head last (its output head is shared); parallel blocks are dense */
  g_autofree char *nohead = mtp_model(1, "");
  g_autofree char *moe_par = g_strdup("{\"name\":\"x\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":1,"
                                      "\"hidden\":64,\"heads\":4,\"ffn\":64,\"experts\":4,\"parallel_block\":\"shared_norm\"}]}");
  g_autofree char *bad_kind = pblock_model("yes");
  const char *const texts[] = {nohead, moe_par, bad_kind};
  const char *const paths[] = {"$.blocks[1].mtp_depth", "$.blocks[0].parallel_block", "$.blocks[0].parallel_block"};
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(MmModel) m = mm_model_parse("inline.json", texts[i], strlen(texts[i]), &error);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(strstr(error->message, paths[i]) != NULL, "%s", error->message);
    ck_assert_ptr_nonnull(strstr(error->message, "inline.json"));
  }
}
END_TEST

static Suite *graph_suite(void)
{
  Suite *s = suite_create("graph");
  TCase *tc = tcase_create("costs");
  tcase_add_test(tc, test_gpt3_params);
  tcase_add_test(tc, test_llama2_params);
  tcase_add_test(tc, test_six_n_plus_attention);
  tcase_add_test(tc, test_attention_seq_squared);
  tcase_add_test(tc, test_eager_attention_keeps_scores);
  tcase_add_test(tc, test_sliding_window);
  tcase_add_test(tc, test_moe_counts);
  tcase_add_test(tc, test_dlrm_a);
  tcase_add_test(tc, test_interaction_dot);
  tcase_add_test(tc, test_frozen_parts_are_separate);
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_parallel_block_graph);
  tcase_add_test(tc, test_residual_adds);
  tcase_add_test(tc, test_mtp_graph);
  tcase_add_test(tc, test_bad_blocks);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(graph_suite());
}
