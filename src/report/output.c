/* output: the files a command writes, staged and then committed together, never over what is not a file. */
#define _XOPEN_SOURCE 700 /* realpath, fsync */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "report.h"

typedef enum {
  KIND_STDOUT,  /* "-" */
  KIND_FILE,    /* a regular file (new, or replaced): a temporary beside it, renamed over it */
  KIND_DIRECT,  /* a device, FIFO or socket (possibly behind symlinks): opened and written in place */
} Kind;

typedef struct {
  char *option;  /* "--json"; NULL: messages name the path only */
  char *path;    /* as the user typed it */
  char *data;    /* in memory; NULL for a staged file */
  gsize len;
  char *staged;  /* a temporary an external program fills (mm_outputs_stage_file) */
  gboolean staged_in_place; /* the temporary sits beside the target (renamed) vs in the temp dir (copied) */
  /* resolved at commit */
  Kind kind;
  char *target; /* KIND_FILE: what the rename replaces (a symlink's final target) */
  char *tmp;    /* KIND_FILE: the temporary written in phase 1 */
  dev_t dev;
  ino_t ino;
  gboolean exists;
} Output;

struct MmOutputs {
  GArray *outs; /* Output */
};

static void output_clear(gpointer p)
{
  Output *o = p;
  if (o->tmp) g_unlink(o->tmp);
  if (o->staged) g_unlink(o->staged);
  g_free(o->option);
  g_free(o->path);
  g_free(o->data);
  g_free(o->staged);
  g_free(o->target);
  g_free(o->tmp);
}

MmOutputs *mm_outputs_new(void)
{
  MmOutputs *s = g_new0(MmOutputs, 1);
  s->outs = g_array_new(FALSE, TRUE, sizeof(Output));
  g_array_set_clear_func(s->outs, output_clear);
  return s;
}

void mm_outputs_free(MmOutputs *s)
{
  if (!s) return;
  g_array_unref(s->outs);
  g_free(s);
}

/* "--json out/x.json" or "out/x.json": how a message names an output. */
static char *what(const Output *o)
{
  const char *path = o->path[0] ? o->path : "''";
  return o->option ? g_strdup_printf("%s %s", o->option, path) : g_strdup(path);
}

static G_GNUC_PRINTF(3, 4) void out_error(GError **error, const Output *o, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *w = what(o);
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s: %s", w, msg);
}

static Output *add_output(GArray *outs, const char *option, const char *path)
{
  Output o = {.option = g_strdup(option), .path = g_strdup(path)};
  g_array_append_val(outs, o);
  return &g_array_index(outs, Output, outs->len - 1);
}

static Output *add(MmOutputs *s, const char *option, const char *path)
{
  return add_output(s->outs, option, path);
}

void mm_outputs_add(MmOutputs *s, const char *option, const char *path, char *data, gsize len)
{
  g_return_if_fail(s && path && data);
  Output *o = add(s, option, path);
  o->data = data;
  o->len = len;
}

void mm_outputs_add_json(MmOutputs *s, const char *option, const char *path, const cJSON *root)
{
  g_return_if_fail(s && path && root);
  g_autofree char *text = cJSON_Print(root);
  if (!text) g_error("out of memory rendering JSON");
  /* loaded names are checked to be UTF-8; a file name given on the command line may not be, and
   * the document must stay JSON: such bytes become U+FFFD */
  g_autofree char *valid = g_utf8_make_valid(text, -1);
  char *with_nl = g_strconcat(valid, "\n", NULL);
  mm_outputs_add(s, option, path, with_nl, strlen(with_nl));
}

