/* check_cli: end-to-end tests of the madmax command line. */
#include <cjson/cJSON.h>
#include <string.h>

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
  static const char *const names[] = {"training", "inference", "collectives"};
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

static Suite *cli_suite(void)
{
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("cli");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_describe_model_only);
  tcase_add_test(tc, test_describe_memory_json);
  tcase_add_test(tc, test_describe_text);
  tcase_add_test(tc, test_json_file_and_determinism);
  tcase_add_test(tc, test_bad_options);
  tcase_add_test(tc, test_unwritable_output_leaves_nothing);
  tcase_add_test(tc, test_help_and_version);
  tcase_add_test(tc, test_schema_doc_is_current);
  tcase_add_test(tc, test_readme_tables_are_current);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(cli_suite());
}
