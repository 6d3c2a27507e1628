/* check_cli: end-to-end tests of the madmax command line. */
#define _XOPEN_SOURCE 700 /* mknod, symlink, mkfifo */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "testutil.h"

static cJSON *parse_json(const char *text)
{
  cJSON *root = cJSON_Parse(text);
  ck_assert_msg(root != NULL, "output is not JSON: %.200s", text);
  return root;
}

static double num(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  ck_assert_msg(cJSON_IsNumber(v), "missing number %s", key);
  return v->valuedouble;
}

START_TEST(test_describe_model_only)
{
  const char *args[] = {"describe", "--model", "models/gpt3-175b.json", "--json", "-", NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, &err), 0);
  cJSON *root = parse_json(out);
  ck_assert_double_eq_tol(num(root, "total_params") / 174.6e9, 1.0, 0.01);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
  ck_assert_int_eq(cJSON_GetArraySize(layers), 98); /* embedding, 96 layers, head */
  const cJSON *l1 = cJSON_GetArrayItem(layers, 1);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(l1, "name")->valuestring, "decoder.0");
  ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(root, "memory"));
  cJSON_Delete(root);
}
END_TEST

START_TEST(test_describe_memory_json)
{
  const char *args[] = {"describe", "-m", "models/gpt3-175b.json", "-H", "hardware/zionex-a100-128.json",
                        "-c", "configs/llm-pretrain-ddp.json", "--json", "-", NULL};
  g_autofree char *out = NULL;
  /* not fitting is a result: exit 0 */
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  cJSON *root = parse_json(out);
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memory");
  ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(mem, "fits")));
  double total = num(mem, "per_device_bytes");
  ck_assert_double_gt(total, num(mem, "capacity_bytes"));
  const cJSON *bd = cJSON_GetObjectItemCaseSensitive(mem, "breakdown");
  double sum = num(bd, "weights") + num(bd, "gradients") + num(bd, "optimizer") + num(bd, "activations") +
               num(bd, "comm_buffers");
  ck_assert_double_eq_tol(sum, total, total * 1e-12);
  cJSON_Delete(root);
}
END_TEST

START_TEST(test_describe_serving)
{
  /* a serving config: describe costs the prefill run simulates, shows the decode step, and
   * its memory is run's */
  g_autofree char *cfg = mm_test_write("serve-describe.json",
    "{\"name\":\"s\",\"task\":\"inference\",\"global_batch\":4,"
    "\"inference\":{\"prompt_tokens\":1000,\"output_tokens\":200},"
    "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}");
  const char *args[] = {"describe", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c", cfg,
                        "-n", "1", "--json", "-", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  cJSON *d = parse_json(out);
  ck_assert_double_eq(num(d, "tokens_per_sample"), 1000);
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(d, "decode_step");
  ck_assert_double_eq(num(step, "context_tokens"), 1100);
  const cJSON *cost = cJSON_GetObjectItemCaseSensitive(step, "cost_per_sequence");
  /* one token: about 2 FLOPs a parameter, every weight read */
  ck_assert_double_eq_tol(num(cost, "fwd_flops") / (2.0 * num(d, "total_params")), 1.0, 0.05);
  ck_assert_double_eq_tol(num(cost, "weight_bytes") / (2.0 * num(d, "total_params")), 1.0, 0.01);
  const char *run[] = {"run", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c", cfg,
                       "-n", "1", "--json", "-", NULL};
  g_autofree char *rout = NULL;
  ck_assert_int_eq(mm_test_cli(run, &rout, NULL), 0);
  cJSON *r = parse_json(rout);
  ck_assert_double_eq(num(cJSON_GetObjectItemCaseSensitive(d, "memory"), "per_device_bytes"),
                      num(cJSON_GetObjectItemCaseSensitive(r, "memory"), "per_device_bytes"));
  cJSON_Delete(r);
  cJSON_Delete(d);
}
END_TEST

/* describe --json prints each layer's placement: TP 8 x FSDP 256 holds 1/2048 of a
 * column-parallel weight, runs 1/8 of its work, and all-reduces its input gradient over tp. */
START_TEST(test_describe_placement)
{
  const char *args[] = {"describe", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c",
                        "configs/llm-pretrain-tp-fsdp.json", "--json", "-", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  cJSON *d = parse_json(out);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(d, "layers");
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(layers, 1), "ops");
  const cJSON *qkv = NULL;
  for (int i = 0; i < cJSON_GetArraySize(ops); i++) {
    const cJSON *o = cJSON_GetArrayItem(ops, i);
    if (strcmp(cJSON_GetObjectItemCaseSensitive(o, "role")->valuestring, "qkv") == 0) qkv = o;
  }
  ck_assert_ptr_nonnull(qkv);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(qkv, "placement");
  ck_assert_double_eq(num(p, "param_fraction"), 1.0 / 2048);
  ck_assert_double_eq(num(p, "work_fraction"), 1.0 / 8);
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "collectives"), 0);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(c, "bwd")->valuestring, "all_reduce");
  ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "group"), 0)->valuestring, "tp");
  cJSON_Delete(d);
}
END_TEST

START_TEST(test_serving_trace)
{
  /* a serving run's trace: the prefill's processes, then the decode step's, starting when
   * the prefill ends (the first token) */
  g_autofree char *cfg = mm_test_write("serve-trace.json",
    "{\"name\":\"s\",\"task\":\"inference\",\"global_batch\":2,"
    "\"inference\":{\"prompt_tokens\":256,\"output_tokens\":32},"
    "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}");
  g_autofree char *trace = g_build_filename(mm_test_tmpdir(), "serve.trace.json", NULL);
  const char *args[] = {"run", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c", cfg,
                        "-n", "1", "--trace", trace, "--json", "-", NULL};
  g_autofree char *out = NULL, *text = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  cJSON *r = parse_json(out);
  const cJSON *sv = cJSON_GetObjectItemCaseSensitive(r, "serving");
  const double ttft_us = num(sv, "time_to_first_token_s") * 1e6, tpot_us = num(sv, "time_per_output_token_s") * 1e6;
  ck_assert(g_file_get_contents(trace, &text, NULL, NULL));
  cJSON *t = parse_json(text);
  double end[2] = {0, 0}, start1 = G_MAXDOUBLE;
  guint names = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "traceEvents"))
  {
    const char *ph = cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring;
    const int pid = (int)num(e, "pid");
    if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, "process_name") == 0) {
      const char *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name")->valuestring;
      ck_assert(g_str_has_prefix(nm, pid == 0 ? "prefill, " : "decode step, "));
      names++;
    }
    if (strcmp(ph, "X") != 0) continue;
    ck_assert_int_le(pid, 1);
    end[pid] = MAX(end[pid], num(e, "ts") + num(e, "dur"));
    if (pid == 1) start1 = MIN(start1, num(e, "ts"));
  }
  ck_assert_uint_eq(names, 2);
  ck_assert_double_eq_tol(end[0], ttft_us, 1e-3);
  ck_assert_double_ge(start1, end[0] - 1e-3);
  ck_assert_double_eq_tol(end[1] - end[0], tpot_us, 1e-3);
  cJSON_Delete(t);
  cJSON_Delete(r);
}
END_TEST