/* Where @path leads: "-", a regular file (existing or to be created), or something to write in place. */
static gboolean resolve(Output *o, GError **error)
{
  if (strcmp(o->path, "-") == 0) {
    o->kind = KIND_STDOUT;
    return TRUE;
  }
  if (!o->path[0]) {
    out_error(error, o, "expected a file name");
    return FALSE;
  }
  GStatBuf st;
  if (g_stat(o->path, &st) == 0) { /* follows symlinks */
    o->exists = TRUE;
    o->dev = st.st_dev;
    o->ino = st.st_ino;
    if (S_ISDIR(st.st_mode)) {
      out_error(error, o, "is a directory; expected a file name");
      return FALSE;
    }
    if (!S_ISREG(st.st_mode)) { /* /dev/null, a FIFO, a terminal: written as they are, never replaced */
      o->kind = KIND_DIRECT;
      return TRUE;
    }
    if (g_access(o->path, W_OK) != 0) {
      int err = errno;
      out_error(error, o, "cannot write: %s", g_strerror(err));
      return FALSE;
    }
    /* a symlink stays a symlink: the file it leads to gets the new content */
    char *real = realpath(o->path, NULL);
    if (!real) {
      int err = errno;
      out_error(error, o, "cannot write: %s", g_strerror(err));
      return FALSE;
    }
    o->target = g_strdup(real);
    free(real);
    o->kind = KIND_FILE;
    return TRUE;
  }
  int err = errno;
  if (err != ENOENT) {
    out_error(error, o, "cannot write: %s", g_strerror(err));
    return FALSE;
  }
  if (g_lstat(o->path, &st) == 0 && S_ISLNK(st.st_mode)) {
    out_error(error, o, "a symbolic link to a missing file; give the file's own path");
    return FALSE;
  }
  o->kind = KIND_FILE;
  o->target = g_strdup(o->path);
  return TRUE;
}

static gboolean distinct(const Output *a, const Output *b, GError **error);

gboolean mm_outputs_check(const MmPathArg *outputs, const MmPathArg *inputs, GError **error)
{
  g_autoptr(GArray) seen = g_array_new(FALSE, TRUE, sizeof(Output)); /* the outputs checked so far */
  g_array_set_clear_func(seen, output_clear);
  for (const MmPathArg *a = outputs; a->option; a++) {
    if (!a->path) continue;
    Output *o = add_output(seen, a->option, a->path);
    if (!resolve(o, error)) return FALSE;
    for (guint k = 0; k + 1 < seen->len; k++) /* two outputs on one destination: refused at commit, after the work */
      if (!distinct(&g_array_index(seen, Output, k), o, error)) return FALSE;
    if (o->kind == KIND_FILE) { /* new or replaced, a temporary is created beside it: its folder must take it */
      g_autofree char *dir = g_path_get_dirname(o->target);
      if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        out_error(error, o, "its folder %s does not exist", dir);
        return FALSE;
      }
      if (g_access(dir, W_OK) != 0) {
        int err = errno;
        out_error(error, o, "cannot write in %s: %s", dir, g_strerror(err));
        return FALSE;
      }
    }
    if (!o->exists) continue;
    for (const MmPathArg *in = inputs; in && in->option; in++) {
      GStatBuf st;
      if (!in->path || strcmp(in->path, "-") == 0 || g_stat(in->path, &st) != 0 || !S_ISREG(st.st_mode) ||
          st.st_dev != o->dev || st.st_ino != o->ino)
        continue;
      out_error(error, o, "is the file %s %s reads: the output would replace it; give the output another name",
                in->option, in->path);
      return FALSE;
    }
  }
  return TRUE;
}

/* The temporary "DIR/.BASE.XXXXXX" beside @target, created empty (umask applies). */
static int open_beside(const char *target, char **tmp)
{
  g_autofree char *dir = g_path_get_dirname(target);
  g_autofree char *base = g_path_get_basename(target);
  g_autofree char *name = g_strdup_printf(".%s.XXXXXX", base);
  *tmp = g_build_filename(dir, name, NULL);
  int fd = g_mkstemp_full(*tmp, O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) g_clear_pointer(tmp, g_free);
  return fd;
}

static gboolean write_all(int fd, const char *data, gsize len)
{
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FALSE;
    if (n == 0) {
      errno = EIO;
      return FALSE;
    }
    data += n;
    len -= (gsize)n;
  }
  return TRUE;
}

const char *mm_outputs_stage_file(MmOutputs *s, const char *option, const char *path, GError **error)
{
  g_return_val_if_fail(s && path, NULL);
  Output *o = add(s, option, path);
  if (!resolve(o, error)) {
    g_array_set_size(s->outs, s->outs->len - 1);
    return NULL;
  }
  int fd = -1;
  g_autoptr(GError) io = NULL;
  if (o->kind == KIND_FILE) { /* beside the target, renamed over it */
    fd = open_beside(o->target, &o->staged);
    if (fd < 0) {
      int err = errno;
      g_set_error_literal(&io, G_FILE_ERROR, g_file_error_from_errno(err), g_strerror(err));
    }
    o->staged_in_place = TRUE;
  } else { /* stdout or a device: in the temporary directory, copied at commit */
    fd = g_file_open_tmp("madmax-out-XXXXXX", &o->staged, &io);
  }
  if (fd < 0) {
    out_error(error, o, "cannot write: %s", io->message);
    g_array_set_size(s->outs, s->outs->len - 1);
    return NULL;
  }
  close(fd);
  return o->staged;
}

