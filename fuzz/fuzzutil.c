/* fuzzutil: helpers of the libFuzzer harnesses. */
#include "fuzz.h"

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