START_TEST(test_describe_text)
{
  const char *args[] = {"describe", "-m", "models/gpt3-175b.json", "-H", "hardware/dgx-a100-2048.json", "-c",
                        "configs/llm-pretrain-fsdp.json", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  ck_assert_ptr_nonnull(strstr(out, "params   174.60 B"));
  ck_assert_ptr_nonnull(strstr(out, "attn_core"));
  ck_assert_ptr_nonnull(strstr(out, ": fits"));
}
END_TEST

START_TEST(test_json_file_and_determinism)
{
  g_autofree char *p1 = g_build_filename(mm_test_tmpdir(), "a.json", NULL);
  g_autofree char *p2 = g_build_filename(mm_test_tmpdir(), "b.json", NULL);
  const char *a1[] = {"describe", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                      "configs/dlrm-pretrain-fsdp-mp.json", "--json", p1, NULL};
  const char *a2[] = {"describe", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                      "configs/dlrm-pretrain-fsdp-mp.json", "--json", p2, NULL};
  ck_assert_int_eq(mm_test_cli(a1, NULL, NULL), 0);
  ck_assert_int_eq(mm_test_cli(a2, NULL, NULL), 0);
  g_autofree char *t1 = NULL, *t2 = NULL;
  ck_assert(g_file_get_contents(p1, &t1, NULL, NULL));
  ck_assert(g_file_get_contents(p2, &t2, NULL, NULL));
  ck_assert_str_eq(t1, t2);
}
END_TEST

START_TEST(test_bad_options)
{
  static const char *const cases[][8] = {
    {"describe", NULL},                                          /* no model */
    {"describe", "--bogus", NULL},                               /* unknown option */
    {"describe", "-m", "models/gpt3-175b.json", "-H", "hardware/dgx-a100-2048.json", NULL}, /* no config */
    {"describe", "-m", "models/gpt3-175b.json", "extra", NULL},  /* stray argument */
    {"frobnicate", NULL},                                        /* unknown command */
    {"describe", "-m", "models/no-such-model.json", NULL},       /* missing file */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *out = NULL, *err = NULL;
    int rc = mm_test_cli(cases[i], &out, &err);
    ck_assert_msg(rc == 1, "case %u: exit %d", i, rc);
    ck_assert_msg(g_str_has_prefix(err, "madmax: "), "case %u: %s", i, err);
  }
}
END_TEST

START_TEST(test_unwritable_output_leaves_nothing)
{
  g_autofree char *p = g_build_filename(mm_test_tmpdir(), "no-such-dir", "out.json", NULL);
  const char *args[] = {"describe", "-m", "models/gpt3-175b.json", "--json", p, NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
  ck_assert(!g_file_test(p, G_FILE_TEST_EXISTS));
}
END_TEST


/* A small run (one DGX A100 node), with @extra options appended (NULL-terminated). */
static int run_small(const char *const *extra, char **out, char **err)
{
  const char *args[24] = {"run", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c",
                          "configs/llm-pretrain-tp-fsdp.json", "-n", "1"};
  guint n = 9;
  for (guint i = 0; extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  return mm_test_cli(args, out, err);
}

/* Outputs are written in place to what is not a regular file (a device, a FIFO) and through
 * symlinks; --json and --trace are written together or not at all, and a failure names the
 * option and the path given. (Before: a temporary renamed over the target turned a device or
 * FIFO into a file, replaced a symlink, and a failing --trace left the --json written.) */
START_TEST(test_outputs_in_place_and_together)
{
  /* a private /dev/null: a character device 1,3 (root only; the real one is not risked) */
  g_autofree char *dev = g_build_filename(mm_test_tmpdir(), "null-device", NULL);
  int fd = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0 ? g_open(dev, O_WRONLY, 0) : -1;
  if (fd >= 0) {
    close(fd);
    const char *extra[] = {"--json", dev, "--trace", dev, NULL};
    ck_assert_int_eq(run_small(extra + 2, NULL, NULL), 0);
    ck_assert_int_eq(run_small(extra, NULL, NULL), 1); /* one destination twice */
    const char *json_only[] = {"--json", dev, NULL};
    ck_assert_int_eq(run_small(json_only, NULL, NULL), 0);
    GStatBuf st;
    ck_assert_int_eq(g_lstat(dev, &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode), "the device became a file");
  }
  /* a FIFO: the document arrives through it */
  g_autofree char *fifo = g_build_filename(mm_test_tmpdir(), "result.fifo", NULL);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  int reader = mm_test_fifo_reader(fifo);
  const char *to_fifo[] = {"--json", fifo, NULL};
  ck_assert_int_eq(run_small(to_fifo, NULL, NULL), 0);
  g_autofree char *doc = mm_test_fifo_drain(reader);
  cJSON *r = parse_json(doc);
  ck_assert_double_gt(num(r, "iteration_time_s"), 0);
  cJSON_Delete(r);
  GStatBuf st;
  ck_assert_int_eq(g_lstat(fifo, &st), 0);
  ck_assert(S_ISFIFO(st.st_mode));
  /* a symlink stays one; the file it names gets the result */
  g_autofree char *real = mm_test_write("linked-result.json", "old");
  g_autofree char *link = g_build_filename(mm_test_tmpdir(), "result-link.json", NULL);
  ck_assert_int_eq(symlink("linked-result.json", link), 0);
  const char *to_link[] = {"--json", link, NULL};
  ck_assert_int_eq(run_small(to_link, NULL, NULL), 0);
  ck_assert_int_eq(g_lstat(link, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  g_autofree char *linked = NULL;
  ck_assert(g_file_get_contents(real, &linked, NULL, NULL));
  ck_assert(g_str_has_prefix(linked, "{"));
  /* a --trace that cannot be written: no --json either, and the message names the option */
  g_autofree char *json = g_build_filename(mm_test_tmpdir(), "together.json", NULL);
  g_autofree char *trace = g_build_filename(mm_test_tmpdir(), "no-such-dir", "t.json", NULL);
  const char *both[] = {"--json", json, "--trace", trace, NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(run_small(both, &out, &err), 1);
  ck_assert_msg(!g_file_test(json, G_FILE_TEST_EXISTS), "--json was written by a failed run");
  g_autofree char *trace_dir = g_path_get_dirname(trace);
  g_autofree char *want = g_strdup_printf("madmax: --trace %s: its folder %s does not exist", trace, trace_dir);
  ck_assert_msg(g_str_has_prefix(err, want), "%s", err);
  ck_assert_str_eq(out, "");
  /* the trace on stdout: only the trace there */
  const char *trace_out[] = {"--trace", "-", NULL};
  g_autofree char *tout = NULL;
  ck_assert_int_eq(run_small(trace_out, &tout, NULL), 0);
  cJSON *t = parse_json(tout);
  ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(t, "traceEvents")));
  cJSON_Delete(t);
}
END_TEST

/* An output over a file the system names (its device file, a network's fit file) would destroy an
 * input as surely as one over --hardware itself; so would validate's over a file its cases name.
 * Before, run, describe, whatif, op and validate wrote their result over it (exit 0); now exit 1
 * before the work, naming the output and the file, unchanged. */
START_TEST(test_output_not_system_file)
{
  g_autofree char *sys_dir = g_build_filename(mm_test_tmpdir(), "own-system", NULL);
  static const char *const files[] = {"dgx-a100-2048.json", "devices/a100-80gb.json", "fits/nccl-a100-nvswitch.json",
                                      "fits/nccl-a100-hdr-ib.json"};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *rel = g_build_filename("hardware", files[i], NULL), *src = mm_test_src(rel), *text = NULL;
    g_autofree char *dst = g_build_filename(sys_dir, files[i], NULL), *dst_dir = g_path_get_dirname(dst);
    ck_assert(g_mkdir_with_parents(dst_dir, 0755) == 0);
    ck_assert(g_file_get_contents(src, &text, NULL, NULL) && g_file_set_contents(dst, text, -1, NULL));
  }
  g_autofree char *hw = g_build_filename(sys_dir, files[0], NULL), *device = g_build_filename(sys_dir, files[1], NULL);
  g_autofree char *intra = g_build_filename(sys_dir, files[2], NULL), *inter = g_build_filename(sys_dir, files[3], NULL);
  const struct {
    const char *args[16];
    const char *out, *what;
  } cases[] = {
    {{"run", "-m", "models/llama2-70b.json", "-H", hw, "-c", "configs/llm-pretrain-tp-fsdp.json", "-n", "1", "--json", device, NULL}, device, "device"},
    {{"run", "-m", "models/llama2-70b.json", "-H", hw, "-c", "configs/llm-pretrain-tp-fsdp.json", "-n", "1", "--trace", inter, NULL}, inter, "inter_node fit"},
    {{"describe", "-m", "models/llama2-70b.json", "-H", hw, "-c", "configs/llm-pretrain-tp-fsdp.json", "--json", intra, NULL}, intra, "intra_node fit"},
    {{"whatif", "-m", "models/llama2-70b.json", "-H", hw, "-c", "configs/llm-pretrain-tp-fsdp.json", "-n", "1", "--json", device, NULL}, device, "device"},
    {{"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "-H", hw, "--json", intra, NULL}, intra,
     "intra_node fit"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *before = NULL, *after = NULL, *err = NULL;
    ck_assert(g_file_get_contents(cases[i].out, &before, NULL, NULL));
    ck_assert_int_eq(mm_test_cli(cases[i].args, NULL, &err), 1);
    g_autofree char *says = g_strdup_printf("is the file --hardware's %s %s reads", cases[i].what, cases[i].out);
    ck_assert_msg(strstr(err, cases[i].out) && strstr(err, says), "case %u: %s", i, err);
    ck_assert(g_file_get_contents(cases[i].out, &after, NULL, NULL));
    ck_assert_str_eq(after, before);
  }
  /* validate: the files its cases name, and the files their systems name */
  g_autofree char *model = g_build_filename(sys_dir, "model.json", NULL), *model_src = mm_test_src("models/llama2-70b.json");
  g_autofree char *model_text = NULL, *root = mm_test_src(".");
  ck_assert(g_file_get_contents(model_src, &model_text, NULL, NULL) && g_file_set_contents(model, model_text, -1, NULL));
  g_autofree char *cases_text = g_strdup_printf(
    "{\"name\": \"t\", \"root\": \"%s\", \"cases\": [{\"id\": \"c\", \"source\": \"s\", \"model\": \"%s\", "
    "\"hardware\": \"%s\", \"nodes\": 1, \"config\": \"configs/llm-pretrain-tp-fsdp.json\", "
    "\"metric\": \"iteration_time_s\", \"measured\": 1}]}", root, model, hw);
  g_autofree char *cases_path = mm_test_write("own-system-cases.json", cases_text);
  const char *const outs[] = {model, device};
  const char *const whats[] = {"CASES.json's model", "CASES.json's hardware's device"};
  for (guint i = 0; i < G_N_ELEMENTS(outs); i++) {
    const char *args[] = {"validate", cases_path, "--json", outs[i], NULL};
    g_autofree char *before = NULL, *after = NULL, *err = NULL;
    ck_assert(g_file_get_contents(outs[i], &before, NULL, NULL));
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    g_autofree char *says = g_strdup_printf("is the file %s %s reads", whats[i], outs[i]);
    ck_assert_msg(strstr(err, says), "validate %u: %s", i, err);
    ck_assert(g_file_get_contents(outs[i], &after, NULL, NULL));
    ck_assert_str_eq(after, before);
  }
}
END_TEST

START_TEST(test_help_and_version)
{
  const char *h[] = {"--help", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(h, &out, NULL), 0);
  ck_assert_ptr_nonnull(strstr(out, "describe"));
  const char *dh[] = {"describe", "--help", NULL};
  g_autofree char *out2 = NULL;
  ck_assert_int_eq(mm_test_cli(dh, &out2, NULL), 0);
  ck_assert_ptr_nonnull(strstr(out2, "--hardware"));
  const char *v[] = {"--version", NULL};
  g_autofree char *out3 = NULL;
  ck_assert_int_eq(mm_test_cli(v, &out3, NULL), 0);
  ck_assert(g_str_has_prefix(out3, "madmax "));
}
END_TEST

START_TEST(test_schema_doc_is_current)
{
  const char *args[] = {"schema", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  g_autofree char *path = mm_test_src("docs/SCHEMA.md");
  g_autofree char *doc = NULL;
  ck_assert_msg(g_file_get_contents(path, &doc, NULL, NULL), "docs/SCHEMA.md is missing");
  ck_assert_msg(strcmp(out, doc) == 0, "docs/SCHEMA.md is stale: run build/madmax schema > docs/SCHEMA.md");
  ck_assert_ptr_nonnull(strstr(doc, "`kv_heads`"));
}
END_TEST

/* The README's validation tables are the program's current output. */
START_TEST(test_readme_tables_are_current)
{
  g_autofree char *path = mm_test_src("README.md");
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(path, &readme, NULL, NULL));
  static const char *const names[] = {"training", "llama3", "fp8", "nemo", "torchtitan", "inference", "collectives", "overlap"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *cases = g_strdup_printf("configs/validation/%s.json", names[i]);
    const char *args[] = {"validate", cases, "--markdown", NULL};
    g_autofree char *out = NULL;
    ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
    g_autofree char *begin = g_strdup_printf("<!-- validate:%s -->\n", names[i]);
    g_autofree char *end = g_strdup_printf("<!-- /validate:%s -->", names[i]);
    const char *a = strstr(readme, begin), *b = strstr(readme, end);
    ck_assert_msg(a && b && b > a, "README lacks the %s markers", names[i]);
    a += strlen(begin);
    g_autofree char *block = g_strndup(a, (gsize)(b - a));
    ck_assert_msg(strcmp(block, out) == 0, "README's %s table is stale: run scripts/update-readme.sh", names[i]);
  }
}
END_TEST

/* A bad validation cases file is bad input (exit 1), named with the JSON path of the fault;
 * so is a case asking a serving metric of a training config. */
START_TEST(test_validate_bad_cases)
{
  g_autofree char *root = mm_test_src(".");
  g_autofree char *serving = g_strdup_printf(
    "{\"name\":\"t\",\"root\":\"%s\",\"cases\":[{\"id\":\"x\",\"source\":\"s\",\"model\":\"models/mpt-7b.json\","
    "\"hardware\":\"hardware/dgx-a100-2048.json\",\"nodes\":1,\"config\":\"configs/validation/fsdp.json\","
    "\"metric\":\"time_per_output_token\",\"measured\":0.02}]}", root);
  /* the metric's name as run --json spells it is not a metric validate knows either */
  g_autofree char *unknown = mm_test_write("validate-unknown-metric.json", serving);
  g_autoptr(GString) s = g_string_new(serving);
  g_string_replace(s, "time_per_output_token", "decode_latency_s_per_token", 0);
  g_autofree char *tpot = mm_test_write("validate-serving-metric.json", s->str);
  g_autofree char *trunc = mm_test_write("validate-trunc.json", "{\"name\":\"t\",\"cases\":[");
  struct {
    const char *file, *where;
  } cases[] = {
    {tpot, "$.cases[0].metric"},
    {unknown, "$.cases[0].metric"},
    {trunc, "validate-trunc.json"},
    {"no/such/cases.json", "no/such/cases.json"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const char *args[] = {"validate", cases[i].file, "--json", "-", NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(mm_test_cli(args, &out, &err), 1);
    ck_assert_msg(strstr(err, cases[i].file) && strstr(err, cases[i].where), "case %u: %s", i, err);
    ck_assert_str_eq(out, ""); /* no half result */
  }
}
END_TEST

/* ---- plot ------------------------------------------------------------------ */

/* A 4-stage 1F1B run of 8 micro-batches on 4 DGX A100 nodes, with its trace and result. */
static void pipeline_run(char **trace, char **result)
{
  g_autofree char *cfg = mm_test_write("pp-plot.json",
    "{\"name\":\"pp\",\"task\":\"pretrain\",\"global_batch\":8,\"micro_batch\":1,"
    "\"pipeline\":{\"degree\":4,\"schedule\":\"1f1b\"},"
    "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}");
  *trace = g_build_filename(mm_test_tmpdir(), "pp.trace.json", NULL);
  *result = g_build_filename(mm_test_tmpdir(), "pp.json", NULL);
  const char *args[] = {"run", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c", cfg,
                        "-n", "4", "--trace", *trace, "--json", *result, NULL};
  ck_assert_int_eq(mm_test_cli(args, NULL, NULL), 0);
}

/* The data lines of the block of a plot data file whose header ("# [K] WHAT") starts with
 * @what; empty when there is none. */
static gchar **data_block(const char *data, const char *what)
{
  g_auto(GStrv) blocks = g_strsplit(data, "\n\n\n", -1);
  for (guint i = 0; blocks[i]; i++) {
    g_auto(GStrv) lines = g_strsplit(blocks[i], "\n", -1);
    gboolean match = FALSE;
    GPtrArray *rows = g_ptr_array_new();
    for (guint k = 0; lines[k]; k++) {
      if (g_str_has_prefix(lines[k], "# [")) {
        const char *sp = strchr(lines[k], ']');
        match |= sp && g_str_has_prefix(sp + 2, what);
      } else if (lines[k][0] && lines[k][0] != '#') {
        g_ptr_array_add(rows, g_strdup(lines[k]));
      }
    }
    g_ptr_array_add(rows, NULL);
    if (match) return (gchar **)g_ptr_array_free(rows, FALSE);
    g_strfreev((gchar **)g_ptr_array_free(rows, FALSE));
  }
  return g_new0(gchar *, 1);
}

/* The quoted fields of a data line, in order. */
static gchar **fields(const char *line)
{
  GPtrArray *f = g_ptr_array_new();
  for (const char *c = strchr(line, '"'); c; c = strchr(c + 1, '"')) {
    const char *end = strchr(c + 1, '"');
    ck_assert_ptr_nonnull(end);
    g_ptr_array_add(f, g_strndup(c + 1, (gsize)(end - c - 1)));
    c = end;
  }
  g_ptr_array_add(f, NULL);
  return (gchar **)g_ptr_array_free(f, FALSE);
}

/* Runs plot with --script @gp (and @extra options); returns the script and its data. */
static void plot_script(const char *const *args, const char *gp, char **script, char **data)
{
  g_autofree char *err = NULL;
  ck_assert_msg(mm_test_cli(args, NULL, &err) == 0, "%s", err);
  g_autofree char *dat = g_strdup_printf("%.*s.dat", (int)strlen(gp) - 3, gp);
  ck_assert(g_file_get_contents(gp, script, NULL, NULL));
  ck_assert(g_file_get_contents(dat, data, NULL, NULL));
}

static gboolean file_starts_with(const char *path, const char *magic)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  return g_file_get_contents(path, &data, &len, NULL) && len > strlen(magic) &&
         memcmp(data, magic, strlen(magic)) == 0;
}

typedef struct {
  double t0, t1;
} Span;

static int span_cmp(const void *a, const void *b)
{
  const Span *x = a, *y = b;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

START_TEST(test_plot_timeline)
{
  g_autofree char *trace = NULL, *result = NULL;
  pipeline_run(&trace, &result);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "t.gp", NULL);
  const char *args[] = {"plot", trace, "--kind", "timeline", "--script", gp, NULL};
  g_autofree char *script = NULL, *data = NULL;
  plot_script(args, gp, &script, &data);

  /* the trace's busy streams, per class: a row each, the pipeline's four streams as one */
  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(trace, &text, NULL, NULL));
  cJSON *root = parse_json(text);
  enum { ROWS_PER_CLASS = 4, CLASSES = 4 }; /* compute, intra, inter, pipeline; 4 stages */
  GArray *ops[CLASSES * ROWS_PER_CLASS]; /* freed at the end (a failed check ends the forked test) */
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) ops[r] = g_array_new(FALSE, FALSE, sizeof(Span));
  g_autoptr(GHashTable) cats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
  {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "X") != 0 || num(e, "dur") <= 0) continue;
    const int pid = (int)num(e, "pid"), tid = (int)num(e, "tid");
    ck_assert(pid < CLASSES && tid < 7);
    Span sp = {num(e, "ts") * 1e-6, (num(e, "ts") + num(e, "dur")) * 1e-6};
    g_array_append_val(ops[pid * ROWS_PER_CLASS + MIN(tid, 3)], sp);
    g_hash_table_add(cats, g_strdup(cJSON_GetObjectItemCaseSensitive(e, "cat")->valuestring));
  }
  /* the title comes from the run's names */
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
  const char *model = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(other, "model"), "name")->valuestring;
  ck_assert_str_eq(model, "LLaMA-2-70B");
  cJSON_Delete(root);
  guint busy_rows = 0, row_of[G_N_ELEMENTS(ops)];
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) row_of[r] = ops[r]->len ? busy_rows++ : G_MAXUINT;
  g_auto(GStrv) rows = data_block(data, "rows");
  ck_assert_uint_eq(g_strv_length(rows), busy_rows);
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) {
    if (row_of[r] == G_MAXUINT) continue;
    g_auto(GStrv) f = fields(rows[row_of[r]]);
    static const char *const stream[] = {"compute", "comm intra", "comm inter", "p2p"};
    g_autofree char *want = r % ROWS_PER_CLASS == 0 ? g_strdup_printf("stage %u \u00b7 compute", r / ROWS_PER_CLASS)
                                                    : g_strdup(stream[r % ROWS_PER_CLASS]);
    ck_assert_str_eq(f[0], want);
  }
  g_auto(GStrv) meta = data_block(data, "figure");
  g_auto(GStrv) title = fields(meta[0]);
  ck_assert_msg(g_str_has_prefix(title[1], "LLaMA-2-70B on 32 x NVIDIA A100-SXM4-80GB: pp"), "%s", title[1]);

  /* spans: every op lies inside its row's spans (thin ops widened to a bin, neighbours
   * merged), spans of a row do not overlap, and only the trace's categories appear */
  GArray *spans[G_N_ELEMENTS(ops)];
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) spans[r] = g_array_new(FALSE, FALSE, sizeof(Span));
  static const char *const cat_names[] = {"fwd", "bwd", "recompute", "optimizer", "all_reduce", "all_gather",
                                          "reduce_scatter", "all_to_all", "p2p", "broadcast", "permute", "other"};
  guint blocks = 0;
  for (guint c = 0; c < G_N_ELEMENTS(cat_names); c++) {
    g_autofree char *head = g_strdup_printf("%s spans", cat_names[c]);
    g_auto(GStrv) lines = data_block(data, head);
    if (!lines[0]) continue;
    blocks++;
    ck_assert_msg(g_hash_table_contains(cats, cat_names[c]), "%s drawn but not in the trace", cat_names[c]);
    for (guint i = 0; lines[i]; i++) {
      guint row = 0;
      Span sp;
      ck_assert_int_eq(sscanf(lines[i], "%u %lf %lf", &row, &sp.t0, &sp.t1), 3);
      ck_assert(sp.t1 > sp.t0);
      guint r = 0;
      while (r < G_N_ELEMENTS(ops) && row_of[r] != row) r++;
      ck_assert_uint_lt(r, G_N_ELEMENTS(ops));
      g_array_append_val(spans[r], sp);
    }
  }
  ck_assert_uint_ge(blocks, 4); /* forward, backward, a collective, pipeline send/recv */
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) {
    if (!ops[r]->len) continue;
    g_array_sort(spans[r], span_cmp);
    const Span *S = (const Span *)spans[r]->data;
    for (guint i = 1; i < spans[r]->len; i++) ck_assert(S[i].t0 >= S[i - 1].t1 - 1e-9);
    for (guint k = 0; k < ops[r]->len; k++) {
      const Span *op = &g_array_index(ops[r], Span, k);
      /* the span holding the op's start, then contiguous spans to its end */
      guint i = 0;
      while (i < spans[r]->len && S[i].t1 <= op->t0) i++;
      ck_assert_msg(i < spans[r]->len && S[i].t0 <= op->t0 + 1e-9, "row %u: op %g..%g not drawn", r, op->t0, op->t1);
      while (i + 1 < spans[r]->len && S[i].t1 < op->t1 - 1e-9) {
        ck_assert_msg(S[i + 1].t0 <= S[i].t1 + 1e-9, "row %u: op %g..%g has a hole", r, op->t0, op->t1);
        i++;
      }
      ck_assert_msg(S[i].t1 >= op->t1 - 1e-9, "row %u: op %g..%g cut", r, op->t0, op->t1);
    }
  }
  for (guint r = 0; r < G_N_ELEMENTS(ops); r++) {
    g_array_free(ops[r], TRUE);
    g_array_free(spans[r], TRUE);
  }
  ck_assert_ptr_nonnull(strstr(script, "set xlabel 'time (s)'"));
  ck_assert_ptr_nonnull(strstr(script, "size 1050,")); /* a page wide at 150 pixels an inch */

  /* the same trace, the same script and data */
  g_autofree char *gp2 = g_build_filename(mm_test_tmpdir(), "t2.gp", NULL);
  const char *again[] = {"plot", trace, "--kind", "timeline", "--script", gp2, NULL};
  g_autofree char *script2 = NULL, *data2 = NULL;
  plot_script(again, gp2, &script2, &data2);
  ck_assert_str_eq(script, script2);
  ck_assert_str_eq(data + strlen("x"), data2 + strlen("x")); /* the figure's name differs: t.png vs t2.png */

  /* a window keeps only what falls in it, clipped; a size sets the terminal */
  const char *win[] = {"plot", trace, "--kind", "timeline", "--window", "100:300", "--size", "column", "--title",
                       "T", "--script", gp2, NULL};
  g_autofree char *script3 = NULL, *data3 = NULL;
  plot_script(win, gp2, &script3, &data3);
  ck_assert_ptr_nonnull(strstr(script3, "set xlabel 'time (ms)'"));
  ck_assert_ptr_nonnull(strstr(script3, "size 525,360"));
  g_auto(GStrv) fwd = data_block(data3, "fwd spans");
  ck_assert_uint_gt(g_strv_length(fwd), 0);
  for (guint i = 0; fwd[i]; i++) {
    double lo, hi;
    ck_assert_int_eq(sscanf(fwd[i], "%*u %lf %lf", &lo, &hi), 2);
    ck_assert(lo >= 100 - 1e-9 && hi <= 300 + 1e-9 && lo < hi);
  }

  /* drawn by gnuplot when it is installed: the file appears whole, nothing else is left */
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (!gnuplot) return;
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "figs", NULL);
  g_mkdir_with_parents(dir, 0755);
  static const char *const ext[][2] = {{"png", "\x89PNG"}, {"pdf", "%PDF"}, {"svg", "<?xml"}};
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++) {
    g_autofree char *name = g_strdup_printf("t.%s", ext[i][0]);
    g_autofree char *fig = g_build_filename(dir, name, NULL);
    const char *draw[] = {"plot", trace, "--kind", "timeline", "--out", fig, NULL};
    ck_assert_int_eq(mm_test_cli(draw, NULL, NULL), 0);
    ck_assert_msg(file_starts_with(fig, ext[i][1]), "%s is not a %s", fig, ext[i][0]);
  }
  /* the script and its data draw the same figure by hand */
  g_autofree char *by_hand = g_build_filename(dir, "t.png", NULL);
  g_unlink(by_hand);
  g_autofree char *gp3 = g_build_filename(mm_test_tmpdir(), "t3.gp", NULL);
  const char *keep[] = {"plot", trace, "--kind", "timeline", "--out", by_hand, "--script", gp3, NULL};
  ck_assert_int_eq(mm_test_cli(keep, NULL, NULL), 0);
  g_unlink(by_hand);
  const char *gp_argv[] = {gnuplot, gp3, NULL};
  int status = 0;
  ck_assert(g_spawn_sync(NULL, (char **)gp_argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                         NULL, NULL, NULL, &status, NULL));
  ck_assert(g_spawn_check_wait_status(status, NULL));
  ck_assert(file_starts_with(by_hand, "\x89PNG"));
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  guint files = 0;
  for (const char *nm; (nm = g_dir_read_name(d));) {
    ck_assert_msg(nm[0] != '.', "left behind: %s", nm);
    files++;
  }
  ck_assert_uint_eq(files, 3);
  /* an output that is a symbolic link is written through, not replaced by a file */
  g_autofree char *target = g_build_filename(mm_test_tmpdir(), "target.png", NULL);
  g_autofree char *link = g_build_filename(mm_test_tmpdir(), "link.png", NULL);
  ck_assert(g_file_set_contents(target, "", 0, NULL));
  const char *ln[] = {"ln", "-s", target, link, NULL};
  ck_assert(g_spawn_sync(NULL, (char **)ln, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, NULL));
  const char *through[] = {"plot", trace, "--kind", "timeline", "--out", link, NULL};
  ck_assert_int_eq(mm_test_cli(through, NULL, NULL), 0);
  ck_assert(g_file_test(link, G_FILE_TEST_IS_SYMLINK));
  ck_assert(file_starts_with(target, "\x89PNG"));
  g_unlink(link);
}
END_TEST