/* Reads a staged file back (it goes to stdout or a device). */
static gboolean load_staged(Output *o, GError **error)
{
  g_autoptr(GError) io = NULL;
  if (!g_file_get_contents(o->staged, &o->data, &o->len, &io)) {
    out_error(error, o, "cannot read what was written: %s", io->message);
    return FALSE;
  }
  return TRUE;
}

/* Phase 1 for a regular file: the whole content in a temporary beside the target. */
static gboolean prepare_file(Output *o, GError **error)
{
  if (o->staged_in_place) {
    o->tmp = g_steal_pointer(&o->staged);
  } else {
    if (o->staged && !load_staged(o, error)) return FALSE;
    int fd = open_beside(o->target, &o->tmp);
    if (fd < 0) {
      int err = errno;
      out_error(error, o, "cannot write: %s", g_strerror(err));
      return FALSE;
    }
    gboolean ok = write_all(fd, o->data, o->len);
    /* replacing a file: its content reaches the disk before the name moves (as GLib does) */
    if (ok && o->exists) ok = fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) {
      ok = FALSE;
      err = errno;
    }
    if (!ok) {
      out_error(error, o, "cannot write: %s", g_strerror(err));
      return FALSE;
    }
  }
  if (o->exists) { /* keep the replaced file's permissions */
    GStatBuf st;
    if (g_stat(o->target, &st) == 0) g_chmod(o->tmp, (int)(st.st_mode & 07777));
  }
  return TRUE;
}

static gboolean write_direct(Output *o, GError **error)
{
  if (o->staged && !load_staged(o, error)) return FALSE;
  if (o->kind == KIND_STDOUT) {
    if (fwrite(o->data, 1, o->len, stdout) != o->len || fflush(stdout) != 0) {
      int err = errno;
      out_error(error, o, "cannot write to standard output: %s", g_strerror(err));
      return FALSE;
    }
    return TRUE;
  }
  int fd = g_open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC, 0);
  gboolean ok = fd >= 0 && write_all(fd, o->data, o->len);
  int err = errno;
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = FALSE;
    err = errno;
  }
  if (!ok) {
    out_error(error, o, "cannot write: %s", g_strerror(err));
    return FALSE;
  }
  return TRUE;
}

/* Two outputs on one destination would overwrite each other. */
static gboolean distinct(const Output *a, const Output *b, GError **error)
{
  gboolean same = a->kind == KIND_STDOUT ? b->kind == KIND_STDOUT
                  : a->exists && b->exists ? a->dev == b->dev && a->ino == b->ino
                                           : a->target && b->target && strcmp(a->target, b->target) == 0;
  if (!same) return TRUE;
  g_autofree char *wa = what(a), *wb = what(b);
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_IO, "%s and %s write to the same place; give each its own",
              wa, wb);
  return FALSE;
}

static gboolean commit(GArray *a, GError **error)
{
  /* 1: resolve every destination and write each regular file's temporary */
  for (guint i = 0; i < a->len; i++) {
    Output *o = &g_array_index(a, Output, i);
    if (!o->staged_in_place && !resolve(o, error)) return FALSE;
    for (guint k = 0; k < i; k++)
      if (!distinct(&g_array_index(a, Output, k), o, error)) return FALSE;
  }
  for (guint i = 0; i < a->len; i++) {
    Output *o = &g_array_index(a, Output, i);
    if (o->kind == KIND_FILE && !prepare_file(o, error)) return FALSE;
  }
  /* 2: what cannot be taken back (stdout, devices) before any file appears, then the renames */
  for (guint i = 0; i < a->len; i++) {
    Output *o = &g_array_index(a, Output, i);
    if (o->kind != KIND_FILE && !write_direct(o, error)) return FALSE;
  }
  for (guint i = 0; i < a->len; i++) {
    Output *o = &g_array_index(a, Output, i);
    if (o->kind != KIND_FILE) continue;
    if (g_rename(o->tmp, o->target) != 0) {
      int err = errno;
      out_error(error, o, "cannot write: %s", g_strerror(err));
      return FALSE;
    }
    g_clear_pointer(&o->tmp, g_free);
  }
  return TRUE;
}

gboolean mm_outputs_commit(MmOutputs *s, GError **error)
{
  g_return_val_if_fail(s, FALSE);
  gboolean ok = commit(s->outs, error);
  g_array_set_size(s->outs, 0); /* removes the temporaries a failure left */
  return ok;
}
