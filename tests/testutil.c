/* testutil: helpers shared by the check test programs. */
#define _XOPEN_SOURCE 700 /* O_NONBLOCK, read, close */
#include "testutil.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/wait.h>

static char *tmpdir;

/* Removes the temporary directory (flat: tests write files only) at exit. */
static void remove_tmpdir(void)
{
  if (!tmpdir) return;
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  if (d) {
    const char *name;
    while ((name = g_dir_read_name(d))) {
      g_autofree char *p = g_build_filename(tmpdir, name, NULL);
      g_remove(p);
    }
    g_dir_close(d);
  }
  g_rmdir(tmpdir);
  g_clear_pointer(&tmpdir, g_free);
}

char *mm_test_src(const char *rel)
{
  const char *root = g_getenv("MM_SOURCE_DIR");
  ck_assert_msg(root != NULL, "MM_SOURCE_DIR is not set (run the tests through ctest)");
  return g_build_filename(root, rel, NULL);
}

const char *mm_test_tmpdir(void)
{
  if (!tmpdir) {
    g_autoptr(GError) error = NULL;
    tmpdir = g_dir_make_tmp("madmax-test-XXXXXX", &error);
    ck_assert_msg(tmpdir != NULL, "mkdtemp: %s", error ? error->message : "?");
    atexit(remove_tmpdir);
  }
  return tmpdir;
}

char *mm_test_write(const char *name, const char *text)
{
  char *path = g_build_filename(mm_test_tmpdir(), name, NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_file_set_contents(path, text, -1, &error), "write %s: %s", path,
                error ? error->message : "?");
  return path;
}

int mm_test_cli(const char *const *args, char **out, char **err)
{
  const char *bin = g_getenv("MM_BINARY");
  ck_assert_msg(bin != NULL, "MM_BINARY is not set (run the tests through ctest)");
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)bin);
  for (guint i = 0; args[i]; i++) g_ptr_array_add(argv, (char *)args[i]);
  g_ptr_array_add(argv, NULL);
  g_autofree char *cwd = mm_test_src(".");
  g_autoptr(GError) error = NULL;
  int status = 0;
  char *o = NULL, *e = NULL;
  gboolean ok = g_spawn_sync(cwd, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &o, &e,
                             &status, &error);
  g_ptr_array_free(argv, TRUE);
  ck_assert_msg(ok, "spawn %s: %s", bin, error ? error->message : "?");
  if (out) *out = o; else g_free(o);
  if (err) *err = e; else g_free(e);
  ck_assert_msg(WIFEXITED(status), "madmax did not exit normally (signal?)");
  return WEXITSTATUS(status);
}

int mm_test_main(Suite *s)
{
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static char *file_arg(const char *arg, const char *name)
{
  return arg[0] == '{' ? mm_test_write(name, arg) : mm_test_src(arg);
}

MmSimulation *mm_test_sim(const char *model, const char *hw, const char *cfg, const MmSimOptions *opt,
                          GError **error)
{
  g_autofree char *mp = file_arg(model, "model.json");
  g_autofree char *hp = file_arg(hw, "hardware.json");
  g_autofree char *cp = file_arg(cfg, "config.json");
  return mm_simulation_new(mp, hp, cp, opt, error);
}

MmSimulation *mm_test_sim_ok(const char *model, const char *hw, const char *cfg, int64_t nodes)
{
  g_autoptr(GError) error = NULL;
  MmSimOptions opt = {.nodes = nodes, .timeline = TRUE}; /* whole plans: tests look at their ops */
  MmSimulation *sim = mm_test_sim(model, hw, cfg, &opt, &error);
  ck_assert_msg(sim != NULL, "%s / %s / %s: %s", model, hw, cfg, error ? error->message : "");
  return sim;
}

char *mm_test_node8(void)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  return g_strdup_printf("{\"name\":\"n8\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":1,"
                         "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":12,\"link_bw_GBps\":25}}",
                         dev);
}

const MmLayer *mm_test_layer(const MmGraph *g, guint unit, MmLayerRole role)
{
  const MmUnit *u = &g->units[unit];
  for (guint l = u->first_layer; l < u->first_layer + u->n_layers; l++)
    if (g->layers[l].role == role) return &g->layers[l];
  ck_abort_msg("role %s not in unit %u", mm_role_names[role], unit);
  return NULL;
}

int mm_test_fifo_reader(const char *path)
{
  int fd = g_open(path, O_RDONLY | O_NONBLOCK, 0);
  ck_assert_int_ge(fd, 0);
  return fd;
}

char *mm_test_fifo_drain(int fd)
{
  GString *g = g_string_new(NULL);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) g_string_append_len(g, buf, n);
  close(fd);
  return g_string_free(g, FALSE);
}