START_TEST(test_plot_breakdown)
{
  g_autofree char *trace = NULL, *result = NULL;
  pipeline_run(&trace, &result);
  g_autofree char *serving = g_build_filename(mm_test_tmpdir(), "serving.json", NULL);
  const char *run[] = {"run", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c",
                       "configs/llm-inference-tp.json", "-n", "1", "--json", serving, NULL};
  g_autofree char *cfg = mm_test_write("serve-plot.json",
    "{\"name\":\"s\",\"task\":\"inference\",\"global_batch\":1,"
    "\"inference\":{\"prompt_tokens\":512,\"output_tokens\":16},"
    "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}");
  run[6] = cfg;
  ck_assert_int_eq(mm_test_cli(run, NULL, NULL), 0);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "b.gp", NULL);
  const char *args[] = {"plot", result, serving, "--kind", "breakdown", "--script", gp, NULL};
  g_autofree char *script = NULL, *data = NULL;
  plot_script(args, gp, &script, &data);
  g_auto(GStrv) bars = data_block(data, "bars");
  ck_assert_uint_eq(g_strv_length(bars), 3);
  /* the parts (compute by phase, exposed communication, idle) fill the iteration: column
   * 3 is the iteration time, then where each of the six parts starts and the last ends */
  for (guint i = 0; bars[i]; i++) {
    double v[8];
    ck_assert_int_eq(sscanf(bars[i], "%*u %*f %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4],
                            &v[5], &v[6], &v[7]), 8);
    ck_assert_double_eq(v[1], 0);
    for (int k = 2; k < 8; k++) ck_assert(v[k] >= v[k - 1]);
    ck_assert_double_eq_tol(v[7], v[0], 1e-6 * v[0]);
  }
  /* labels from the runs' names: what tells them apart (the system's size, the config);
   * what they share (the model) titles the figure */
  g_auto(GStrv) labels = data_block(data, "labels");
  ck_assert_uint_eq(g_strv_length(labels), 3);
  static const char *const want[] = {"32 x NVIDIA A100-SXM4-80GB \u00b7 pp", "8 x NVIDIA A100-SXM4-80GB \u00b7 s: prefill",
                                     "8 x NVIDIA A100-SXM4-80GB \u00b7 s: decode step"};
  for (guint i = 0; i < 3; i++) {
    g_auto(GStrv) f = fields(labels[i]);
    ck_assert_str_eq(f[0], want[i]);
  }
  g_auto(GStrv) meta = data_block(data, "figure");
  g_auto(GStrv) title = fields(meta[0]);
  ck_assert_str_eq(title[1], "LLaMA-2-70B");
  /* the pipeline bubble shows as idle time */
  double idle0 = 0, idle1 = 0;
  ck_assert_int_eq(sscanf(bars[0], "%*u %*f %*f %*f %*f %*f %*f %*f %lf %lf", &idle0, &idle1), 2);
  ck_assert_double_gt(idle1 - idle0, 0);

  /* a directory: its run results in name order; other JSON files (the trace) are not
   * results; the labels are still the runs' names, not the files' */
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "results", NULL);
  g_mkdir_with_parents(dir, 0755);
  const char *const files[][2] = {{result, "a-pp.json"}, {serving, "b-serving.json"}, {trace, "c-trace.json"}};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *bytes = NULL, *to = g_build_filename(dir, files[i][1], NULL);
    ck_assert(g_file_get_contents(files[i][0], &bytes, NULL, NULL) && g_file_set_contents(to, bytes, -1, NULL));
  }
  const char *by_dir[] = {"plot", dir, "--kind", "breakdown", "--script", gp, NULL};
  g_autofree char *script2 = NULL, *data2 = NULL;
  plot_script(by_dir, gp, &script2, &data2);
  g_auto(GStrv) labels2 = data_block(data2, "labels");
  ck_assert_uint_eq(g_strv_length(labels2), 3);
  for (guint i = 0; i < 3; i++) {
    g_auto(GStrv) f = fields(labels2[i]);
    ck_assert_str_eq(f[0], want[i]);
  }
  /* two results of one setup: the config labels them, the file names tell them apart */
  g_autofree char *twice = g_build_filename(mm_test_tmpdir(), "twice", NULL);
  g_mkdir_with_parents(twice, 0755);
  for (guint i = 0; i < 2; i++) {
    g_autofree char *bytes = NULL, *to = g_build_filename(twice, i ? "run2.json" : "run1.json", NULL);
    ck_assert(g_file_get_contents(result, &bytes, NULL, NULL) && g_file_set_contents(to, bytes, -1, NULL));
  }
  const char *by_twice[] = {"plot", twice, "--kind", "breakdown", "--script", gp, NULL};
  g_autofree char *script3 = NULL, *data3 = NULL;
  plot_script(by_twice, gp, &script3, &data3);
  g_auto(GStrv) labels3 = data_block(data3, "labels");
  ck_assert_uint_eq(g_strv_length(labels3), 2);
  g_auto(GStrv) f0 = fields(labels3[0]), f1 = fields(labels3[1]);
  ck_assert_str_eq(f0[0], "pp (run1)");
  ck_assert_str_eq(f1[0], "pp (run2)");
  g_auto(GStrv) meta3 = data_block(data3, "figure");
  g_auto(GStrv) title3 = fields(meta3[0]);
  ck_assert_str_eq(title3[1], "LLaMA-2-70B on 32 x NVIDIA A100-SXM4-80GB");
}
END_TEST

