/* check_config: loading and validating model, hardware and parallelism files. */
#define _XOPEN_SOURCE 700 /* mkfifo, ftruncate */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "config/config.h"
#include "config/json.h" /* the reader's limits */
#include "testutil.h"

/* ---- every shipped file loads ------------------------------------------ */

static void load_dir(const char *rel, int kind)
{
  g_autofree char *dir = mm_test_src(rel);
  g_autoptr(GError) error = NULL;
  GDir *d = g_dir_open(dir, 0, &error);
  ck_assert_msg(d != NULL, "%s", error ? error->message : "?");
  guint n = 0;
  const char *name;
  while ((name = g_dir_read_name(d))) {
    if (!g_str_has_suffix(name, ".json")) continue;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    gboolean ok = FALSE;
    if (kind == 0) {
      g_autoptr(MmModel) m = mm_model_load(path, &error);
      ok = m != NULL;
    } else if (kind == 1) {
      g_autoptr(MmHardware) h = mm_hardware_load(path, &error);
      ok = h != NULL;
    } else if (kind == 2) {
      g_autoptr(MmParallelConfig) c = mm_parallel_load(path, &error);
      ok = c != NULL;
    } else {
      MmDevice dev;
      ok = mm_device_load(path, &dev, &error);
      mm_device_clear(&dev);
    }
    ck_assert_msg(ok, "%s: %s", path, error ? error->message : "?");
    n++;
  }
  g_dir_close(d);
  ck_assert_uint_ge(n, 7);
}

START_TEST(test_shipped_files_load)
{
  load_dir("models", 0);
  load_dir("hardware", 1);
  load_dir("configs", 2);
  load_dir("hardware/devices", 3);
}
END_TEST

START_TEST(test_shipped_names)
{
  static const char *const must[] = {
    "models/dlrm-a.json", "models/dlrm-b.json", "models/dlrm-a-transformer.json", "models/dlrm-a-moe.json",
    "models/gpt3-175b.json", "models/llama-65b.json", "models/llama2-70b.json", "models/llm-moe-1.8t.json",
    "hardware/devices/a100-40gb.json", "hardware/devices/a100-80gb.json", "hardware/devices/h100-sxm.json",
    "hardware/devices/mi210.json", "hardware/devices/mi250x.json", "hardware/devices/mi300x.json",
    "hardware/devices/gaudi2.json", "hardware/zionex-a100-128.json", "hardware/dgx-a100-2048.json",
    "hardware/dgx-h100-2048.json", "hardware/h100-superpod-256.json", "hardware/mi210-4.json",
    "hardware/mi300x-8.json", "hardware/mi300x-1024.json", "hardware/gaudi2-128.json",
    "configs/llm-pretrain-fsdp.json", "configs/llm-pretrain-ddp.json", "configs/llm-pretrain-tp-fsdp.json",
    "configs/llm-pretrain-tp-ddp.json", "configs/dlrm-pretrain-fsdp-mp.json",
    "configs/dlrm-pretrain-tp-ddp-mp.json", "configs/llm-inference-tp.json", "configs/llm-finetune.json",
  };
  for (guint i = 0; i < G_N_ELEMENTS(must); i++) {
    g_autofree char *p = mm_test_src(must[i]);
    ck_assert_msg(g_file_test(p, G_FILE_TEST_IS_REGULAR), "missing %s", must[i]);
  }
}
END_TEST

