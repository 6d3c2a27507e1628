/* fuzzutil: helpers of the libFuzzer harnesses. */
#include "fuzz.h"

#include "sweep/sweep.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mm_fuzz_init(void)
{
  g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
}

const char *mm_fuzz_src(void)
{
  const char *env = g_getenv("MM_SOURCE_DIR");
  return env && *env ? env : MM_FUZZ_SOURCE_DIR;
}

char *mm_fuzz_path(const char *rel)
{
  return g_build_filename(mm_fuzz_src(), rel, NULL);
}

char *mm_fuzz_text(const uint8_t *data, size_t size)
{
  if (memchr(data, 0, size)) return NULL;
  char *text = g_malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  return text;
}

static char *tmpdir;

/* Removes the temporary directory at exit (files and symlinks, any depth). */
static void remove_tree(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d) {
    const char *name;
    while ((name = g_dir_read_name(d))) {
      g_autofree char *p = g_build_filename(dir, name, NULL);
      if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK)) remove_tree(p);
      else g_remove(p);
    }
    g_dir_close(d);
  }
  g_rmdir(dir);
}

static void remove_tmpdir(void)
{
  if (tmpdir) remove_tree(tmpdir);
  g_clear_pointer(&tmpdir, g_free);
}

const char *mm_fuzz_tmpdir(void)
{
  if (!tmpdir) {
    tmpdir = g_dir_make_tmp("madmax-fuzz-XXXXXX", NULL);
    if (!tmpdir) mm_fuzz_fail(__FILE__, __LINE__, "cannot make a temporary directory");
    atexit(remove_tmpdir);
  }
  return tmpdir;
}

char *mm_fuzz_write(const char *name, const uint8_t *data, size_t size)
{
  char *path = g_build_filename(mm_fuzz_tmpdir(), name, NULL);
  g_autofree char *dir = g_path_get_dirname(path);
  g_mkdir_with_parents(dir, 0700);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) mm_fuzz_fail(__FILE__, __LINE__, "cannot write %s", path);
  return path;
}

void mm_fuzz_fail(const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

static void finite_at(const cJSON *j, GString *path, const char *what)
{
  if (cJSON_IsNumber(j))
    mm_fuzz_require(isfinite(j->valuedouble), "%s: %s is %g", what, path->str, j->valuedouble);
  guint i = 0;
  for (const cJSON *c = j->child; c; c = c->next, i++) {
    gsize len = path->len;
    if (c->string) g_string_append_printf(path, ".%s", c->string);
    else g_string_append_printf(path, "[%u]", i);
    finite_at(c, path, what);
    g_string_truncate(path, len);
  }
}

void mm_fuzz_require_finite(const cJSON *doc, const char *what)
{
  g_autoptr(GString) path = g_string_new("$");
  finite_at(doc, path, what);
}

static const char *const small_models[] = {
  "{\"name\":\"t\",\"seq_len\":256,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":1000,\"hidden\":256},"
  "{\"kind\":\"transformer\",\"count\":2,\"hidden\":256,\"heads\":8,\"ffn\":1024,\"experts\":8,\"top_k\":2},"
  "{\"kind\":\"lm_head\",\"vocab\":1000,\"hidden\":256}]}",
  "{\"name\":\"d\",\"blocks\":[{\"kind\":\"embedding_bag\",\"name\":\"e\",\"tables\":64,\"rows\":10000,\"dim\":64,"
  "\"pooling\":8},{\"kind\":\"mlp\",\"name\":\"m\",\"inputs\":[],\"count\":2,\"width\":256,\"output_dim\":64},"
  "{\"kind\":\"interaction\",\"op\":\"dot\",\"inputs\":[\"e\",\"m\"]},{\"kind\":\"mlp\",\"count\":2,\"width\":256}]}",
};
static const char *const small_configs[] = {
  "{\"name\":\"a\",\"task\":\"pretrain\",\"global_batch\":512,\"micro_batch\":2,\"parallelism\":{\"default\":["
  "{\"strategy\":\"tp\",\"degree\":\"node\"},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}",
  "{\"name\":\"b\",\"task\":\"pretrain\",\"global_batch\":512,\"parallelism\":{\"transformer\":[{\"strategy\":\"ep\","
  "\"degree\":\"node\"},{\"strategy\":\"ddp\",\"degree\":\"all\"}],\"embedding_bag\":[{\"strategy\":\"mp\",\"degree\":"
  "\"all\"}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]}}",
  "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":64,\"inference\":{\"prompt_tokens\":128,"
  "\"output_tokens\":16},\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":\"node\"},{\"strategy\":"
  "\"ddp\",\"degree\":\"all\"}]}}",
};

void mm_fuzz_simulate_small(const MmHardware *hw, int64_t nodes)
{
  static MmModel *models[G_N_ELEMENTS(small_models)];
  static MmParallelConfig *configs[G_N_ELEMENTS(small_configs)];
  if (!models[0]) {
    for (guint i = 0; i < G_N_ELEMENTS(small_models); i++)
      models[i] = mm_model_parse("small-model.json", small_models[i], strlen(small_models[i]), NULL);
    for (guint i = 0; i < G_N_ELEMENTS(small_configs); i++)
      configs[i] = mm_parallel_parse("small-config.json", small_configs[i], strlen(small_configs[i]), NULL);
  }
  MmPoint pt = {.nodes = hw->inter.n_dims > 0 ? 0 : MIN(hw->nodes, nodes)};
  for (guint m = 0; m < G_N_ELEMENTS(small_models); m++) {
    for (guint c = 0; c < G_N_ELEMENTS(small_configs); c++) {
      g_autoptr(GError) error = NULL;
      g_autoptr(MmScenario) s = mm_scenario_new(models[m], hw, configs[c], &pt, &error);
      if (!s) {
        mm_fuzz_require(error->domain == MM_CONFIG_ERROR, "scenario rejected without a config error");
        continue;
      }
      MmInputs in = {models[m], (MmHardware *)hw, configs[c]};
      g_autoptr(MmSimulation) sim = mm_simulation_new_point(&in, &pt, FALSE, &error);
      mm_fuzz_require(sim != NULL, "model %u config %u: %s", m, c, error ? error->message : "?");
      g_autoptr(cJSON) run = mm_report_run_json(sim->plan, sim->engine, &sim->metrics, sim->memory);
      mm_fuzz_require_finite(run, "run");
    }
  }
}