START_TEST(test_plot_bad_input)
{
  g_autofree char *trace = NULL, *result = NULL;
  pipeline_run(&trace, &result);
  g_autofree char *trunc = mm_test_write("trunc.json", "{\"traceEvents\":[{\"ph\":\"X\",");
  g_autofree char *fig = g_build_filename(mm_test_tmpdir(), "bad.png", NULL);
  struct {
    const char *args[12];
    const char *msg;
  } cases[] = {
    {{"plot", result, "--kind", "timeline", "--out", fig, NULL}, "$.traceEvents"},
    {{"plot", trace, "--kind", "breakdown", "--out", fig, NULL}, "$.iteration_time_s"},
    {{"plot", trunc, "--kind", "timeline", "--out", fig, NULL}, "trunc.json"},
    {{"plot", trace, "--kind", "timeline", "--out", "x.jpg", NULL}, ".png, .svg or .pdf"},
    {{"plot", trace, "--kind", "gantt", NULL}, "--kind"},
    {{"plot", result, "--kind", "breakdown", "--window", "1:2", NULL}, "--window"},
    {{"plot", trace, "--kind", "timeline", "--window", "5:1", NULL}, "--window"},
    {{"plot", "--kind", "timeline", NULL}, "INPUT"},
    {{"plot", "no/such.json", "--kind", "timeline", NULL}, "no/such.json"},
    {{"plot", trace, "--kind", "timeline", "--out", "no/such/dir/t.png", NULL}, "no/such/dir does not exist"},
    {{"plot", trace, "--kind", "timeline", "--size", "huge", "--out", fig, NULL}, "--size"},
    {{"plot", trace, "--kind", "timeline", "--size", "0x2", "--out", fig, NULL}, "--size"},
    {{"plot", trace, "--kind", "timeline", "--script", "-", NULL}, "--script"},
    {{"plot", trace, "--kind", "timeline", "--out", "a\"b.png", "--script", "x.gp", NULL}, "a\"b.png"},
    /* the script written over the trace it reads (exit 0, the trace gone) */
    {{"plot", trace, "--kind", "timeline", "--script", trace, NULL}, "is the file INPUT"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(cases[i].args, NULL, &err), 1);
    ck_assert_msg(strstr(err, cases[i].msg) != NULL, "case %u: '%s' lacks '%s'", i, err, cases[i].msg);
    ck_assert(!g_file_test(fig, G_FILE_TEST_EXISTS));
  }
  g_autofree char *stray = mm_test_src("x.gp");
  ck_assert(!g_file_test(stray, G_FILE_TEST_EXISTS));
}
END_TEST