START_TEST(test_model_values)
{
  g_autofree char *p = mm_test_src("models/llama2-70b.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(p, &error);
  ck_assert_ptr_nonnull(m);
  ck_assert_uint_eq(m->n_blocks, 3);
  const MmBlock *t = &m->blocks[1];
  ck_assert_int_eq(t->kind, MM_BLOCK_TRANSFORMER);
  ck_assert_int_eq(t->kv_heads, 8);
  ck_assert_int_eq(t->ffn, 28672);
  ck_assert_int_eq(t->ffn_kind, MM_FFN_SWIGLU);
  ck_assert_int_eq(t->seq_len, 4096); /* inherited from the model */
  ck_assert_int_eq(t->dtype, MM_DTYPE_BF16);
  ck_assert_int_eq(t->compute_dtype, MM_DTYPE_BF16);
  ck_assert_int_eq(m->blocks[2].tied, FALSE);
}
END_TEST

START_TEST(test_hardware_values)
{
  g_autofree char *p = mm_test_src("hardware/mi300x-8.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) h = mm_hardware_load(p, &error);
  ck_assert_ptr_nonnull(h);
  ck_assert_int_eq(mm_hardware_devices(h), 8);
  ck_assert_int_eq(h->intra.topology, MM_TOPO_FULL_MESH);
  ck_assert_double_eq_tol(h->intra.bw_per_gpu_Bps, 7 * 64e9, 1);
  ck_assert_double_eq_tol(h->device.peak_flops[MM_DTYPE_BF16], 1307.4e12, 1e6);
  ck_assert_double_eq_tol(h->device.hbm_bytes, 192.0 * 1024 * 1024 * 1024, 1);
  ck_assert(!h->inter.present);
  g_autofree char *p2 = mm_test_src("hardware/zionex-a100-128.json");
  g_autoptr(MmHardware) z = mm_hardware_load(p2, &error);
  ck_assert_ptr_nonnull(z);
  /* 8 NICs x 200 Gb/s shared by 8 GPUs = 25 GB/s per GPU */
  ck_assert_double_eq_tol(z->inter.bw_per_gpu_Bps, 25e9, 1);
  ck_assert_int_eq(mm_hardware_devices(z), 128);
  /* --nodes: the name says the system was resized; its own size leaves it alone */
  ck_assert(mm_hardware_set_nodes(z, 2, &error));
  ck_assert_int_eq(mm_hardware_devices(z), 16);
  ck_assert(g_str_has_suffix(z->name, ", resized to 2 nodes"));
  g_autoptr(MmHardware) same = mm_hardware_load(p2, &error);
  g_autofree char *name = g_strdup(same->name);
  ck_assert(mm_hardware_set_nodes(same, 16, &error));
  ck_assert_str_eq(same->name, name);
}
END_TEST

START_TEST(test_scenario_resolution)
{
  g_autofree char *mp = mm_test_src("models/gpt3-175b.json");
  g_autofree char *hp = mm_test_src("hardware/dgx-a100-2048.json");
  g_autofree char *cp = mm_test_src("configs/llm-pretrain-tp-fsdp.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(mp, &error);
  g_autoptr(MmHardware) h = mm_hardware_load(hp, &error);
  g_autoptr(MmParallelConfig) c = mm_parallel_load(cp, &error);
  ck_assert(m && h && c);
  g_autoptr(MmScenario) s = mm_scenario_new(m, h, c, NULL, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  const MmBlockSetup *b = &s->blocks[1];
  ck_assert_uint_eq(b->n_levels, 2);
  ck_assert_int_eq(b->levels[0].strategy, MM_STRAT_TP);
  ck_assert_int_eq(b->levels[0].degree, 8);
  ck_assert_int_eq(b->levels[1].degree, 256); /* "all" fills 2048 / 8 */
  ck_assert_int_eq(b->stride[1], 8);
  ck_assert(mm_level_intra_node(s, b, 0));
  ck_assert(!mm_level_intra_node(s, b, 1));
  ck_assert_int_eq(b->dp, 256);
  ck_assert_int_eq(mm_plan_mask_degree(b, MM_STRAT_MASK(MM_STRAT_FSDP) | MM_STRAT_MASK(MM_STRAT_TP)), 2048);
  /* no micro_batch given: the whole local batch (2048 samples / 256 ranks) in one step */
  ck_assert_int_eq(s->micro_steps, 1);
  ck_assert_int_eq(s->micro_batch, 8);
  ck_assert_double_eq_tol(b->samples_per_micro, 8.0, 1e-12);
}
END_TEST

/* ---- malformed inputs --------------------------------------------------- */

typedef enum { K_MODEL, K_SYSTEM, K_DEVICE, K_CONFIG, K_SCENARIO } Kind;

typedef struct {
  const char *what;
  Kind kind;
  const char *text;
  MmConfigError code;
  const char *where; /* a fragment the message must contain (JSON path) */
  const char *model; /* K_SCENARIO: shipped model (default llama2-70b) */
} BadCase;

#define M_OK_BLOCK "{\"kind\":\"transformer\",\"count\":2,\"hidden\":64,\"heads\":4,\"ffn\":256}"
#define DEV_OK \
  "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"utilization\":{" \
  "\"gemm\":{\"value\":0.5,\"provenance\":\"estimate\"},\"hbm\":{\"value\":0.8,\"provenance\":\"estimate\"}}}"
#define SYS_HEAD "{\"name\":\"s\",\"device\":\"@DEV@\","
#define INTRA "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":4,\"link_bw_GBps\":25}"
#define CFG_HEAD "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,"
#define FSDP_ALL "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"

/* 1001 nested arrays: one over cJSON's nesting limit */
#define OPEN10(x) x x x x x x x x x x
#define OPEN1001 OPEN10(OPEN10(OPEN10("["))) "["

static const BadCase bad_cases[] = {
  /* syntax: what is wrong, not only where */
  {"trailing comma in an object", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,}", MM_CONFIG_ERROR_PARSE, ":1:24: invalid JSON: a comma before '}'", NULL},
  {"trailing comma in an array", K_MODEL, "{\"name\":\"t\",\"blocks\":[1,\n 2, ]}", MM_CONFIG_ERROR_PARSE, ":2:3: invalid JSON: a comma before ']'", NULL},
  {"nesting over the limit", K_MODEL, "{\"name\":" OPEN1001 "}", MM_CONFIG_ERROR_PARSE, "nested deeper than 1000 levels", NULL},
  {"missing colon", K_MODEL, "{\"name\" \"t\"}", MM_CONFIG_ERROR_PARSE, ":1:9: invalid JSON: unexpected character '\"'", NULL},
  {"text after the document", K_MODEL, "{\"name\":\"t\"}\n}", MM_CONFIG_ERROR_PARSE, ":2:1: invalid JSON: unexpected character '}'", NULL},
  /* a repeated key would silently lose its second value */
  {"repeated key", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"seq_len\":16,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_INCONSISTENT, "$.seq_len: the key appears twice", NULL},
  {"repeated nested key", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"mlp\",\"count\":1,\"count\":2,\"width\":4}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[0].count: the key appears twice", NULL},
  /* encodings: every key and string valid UTF-8 without NUL or control characters */
  {"name not UTF-8", K_MODEL, "{\"name\":\"a\xff\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "$.name: the string is not valid UTF-8", NULL},
  {"block name not UTF-8", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"mlp\",\"name\":\"\xc3\",\"count\":1,\"width\":4}]}", MM_CONFIG_ERROR_ENCODING, "$.blocks[0].name", NULL},
  {"escaped NUL truncates a name", K_MODEL, "{\"name\":\"a\\u0000b\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "$.name: the string contains a NUL", NULL},
  {"escaped NUL truncates a key", K_MODEL, "{\"name\":\"t\",\"seq_len\\u0000x\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "$: a key contains a NUL", NULL},
  {"ANSI escape in a name", K_MODEL, "{\"name\":\"\\u001b[2Jt\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "$.name: the string contains a control character (U+001B)", NULL},
  {"raw ESC byte in a name", K_MODEL, "{\"name\":\"\x1b[31mt\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "$.name", NULL},
  {"C1 control in a name", K_MODEL, "{\"name\":\"\\u009b2J\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_ENCODING, "U+009B", NULL},
  {"escaped backslash before u0000 is text", K_MODEL, "{\"name\":\"\\\\u0000\",\"seq_len\":8,\"blocks\":[]}", MM_CONFIG_ERROR_RANGE, "$.blocks", NULL},
  /* model files */
  {"truncated file", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,", MM_CONFIG_ERROR_PARSE, "truncated", NULL},
  {"empty file", K_MODEL, "", MM_CONFIG_ERROR_PARSE, "empty", NULL},
  {"top level not an object", K_MODEL, "[1, 2]", MM_CONFIG_ERROR_TYPE, "$", NULL},
  {"NaN literal", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":NaN,\"width\":4}]}", MM_CONFIG_ERROR_PARSE, ":1:", NULL},
  {"missing name", K_MODEL, "{\"seq_len\":128,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_MISSING_KEY, "\"name\"", NULL},
  {"name is a number", K_MODEL, "{\"name\":5,\"seq_len\":128,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_TYPE, "$.name", NULL},
  {"blocks is an object", K_MODEL, "{\"name\":\"t\",\"blocks\":{}}", MM_CONFIG_ERROR_TYPE, "$.blocks", NULL},
  {"no blocks", K_MODEL, "{\"name\":\"t\",\"blocks\":[]}", MM_CONFIG_ERROR_RANGE, "$.blocks", NULL},
  {"unknown block kind", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"lstm\"}]}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.blocks[0].kind", NULL},
  {"unknown key (typo)", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hiden\":64,\"heads\":4,\"ffn\":256}]}", MM_CONFIG_ERROR_UNKNOWN_KEY, "hiden", NULL},
  {"negative size", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":-4,\"heads\":4,\"ffn\":256}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].hidden", NULL},
  {"zero size", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":0,\"width\":4}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].count", NULL},
  {"fractional integer", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":64,\"heads\":4.5,\"ffn\":256}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].heads", NULL},
  {"huge number overflows", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":1e30,\"dim\":4,\"pooling\":1}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].rows", NULL},
  {"infinite number", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":4,\"dim\":4,\"pooling\":1e999}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].pooling", NULL},
  {"string for a number", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":\"64\",\"heads\":4,\"ffn\":256}]}", MM_CONFIG_ERROR_TYPE, "$.blocks[0].hidden", NULL},
  {"heads do not divide hidden", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":64,\"heads\":5,\"ffn\":256}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[0]", NULL},
  {"kv_heads do not divide heads", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":3,\"ffn\":256}]}", MM_CONFIG_ERROR_INCONSISTENT, "kv_heads", NULL},
  {"top_k above experts", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":4,\"top_k\":5}]}", MM_CONFIG_ERROR_INCONSISTENT, "top_k", NULL},
  /* group-limited routing (DeepSeek-V3's node-limited routing) */
  {"router groups not dividing experts", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":8,\"top_k\":2,\"router_groups\":3,\"router_group_topk\":1}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[0]: router_groups 3 does not divide experts 8", NULL},
  {"router groups without group top-k", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":8,\"router_groups\":4}]}", MM_CONFIG_ERROR_INCONSISTENT, "needs both router_groups and router_group_topk", NULL},
  {"group top-k above groups", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":8,\"router_groups\":4,\"router_group_topk\":5}]}", MM_CONFIG_ERROR_INCONSISTENT, "router_group_topk 5 exceeds router_groups 4", NULL},
  {"top_k beyond the chosen groups", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":8,\"top_k\":3,\"router_groups\":4,\"router_group_topk\":1}]}", MM_CONFIG_ERROR_INCONSISTENT, "top_k 3 exceeds the 2 experts", NULL},
  {"router groups on a dense block", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"router_groups\":4,\"router_group_topk\":1}]}", MM_CONFIG_ERROR_INCONSISTENT, "router_groups need \"experts\"", NULL},
  {"negative router groups", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":8,\"router_groups\":-1}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0].router_groups", NULL},
  {"zb_h1 with recompute", K_SCENARIO, CFG_HEAD "\"recompute\":\"full\",\"pipeline\":{\"degree\":4,\"schedule\":\"zb_h1\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.schedule: zb_h1 needs \"recompute\": \"none\"", NULL},
  {"dualpipev with three chunks per stage", K_CONFIG, CFG_HEAD "\"pipeline\":{\"degree\":4,\"schedule\":\"dualpipev\",\"virtual_stages\":3}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.virtual_stages: dualpipev holds two chunks per stage", NULL},
  {"dualpipev with fewer than 2p micro-batches", K_SCENARIO, CFG_HEAD "\"micro_batch\":1,\"recompute\":\"none\",\"pipeline\":{\"degree\":4,\"schedule\":\"dualpipev\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.micro_batch: dualpipev needs at least 2 x 4 stages = 8 micro-batches per iteration; this config gives 4", NULL},
  {"dualpipev with recompute", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8192,\"micro_batch\":1,\"recompute\":\"full\",\"pipeline\":{\"degree\":4,\"schedule\":\"dualpipev\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.schedule: dualpipev needs \"recompute\": \"none\"", NULL},
  {"dualpipev for inference", K_SCENARIO, "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":8,\"pipeline\":{\"degree\":4,\"schedule\":\"dualpipev\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.schedule: dualpipev is a training schedule", NULL},
  {"zb_h1 with activation offload", K_SCENARIO, CFG_HEAD "\"offload_num_layers\":2,\"pipeline\":{\"degree\":4,\"schedule\":\"zb_h1\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "offload_num_layers 2", NULL},
  {"unknown dispatch", K_CONFIG, CFG_HEAD "\"moe_dispatch\":\"per_rank\"," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.moe_dispatch", NULL},
  {"unknown cross entropy", K_CONFIG, CFG_HEAD "\"cross_entropy\":\"fused\"," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.cross_entropy", NULL},
  {"unknown attention kernel", K_CONFIG, CFG_HEAD "\"attention_kernel\":\"fa4\"," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.attention_kernel", NULL},
  {"attention kernel not a string", K_CONFIG, CFG_HEAD "\"attention_kernel\":2," FSDP_ALL "}", MM_CONFIG_ERROR_TYPE, "$.attention_kernel", NULL},
  {"unknown fsdp collectives", K_CONFIG, CFG_HEAD "\"fsdp_collectives\":\"per_tensor\"," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.fsdp_collectives", NULL},
  {"one expert", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":4,\"experts\":1}]}", MM_CONFIG_ERROR_RANGE, "$.blocks[0]", NULL},
  {"duplicate block names", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"name\":\"a\",\"count\":1,\"width\":4},{\"kind\":\"mlp\",\"name\":\"a\",\"count\":1,\"width\":4}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[1].name", NULL},
  {"sequence length nowhere", K_MODEL, "{\"name\":\"t\",\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_MISSING_KEY, "seq_len", NULL},
  {"unknown dtype", K_MODEL, "{\"name\":\"t\",\"dtype\":\"fp64\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.dtype", NULL},
  {"tied head without embedding", K_MODEL, "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"lm_head\",\"vocab\":10,\"hidden\":4,\"tied\":true}]}", MM_CONFIG_ERROR_INCONSISTENT, "tied", NULL},
  {"key twice", K_MODEL, "{\"name\":\"t\",\"name\":\"u\",\"seq_len\":8,\"blocks\":[" M_OK_BLOCK "]}", MM_CONFIG_ERROR_INCONSISTENT, "twice", NULL},
  {"input is not an earlier block", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"name\":\"a\",\"count\":1,\"width\":4,\"inputs\":[\"b\"]},{\"kind\":\"mlp\",\"name\":\"b\",\"count\":1,\"width\":4}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[0].inputs[0]", NULL},
  {"interaction without tables", K_MODEL, "{\"name\":\"t\",\"blocks\":[{\"kind\":\"interaction\",\"op\":\"dot\"}]}", MM_CONFIG_ERROR_INCONSISTENT, "$.blocks[0]", NULL},
  /* system and device files */
  {"missing device file", K_SYSTEM, "{\"name\":\"s\",\"device\":\"no/such/device.json\",\"gpus_per_node\":1,\"nodes\":1}", MM_CONFIG_ERROR_IO, "$.device", NULL},
  {"device is a number", K_SYSTEM, "{\"name\":\"s\",\"device\":3,\"gpus_per_node\":1,\"nodes\":1}", MM_CONFIG_ERROR_TYPE, "$.device", NULL},
  {"full mesh short of links", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":8,\"nodes\":1,\"intra_node\":{\"topology\":\"full_mesh\",\"links_per_gpu\":3,\"link_bw_GBps\":64}}", MM_CONFIG_ERROR_INCONSISTENT, "$.intra_node", NULL},
  {"NICs given twice", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":2," INTRA ",\"inter_node\":{\"topology\":\"fat_tree\",\"nics_per_node\":4,\"nics_per_gpu\":1,\"nic_bw_Gbps\":200}}", MM_CONFIG_ERROR_INCONSISTENT, "$.inter_node", NULL},
  {"nodes without a network", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":2," INTRA "}", MM_CONFIG_ERROR_MISSING_KEY, "inter_node", NULL},
  {"negative one-shot latency", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":1,\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":4,\"link_bw_GBps\":25,\"one_shot_latency_us\":-2}}", MM_CONFIG_ERROR_RANGE, "$.intra_node.one_shot_latency_us", NULL},
  {"graph launch cost as a string", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"graph_launch_overhead_us\":\"fast\",\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_TYPE, "$.graph_launch_overhead_us", NULL},
  {"unknown topology", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":1,\"intra_node\":{\"topology\":\"star\",\"links_per_gpu\":4,\"link_bw_GBps\":25}}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.intra_node.topology", NULL},
  {"dims without a torus", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":2," INTRA ",\"inter_node\":{\"topology\":\"fat_tree\",\"nics_per_node\":4,\"nic_bw_Gbps\":200,\"dims\":[2,1]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.inter_node.dims", NULL},
  {"torus without dims", K_SYSTEM, SYS_HEAD "\"gpus_per_node\":4,\"nodes\":2," INTRA ",\"inter_node\":{\"topology\":\"torus2d\",\"nics_per_node\":4,\"nic_bw_Gbps\":200}}", MM_CONFIG_ERROR_MISSING_KEY, "dims", NULL},
  {"utilization above 1", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"utilization\":{\"gemm\":{\"value\":1.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_RANGE, "$.utilization.gemm.value", NULL},
  {"unknown provenance", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"guess\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "provenance", NULL},
  {"no positive peak", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":0},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_RANGE, "$.peak_tflops", NULL},
  {"unknown peak dtype", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"fp64\":10},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_UNKNOWN_KEY, "fp64", NULL},
  /* the FiCCO heuristic's thresholds out of order */
  {"overlap heuristic thresholds crossed", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"overlap\":{\"heuristic_low\":{\"value\":6,\"provenance\":\"estimate\",\"source\":\"x\"}},\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_INCONSISTENT, "$.overlap.heuristic_high: expected at least heuristic_low (6)", NULL},
  /* a coefficient given bare instead of {value, provenance, source}: was an unset GError (a crash) */
  {"fused coefficient not an object", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"fused\":{\"compute_units\":104},\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_TYPE, "$.fused.compute_units", NULL},
  {"overlap coefficient not an object", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000,\"overlap\":{\"gemm_tile\":[256]},\"utilization\":{\"gemm\":{\"value\":0.5,\"provenance\":\"paper\"},\"hbm\":{\"value\":0.8,\"provenance\":\"paper\"}}}", MM_CONFIG_ERROR_TYPE, "$.overlap.gemm_tile", NULL},
  {"device missing utilization", K_DEVICE, "{\"name\":\"d\",\"peak_tflops\":{\"bf16\":100},\"hbm_GiB\":16,\"hbm_bw_GBps\":1000}", MM_CONFIG_ERROR_MISSING_KEY, "utilization", NULL},
  /* parallelism + task files */
  {"unknown task", K_CONFIG, "{\"name\":\"c\",\"task\":\"train\",\"global_batch\":8," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.task", NULL},
  {"batch given twice", K_CONFIG, CFG_HEAD "\"global_batch_tokens\":8192," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "global_batch_tokens", NULL},
  {"pipeline as a level", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"pp\",\"degree\":4}]}}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.parallelism.default[0].strategy", NULL},
  {"zero on a tp level", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8,\"zero\":1}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].zero", NULL},
  {"ZeRO stage 3 on ddp", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":3}]}}", MM_CONFIG_ERROR_RANGE, "$.parallelism.default[0].zero", NULL},
  {"sequence parallel on ddp", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\",\"sequence_parallel\":true}]}}", MM_CONFIG_ERROR_INCONSISTENT, "sequence_parallel", NULL},
  {"fsdp on a tp level", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8,\"fsdp\":true}]}}", MM_CONFIG_ERROR_INCONSISTENT, "fsdp", NULL},
  {"fsdp on a cp level not a boolean", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"cp\",\"degree\":8,\"fsdp\":\"yes\"}]}}", MM_CONFIG_ERROR_TYPE, "fsdp", NULL},
  {"kv exchange on tp", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8,\"kv_exchange\":\"ring\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "kv_exchange", NULL},
  {"virtual stages without interleaving", K_CONFIG, CFG_HEAD "\"pipeline\":{\"degree\":4,\"virtual_stages\":2}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.virtual_stages", NULL},
  {"unknown schedule", K_CONFIG, CFG_HEAD "\"pipeline\":{\"degree\":4,\"schedule\":\"zb\"}," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.pipeline.schedule", NULL},
  {"layers per chunk miscounted", K_CONFIG, CFG_HEAD "\"pipeline\":{\"degree\":2,\"layers\":[40,30,10]}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.layers", NULL},
  {"zero layers in a chunk", K_CONFIG, CFG_HEAD "\"pipeline\":{\"degree\":2,\"layers\":[80,0]}," FSDP_ALL "}", MM_CONFIG_ERROR_RANGE, "$.pipeline.layers[1]", NULL},
  {"pipeline is a number", K_CONFIG, CFG_HEAD "\"pipeline\":4," FSDP_ALL "}", MM_CONFIG_ERROR_TYPE, "$.pipeline", NULL},
  {"serving while training", K_CONFIG, CFG_HEAD "\"inference\":{\"prompt_tokens\":128,\"output_tokens\":8}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.inference", NULL},
  {"cuda graphs as a string", K_CONFIG, "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":8,\"inference\":{\"prompt_tokens\":128,\"output_tokens\":8,\"cuda_graphs\":\"yes\"}," FSDP_ALL "}", MM_CONFIG_ERROR_TYPE, "$.inference.cuda_graphs", NULL},
  {"serving without output length", K_CONFIG, "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":8,\"inference\":{\"prompt_tokens\":128}," FSDP_ALL "}", MM_CONFIG_ERROR_MISSING_KEY, "output_tokens", NULL},
  {"negative skew", K_CONFIG, CFG_HEAD "\"expert_skew\":-1," FSDP_ALL "}", MM_CONFIG_ERROR_RANGE, "$.expert_skew", NULL},
  {"unknown strategy", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"zero9\",\"degree\":4}]}}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.parallelism.default[0].strategy", NULL},
  {"unknown degree word", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"half\"}]}}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "degree", NULL},
  {"zero degree", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":0}]}}", MM_CONFIG_ERROR_RANGE, "$.parallelism.default[0].degree", NULL},
  {"two levels fill all", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":\"all\"},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[1].degree", NULL},
  {"sharding on fsdp", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\",\"sharding\":\"row\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "sharding", NULL},
  {"recompute_num_layers without full recompute", K_CONFIG, CFG_HEAD "\"recompute\":\"selective\",\"recompute_num_layers\":2," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.recompute_num_layers", NULL},
  {"recompute_method without recompute", K_CONFIG, CFG_HEAD "\"recompute_method\":\"block\"," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.recompute_method", NULL},
  {"offload with recompute", K_CONFIG, CFG_HEAD "\"recompute\":\"full\",\"offload_num_layers\":2," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.offload_num_layers", NULL},
  {"offload while serving", K_CONFIG, "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":2048,\"offload_num_layers\":2," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.offload_num_layers", NULL},
  {"negative offload_num_layers", K_CONFIG, CFG_HEAD "\"offload_num_layers\":-1," FSDP_ALL "}", MM_CONFIG_ERROR_RANGE, "$.offload_num_layers", NULL},
  {"unknown recompute_method", K_CONFIG, CFG_HEAD "\"recompute\":\"full\",\"recompute_method\":\"every_other\"," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.recompute_method", NULL},
  {"negative recompute_num_layers", K_CONFIG, CFG_HEAD "\"recompute\":\"full\",\"recompute_num_layers\":-1," FSDP_ALL "}", MM_CONFIG_ERROR_RANGE, "$.recompute_num_layers", NULL},
  {"fp8_param_gather with rowwise", K_CONFIG, CFG_HEAD "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"rowwise\",\"fp8_param_gather\":true}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.precision.fp8_param_gather", NULL},
  {"fp8_param_gather with per_tensor_list", K_SCENARIO, CFG_HEAD "\"fsdp_collectives\":\"per_tensor_list\",\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\",\"fp8_param_gather\":true}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.precision.fp8_param_gather", NULL},
  {"fp8_param_gather not a boolean", K_CONFIG, CFG_HEAD "\"precision\":{\"compute\":\"fp8\",\"fp8_param_gather\":1}," FSDP_ALL "}", MM_CONFIG_ERROR_TYPE, "$.precision.fp8_param_gather", NULL},
  {"unknown fp8 recipe", K_CONFIG, CFG_HEAD "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"hybrid\"}," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.precision.fp8_recipe", NULL},
  {"frozen while pretraining", K_CONFIG, CFG_HEAD "\"frozen\":[\"decoder\"]," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.frozen", NULL},
  {"finetune freezes nothing", K_CONFIG, "{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":8," FSDP_ALL "}", MM_CONFIG_ERROR_MISSING_KEY, "frozen", NULL},
  {"grad_sync on fsdp", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\",\"grad_sync\":\"sparse\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "grad_sync", NULL},
  {"unknown algorithm", K_CONFIG, CFG_HEAD "\"collectives\":{\"all_reduce\":\"butterfly\"}," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.collectives.all_reduce", NULL},
  {"unknown collective", K_CONFIG, CFG_HEAD "\"collectives\":{\"allreduce\":\"ring\"}," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_KEY, "allreduce", NULL},
  {"empty level list", K_CONFIG, CFG_HEAD "\"parallelism\":{\"default\":[]}}", MM_CONFIG_ERROR_RANGE, "$.parallelism.default", NULL},
  /* cross-file consistency (llama2-70b on 2048 A100 unless said) */
  {"degrees do not match the system", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":64}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default", NULL},
  {"sp does not divide seq_len", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].degree: sequence parallelism splits each sequence over the 8 TP ranks, which does not divide seq_len 257", "models/vit-25b.json"},
  {"sp x cp does not divide seq_len", K_SCENARIO, CFG_HEAD "\"seq_len\":8196,\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":4},{\"strategy\":\"cp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].degree: sequence parallelism splits each sequence over tp x cp x ulysses = 8 ranks, which does not divide seq_len 8196", NULL},
  {"tp does not divide heads", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":64},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "heads", "models/gpt3-175b.json"},
  {"unknown parallelism key", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"transfomer\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_UNKNOWN_KEY, "$.parallelism.transfomer", NULL},
  {"mp on a transformer", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"mp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].strategy", NULL},
  {"batch does not split", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1000," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.global_batch", NULL},
  {"micro-batch does not divide", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":6144,\"micro_batch\":2," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.micro_batch", NULL},
  {"frozen block unknown", K_SCENARIO, "{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":2048,\"frozen\":[\"encoder\"]," FSDP_ALL "}", MM_CONFIG_ERROR_UNKNOWN_VALUE, "$.frozen[0]", NULL},
  {"group straddles nodes", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":3},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "degree", NULL},
  {"dtype without a peak", K_SCENARIO, CFG_HEAD "\"precision\":{\"compute\":\"fp8\"}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.precision.compute", NULL},
  {"block without strategy", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"transformer\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_MISSING_KEY, "$.parallelism", NULL},
  {"sparse sync on a transformer", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\",\"grad_sync\":\"sparse\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "grad_sync", NULL},
  {"stages do not divide the devices", K_SCENARIO, CFG_HEAD "\"pipeline\":{\"degree\":3}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.degree", NULL},
  {"more chunks than layers", K_SCENARIO, CFG_HEAD "\"pipeline\":{\"degree\":128}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline", NULL},
  {"pipeline layers do not sum to the model's", K_SCENARIO, CFG_HEAD "\"pipeline\":{\"degree\":2,\"layers\":[40,30]}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.pipeline.layers", NULL},
  {"interleaving needs micro-batches in stage multiples", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":6144,\"micro_batch\":2,\"pipeline\":{\"degree\":4,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":2}," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.micro_batch", NULL},
  {"pipeline over a DAG of blocks", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":65536,\"pipeline\":{\"degree\":2},\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "chain", "models/dlrm-a.json"},
  {"ep on a dense model", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"ep\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].strategy", NULL},
  {"ep does not divide experts", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"transformer\":[{\"strategy\":\"ep\",\"degree\":32},{\"strategy\":\"fsdp\",\"degree\":\"all\"}],\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.transformer[0].degree", "models/llm-moe-1.8t.json"},
  {"skew without expert parallelism", K_SCENARIO, CFG_HEAD "\"expert_skew\":0.5," FSDP_ALL "}", MM_CONFIG_ERROR_INCONSISTENT, "$.expert_skew", NULL},
  {"skew beyond the group", K_SCENARIO, CFG_HEAD "\"expert_skew\":9,\"parallelism\":{\"transformer\":[{\"strategy\":\"ep\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_RANGE, "$.expert_skew", "models/llm-moe-1.8t.json"},
  {"cp does not divide the sequence", K_SCENARIO, CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"cp\",\"degree\":3},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "degree", NULL},
  {"cp on an mlp", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":65536,\"parallelism\":{\"mlp\":[{\"strategy\":\"cp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "cp splits sequences", "models/dlrm-a.json"},
  {"tp on embedding tables", K_SCENARIO, "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":65536,\"parallelism\":{\"embedding_bag\":[{\"strategy\":\"tp\",\"degree\":\"all\"}],\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}", MM_CONFIG_ERROR_INCONSISTENT, "embedding", "models/dlrm-a.json"},
};

/* Writes the case's files; returns the paths to load (model, hardware, config). */
static void case_files(const BadCase *bc, int i, char **model, char **hw, char **cfg)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  g_autofree char *name = g_strdup_printf("case%02d.json", i);
  g_autofree char *text = NULL;
  *model = mm_test_src(bc->model ? bc->model : "models/llama2-70b.json");
  *hw = mm_test_src("hardware/dgx-a100-2048.json");
  *cfg = mm_test_src("configs/llm-pretrain-fsdp.json");
  switch (bc->kind) {
  case K_MODEL:
    g_free(*model);
    *model = mm_test_write(name, bc->text);
    break;
  case K_SYSTEM: {
    GString *s = g_string_new(bc->text);
    g_string_replace(s, "@DEV@", dev, 0);
    text = g_string_free(s, FALSE);
    g_free(*hw);
    *hw = mm_test_write(name, text);
    break;
  }
  case K_DEVICE: {
    g_autofree char *devname = g_strdup_printf("dev%02d.json", i);
    g_autofree char *devpath = mm_test_write(devname, bc->text);
    text = g_strdup_printf("{\"name\":\"s\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":1}", devpath);
    g_free(*hw);
    *hw = mm_test_write(name, text);
    break;
  }
  case K_CONFIG:
  case K_SCENARIO:
    g_free(*cfg);
    *cfg = mm_test_write(name, bc->text);
    break;
  }
}

START_TEST(test_bad_input)
{
  const BadCase *bc = &bad_cases[_i];
  g_autofree char *model = NULL, *hw = NULL, *cfg = NULL;
  case_files(bc, _i, &model, &hw, &cfg);
  const char *bad_file = bc->kind == K_MODEL ? model : bc->kind == K_SYSTEM || bc->kind == K_DEVICE ? hw : cfg;

  /* library: the error code and a message naming the file and the place */
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(model, &error);
  g_autoptr(MmHardware) h = m ? mm_hardware_load(hw, &error) : NULL;
  g_autoptr(MmParallelConfig) c = h ? mm_parallel_load(cfg, &error) : NULL;
  g_autoptr(MmScenario) s = c ? mm_scenario_new(m, h, c, NULL, &error) : NULL;
  ck_assert_msg(s == NULL, "case '%s' was accepted", bc->what);
  ck_assert_msg(error != NULL, "case '%s': no error set", bc->what);
  ck_assert_msg(error->domain == MM_CONFIG_ERROR, "case '%s': wrong domain", bc->what);
  ck_assert_msg((MmConfigError)error->code == bc->code, "case '%s': code %d, expected %d (%s)", bc->what,
                error->code, bc->code, error->message);
  if (bc->kind != K_DEVICE)
    ck_assert_msg(strstr(error->message, bad_file) != NULL, "case '%s': message does not name %s: %s",
                  bc->what, bad_file, error->message);
  ck_assert_msg(strstr(error->message, bc->where) != NULL, "case '%s': message lacks '%s': %s", bc->what,
                bc->where, error->message);

  /* command line: exit code 1 and one line on stderr */
  const char *args[] = {"describe", "-m", model, "-H", hw, "-c", cfg, NULL};
  g_autofree char *out = NULL, *err = NULL;
  int rc = mm_test_cli(args, &out, &err);
  ck_assert_msg(rc == 1, "case '%s': exit %d, stderr: %s", bc->what, rc, err);
  ck_assert_msg(g_str_has_prefix(err, "madmax: "), "case '%s': stderr: %s", bc->what, err);
  ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "case '%s': not one line: %s", bc->what, err);
  ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_error_message_format)
{
  g_autoptr(GError) error = NULL;
  const char *text = "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"mlp\",\"count\":1,\"width\":4},"
                     "{\"kind\":\"transformer\",\"count\":2,\"hidden\":-4,\"heads\":4,\"ffn\":256}]}";
  g_autoptr(MmModel) m = mm_model_parse("models/x.json", text, strlen(text), &error);
  ck_assert_ptr_null(m);
  ck_assert_str_eq(error->message, "models/x.json: $.blocks[1].hidden: -4 is not a positive integer up to 16777216");
  /* numbers in their shortest form: 1e-07, not 9.9999999999999995e-08 */
  g_clear_error(&error);
  const char *small = "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":4,\"dim\":4,"
                      "\"pooling\":1e-7}]}";
  g_autoptr(MmModel) m2 = mm_model_parse("models/x.json", small, strlen(small), &error);
  ck_assert_ptr_null(m2);
  ck_assert_str_eq(error->message,
                   "models/x.json: $.blocks[0].pooling: 1e-07 is not a number between 1e-06 and 1000000000");
  g_autofree char *third = mm_json_fmt_number(0.1 + 0.2);
  ck_assert_str_eq(third, "0.30000000000000004"); /* 17 digits when fewer do not read back */
}
END_TEST

/* A level names the strategies a level takes; "pp" (the top-level "pipeline") is not listed. */
START_TEST(test_level_strategies_listed)
{
  g_autofree char *p = mm_test_write("bad-strategy.json", CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"qq\",\"degree\":4}]}}");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmParallelConfig) c = mm_parallel_load(p, &error);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(error->message, "\"fsdp\", \"tp\"") && !strstr(error->message, "\"pp\""), "%s", error->message);
  /* and "sp" still reads as tp with sequence parallelism */
  g_autofree char *sp = mm_test_write("sp.json", CFG_HEAD "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8}]}}");
  g_autoptr(MmParallelConfig) c2 = mm_parallel_load(sp, &error);
  ck_assert_msg(c2 != NULL, "%s", error ? error->message : "");
  ck_assert_int_eq(c2->strategies[0].levels[0].strategy, MM_STRAT_TP);
  ck_assert(c2->strategies[0].levels[0].sequence_parallel);
}
END_TEST

/* --nodes beyond the limit states the bound that applies (2^20 nodes, 2^24 devices). */
START_TEST(test_nodes_bound_message)
{
  g_autofree char *path = mm_test_src("hardware/dgx-a100-2048.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) h = mm_hardware_load(path, &error);
  ck_assert_ptr_nonnull(h);
  ck_assert(mm_hardware_check_nodes(h, 1 << 20, NULL));
  ck_assert(!mm_hardware_check_nodes(h, (1 << 20) + 1, &error));
  ck_assert_msg(strstr(error->message, "expected 1 to 1048576 nodes of 8 GPUs"), "%s", error->message);
}
END_TEST

/* Input files: a regular file of at most 256 MiB; anything else is refused at once (a FIFO
 * used to block forever, /dev/zero to be read until memory ran out). */
START_TEST(test_input_files)
{
  g_autofree char *fifo = g_build_filename(mm_test_tmpdir(), "in.fifo", NULL);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  g_autofree char *big = g_build_filename(mm_test_tmpdir(), "big.json", NULL);
  FILE *f = fopen(big, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(ftruncate(fileno(f), (off_t)MM_JSON_MAX_FILE_BYTES + 1), 0); /* sparse: no disk used */
  fclose(f);
  g_autofree char *nul = g_build_filename(mm_test_tmpdir(), "nul.json", NULL);
  ck_assert(g_file_set_contents(nul, "{\n  \0}", 6, NULL));
  const struct {
    const char *path, *msg;
    MmConfigError code;
  } cases[] = {
    {"/dev/zero", "/dev/zero: cannot read: a character device; expected a JSON file", MM_CONFIG_ERROR_IO},
    {fifo, "cannot read: a FIFO", MM_CONFIG_ERROR_IO},
    {mm_test_tmpdir(), "cannot read: a directory", MM_CONFIG_ERROR_IO},
    {big, "larger than 256 MiB", MM_CONFIG_ERROR_IO},
    {"", "'': cannot read: expected a file name", MM_CONFIG_ERROR_IO},
    {nul, ":2:3: invalid JSON: a NUL byte", MM_CONFIG_ERROR_PARSE},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(MmModel) m = mm_model_load(cases[i].path, &error);
    ck_assert_msg(m == NULL, "%s was read", cases[i].path);
    ck_assert_ptr_null(m);
    ck_assert_msg(g_error_matches(error, MM_CONFIG_ERROR, (gint)cases[i].code), "%s", error->message);
    ck_assert_msg(g_str_has_prefix(error->message, cases[i].path) && strstr(error->message, cases[i].msg), "%s",
                  error->message);
  }
  g_unlink(big);
}
END_TEST

START_TEST(test_strategy_lookup_order)
{
  const char *text = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,\"parallelism\":{"
                     "\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}],"
                     "\"mlp\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}],"
                     "\"top\":[{\"strategy\":\"tp\",\"degree\":\"all\"}]}}";
  g_autofree char *p = mm_test_write("order.json", text);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmParallelConfig) c = mm_parallel_load(p, &error);
  ck_assert_ptr_nonnull(c);
  MmBlock top = {.name = "top", .kind = MM_BLOCK_MLP};
  MmBlock bot = {.name = "bottom", .kind = MM_BLOCK_MLP};
  MmBlock emb = {.name = "tables", .kind = MM_BLOCK_EMBEDDING_BAG};
  ck_assert_str_eq(mm_parallel_strategy_for(c, &top)->key, "top");
  ck_assert_str_eq(mm_parallel_strategy_for(c, &bot)->key, "mlp");
  ck_assert_str_eq(mm_parallel_strategy_for(c, &emb)->key, "default");
}
END_TEST

static Suite *config_suite(void)
{
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("load");
  tcase_add_test(tc, test_shipped_files_load);
  tcase_add_test(tc, test_shipped_names);
  tcase_add_test(tc, test_model_values);
  tcase_add_test(tc, test_hardware_values);
  tcase_add_test(tc, test_scenario_resolution);
  tcase_add_test(tc, test_error_message_format);
  tcase_add_test(tc, test_strategy_lookup_order);
  tcase_add_test(tc, test_level_strategies_listed);
  tcase_add_test(tc, test_nodes_bound_message);
  tcase_add_test(tc, test_input_files);
  suite_add_tcase(s, tc);
  TCase *bad = tcase_create("bad_input");
  tcase_add_loop_test(bad, test_bad_input, 0, (int)G_N_ELEMENTS(bad_cases));
  suite_add_tcase(s, bad);
  return s;
}

int main(void)
{
  return mm_test_main(config_suite());
}