/* Hostile traces and results (issue 10, defect 9) exit 1 with a message naming the file and
 * the JSON path, instead of undefined conversions, gnuplot failing (exit 2) or a negative
 * bar; nothing is written. */
START_TEST(test_plot_hostile_input)
{
  static const struct {
    const char *kind, *text, *where;
  } cases[] = {
    {"timeline", "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1e300,\"tid\":0,\"ts\":0,\"dur\":5}]}", "$.traceEvents[0].pid"},
    {"timeline", "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":4e18,\"tid\":0,\"ts\":0,\"dur\":5}]}", "$.traceEvents[0].pid"},
    {"timeline", "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":1e308,\"dur\":1e308}]}",
     "$.traceEvents[0].ts"},
    {"timeline", "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1e308}]}", "$.traceEvents[0].dur"},
    {"timeline",
     "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":0,\"tid\":1e300,\"name\":\"thread_name\",\"args\":{\"name\":\"a\"}},"
     "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":5}]}",
     "$.traceEvents[0].tid"},
    {"timeline",
     "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":-7,\"name\":\"process_name\",\"args\":{\"name\":\"a\"}},"
     "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":5}]}",
     "$.traceEvents[0].pid"},
    {"breakdown",
     "{\"iteration_time_s\":-1,\"serialized\":{\"compute_by_phase\":{\"fwd\":0,\"bwd\":0,\"recompute\":0,"
     "\"optimizer\":0}},\"exposed_comm_s\":0,\"idle_s\":0}",
     "$.iteration_time_s"},
    {"breakdown",
     "{\"iteration_time_s\":1,\"serialized\":{\"compute_by_phase\":{\"fwd\":2,\"bwd\":0,\"recompute\":0,"
     "\"optimizer\":0}},\"exposed_comm_s\":0,\"idle_s\":-1}",
     "$.serialized.compute_by_phase.fwd"},
  };
  g_autofree char *fig = g_build_filename(mm_test_tmpdir(), "hostile.png", NULL);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "hostile.gp", NULL);
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("hostile-%u.json", i);
    g_autofree char *path = mm_test_write(name, cases[i].text);
    const char *args[] = {"plot", path, "--kind", cases[i].kind, "--out", fig, "--script", gp, NULL};
    g_autofree char *err = NULL;
    ck_assert_msg(mm_test_cli(args, NULL, &err) == 1, "case %u: %s", i, err);
    ck_assert_msg(strstr(err, path) && strstr(err, cases[i].where), "case %u: '%s' lacks '%s'", i, err,
                  cases[i].where);
    ck_assert(!g_file_test(fig, G_FILE_TEST_EXISTS) && !g_file_test(gp, G_FILE_TEST_EXISTS));
  }
}
END_TEST

/* A results folder holding a file whose name ended the old script's inline data block and
 * ran `system` (issue 10, defect 1), and a title trying the same: gnuplot runs nothing. */
START_TEST(test_plot_names_are_inert)
{
  g_autofree char *trace = NULL, *result = NULL;
  pipeline_run(&trace, &result);
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "hostile-names", NULL);
  g_mkdir_with_parents(dir, 0755);
  g_autofree char *evil = g_build_filename(dir, "x\nEOD\nsystem \"touch PWNED\"\n$j << EOD\n.json", NULL);
  g_autofree char *bytes = NULL;
  ck_assert(g_file_get_contents(result, &bytes, NULL, NULL) && g_file_set_contents(evil, bytes, -1, NULL));
  /* gnuplot ran in madmax's working directory, the source tree */
  g_autofree char *pwned = mm_test_src("PWNED");
  g_unlink(pwned);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "inert.gp", NULL);
  g_autofree char *fig = g_build_filename(mm_test_tmpdir(), "inert.png", NULL);
  const char *title = "t'\nsystem 'touch PWNED'\n#";
  const char *cases[][10] = {
    {"plot", dir, "--kind", "breakdown", NULL},
    {"plot", dir, "--kind", "breakdown", "--title", title, NULL},
    {"plot", trace, "--kind", "timeline", "--title", title, NULL},
  };
  /* drawn (when gnuplot is installed): nothing runs */
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  int status[G_N_ELEMENTS(cases)] = {0};
  for (guint i = 0; gnuplot && i < G_N_ELEMENTS(cases); i++) {
    const guint n = g_strv_length((char **)cases[i]);
    cases[i][n] = "--out";
    cases[i][n + 1] = fig;
    status[i] = mm_test_cli(cases[i], NULL, NULL);
    cases[i][n] = NULL;
  }
  const gboolean ran = g_file_test(pwned, G_FILE_TEST_EXISTS);
  g_unlink(pwned);
  ck_assert_msg(!ran, "gnuplot ran a command from a file name or title");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) ck_assert_msg(status[i] == 0, "case %u: exit %d", i, status[i]);
  /* and the script holds no text of theirs */
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const guint n = g_strv_length((char **)cases[i]);
    cases[i][n] = "--script";
    cases[i][n + 1] = gp;
    ck_assert_int_eq(mm_test_cli(cases[i], NULL, NULL), 0);
    g_autofree char *script = NULL;
    ck_assert(g_file_get_contents(gp, &script, NULL, NULL));
    ck_assert_msg(!strstr(script, "PWNED") && !strstr(script, "system"), "case %u: input text in the script:\n%s", i,
                  script);
    cases[i][n] = NULL;
  }
  g_unlink(evil);
  g_rmdir(dir);
}
END_TEST


/* ---- plots of sweeps and what-if studies --------------------------------------- */

static const char *const DLRM[] = {"-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                                   "configs/dlrm-pretrain-fsdp-mp.json"};

/* Runs `madmax sweep` (or whatif) on DLRM-A with @extra arguments. */
static void dlrm_study(const char *cmd, const char *const *extra)
{
  const char *args[24] = {cmd};
  guint n = 1;
  for (guint i = 0; i < G_N_ELEMENTS(DLRM); i++) args[n++] = DLRM[i];
  for (guint i = 0; extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  g_autofree char *err = NULL;
  ck_assert_msg(mm_test_cli(args, NULL, &err) == 0, "%s: %s", cmd, err);
}

/* The number at @key of @obj. */
static double num_at(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  ck_assert_msg(cJSON_IsNumber(v), "no number at %s", key);
  return v->valuedouble;
}

/* A sweep whose space the scenario rejects in part says why, rule by rule: each line's count, and
 * its first point (no row of points.csv) with the scenario's message naming the JSON path; most
 * points first, the counts adding up to the points rejected (summary.json), a rule a line. */
START_TEST(test_sweep_rejected_example)
{
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "sweep-rejected", NULL);
  const char *args[] = {"sweep", "-m", "models/llama2-70b.json", "-H", "hardware/dgx-a100-2048.json", "-c",
                        "configs/llm-pretrain-fsdp.json", "--space", "bench/spaces/llama2-70b.json", "--out", dir,
                        "--quiet", "--yes", NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_msg(mm_test_cli(args, &out, &err) == 0, "%s", err);
  g_autofree char *csv_path = g_build_filename(dir, "points.csv", NULL), *csv = NULL;
  ck_assert(g_file_get_contents(csv_path, &csv, NULL, NULL));
  g_autofree char *sum_path = g_build_filename(dir, "summary.json", NULL), *sum_text = NULL;
  ck_assert(g_file_get_contents(sum_path, &sum_text, NULL, NULL));
  g_autoptr(cJSON) sum = parse_json(sum_text);
  g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
  guint at = 0, rules = 0;
  while (lines[at] && !g_str_has_prefix(lines[at], "  rejected ")) at++;
  ck_assert_msg(lines[at], "no rejected line in: %s", out);
  guint64 total = 0, last = G_MAXUINT64;
  g_autoptr(GHashTable) reasons = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (; lines[at] && strstr(lines[at], " points, e.g. point "); at++, rules++) {
    const char *line = lines[at] + strlen("  rejected ");
    char *end = NULL;
    const guint64 n = g_ascii_strtoull(line, &end, 10);
    ck_assert_msg(n > 0 && n <= last, "%s", lines[at]); /* most points first */
    last = n;
    total += n;
    const char *eg = strstr(end, ", e.g. point ") + strlen(", e.g. point ");
    const guint64 i = g_ascii_strtoull(eg, &end, 10);
    ck_assert_msg(strstr(end, ": $."), "no JSON path in %s", lines[at]);
    g_autofree char *row = g_strdup_printf("\n%" G_GUINT64_FORMAT ",", i);
    ck_assert_msg(!strstr(csv, row), "point %" G_GUINT64_FORMAT " has a row", i);
    /* a rule a line: the reasons without their numbers differ */
    GString *g = g_string_new(NULL);
    for (const char *p = strchr(end, '$'); *p; p++)
      if (!g_ascii_isdigit(*p)) g_string_append_c(g, *p);
    ck_assert_msg(g_hash_table_add(reasons, g_string_free(g, FALSE)), "a rule twice: %s", lines[at]);
  }
  ck_assert_uint_ge(rules, 2);
  ck_assert_double_eq((double)total, num_at(cJSON_GetObjectItemCaseSensitive(sum, "points"), "rejected_by_scenario"));
}
END_TEST

/* The figures of a real sweep and what-if study of DLRM-A: the ranking's best bar is the
 * summary's best point, the baseline is marked at 1.00x and the pruned points are noted; the
 * scatter has every point that ran and the summary's Pareto set; the what-if bars are the
 * study's systems. The same script and data each time; drawn when gnuplot is installed. */
START_TEST(test_plot_studies)
{
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "plot-sweep", NULL);
  g_autofree char *wi = g_build_filename(mm_test_tmpdir(), "plot-whatif.json", NULL);
  const char *sweep_args[] = {"--out", dir, "--quiet", NULL}, *whatif_args[] = {"--json", wi, NULL};
  dlrm_study("sweep", sweep_args);
  dlrm_study("whatif", whatif_args);
  g_autofree char *summary_path = g_build_filename(dir, "summary.json", NULL), *text = NULL;
  ck_assert(g_file_get_contents(summary_path, &text, NULL, NULL));
  g_autoptr(cJSON) summary = parse_json(text);
  const cJSON *best = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(summary, "best"), "throughput");
  const cJSON *front = cJSON_GetObjectItemCaseSensitive(summary, "pareto_memory_throughput");
  g_autofree char *csv_path = g_build_filename(dir, "points.csv", NULL), *csv = NULL;
  ck_assert(g_file_get_contents(csv_path, &csv, NULL, NULL));
  guint ran = 0;
  for (const char *c = strstr(csv, ",ok,1,"); c; c = strstr(c + 1, ",ok,1,")) ran++;

  const struct {
    const char *kind, *input;
  } kinds[] = {{"ranking", dir}, {"pareto", dir}, {"whatif", wi}};
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "study.gp", NULL);
  g_autofree char *gp2 = g_build_filename(mm_test_tmpdir(), "study2.gp", NULL);
  for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
    const char *args[] = {"plot", kinds[k].input, "--kind", kinds[k].kind, "--script", gp, NULL};
    const char *again[] = {"plot", kinds[k].input, "--kind", kinds[k].kind, "--script", gp2, NULL};
    g_autofree char *script = NULL, *data = NULL, *script2 = NULL, *data2 = NULL;
    plot_script(args, gp, &script, &data);
    plot_script(again, gp2, &script2, &data2);
    ck_assert_str_eq(script, script2);
    ck_assert_str_eq(data, data2);
    if (k == 0) {
      g_auto(GStrv) bars = data_block(data, "bars");
      ck_assert_uint_ge(g_strv_length(bars), 10);
      double sps = 0;
      int cls = -1;
      ck_assert_int_eq(sscanf(bars[0], "0 %lf %d", &sps, &cls), 2);
      ck_assert_int_eq(cls, 0);
      ck_assert_double_eq_tol(sps * 1e3, num_at(best, "samples_per_s"), 1e-6 * sps * 1e3);
      gboolean base = FALSE;
      for (guint i = 0; bars[i]; i++) base |= g_str_has_suffix(bars[i], " 1");
      ck_assert(base);
      ck_assert_ptr_nonnull(strstr(data, "\"1.00x\""));
      g_auto(GStrv) note = data_block(data, "note");
      ck_assert_uint_eq(g_strv_length(note), 1);
      ck_assert_ptr_nonnull(strstr(note[0], "out of memory (not simulated)"));
      g_auto(GStrv) meta = data_block(data, "figure");
      g_auto(GStrv) title = fields(meta[0]);
      /* the inputs' names, the config's cut to its headline */
      ck_assert_str_eq(title[1], "DLRM-A on Meta ZionEX, 16 nodes x 8 A100-40GB: DLRM pretraining");
    } else if (k == 1) {
      g_auto(GStrv) pts = data_block(data, "points");
      ck_assert_uint_eq(g_strv_length(pts), ran);
      g_auto(GStrv) fr = data_block(data, "front");
      ck_assert_uint_eq(g_strv_length(fr), (guint)cJSON_GetArraySize(front));
      double prev_m = 0, prev_t = 0;
      for (guint i = 0; fr[i]; i++) { /* a front: more memory buys more samples/s */
        double m = 0, t = 0;
        ck_assert_int_eq(sscanf(fr[i], "%lf %lf", &m, &t), 2);
        ck_assert(m >= prev_m && t > prev_t);
        prev_m = m, prev_t = t;
      }
      ck_assert_ptr_nonnull(strstr(script, "set arrow from 40, graph 0")); /* 40 GiB A100s */
    } else {
      g_auto(GStrv) labels = data_block(data, "labels");
      ck_assert_uint_eq(g_strv_length(labels), 8); /* baseline, six components, all together */
      g_auto(GStrv) joint = data_block(data, "bars of components scaled together");
      ck_assert_uint_eq(g_strv_length(joint), 1);
      ck_assert(g_str_has_prefix(joint[0], "7 "));
      g_auto(GStrv) note = data_block(data, "note");
      ck_assert_ptr_nonnull(strstr(note[0], "super-linear"));
      g_auto(GStrv) meta = data_block(data, "figure");
      g_auto(GStrv) title = fields(meta[0]);
      ck_assert_str_eq(title[1], "What-if: DLRM-A on Meta ZionEX, 16 nodes x 8 A100-40GB: DLRM pretraining");
    }
  }

  /* --include-oom: simulated points out of memory, hatched and crossed */
  g_autofree char *space = mm_test_write("plot-space.json", "{\"strategies\": {\"mlp\": [\"fsdp\", \"ddp\"], "
                                                            "\"embedding_bag\": [\"mp\", \"ddp\"]}, \"max_levels\": 1}");
  g_autofree char *oom = g_build_filename(mm_test_tmpdir(), "plot-sweep-oom", NULL);
  const char *oom_args[] = {"--out", oom, "--quiet", "--space", space, "--include-oom", NULL};
  dlrm_study("sweep", oom_args);
  const char *rk[] = {"plot", oom, "--kind", "ranking", "--script", gp, NULL};
  g_autofree char *script = NULL, *data = NULL;
  plot_script(rk, gp, &script, &data);
  ck_assert_ptr_nonnull(strstr(data, ", OOM\""));
  ck_assert_ptr_nonnull(strstr(script, "fs pattern"));
  g_auto(GStrv) notes = data_block(data, "note");
  ck_assert_uint_eq(g_strv_length(notes), 0); /* every point simulated */

  /* a corrupted points.csv: exit 1, the line and column named */
  g_autofree char *bad = g_build_filename(mm_test_tmpdir(), "plot-sweep-bad", NULL);
  g_mkdir_with_parents(bad, 0755);
  g_autofree char *bad_csv = g_build_filename(bad, "points.csv", NULL), *bad_sum = g_build_filename(bad, "summary.json", NULL);
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  guint sps = 0; /* the samples_per_s column */
  while (head[sps] && strcmp(head[sps], "samples_per_s") != 0) sps++;
  ck_assert_ptr_nonnull(head[sps]);
  for (guint i = 1; lines[i]; i++)
    if (strstr(lines[i], ",ok,1,")) {
      g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
      g_free(f[sps]);
      f[sps] = g_strdup("lots");
      g_free(lines[i]);
      lines[i] = g_strjoinv(",", f);
      break;
    }
  g_autofree char *bad_text = g_strjoinv("\n", lines);
  ck_assert(g_file_set_contents(bad_csv, bad_text, -1, NULL) && g_file_set_contents(bad_sum, text, -1, NULL));
  g_autofree char *fig = g_build_filename(mm_test_tmpdir(), "plot-bad.png", NULL);
  const char *fail[] = {"plot", bad, "--kind", "ranking", "--out", fig, NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(fail, NULL, &err), 1);
  ck_assert_msg(strstr(err, "points.csv: line ") && strstr(err, ": samples_per_s: 'lots' is not a number"), "%s", err);
  ck_assert(!g_file_test(fig, G_FILE_TEST_EXISTS));

  /* drawn by gnuplot when it is installed */
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (!gnuplot) return;
  static const char *const formats[][2] = {{"png", "\x89PNG"}, {"pdf", "%PDF"}, {"svg", "<?xml"}};
  for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
    for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
      g_autofree char *name = g_strdup_printf("study-%s.%s", kinds[k].kind, formats[f][0]);
      g_autofree char *out = g_build_filename(mm_test_tmpdir(), name, NULL);
      const char *draw[] = {"plot", kinds[k].input, "--kind", kinds[k].kind, "--out", out, "--size",
                            f == 1 ? "column" : "page", NULL};
      g_autofree char *e = NULL;
      ck_assert_msg(mm_test_cli(draw, NULL, &e) == 0, "%s: %s", name, e);
      ck_assert_msg(file_starts_with(out, formats[f][1]), "%s", name);
    }
  }
  const char *draw_oom[] = {"plot", oom, "--kind", "pareto", "--out", fig, NULL};
  ck_assert_int_eq(mm_test_cli(draw_oom, NULL, NULL), 0);
  ck_assert(file_starts_with(fig, "\x89PNG"));
}
END_TEST

/* A sweep of two systems: the systems figure has each system's own front (its points, as the
 * summary lists them), the front across systems, the names in the legend rows and in the title;
 * a sweep of one system is refused naming $.systems. */
START_TEST(test_plot_systems)
{
  g_autofree char *dir = g_build_filename(mm_test_tmpdir(), "plot-systems", NULL);
  g_autofree char *space = mm_test_write("plot-systems-space.json", "{\"nodes\": [8, 16], \"strategies\": "
                                         "{\"mlp\": [\"fsdp\", \"ddp\", \"tp\"], \"embedding_bag\": [\"mp\"]}}");
  const char *sweep[] = {"sweep", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-H",
                         "hardware/h100-superpod-256.json", "-c", "configs/dlrm-pretrain-fsdp-mp.json", "--space",
                         space, "--out", dir, "--quiet", NULL};
  g_autofree char *err = NULL;
  ck_assert_msg(mm_test_cli(sweep, NULL, &err) == 0, "%s", err);
  g_autofree char *sum_path = g_build_filename(dir, "summary.json", NULL), *text = NULL;
  ck_assert(g_file_get_contents(sum_path, &text, NULL, NULL));
  g_autoptr(cJSON) sum = parse_json(text);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "systems.gp", NULL);
  const char *args[] = {"plot", dir, "--kind", "systems", "--script", gp, NULL};
  g_autofree char *script = NULL, *data = NULL;
  plot_script(args, gp, &script, &data);
  g_auto(GStrv) meta = data_block(data, "figure");
  g_auto(GStrv) title = fields(meta[0]);
  ck_assert_str_eq(title[1], "DLRM-A on 2 systems: DLRM pretraining");
  g_auto(GStrv) names = data_block(data, "systems");
  ck_assert_uint_eq(g_strv_length(names), 2);
  ck_assert_ptr_nonnull(strstr(names[1], "\"H100 SuperPOD with NVLink Switch System, 32 nodes x 8 H100-SXM\""));
  const cJSON *systems = cJSON_GetObjectItemCaseSensitive(sum, "systems");
  for (int k = 0; k < 2; k++) {
    g_autofree char *what = g_strdup_printf("system %d's front", k);
    g_auto(GStrv) pts = data_block(data, what);
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(systems, k), "pareto_time_gpu_hours");
    ck_assert_uint_eq(g_strv_length(pts), (guint)cJSON_GetArraySize(own));
    ck_assert_uint_gt(g_strv_length(pts), 0);
    /* GPU-hours per million samples: the summary's per sample, times a million */
    double x = 0, y = 0;
    ck_assert_int_eq(sscanf(pts[0], "%lf %lf", &x, &y), 2);
    ck_assert_double_eq_tol(x, 1e6 * num_at(cJSON_GetArrayItem(own, 0), "a100_gpu_hours_per_sample"), 1e-6 * x);
  }
  g_auto(GStrv) front = data_block(data, "front across systems");
  ck_assert_uint_eq(g_strv_length(front), (guint)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sum, "pareto_time_gpu_hours")));
  double prev_x = 0, prev_y = INFINITY;
  for (guint i = 0; front[i]; i++) { /* a front: more GPU-hours buy less time */
    double x = 0, y = 0;
    unsigned sys = 9;
    ck_assert_int_eq(sscanf(front[i], "%lf %lf %u", &x, &y, &sys), 3);
    ck_assert(x >= prev_x && y < prev_y && sys < 2);
    prev_x = x, prev_y = y;
  }
  ck_assert_ptr_null(strstr(script, "DLRM-A")); /* names only in the data */
  /* the ranking of a sweep of several systems has a system column */
  const char *rk[] = {"plot", dir, "--kind", "ranking", "--script", gp, NULL};
  g_autofree char *rscript = NULL, *rdata = NULL;
  plot_script(rk, gp, &rscript, &rdata);
  ck_assert_ptr_nonnull(strstr(rdata, "\"system\""));
  /* a sweep of one system */
  g_autofree char *one = g_build_filename(mm_test_tmpdir(), "plot-systems-one", NULL);
  const char *sweep1[] = {"sweep", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                          "configs/dlrm-pretrain-fsdp-mp.json", "--space", space, "--out", one, "--quiet", NULL};
  ck_assert_int_eq(mm_test_cli(sweep1, NULL, NULL), 0);
  g_autofree char *fig1 = g_build_filename(mm_test_tmpdir(), "systems-one.png", NULL);
  const char *bad[] = {"plot", one, "--kind", "systems", "--out", fig1, NULL};
  g_autofree char *e1 = NULL;
  ck_assert_int_eq(mm_test_cli(bad, NULL, &e1), 1);
  ck_assert_msg(strstr(e1, "summary.json: $.systems"), "%s", e1);
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (!gnuplot) return;
  static const char *const formats[][2] = {{"png", "\x89PNG"}, {"svg", "<?xml"}};
  for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
    g_autofree char *name = g_strdup_printf("systems.%s", formats[f][0]);
    g_autofree char *out = g_build_filename(mm_test_tmpdir(), name, NULL);
    const char *draw[] = {"plot", dir, "--kind", "systems", "--out", out, NULL};
    g_autofree char *e = NULL;
    ck_assert_msg(mm_test_cli(draw, NULL, &e) == 0, "%s: %s", name, e);
    ck_assert_msg(file_starts_with(out, formats[f][1]), "%s", name);
  }
}
END_TEST

/* ---- hostile input: exit 1 and a message that says where ------------------ */

#define LLAMA "models/llama2-70b.json"
#define DGX "hardware/dgx-a100-2048.json"
#define TPFSDP "configs/llm-pretrain-tp-fsdp.json"
#define OPEN10(x) x x x x x x x x x x
#define DEEP OPEN10(OPEN10(OPEN10("["))) "["
#define BLOCK "{\"kind\":\"transformer\",\"count\":2,\"hidden\":64,\"heads\":4,\"ffn\":256}"

/* In args and names: "@" is a file holding .text, "%FIFO%" a FIFO, "%DIR%" the test directory. */
static const struct {
  const char *category;
  const char *text;     /* the file "@", or NULL */
  const char *args[16];
  const char *names[3]; /* what the message must name: the file and a JSON path, or the option */
} hostile[] = {
  {"syntax", "{\"name\":\"t\",}", {"describe", "-m", "@", NULL}, {"@:1:12:", "comma before '}'"}},
  {"syntax", "{\"name\":\"t\",\"blocks\":[", {"describe", "-m", "@", NULL}, {"@:1:", "truncated"}},
  {"syntax", "{\"name\":" DEEP "}", {"describe", "-m", "@", NULL}, {"@:1:", "nested deeper than 1000"}},
  {"syntax", "{\"name\" \"t\"}", {"describe", "-m", "@", NULL}, {"@:1:9:", "unexpected character"}},
  {"syntax", NULL, {"run", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--nodes", "two", NULL}, {"--nodes two"}},
  {"syntax", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "12 parsecs", "-H", DGX, NULL}, {"--bytes 12 parsecs"}},
  {"types", "{\"name\":5,\"seq_len\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", NULL}, {"@: $.name:", "expected a string"}},
  {"types", "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":\"8\"}", {"describe", "-m", LLAMA, "-H", DGX, "-c", "@", NULL},
   {"@: $.global_batch:", "expected"}},
  {"types", NULL, {"op", "sparse", "--rows", "many", "--dim", "4", "-H", DGX, NULL}, {"--rows many"}},
  {"ranges", "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":-4,\"heads\":4,\"ffn\":256}]}",
   {"describe", "-m", "@", NULL}, {"@: $.blocks[0].hidden:", "-4 is not a positive integer"}},
  {"ranges", "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":4,\"dim\":4,\"pooling\":1e-7}]}",
   {"describe", "-m", "@", NULL}, {"@: $.blocks[0].pooling:", "1e-07 is not a number between 1e-06 and 1000000000"}},
  {"ranges", "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,\"parallelism\":{\"default\":[{\"strategy\":\"pp\",\"degree\":4}]}}",
   {"describe", "-m", LLAMA, "-H", DGX, "-c", "@", NULL}, {"@: $.parallelism.default[0].strategy:", "\"pipeline\""}},
  {"ranges", NULL, {"run", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--nodes", "0", NULL}, {"--nodes 0", "positive"}},
  {"ranges", NULL, {"run", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "-n", "-1", NULL}, {"-n -1", "positive"}},
  {"ranges", NULL, {"describe", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--nodes", "1048577", NULL}, {"--nodes 1048577", "1 to 1048576 nodes"}},
  {"ranges", NULL, {"op", "sparse", "--rows", "100", "--dim", "8", "--touched", "nan", "-H", DGX, NULL}, {"--touched"}},
  {"ranges", NULL, {"op", "sparse", "--rows", "100", "--dim", "8", "--overlap", "-0.5", "-H", DGX, NULL}, {"--overlap"}},
  {"ranges", NULL, {"op", "sparse", "--rows", "100", "--dim", "8", "--stride", "0", "-H", DGX, NULL}, {"--stride 0"}},
  {"ranges", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "--ranks", "0", "-H", DGX, NULL}, {"--ranks 0"}},
  {"ranges", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "0.5", "-H", DGX, NULL}, {"--bytes 0.5", "whole number"}},
  {"ranges", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "--ranks", "4096", "-H", DGX, NULL}, {"--ranks 4096", DGX}},
  /* --per-device on 2048 devices x 4096 micro-steps: exit 2 "too many ops" (at 2048 micro-steps a 41 GB
   * allocation and an abort) */
  {"ranges", "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8388608,\"micro_batch\":1,"
   "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}",
   {"run", "-m", LLAMA, "-H", DGX, "-c", "@", "--per-device", NULL}, {"--per-device: 2048 devices", "ops"}},
  /* --occupancy 0 ran with the device's default occupancy */
  {"ranges", NULL, {"op", "emb-a2a", "--occupancy", "0", "-H", DGX, NULL}, {"--occupancy 0", "(0, 1]"}},
  /* a factor too small for any point to finish (said "nothing fits"), a component twice (the last won) */
  {"ranges", NULL, {"whatif", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--scale", "compute=1e-308", NULL}, {"--scale compute=1e-308", "1e-06"}},
  {"ranges", NULL, {"whatif", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--scale", "compute=2,compute=3", NULL}, {"compute is given twice"}},
  {"ranges", NULL, {"sweep", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--memo-mb", "-5", NULL}, {"--memo-mb -5", "0 to 1048576"}},
  {"overflow", "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":1e30,\"dim\":4,\"pooling\":1}]}",
   {"describe", "-m", "@", NULL}, {"@: $.blocks[0].rows:", "overflow"}},
  {"overflow", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "1e30", "-H", DGX, NULL}, {"--bytes 1e30"}},
  {"overflow", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "1180591620717411303424", "-H", DGX, NULL}, {"--bytes 1180591620717411303424"}},
  {"overflow", NULL, {"op", "collective", "--kind", "all_reduce", "--sweep", "1:1e30", "-H", DGX, NULL}, {"--sweep 1:1e30"}},
  {"overflow", NULL, {"run", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "--nodes", "99999999999999999999", NULL}, {"--nodes 99999999999999999999"}},
  {"overflow", NULL, {"op", "collective", "--kind", "all_reduce", "--bytes", "8", "--ranks", "4611686018427387904", "--stride", "4", "-H", DGX, NULL},
   {"--ranks 4611686018427387904"}},
  {"overflow", NULL, {"op", "sparse", "--rows", "9007199254740992", "--dim", "9007199254740992", "-H", DGX, NULL}, {"--rows", "--dim"}},
  {"paths", NULL, {"describe", "-m", "", NULL}, {"-m ''", "file name"}},
  {"paths", NULL, {"run", "-m", LLAMA, "-H", DGX, "--config", "", NULL}, {"--config ''"}},
  {"paths", NULL, {"op", "sparse", "--rows", "100", "--dim", "8", "-H", "", NULL}, {"''", "file name"}},
  {"paths", NULL, {"describe", "-m", "models/no-such.json", NULL}, {"models/no-such.json: cannot read", "No such file"}},
  {"paths", NULL, {"describe", "-m", LLAMA, "--json", "%DIR%", NULL}, {"--json %DIR%:", "is a directory"}},
  {"paths", NULL, {"describe", "-m", LLAMA, "--json", "no/such/dir/x.json", NULL}, {"--json no/such/dir/x.json:", "no/such/dir does not exist"}},
  /* an output checked before the work: validate printed its whole table, then refused the folder */
  {"paths", NULL, {"validate", "configs/validation/inference.json", "--json", "%DIR%", NULL}, {"--json %DIR%:", "is a directory"}},
  /* a result written over the model it was computed from (exit 0, the model file gone) */
  {"paths", "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", "--json", "@", NULL},
   {"--json @:", "is the file --model @ reads"}},
  {"paths", NULL, {"run", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, "-n", "1", "--json", "-", "--trace", "-", NULL}, {"--json -", "--trace -"}},
  {"paths", NULL, {"validate", "configs/validation/no-such.json", NULL}, {"configs/validation/no-such.json"}},
  {"non-regular files", NULL, {"describe", "-m", "/dev/zero", NULL}, {"/dev/zero:", "a character device"}},
  {"non-regular files", NULL, {"describe", "-m", "%FIFO%", NULL}, {"%FIFO%:", "a FIFO"}},
  {"non-regular files", NULL, {"describe", "-m", "%DIR%", NULL}, {"%DIR%:", "a directory"}},
  {"non-regular files", NULL, {"run", "-m", LLAMA, "-H", "/dev/null", "-c", TPFSDP, NULL}, {"/dev/null:", "a character device"}},
  {"non-regular files", NULL, {"validate", "%FIFO%", NULL}, {"%FIFO%:", "a FIFO"}},
  {"non-regular files", NULL, {"plot", "/dev/zero", "--kind", "timeline", "--script", "%DIR%/never.gp", NULL}, {"/dev/zero:", "a character device"}},
  {"encodings", "{\"name\":\"t\xff\",\"seq_len\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", "--json", "-", NULL},
   {"@: $.name:", "not valid UTF-8"}},
  {"encodings", "{\"name\":\"t\\u0000hidden\",\"seq_len\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", NULL}, {"@: $.name:", "NUL"}},
  {"encodings", "{\"name\":\"t\",\"seq_len\\u0000x\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", NULL}, {"@: $:", "a key contains a NUL"}},
  {"encodings", "{\"name\":\"\\u001b[2J\\u001b[31mt\",\"seq_len\":8,\"blocks\":[" BLOCK "]}", {"describe", "-m", "@", NULL},
   {"@: $.name:", "U+001B"}},
  {"encodings", "{\"name\":\"c\",\"task\":\"pretrain\\u001b[0m\",\"global_batch\":8}", {"describe", "-m", LLAMA, "-H", DGX, "-c", "@", NULL},
   {"@: $.task:", "control character"}},
  {"encodings", NULL, {"describe", "-m", "models/\x1b[31mred.json", NULL}, {"models/\\u001b[31mred.json"}},
  {"encodings", NULL, {"describe", "--\x1b]0;title\x07", NULL}, {"\\u001b]0;title\\u0007"}},
};

/* @s with "@", "%FIFO%" and "%DIR%" replaced. (transfer full) */
static char *fill(const char *s, const char *file)
{
  g_autoptr(GString) g = g_string_new(s);
  g_autofree char *fifo = g_build_filename(mm_test_tmpdir(), "hostile.fifo", NULL);
  if (file) g_string_replace(g, "@", file, 0);
  g_string_replace(g, "%FIFO%", fifo, 0);
  g_string_replace(g, "%DIR%", mm_test_tmpdir(), 0);
  return g_strdup(g->str);
}

START_TEST(test_hostile_inputs)
{
  g_autofree char *fifo = g_build_filename(mm_test_tmpdir(), "hostile.fifo", NULL);
  if (!g_file_test(fifo, G_FILE_TEST_EXISTS)) ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  g_autofree char *name = g_strdup_printf("hostile%02d.json", _i);
  g_autofree char *file = hostile[_i].text ? mm_test_write(name, hostile[_i].text) : NULL;
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  for (guint k = 0; hostile[_i].args[k]; k++) g_ptr_array_add(args, fill(hostile[_i].args[k], file));
  g_ptr_array_add(args, NULL);
  g_autofree char *out = NULL, *err = NULL;
  int rc = mm_test_cli((const char *const *)args->pdata, &out, &err);
  ck_assert_msg(rc == 1, "%s row %d: exit %d: %s", hostile[_i].category, _i, rc, err);
  ck_assert_msg(g_str_has_prefix(err, "madmax: "), "%s row %d: %s", hostile[_i].category, _i, err);
  for (guint k = 0; k < G_N_ELEMENTS(hostile[_i].names) && hostile[_i].names[k]; k++) {
    g_autofree char *want = fill(hostile[_i].names[k], file);
    ck_assert_msg(strstr(err, want), "%s row %d: the message lacks '%s': %s", hostile[_i].category, _i, want, err);
  }
  /* nothing reaches the terminal as a control sequence, nothing half-written on stdout */
  ck_assert_msg(!strchr(err, '\x1b') && !strchr(err, '\x07'), "%s row %d: a control character on stderr",
                hostile[_i].category, _i);
  ck_assert_msg(g_utf8_validate(err, -1, NULL), "%s row %d: stderr is not UTF-8", hostile[_i].category, _i);
  ck_assert_msg(strcmp(out, "") == 0, "%s row %d: stdout: %.200s", hostile[_i].category, _i, out);
}
END_TEST

/* The text output of every subcommand (what the sanitizer build's leak checker sees: any leak
 * report is on stderr and makes the exit non-zero). */
START_TEST(test_text_modes_clean)
{
  g_autofree char *trace = g_build_filename(mm_test_tmpdir(), "text-modes.trace.json", NULL);
  g_autofree char *gp = g_build_filename(mm_test_tmpdir(), "text-modes.gp", NULL);
  const char *runs[][16] = {
    {"run", "-m", "models/llama3-8b.json", "-H", "hardware/dgx-h100-2048.json", "-c", "configs/llama3-8b-pretrain.json",
     "-n", "1", "--trace", trace, NULL},
    {"run", "-m", "models/llama3-70b.json", "-H", "hardware/dgx-h100-2048.json", "-c", "configs/llama3-70b-serving-tp8.json",
     "-n", "1", NULL},
    {"describe", "-m", LLAMA, "-H", DGX, "-c", TPFSDP, NULL},
    {"describe", "-m", "models/dlrm-a.json", NULL},
    {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "-H", DGX, NULL},
    {"op", "collective", "--kind", "all_gather", "--sweep", "1MiB:64MiB", "-H", DGX, "--ranks", "16", NULL},
    {"op", "sparse", "--rows", "5000000", "--dim", "2048", "--touched", "0.01", "-H", DGX, NULL},
    {"validate", "configs/validation/collectives.json", NULL},
    {"validate", "configs/validation/inference.json", "--markdown", NULL},
    {"plot", trace, "--kind", "timeline", "--script", gp, NULL},
    {"schema", NULL},
    {"op", "--help", NULL},
    {"--help", NULL},
  };
  for (guint i = 0; i < G_N_ELEMENTS(runs); i++) {
    g_autofree char *out = NULL, *err = NULL;
    int rc = mm_test_cli(runs[i], &out, &err);
    ck_assert_msg(rc == 0 && strcmp(err, "") == 0, "madmax %s %s: exit %d: %.2000s", runs[i][0], runs[i][1], rc,
                  g_strstrip(err));
    ck_assert_msg(strcmp(runs[i][0], "plot") == 0 || *out, "madmax %s printed nothing", runs[i][0]);
  }
}
END_TEST

/* The README's sample of `madmax run` is what the command prints. */
START_TEST(test_readme_run_sample_is_current)
{
  g_autofree char *path = mm_test_src("README.md");
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(path, &readme, NULL, NULL));
  const char *start = "```\n$ build/madmax run ";
  const char *a = strstr(readme, start);
  ck_assert_msg(a != NULL, "README has no `madmax run` sample");
  a += strlen("```\n$ ");
  const char *nl = strchr(a, '\n'), *b = strstr(nl, "```\n");
  ck_assert_ptr_nonnull(b);
  g_autofree char *cmd = g_strndup(a, (gsize)(nl - a));
  g_autofree char *want = g_strndup(nl + 1, (gsize)(b - nl - 1));
  g_auto(GStrv) argv = NULL;
  ck_assert(g_shell_parse_argv(cmd, NULL, &argv, NULL));
  ck_assert_str_eq(argv[0], "build/madmax");
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(mm_test_cli((const char *const *)argv + 1, &out, &err), 0);
  ck_assert_msg(strcmp(out, want) == 0, "README's `%s` sample is stale; it prints:\n%s", cmd, out);
}
END_TEST

/* The README's `madmax op` samples (fused kernels): each "$ build/madmax op ..." line's command
 * still prints every line the README shows under it (the README leaves out the headers). */
START_TEST(test_readme_op_samples_are_current)
{
  g_autofree char *path = mm_test_src("README.md");
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(path, &readme, NULL, NULL));
  guint samples = 0;
  for (const char *a = strstr(readme, "$ build/madmax op "); a; a = strstr(a, "$ build/madmax op ")) {
    a += strlen("$ ");
    const char *nl = strchr(a, '\n');
    ck_assert_ptr_nonnull(nl);
    const char *end = nl + 1;
    while (*end && *end != '$' && strncmp(end, "```", 3) != 0) end = strchr(end, '\n') + 1;
    g_autofree char *cmd = g_strndup(a, (gsize)(nl - a));
    g_autofree char *shown = g_strndup(nl + 1, (gsize)(end - nl - 1));
    g_auto(GStrv) argv = NULL;
    ck_assert(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_autofree char *out = NULL;
    ck_assert_int_eq(mm_test_cli((const char *const *)argv + 1, &out, NULL), 0);
    g_auto(GStrv) lines = g_strsplit(shown, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
      if (!lines[i][0]) continue;
      g_autofree char *line = g_strdup_printf("%s\n", lines[i]);
      ck_assert_msg(strstr(out, line) != NULL, "README's `%s` sample is stale: it no longer prints\n%s\nit prints:\n%s",
                    cmd, lines[i], out);
    }
    samples++;
    a = end;
  }
  ck_assert_uint_ge(samples, 2);
}
END_TEST

static Suite *cli_suite(void)
{
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("cli");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_describe_model_only);
  tcase_add_test(tc, test_readme_op_samples_are_current);
  tcase_add_test(tc, test_describe_memory_json);
  tcase_add_test(tc, test_describe_text);
  tcase_add_test(tc, test_describe_serving);
  tcase_add_test(tc, test_describe_placement);
  tcase_add_test(tc, test_serving_trace);
  tcase_add_test(tc, test_json_file_and_determinism);
  tcase_add_test(tc, test_bad_options);
  tcase_add_test(tc, test_unwritable_output_leaves_nothing);
  tcase_add_test(tc, test_outputs_in_place_and_together);
  tcase_add_test(tc, test_output_not_system_file);
  tcase_add_test(tc, test_help_and_version);
  tcase_add_test(tc, test_schema_doc_is_current);
  tcase_add_test(tc, test_readme_tables_are_current);
  tcase_add_test(tc, test_validate_bad_cases);
  tcase_add_test(tc, test_plot_timeline);
  tcase_add_test(tc, test_plot_breakdown);
  tcase_add_test(tc, test_plot_bad_input);
  tcase_add_test(tc, test_text_modes_clean);
  tcase_add_test(tc, test_readme_run_sample_is_current);
  tcase_add_test(tc, test_plot_hostile_input);
  tcase_add_test(tc, test_plot_names_are_inert);
  tcase_add_test(tc, test_plot_studies);
  tcase_add_test(tc, test_sweep_rejected_example);
  tcase_add_test(tc, test_plot_systems);
  suite_add_tcase(s, tc);
  TCase *bad = tcase_create("hostile");
  tcase_set_timeout(bad, 60);
  tcase_add_loop_test(bad, test_hostile_inputs, 0, (int)G_N_ELEMENTS(hostile));
  suite_add_tcase(s, bad);
  return s;
}

int main(void)
{
  return mm_test_main(cli_suite());
}
