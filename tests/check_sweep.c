/* check_sweep: design-space sweeps: the space, the same CSV bytes for any --jobs, after an
 * interruption and --resume, and for shards merged; the summary; bad space files. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "config/json.h"
#include "testutil.h"

static const char *const DLRM[] = {"-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-c",
                                   "configs/dlrm-pretrain-fsdp-mp.json"};

/* Runs `madmax sweep` on DLRM-A with @extra arguments into a fresh folder; returns points.csv. */
static char *sweep_csv(const char *dir, const char *const *extra, int want)
{
  const char *args[32] = {"sweep"};
  guint n = 1;
  for (guint i = 0; i < G_N_ELEMENTS(DLRM); i++) args[n++] = DLRM[i];
  args[n++] = "--out";
  args[n++] = dir;
  args[n++] = "--quiet";
  for (guint i = 0; extra && extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err) == want, TRUE);
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL);
  char *text = NULL;
  if (!g_file_get_contents(csv, &text, NULL, NULL)) ck_abort_msg("no %s: %s", csv, err);
  return text;
}

static int csv_col(char **names, const char *name);

static char *tmp(const char *name)
{
  return g_build_filename(mm_test_tmpdir(), name, NULL);
}

/* DIR/points.csv holds @want, byte for byte. */
static void csv_eq(const char *dir, const char *want)
{
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL), *got = NULL;
  ck_assert_msg(g_file_get_contents(csv, &got, NULL, NULL), "no %s", csv);
  ck_assert_str_eq(got, want);
}

/* A DLRM space long enough to interrupt (kill, Ctrl-C) before it ends. */
#define LONG_SPACE \
  "{\"micro_batches\": [256, 512], \"recompute\": [\"none\", \"selective\", \"full\"], \"zero\": [0, 1, 2]}"

/* Starts @argv and sends @sig once points.csv in @dir holds rows beyond its header (the sweep is
 * under way); returns the wait status. Fails the test when the sweep ended first (a sweep too short
 * to interrupt tests nothing). */
static int interrupt_sweep(const char *const *argv, const char *dir, int sig)
{
  g_autofree char *cwd = mm_test_src(".");
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL);
  GPid pid;
  ck_assert(g_spawn_async(cwd, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL |
                          G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, &pid, NULL));
  int status = 0;
  for (int i = 0; i < 60000; i++) { /* at most a minute */
    GStatBuf st;
    if (g_stat(csv, &st) == 0 && st.st_size > 4096) break; /* the first buffer of rows */
    ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the sweep ended before it could be interrupted");
    g_usleep(1000);
  }
  kill(pid, sig);
  waitpid(pid, &status, 0);
  g_spawn_close_pid(pid);
  return status;
}

/* The space has every mlp hierarchy x every embedding hierarchy, and a point decodes to
 * strategies the scenario accepts or rejects, never anything else. */
START_TEST(test_space_dlrm)
{
  g_autofree char *mp = mm_test_src("models/dlrm-a.json"), *hp = mm_test_src("hardware/zionex-a100-128.json");
  g_autofree char *cp = mm_test_src("configs/dlrm-pretrain-fsdp-mp.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in = mm_inputs_load(mp, hp, cp, &error);
  ck_assert_ptr_nonnull(in);
  g_autoptr(MmSweepSpace) sp = mm_sweep_space_new(in, NULL, &error);
  ck_assert_ptr_nonnull(sp);
  ck_assert_uint_eq(sp->n_kinds, 2); /* mlp, embedding_bag */
  /* mlp: tp, fsdp, ddp alone (3) and ordered pairs of distinct ones over 2, 4, 8 (3 x 2 x 3) */
  ck_assert_uint_eq(sp->kinds[0].n_choices, 3 + 3 * 2 * 3);
  /* tables: mp in 3 shardings, fsdp, ddp (5) and pairs of distinct strategies (mp x 3 with 2 others...) */
  ck_assert_uint_eq(sp->n_points, (uint64_t)sp->kinds[0].n_choices * sp->kinds[1].n_choices);
  guint valid = 0;
  for (uint64_t i = 0; i < sp->n_points; i += 7) {
    MmSweepPoint p;
    mm_sweep_space_point(sp, in->model, i, &p);
    g_autoptr(GError) e = NULL;
    g_autoptr(MmScenario) s = mm_scenario_new(in->model, in->hardware, in->config, &p.point, &e);
    if (s) valid++;
    else ck_assert_msg(e->domain == MM_CONFIG_ERROR, "%s", e->message);
  }
  ck_assert_uint_gt(valid, 10);
  /* the loaded inputs are untouched by deriving points */
  ck_assert_str_eq(in->config->strategies[0].key, "embedding_bag");
}
END_TEST

START_TEST(test_same_bytes_any_jobs)
{
  g_autofree char *d1 = tmp("jobs1"), *d3 = tmp("jobs3");
  const char *j1[] = {"--jobs", "1", NULL}, *j3[] = {"--jobs", "3", NULL};
  g_autofree char *a = sweep_csv(d1, j1, 0), *b = sweep_csv(d3, j3, 0);
  ck_assert_str_eq(a, b);
  ck_assert_uint_gt(strlen(a), 1000);
  /* a second run into the same folder refuses rather than mixing sweeps */
  const char *args[] = {"sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", d1, "--quiet", NULL};
  ck_assert_int_eq(mm_test_cli(args, NULL, NULL), 1);
}
END_TEST

/* A row cut off by a kill is dropped and the sweep continues where the complete rows end. */
START_TEST(test_resume_after_cut)
{
  g_autofree char *full = tmp("full"), *cut = tmp("cut");
  g_autofree char *want = sweep_csv(full, NULL, 0);
  g_autofree char *partial = g_strndup(want, strlen(want) * 2 / 5); /* ends inside a row */
  ck_assert(g_mkdir_with_parents(cut, 0755) == 0);
  g_autofree char *csv = g_build_filename(cut, "points.csv", NULL);
  g_autofree char *sig_src = g_build_filename(full, "sweep.json", NULL), *sig = g_build_filename(cut, "sweep.json", NULL);
  g_autofree char *sig_text = NULL;
  ck_assert(g_file_get_contents(sig_src, &sig_text, NULL, NULL));
  ck_assert(g_file_set_contents(sig, sig_text, -1, NULL));
  ck_assert(g_file_set_contents(csv, partial, -1, NULL));
  const char *resume[] = {"--resume", NULL};
  g_autofree char *got = sweep_csv(cut, resume, 0);
  ck_assert_str_eq(got, want);
}
END_TEST

/* A last row that is not one of this sweep's (another file's, an index past the space's end, a
 * row cut short by an editor) is refused, the file untouched: before, --resume read its index
 * as 0 or past the end and appended the whole sweep again after it (exit 1 at the summary). */
START_TEST(test_resume_bad_last_row)
{
  g_autofree char *full = tmp("full-bad"), *cut = tmp("cut-bad");
  g_autofree char *want = sweep_csv(full, NULL, 0);
  ck_assert(g_mkdir_with_parents(cut, 0755) == 0);
  g_autofree char *csv = g_build_filename(cut, "points.csv", NULL);
  const char *header_end = strchr(want, '\n') + 1, *row2_end = strchr(strchr(header_end, '\n') + 1, '\n') + 1;
  static const char *const tails[] = {"garbage,1,2\n", "99999999,1,2\n", "5,1,2\n", "-3,x\n"};
  for (guint i = 0; i < G_N_ELEMENTS(tails); i++) {
    g_autofree char *head = g_strndup(want, (gsize)(row2_end - want));
    g_autofree char *bad = g_strconcat(head, tails[i], NULL);
    ck_assert(g_file_set_contents(csv, bad, -1, NULL));
    const char *resume[] = {"--resume", NULL};
    g_autofree char *got = sweep_csv(cut, resume, 1);
    ck_assert_str_eq(got, bad);
  }
}
END_TEST

/* --resume with another --nodes or with --space full is another sweep: refused, the rows kept.
 * Before, neither was in sweep.json, and the rows of 16 nodes were appended to those of 8. */
START_TEST(test_resume_other_nodes_or_space)
{
  g_autofree char *dir = tmp("nodes8");
  const char *n8[] = {"--nodes", "8", NULL};
  g_autofree char *want = sweep_csv(dir, n8, 0);
  const char *n16[] = {"--nodes", "16", "--resume", NULL}, *full[] = {"--nodes", "8", "--space", "full", "--resume", NULL};
  const char *const *other[] = {n16, full};
  for (guint i = 0; i < G_N_ELEMENTS(other); i++) {
    const char *args[32] = {"sweep"};
    guint n = 1;
    for (guint k = 0; k < G_N_ELEMENTS(DLRM); k++) args[n++] = DLRM[k];
    args[n++] = "--out", args[n++] = dir, args[n++] = "--quiet";
    for (guint k = 0; other[i][k]; k++) args[n++] = other[i][k];
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    ck_assert_msg(strstr(err, "sweep.json: a sweep of other inputs"), "%s", err);
    csv_eq(dir, want);
  }
  const char *same[] = {"--nodes", "8", "--resume", NULL};
  g_autofree char *again = sweep_csv(dir, same, 0);
  ck_assert_str_eq(again, want);
}
END_TEST

/* kill -9 in the middle of a longer sweep, then --resume: the same bytes as uninterrupted. */
START_TEST(test_resume_after_kill)
{
  g_autofree char *space = mm_test_write("space-kill.json", LONG_SPACE);
  const char *sp[] = {"--space", space, "--jobs", "2", NULL};
  g_autofree char *full = tmp("kfull"), *killed = tmp("killed");
  g_autofree char *want = sweep_csv(full, sp, 0);
  const char *bin = g_getenv("MM_BINARY");
  const char *argv[] = {bin, "sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", killed,
                        "--quiet", "--space", space, "--jobs", "2", NULL};
  const int status = interrupt_sweep(argv, killed, SIGKILL);
  ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const char *resume[] = {"--space", space, "--jobs", "2", "--resume", NULL};
  g_autofree char *got = sweep_csv(killed, resume, 0);
  ck_assert_str_eq(got, want);
}
END_TEST

/* Ctrl-C: the points under way finish, only whole rows are written, exit 130; --resume ends
 * with the bytes of an uninterrupted sweep. */
START_TEST(test_sigint_then_resume)
{
  g_autofree char *space = mm_test_write("space-int.json", LONG_SPACE);
  const char *sp[] = {"--space", space, NULL};
  g_autofree char *full = tmp("ifull"), *stopped = tmp("stopped");
  g_autofree char *want = sweep_csv(full, sp, 0);
  const char *bin = g_getenv("MM_BINARY");
  const char *argv[] = {bin, "sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", stopped,
                        "--quiet", "--space", space, NULL};
  const int status = interrupt_sweep(argv, stopped, SIGINT);
  ck_assert(WIFEXITED(status));
  g_autofree char *csv = g_build_filename(stopped, "points.csv", NULL), *part = NULL;
  ck_assert(g_file_get_contents(csv, &part, NULL, NULL));
  if (WEXITSTATUS(status) == 130) { /* interrupted (not finished before the signal) */
    ck_assert(part[strlen(part) - 1] == '\n');
    ck_assert_uint_lt(strlen(part), strlen(want));
    ck_assert(strncmp(part, want, strlen(part)) == 0);
  } else {
    ck_assert_int_eq(WEXITSTATUS(status), 0);
  }
  const char *resume[] = {"--space", space, "--resume", NULL};
  g_autofree char *got = sweep_csv(stopped, resume, 0);
  ck_assert_str_eq(got, want);

  /* Ctrl-C right after the estimate line (inputs loaded, no row written yet): an exit (130, or 0 when
   * it raced the end), never a kill */
  g_autofree char *early = tmp("early"), *cwd = mm_test_src(".");
  const char *argv2[] = {bin, "sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", early,
                         "--quiet", "--space", space, NULL};
  GPid pid;
  int err_fd = -1;
  ck_assert(g_spawn_async_with_pipes(cwd, (char **)argv2, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                     NULL, NULL, &pid, NULL, NULL, &err_fd, NULL));
  char ch;
  while (read(err_fd, &ch, 1) == 1 && ch != '\n') {} /* "madmax: N points ..., about S s" */
  kill(pid, SIGINT);
  while (read(err_fd, &ch, 1) == 1) {} /* the rest, until it exits (a closed pipe would kill it) */
  close(err_fd);
  int st2 = 0;
  waitpid(pid, &st2, 0);
  g_spawn_close_pid(pid);
  ck_assert_msg(WIFEXITED(st2) && (WEXITSTATUS(st2) == 130 || WEXITSTATUS(st2) == 0), "status %d", st2);
}
END_TEST

/* Three shards merged: the bytes of one process. */
START_TEST(test_shards_merge)
{
  g_autofree char *whole = tmp("whole"), *merged = tmp("merged");
  g_autofree char *want = sweep_csv(whole, NULL, 0);
  g_autofree char *s0 = tmp("s0"), *s1 = tmp("s1"), *s2 = tmp("s2");
  const char *const dirs[] = {s0, s1, s2};
  for (guint k = 0; k < 3; k++) {
    g_autofree char *spec = g_strdup_printf("%u/3", k);
    const char *sh[] = {"--shard", spec, NULL};
    g_autofree char *part = sweep_csv(dirs[k], sh, 0);
    ck_assert_uint_lt(strlen(part), strlen(want));
  }
  const char *args[] = {"sweep", "merge", "--out", merged, s0, s1, s2, NULL};
  ck_assert_int_eq(mm_test_cli(args, NULL, NULL), 0);
  g_autofree char *csv = g_build_filename(merged, "points.csv", NULL);
  g_autofree char *got = NULL;
  ck_assert(g_file_get_contents(csv, &got, NULL, NULL));
  ck_assert_str_eq(got, want);
  /* its sweep.json is the one process's: a --resume there with other inputs is refused */
  g_autofree char *wsig = g_build_filename(whole, "sweep.json", NULL), *msig = g_build_filename(merged, "sweep.json", NULL);
  g_autofree char *wtext = NULL, *mtext = NULL;
  ck_assert(g_file_get_contents(wsig, &wtext, NULL, NULL) && g_file_get_contents(msig, &mtext, NULL, NULL));
  ck_assert_str_eq(mtext, wtext);
}
END_TEST

/* Merging what is not the shards of one sweep is refused, nothing written: a shard missing, one
 * twice, shards of another count, a shard with a row out of place. Before, each merged with exit 0
 * (rows missing or twice). --out one of the shards' folders: before, its points.csv was truncated
 * while being read (rows lost); now the merge replaces it once complete. */
START_TEST(test_merge_refuses)
{
  g_autofree char *whole = tmp("m-whole"), *merged = tmp("m-merged");
  g_autofree char *want = sweep_csv(whole, NULL, 0);
  g_autofree char *s0 = tmp("m-s0"), *s1 = tmp("m-s1"), *s2 = tmp("m-s2"), *t0 = tmp("m-t0");
  const char *const dirs[] = {s0, s1, s2, t0};
  for (guint k = 0; k < 4; k++) {
    g_autofree char *spec = g_strdup_printf(k < 3 ? "%u/3" : "0/2", k % 3);
    const char *sh[] = {"--shard", spec, NULL};
    g_free(sweep_csv(dirs[k], sh, 0));
  }
  g_autofree char *bad = tmp("m-bad"); /* s2 with a row of s0 in it */
  ck_assert(g_mkdir_with_parents(bad, 0755) == 0);
  g_autofree char *s2csv = g_build_filename(s2, "points.csv", NULL), *s2sig = g_build_filename(s2, "sweep.json", NULL);
  g_autofree char *badcsv = g_build_filename(bad, "points.csv", NULL), *badsig = g_build_filename(bad, "sweep.json", NULL);
  g_autofree char *text = NULL, *sig = NULL;
  ck_assert(g_file_get_contents(s2csv, &text, NULL, NULL) && g_file_get_contents(s2sig, &sig, NULL, NULL));
  ck_assert(g_file_set_contents(badsig, sig, -1, NULL));
  char *second = strchr(strchr(text, '\n') + 1, '\n') + 1; /* the second row's index -> 0 (shard 0's) */
  g_autofree char *broken = g_strdup_printf("%.*s0%s", (int)(second - text), text, strchr(second, ','));
  ck_assert(g_file_set_contents(badcsv, broken, -1, NULL));
  /* a sweep.json claiming 2^32 - 1 shards (its count sized a table: a 34 GB allocation, an abort) */
  g_autofree char *huge = tmp("m-huge");
  ck_assert(g_mkdir_with_parents(huge, 0755) == 0);
  g_autofree char *hugesig = g_build_filename(huge, "sweep.json", NULL), *hugecsv = g_build_filename(huge, "points.csv", NULL);
  g_autofree char *hsig = g_strdup(sig);
  char *tail = g_strrstr(hsig, "\"shards\": 3}");
  ck_assert(tail != NULL);
  *tail = '\0';
  g_autofree char *hsig2 = g_strconcat(hsig, "\"shards\": 4294967295}\n", NULL);
  ck_assert(g_file_set_contents(hugesig, hsig2, -1, NULL) && g_file_set_contents(hugecsv, text, -1, NULL));
  const char *const sets[][5] = {{s0, s1, NULL}, {s0, s1, s1, s2, NULL}, {s0, s1, t0, NULL}, {s0, s1, bad, NULL},
                                 {huge, NULL}};
  for (guint i = 0; i < G_N_ELEMENTS(sets); i++) {
    const char *args[16] = {"sweep", "merge", "--out", merged};
    guint n = 4;
    for (guint k = 0; sets[i][k]; k++) args[n++] = sets[i][k];
    args[n] = NULL;
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    ck_assert_msg(!g_file_test(merged, G_FILE_TEST_EXISTS), "set %u: %s", i, err);
  }
  const char *into_s0[] = {"sweep", "merge", "--out", s0, s0, s1, s2, NULL};
  ck_assert_int_eq(mm_test_cli(into_s0, NULL, NULL), 0);
  csv_eq(s0, want);
}
END_TEST

/* A shard cut short (a kill) holds part of its rows: its shard.json says so. Before, the merge
 * joined it with exit 0 (rows missing, a row cut in half); now exit 1 naming the folder, the
 * shard's points and --resume, before any row is read, nothing written. A shard without
 * shard.json (an older madmax) cannot be told complete: refused the same way. After --resume on
 * each: the bytes of one process. */
START_TEST(test_merge_incomplete)
{
  g_autofree char *space = mm_test_write("space-shard-kill.json", LONG_SPACE);
  const char *sp[] = {"--space", space, "--jobs", "2", NULL};
  g_autofree char *whole = tmp("i-whole"), *merged = tmp("i-merged"), *s0 = tmp("i-s0"), *s1 = tmp("i-s1");
  g_autofree char *want = sweep_csv(whole, sp, 0);
  const char *sh0[] = {"--space", space, "--jobs", "2", "--shard", "0/2", NULL};
  g_free(sweep_csv(s0, sh0, 0));
  const char *bin = g_getenv("MM_BINARY");
  const char *argv[] = {bin, "sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", s1, "--quiet",
                        "--space", space, "--jobs", "2", "--shard", "1/2", NULL};
  const int status = interrupt_sweep(argv, s1, SIGKILL);
  ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const char *args[] = {"sweep", "merge", "--out", merged, s0, s1, NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
  g_autofree char *says = g_strdup_printf("%s: shard 1/2 is incomplete", s1);
  ck_assert_msg(strstr(err, says) && strstr(err, "points") && strstr(err, "--resume"), "%s", err);
  ck_assert(!g_file_test(merged, G_FILE_TEST_EXISTS));
  /* shard 0 without its shard.json */
  g_autofree char *state0 = g_build_filename(s0, MM_SWEEP_SHARD_FILE, NULL);
  ck_assert(g_unlink(state0) == 0);
  const char *resume1[] = {"--space", space, "--jobs", "2", "--shard", "1/2", "--resume", NULL};
  g_free(sweep_csv(s1, resume1, 0));
  g_clear_pointer(&err, g_free);
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
  g_autofree char *says0 = g_strdup_printf("%s: shard 0/2 cannot be told complete", s0);
  ck_assert_msg(strstr(err, says0) && strstr(err, "--resume"), "%s", err);
  ck_assert(!g_file_test(merged, G_FILE_TEST_EXISTS));
  const char *resume0[] = {"--space", space, "--jobs", "2", "--shard", "0/2", "--resume", NULL};
  g_free(sweep_csv(s0, resume0, 0));
  ck_assert_int_eq(mm_test_cli(args, NULL, NULL), 0);
  csv_eq(merged, want);
}
END_TEST

/* A merge reports the points the shards' runs left out with an internal error (their shard.json's
 * "failed"; before, a shard that failed points merged with exit 0, rows missing, where the same sweep
 * in one process exits 2), and removes a summary.json it finds in --out (it described other rows).
 * A shard.json of an older madmax (no "failed") merges as before. */
START_TEST(test_merge_failed_and_stale_summary)
{
  g_autofree char *space = mm_test_write("space-merge-failed.json", "{\"micro_batches\": [256, 512]}");
  const char *sp[] = {"--space", space, NULL};
  g_autofree char *whole = tmp("f-whole"), *s0 = tmp("f-s0"), *s1 = tmp("f-s1"), *merged = tmp("f-merged");
  g_autofree char *want = sweep_csv(whole, sp, 0);
  const char *sh0[] = {"--space", space, "--shard", "0/2", NULL}, *sh1[] = {"--space", space, "--shard", "1/2", NULL};
  g_free(sweep_csv(s0, sh0, 0));
  g_free(sweep_csv(s1, sh1, 0));
  g_autofree char *state1 = g_build_filename(s1, MM_SWEEP_SHARD_FILE, NULL), *text = NULL;
  ck_assert(g_file_get_contents(state1, &text, NULL, NULL));
  ck_assert_msg(strstr(text, "\"complete\": true, \"failed\": 0"), "%s", text);
  /* shard 1's run left two points out */
  g_autofree char *failed = g_strdup_printf("{\"shard\": 1, \"shards\": 2, \"points\": 1, \"complete\": true, "
                                            "\"failed\": 2}\n");
  ck_assert(g_file_set_contents(state1, failed, -1, NULL));
  g_autofree char *stale = g_build_filename(merged, "summary.json", NULL), *whole_sum = NULL;
  g_autofree char *whole_summary = g_build_filename(whole, "summary.json", NULL);
  ck_assert(g_mkdir_with_parents(merged, 0755) == 0 && g_file_get_contents(whole_summary, &whole_sum, NULL, NULL));
  ck_assert(g_file_set_contents(stale, whole_sum, -1, NULL));
  const char *args[] = {"sweep", "merge", "--out", merged, s0, s1, NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 2);
  ck_assert_msg(strstr(err, "left 2 points out of points.csv with an internal error"), "%s", err);
  csv_eq(merged, want);
  ck_assert(!g_file_test(stale, G_FILE_TEST_EXISTS));
  /* an older shard.json, without "failed": merged, exit 0 */
  ck_assert(g_file_set_contents(state1, "{\"shard\": 1, \"shards\": 2, \"points\": 1, \"complete\": true}\n", -1, NULL));
  g_clear_pointer(&err, g_free);
  ck_assert_msg(mm_test_cli(args, NULL, &err) == 0, "%s", err);
  csv_eq(merged, want);
}
END_TEST

/* One shard (a Slurm array of one task: --shard 0/1) merges: its run keeps shard.json too (before,
 * it wrote none and the merge refused it, also after the --resume the message advised); so does a
 * finished unsharded folder (its summary.json), not one without. A points.csv killed before its
 * header was whole (empty: nothing flushed) resumes from the start (before: "its header is not
 * this sweep's"). */
START_TEST(test_merge_one_shard)
{
  g_autofree char *space = mm_test_write("space-one-shard.json", "{\"micro_batches\": [256, 512]}");
  const char *sp[] = {"--space", space, NULL};
  const char *one[] = {"--space", space, "--shard", "0/1", NULL};
  g_autofree char *whole = tmp("o-whole"), *s0 = tmp("o-s0"), *merged = tmp("o-merged"), *m2 = tmp("o-m2");
  g_autofree char *want = sweep_csv(whole, sp, 0);
  g_free(sweep_csv(s0, one, 0));
  g_autofree char *state = g_build_filename(s0, MM_SWEEP_SHARD_FILE, NULL), *text = NULL;
  ck_assert(g_file_get_contents(state, &text, NULL, NULL));
  ck_assert_ptr_nonnull(strstr(text, "\"complete\": true"));
  const char *args[] = {"sweep", "merge", "--out", merged, s0, NULL};
  g_autofree char *err = NULL;
  ck_assert_msg(mm_test_cli(args, NULL, &err) == 0, "%s", err);
  csv_eq(merged, want);
  /* a finished unsharded folder merges as its one shard; without its summary it cannot be told */
  const char *from_whole[] = {"sweep", "merge", "--out", m2, whole, NULL};
  ck_assert_int_eq(mm_test_cli(from_whole, NULL, NULL), 0);
  g_autofree char *summary = g_build_filename(whole, "summary.json", NULL);
  ck_assert(g_unlink(summary) == 0);
  g_autofree char *m3 = tmp("o-m3");
  const char *from_bare[] = {"sweep", "merge", "--out", m3, whole, NULL};
  ck_assert_int_eq(mm_test_cli(from_bare, NULL, NULL), 1);
  /* an empty points.csv (killed before anything was flushed) resumes from the start */
  g_autofree char *wcsv = g_build_filename(whole, "points.csv", NULL);
  ck_assert(g_file_set_contents(wcsv, "", 0, NULL));
  const char *resume[] = {"--space", space, "--resume", NULL};
  g_autofree char *again = sweep_csv(whole, resume, 0);
  ck_assert_str_eq(again, want);
}
END_TEST

/* --out's files are never the sweep's inputs: a model at DIR/sweep.json, a config at
 * DIR/summary.json, a system whose device file is DIR/points.csv. Before, the sweep wrote over the
 * first two (exit 0: the model when it began, the config with its summary) and refused the third
 * only as a sweep already there; now each is refused before any work (exit 1, naming --out and
 * the input), the file unchanged. */
START_TEST(test_out_not_input)
{
  g_autofree char *hw = mm_test_src(DLRM[3]), *fits = mm_test_src("hardware/fits"), *hw_text = NULL;
  ck_assert(g_file_get_contents(hw, &hw_text, NULL, NULL));
  static const char *const names[] = {"sweep.json", "summary.json", "points.csv"};
  static const char *const from[] = {"models/dlrm-a.json", "configs/dlrm-pretrain-fsdp-mp.json",
                                     "hardware/devices/a100-40gb.json"};
  static const char *const option[] = {"--model", "--config", "--hardware's device"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *dname = g_strdup_printf("out-input-%u", i), *dir = tmp(dname);
    ck_assert(g_mkdir_with_parents(dir, 0755) == 0);
    g_autofree char *in = g_build_filename(dir, names[i], NULL), *src = mm_test_src(from[i]), *text = NULL;
    ck_assert(g_file_get_contents(src, &text, NULL, NULL) && g_file_set_contents(in, text, -1, NULL));
    /* the system with its device at @in (absolute paths: the copy sits in the temporary folder) */
    g_auto(GStrv) a = g_strsplit(hw_text, "\"devices/a100-40gb.json\"", -1);
    g_autofree char *quoted = g_strdup_printf("\"%s\"", in), *with_dev = g_strjoinv(quoted, a);
    g_auto(GStrv) b = g_strsplit(with_dev, "\"fits/", -1);
    g_autofree char *fits_dir = g_strdup_printf("\"%s/", fits), *sys_text = g_strjoinv(fits_dir, b);
    g_autofree char *sys = mm_test_write("out-input-system.json", sys_text);
    const char *args[] = {"sweep", "-m", i == 0 ? in : DLRM[1], "-H", i == 2 ? sys : DLRM[3], "-c",
                          i == 1 ? in : DLRM[5], "--out", dir, "--quiet", NULL};
    g_autofree char *err = NULL, *after = NULL;
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    g_autofree char *says = g_strdup_printf("--out %s: is the file %s %s reads", in, option[i], in);
    ck_assert_msg(strstr(err, says) && !strstr(err, "points ("), "case %u: %s", i, err); /* before the estimate */
    ck_assert(g_file_get_contents(in, &after, NULL, NULL));
    ck_assert_str_eq(after, text);
  }
}
END_TEST

/* The summary: the FSDP baseline (tables MP, as MAD-Max), the best point at least as fast, the
 * per-kind study, a Pareto set; OOM points pruned and counted. */
START_TEST(test_summary)
{
  g_autofree char *dir = tmp("summary");
  g_autofree char *csv = sweep_csv(dir, NULL, 0);
  g_autofree char *path = g_build_filename(dir, "summary.json", NULL), *text = NULL;
  ck_assert(g_file_get_contents(path, &text, NULL, NULL));
  cJSON *s = cJSON_Parse(text);
  const cJSON *base = cJSON_GetObjectItemCaseSensitive(s, "baseline_fsdp");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(base, "strategies");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(st, "mlp")->valuestring, "fsdp*");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(st, "embedding_bag")->valuestring, "mp(table)*");
  const cJSON *best = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "best"), "throughput");
  ck_assert_double_ge(cJSON_GetObjectItemCaseSensitive(best, "speedup_over_fsdp")->valuedouble, 1.0);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "per_layer_kind")), 2);
  ck_assert_int_gt(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "pareto_memory_throughput")), 0);
  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(s, "points");
  ck_assert_double_gt(cJSON_GetObjectItemCaseSensitive(pts, "out_of_memory")->valuedouble, 0);
  /* the inputs by their names, the files beside them */
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(s, "inputs");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(in, "model")->valuestring, "DLRM-A");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(in, "hardware")->valuestring, "Meta ZionEX, 16 nodes x 8 A100-40GB");
  ck_assert(g_str_has_prefix(cJSON_GetObjectItemCaseSensitive(in, "config")->valuestring, "DLRM pretraining: "));
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(in, "hardware_path")->valuestring, "hardware/zionex-a100-128.json");
  /* pruned points carry their memory, not a time */
  ck_assert_ptr_nonnull(strstr(csv, ",oom,0,,,"));
  cJSON_Delete(s);
  /* time to train a sample budget: the best point's rate */
  g_autofree char *d2 = tmp("budget");
  const char *bud[] = {"--budget-samples", "1e9", NULL};
  g_autofree char *csv2 = sweep_csv(d2, bud, 0);
  ck_assert_ptr_nonnull(strstr(csv2, "\n")); /* points were written */
  g_autofree char *p2 = g_build_filename(d2, "summary.json", NULL), *t2 = NULL;
  ck_assert(g_file_get_contents(p2, &t2, NULL, NULL));
  cJSON *s2 = cJSON_Parse(t2);
  const cJSON *bst = cJSON_GetObjectItemCaseSensitive(s2, "best");
  const cJSON *ttt = cJSON_GetObjectItemCaseSensitive(bst, "time_to_train");
  const double rate = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(bst, "throughput"), "samples_per_s")->valuedouble;
  ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(ttt, "time_to_train_s")->valuedouble, 1e9 / rate, 1e-6 * 1e9 / rate);
  cJSON_Delete(s2);
}
END_TEST

/* The summary's Pareto set, kept as the rows stream by, against the definition checked pair by
 * pair: a point is on it unless another that ran has no more memory and no fewer samples/s (and
 * is better in one, or is the same and earlier). Many ties, a few out-of-memory rows. */
START_TEST(test_summary_pareto_streamed)
{
  g_autofree char *dir = tmp("pareto-src");
  g_autofree char *csv = sweep_csv(dir, NULL, 0);
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  const char *tmpl = NULL;
  for (guint i = 1; lines[i] && !tmpl; i++)
    if (strstr(lines[i], ",ok,1,")) tmpl = lines[i];
  ck_assert_ptr_nonnull(tmpl);
  g_auto(GStrv) names = g_strsplit(lines[0], ",", -1);
  const int cp = csv_col(names, "point"), cs = csv_col(names, "status"), cf = csv_col(names, "fits");
  const int ct = csv_col(names, "samples_per_s"), cm = csv_col(names, "memory_per_device_bytes");
  enum { N = 3000 };
  static double mem[N], sps[N];
  static gboolean ran[N];
  GString *g = g_string_new(lines[0]);
  g_string_append_c(g, '\n');
  GRand *rnd = g_rand_new_with_seed(7);
  for (guint i = 0; i < N; i++) {
    g_auto(GStrv) f = g_strsplit(tmpl, ",", -1);
    mem[i] = 1e9 * g_rand_int_range(rnd, 1, 60);
    sps[i] = 100.0 * g_rand_int_range(rnd, 1, 60) + (g_rand_int_range(rnd, 0, 4) == 0 ? 0 : mem[i] / 1e8);
    ran[i] = g_rand_int_range(rnd, 0, 10) != 0;
    g_free(f[cp]), f[cp] = g_strdup_printf("%u", i);
    g_free(f[cm]), f[cm] = g_strdup_printf("%.9g", mem[i]);
    g_free(f[ct]), f[ct] = g_strdup_printf("%.9g", sps[i]);
    if (!ran[i]) g_free(f[cs]), f[cs] = g_strdup("oom"), g_free(f[cf]), f[cf] = g_strdup("0");
    g_autofree char *row = g_strjoinv(",", f);
    g_string_append_printf(g, "%s\n", row);
  }
  g_rand_free(rnd);
  g_autofree char *syn = tmp("pareto-syn");
  ck_assert(g_mkdir_with_parents(syn, 0755) == 0);
  g_autofree char *path = g_build_filename(syn, "points.csv", NULL);
  ck_assert(g_file_set_contents(path, g->str, (gssize)g->len, NULL));
  g_string_free(g, TRUE);
  g_autofree char *mp = mm_test_src("models/dlrm-a.json"), *hp = mm_test_src("hardware/zionex-a100-128.json");
  g_autofree char *cfp = mm_test_src("configs/dlrm-pretrain-fsdp-mp.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in = mm_inputs_load(mp, hp, cfp, &error);
  g_autoptr(MmSweepSpace) sp = mm_sweep_space_new(in, NULL, &error);
  MmSweepSystem one = {in, sp, 0};
  cJSON *sum = mm_sweep_summary(syn, &one, 1, NULL, &error);
  ck_assert_msg(sum != NULL, "%s", error ? error->message : "");
  GArray *want = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint r = 0; r < N; r++) {
    gboolean dominated = !ran[r];
    for (guint q = 0; q < N && !dominated; q++)
      dominated = q != r && ran[q] && mem[q] <= mem[r] && sps[q] >= sps[r] &&
                  (mem[q] < mem[r] || sps[q] > sps[r] || q < r);
    if (!dominated) g_array_append_val(want, r);
  }
  const cJSON *front = cJSON_GetObjectItemCaseSensitive(sum, "pareto_memory_throughput");
  ck_assert_int_eq(cJSON_GetArraySize(front), (int)want->len);
  ck_assert_uint_gt(want->len, 5);
  int i = 0;
  for (const cJSON *e = front->child; e; e = e->next, i++)
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(e, "point")->valueint, (int)g_array_index(want, guint, i));
  g_array_free(want, TRUE);
  ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sum, "points"), "valid")->valuedouble, N);
  cJSON_Delete(sum);
  /* a row of the wrong width: the file and line named */
  ck_assert(g_file_set_contents(path, "point,status\n0,ok\n1,ok,extra\n", -1, NULL));
  g_clear_error(&error);
  ck_assert_ptr_null(mm_sweep_summary(syn, &one, 1, NULL, &error));
  ck_assert_msg(strstr(error->message, "points.csv: line 3"), "%s", error->message);
}
END_TEST

/* The column @name of a CSV header line split into @names. */
static int csv_col(char **names, const char *name)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], name) == 0) return i;
  ck_abort_msg("no column %s", name);
  return -1;
}

/* Serving under a latency bound: the summary's pick is, of the points that ran with TTFT (and
 * TPOT) within the bound, the one with the most output tokens/s per GPU, as counted here from
 * points.csv; a bound that excludes the fastest point changes the pick; one nothing meets says so. */
START_TEST(test_serving_latency_bound)
{
  static const char *const in[] = {"-m", "models/llama3-70b.json", "-H", "hardware/dgx-h100-2048.json", "-c",
                                   "configs/llama3-70b-serving-tp8.json", "--nodes", "1", "--quiet"};
  const struct {
    const char *ttft, *tpot;
  } bounds[] = {{"2500", NULL}, {"2500", "20"}, {"1000", NULL}};
  for (guint b = 0; b < G_N_ELEMENTS(bounds); b++) {
    g_autofree char *name = g_strdup_printf("serving-%u", b), *dir = tmp(name);
    const char *args[24] = {"sweep"};
    guint n = 1;
    for (guint i = 0; i < G_N_ELEMENTS(in); i++) args[n++] = in[i];
    args[n++] = "--out", args[n++] = dir;
    if (bounds[b].ttft) args[n++] = "--ttft-max-ms", args[n++] = bounds[b].ttft;
    if (bounds[b].tpot) args[n++] = "--tpot-max-ms", args[n++] = bounds[b].tpot;
    args[n] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(mm_test_cli(args, &out, &err) == 0, "%s", err);
    g_autofree char *csv_path = g_build_filename(dir, "points.csv", NULL), *csv = NULL;
    g_autofree char *sum_path = g_build_filename(dir, "summary.json", NULL), *text = NULL;
    ck_assert(g_file_get_contents(csv_path, &csv, NULL, NULL) && g_file_get_contents(sum_path, &text, NULL, NULL));
    /* the bound applied to points.csv here */
    const double ttft_max = g_ascii_strtod(bounds[b].ttft, NULL) * 1e-3;
    const double tpot_max = bounds[b].tpot ? g_ascii_strtod(bounds[b].tpot, NULL) * 1e-3 : INFINITY;
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_auto(GStrv) names = g_strsplit(lines[0], ",", -1);
    const int cp = csv_col(names, "point"), cs = csv_col(names, "status"), cd = csv_col(names, "devices");
    const int ct = csv_col(names, "tokens_per_s"), cf = csv_col(names, "time_to_first_token_s");
    const int co = csv_col(names, "time_per_output_token_s");
    guint meeting = 0, ran = 0;
    double best_rate = -1, fastest = -1, fastest_ttft = 0;
    long best_point = -1;
    for (guint i = 1; lines[i] && *lines[i]; i++) {
      g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
      if (strcmp(f[cs], "ok") != 0) continue;
      ran++;
      const double rate = g_ascii_strtod(f[ct], NULL) / g_ascii_strtod(f[cd], NULL);
      if (rate > fastest) fastest = rate, fastest_ttft = g_ascii_strtod(f[cf], NULL);
      if (g_ascii_strtod(f[cf], NULL) > ttft_max || g_ascii_strtod(f[co], NULL) > tpot_max) continue;
      meeting++;
      if (rate > best_rate) best_rate = rate, best_point = strtol(f[cp], NULL, 10);
    }
    ck_assert_double_gt(fastest_ttft, ttft_max); /* the bound excludes the unbounded best */
    cJSON *s = cJSON_Parse(text);
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(s, "latency_bound");
    ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(lb, "time_to_first_token_max_s")->valuedouble, ttft_max, 1e-12);
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(lb, "points_meeting")->valueint, (int)meeting);
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(lb, "points_simulated")->valueint, (int)ran);
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(s, "best");
    const cJSON *pick = cJSON_GetObjectItemCaseSensitive(best, "serving_under_latency_bound");
    if (b < 2) {
      ck_assert_uint_gt(meeting, 0);
      ck_assert_ptr_nonnull(pick);
      ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(pick, "point")->valueint, (int)best_point);
      ck_assert_double_le(cJSON_GetObjectItemCaseSensitive(pick, "time_to_first_token_s")->valuedouble, ttft_max);
      ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(pick, "output_tokens_per_s_per_device")->valuedouble,
                              best_rate, 1e-9 * best_rate);
      const cJSON *fast = cJSON_GetObjectItemCaseSensitive(best, "throughput");
      ck_assert_int_ne(cJSON_GetObjectItemCaseSensitive(fast, "point")->valueint, (int)best_point);
      ck_assert_ptr_nonnull(strstr(out, "best under latency bound"));
    } else {
      ck_assert_uint_eq(meeting, 0);
      ck_assert_ptr_null(pick);
      ck_assert_ptr_nonnull(strstr(out, "none of the"));
    }
    if (b == 1) ck_assert_uint_lt(meeting, 26); /* TPOT narrows it */
    cJSON_Delete(s);
  }
  /* bad bounds, and a bound on a training sweep: exit 1 naming the option */
  static const char *const bad[][2] = {{"--ttft-max-ms", "0"}, {"--ttft-max-ms", "-5"}, {"--tpot-max-ms", "fast"},
                                       {"--tpot-max-ms", "nan"}, {"--ttft-max-ms", "1e99"}};
  for (guint i = 0; i < G_N_ELEMENTS(bad) + 1; i++) {
    g_autofree char *dir = tmp("serving-bad");
    const gboolean training = i == G_N_ELEMENTS(bad);
    const char *args[] = {"sweep", training ? DLRM[0] : in[0], training ? DLRM[1] : in[1], training ? DLRM[2] : in[2],
                          training ? DLRM[3] : in[3], training ? DLRM[4] : in[4], training ? DLRM[5] : in[5],
                          "--out", dir, training ? "--ttft-max-ms" : bad[i][0], training ? "100" : bad[i][1], NULL};
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    ck_assert_msg(strstr(err, training ? "--ttft-max-ms" : bad[i][0]), "%s", err);
    if (training) ck_assert_msg(strstr(err, "serving"), "%s", err);
    ck_assert(!g_file_test(dir, G_FILE_TEST_EXISTS));
  }
}
END_TEST

/* Runs `madmax sweep` of DLRM-A on two systems (ZionEX A100, an H100 SuperPOD) at 8 and 16 nodes
 * with @extra arguments into @dir; returns points.csv. */
static char *two_systems_csv(const char *dir, const char *const *extra)
{
  g_autofree char *space = mm_test_write("space-systems.json", "{\"nodes\": [8, 16], \"strategies\": {\"mlp\": "
                                         "[\"fsdp\", \"ddp\", \"tp\"], \"embedding_bag\": [\"mp\", \"ddp\"]}}");
  const char *args[32] = {"sweep", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-H",
                          "hardware/h100-superpod-256.json", "-c", "configs/dlrm-pretrain-fsdp-mp.json", "--space",
                          space, "--out", dir, "--quiet"};
  guint n = 14;
  for (guint i = 0; extra && extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  g_autofree char *err = NULL;
  ck_assert_msg(mm_test_cli(args, NULL, &err) == 0, "%s", err);
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL);
  char *text = NULL;
  ck_assert(g_file_get_contents(csv, &text, NULL, NULL));
  return text;
}

/* Several systems in one sweep: a system column (the system the outermost dimension of the
 * index), the same bytes for any --jobs, for shards merged and after a cut and --resume; the
 * summary's per-system best and the time-vs-GPU-hours front across systems, as counted here. */
START_TEST(test_two_systems)
{
  g_autofree char *d1 = tmp("sys-j1"), *d3 = tmp("sys-j3");
  const char *j1[] = {"--jobs", "1", NULL}, *j3[] = {"--jobs", "3", NULL};
  g_autofree char *want = two_systems_csv(d1, j1), *got3 = two_systems_csv(d3, j3);
  ck_assert_str_eq(got3, want);
  /* shards merged */
  g_autofree char *s0 = tmp("sys-s0"), *s1 = tmp("sys-s1"), *s2 = tmp("sys-s2"), *merged = tmp("sys-merged");
  const char *const dirs[] = {s0, s1, s2};
  for (guint k = 0; k < 3; k++) {
    g_autofree char *spec = g_strdup_printf("%u/3", k);
    const char *sh[] = {"--shard", spec, NULL};
    g_autofree char *part = two_systems_csv(dirs[k], sh);
    ck_assert_uint_lt(strlen(part), strlen(want));
  }
  const char *margs[] = {"sweep", "merge", "--out", merged, s0, s1, s2, NULL};
  ck_assert_int_eq(mm_test_cli(margs, NULL, NULL), 0);
  g_autofree char *mcsv = g_build_filename(merged, "points.csv", NULL), *mtext = NULL;
  ck_assert(g_file_get_contents(mcsv, &mtext, NULL, NULL));
  ck_assert_str_eq(mtext, want);
  /* a cut, then --resume */
  g_autofree char *cut = tmp("sys-cut");
  ck_assert(g_mkdir_with_parents(cut, 0755) == 0);
  g_autofree char *sig_src = g_build_filename(d1, "sweep.json", NULL), *sig = g_build_filename(cut, "sweep.json", NULL);
  g_autofree char *sig_text = NULL, *ccsv = g_build_filename(cut, "points.csv", NULL);
  ck_assert(g_file_get_contents(sig_src, &sig_text, NULL, NULL) && g_file_set_contents(sig, sig_text, -1, NULL));
  ck_assert(strstr(sig_text, "h100-superpod-256.json")); /* the second system is part of what is resumed */
  g_autofree char *partial = g_strndup(want, strlen(want) * 3 / 5);
  ck_assert(g_file_set_contents(ccsv, partial, -1, NULL));
  const char *resume[] = {"--resume", NULL};
  g_autofree char *resumed = two_systems_csv(cut, resume);
  ck_assert_str_eq(resumed, want);

  /* the rows: system 0's points first, then system 1's */
  g_auto(GStrv) lines = g_strsplit(want, "\n", -1);
  ck_assert(g_str_has_prefix(lines[0], "point,system,nodes,"));
  g_auto(GStrv) names = g_strsplit(lines[0], ",", -1);
  const int cp = csv_col(names, "point"), cy = csv_col(names, "system"), cs = csv_col(names, "status");
  const int ct = csv_col(names, "samples_per_s"), cg = csv_col(names, "a100_gpu_hours_per_iteration");
  const int ci = csv_col(names, "iteration_time_s");
  static const char *const label[2] = {"Meta ZionEX; 16 nodes x 8 A100-40GB",
                                       "H100 SuperPOD with NVLink Switch System; 32 nodes x 8 H100-SXM"};
  GArray *ok = g_array_new(FALSE, FALSE, sizeof(guint));
  double best[2] = {0};
  long best_point[2] = {-1, -1}, last_point = -1;
  int prev_sys = 0;
  for (guint i = 1; lines[i] && *lines[i]; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    const int y = strcmp(f[cy], label[0]) == 0 ? 0 : 1;
    if (y == 1) ck_assert_str_eq(f[cy], label[1]);
    ck_assert_int_ge(y, prev_sys); /* the outermost dimension */
    prev_sys = y;
    last_point = strtol(f[cp], NULL, 10);
    if (strcmp(f[cs], "ok") != 0) continue;
    g_array_append_val(ok, i);
    const double t = g_ascii_strtod(f[ct], NULL);
    if (t > best[y]) best[y] = t, best_point[y] = strtol(f[cp], NULL, 10);
  }
  ck_assert_int_eq(prev_sys, 1);
  ck_assert(best_point[0] >= 0 && best_point[1] >= 0);
  /* the summary */
  g_autofree char *sum_path = g_build_filename(d1, "summary.json", NULL), *text = NULL;
  ck_assert(g_file_get_contents(sum_path, &text, NULL, NULL));
  cJSON *sum = cJSON_Parse(text);
  const cJSON *systems = cJSON_GetObjectItemCaseSensitive(sum, "systems");
  ck_assert_int_eq(cJSON_GetArraySize(systems), 2);
  ck_assert_int_eq((int)cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sum, "points"), "in_space")->valuedouble,
                   (int)last_point + 1);
  for (int y = 0; y < 2; y++) {
    const cJSON *e = cJSON_GetArrayItem(systems, y);
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "best"), "throughput");
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(bt, "point")->valueint, (int)best_point[y]);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(bt, "system")->valuestring,
                     y == 0 ? "Meta ZionEX, 16 nodes x 8 A100-40GB" : "H100 SuperPOD with NVLink Switch System, 32 nodes x 8 H100-SXM");
  }
  /* the front across systems: no other point that ran takes fewer GPU-hours per sample and is faster */
  GArray *want_front = g_array_new(FALSE, FALSE, sizeof(long));
  for (guint a = 0; a < ok->len; a++) {
    g_auto(GStrv) f = g_strsplit(lines[g_array_index(ok, guint, a)], ",", -1);
    const double ta = g_ascii_strtod(f[ct], NULL), ga = g_ascii_strtod(f[cg], NULL) / (ta * g_ascii_strtod(f[ci], NULL));
    gboolean dominated = FALSE;
    for (guint b = 0; b < ok->len && !dominated; b++) {
      if (a == b) continue;
      g_auto(GStrv) h = g_strsplit(lines[g_array_index(ok, guint, b)], ",", -1);
      const double tb = g_ascii_strtod(h[ct], NULL), gb = g_ascii_strtod(h[cg], NULL) / (tb * g_ascii_strtod(h[ci], NULL));
      dominated = gb <= ga && tb >= ta && (gb < ga || tb > ta || b < a);
    }
    const long pt = strtol(f[cp], NULL, 10);
    if (!dominated) g_array_append_val(want_front, pt);
  }
  const cJSON *front = cJSON_GetObjectItemCaseSensitive(sum, "pareto_time_gpu_hours");
  ck_assert_int_eq(cJSON_GetArraySize(front), (int)want_front->len);
  ck_assert_uint_ge(want_front->len, 2);
  int i = 0;
  for (const cJSON *e = front->child; e; e = e->next, i++)
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(e, "point")->valueint, (int)g_array_index(want_front, long, i));
  g_array_free(want_front, TRUE);
  g_array_free(ok, TRUE);
  cJSON_Delete(sum);

  /* one system twice: exit 1 naming the file and $.name */
  g_autofree char *dup = tmp("sys-dup");
  const char *bad[] = {"sweep", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-H",
                       "hardware/zionex-a100-128.json", "-c", "configs/dlrm-pretrain-fsdp-mp.json", "--out", dup, NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(bad, NULL, &err), 1);
  ck_assert_msg(strstr(err, "hardware/zionex-a100-128.json: $.name"), "%s", err);
  /* a bad second system: its file named */
  g_autofree char *bad_hw = mm_test_write("bad-system.json", "{\"name\": 3}");
  const char *bad2[] = {"sweep", "-m", "models/dlrm-a.json", "-H", "hardware/zionex-a100-128.json", "-H", bad_hw,
                        "-c", "configs/dlrm-pretrain-fsdp-mp.json", "--out", dup, NULL};
  g_autofree char *err2 = NULL;
  ck_assert_int_eq(mm_test_cli(bad2, NULL, &err2), 1);
  ck_assert_msg(strstr(err2, "bad-system.json"), "%s", err2);
}
END_TEST

/* MAD-Max's DLRM-A scaling study, its shape: of the single 10x improvements inter-node
 * bandwidth helps most, and all of them together do better than their product. */
START_TEST(test_whatif_dlrm)
{
  const char *args[] = {"whatif", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--json", "-", NULL};
  g_autofree char *out = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  cJSON *w = cJSON_Parse(out);
  ck_assert_ptr_nonnull(w);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(w, "systems");
  ck_assert_int_eq(cJSON_GetArraySize(rows), 8); /* baseline, 6 single, all together */
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(w, "inputs");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(in, "model")->valuestring, "DLRM-A");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(in, "model_path")->valuestring, "models/dlrm-a.json");
  const char *best = NULL;
  double best_speedup = 0;
  for (int i = 1; i < 7; i++) {
    const cJSON *r = cJSON_GetArrayItem(rows, i);
    double s = cJSON_GetObjectItemCaseSensitive(r, "speedup")->valuedouble;
    ck_assert_double_ge(s, 0.999); /* better hardware never slows the best strategy */
    if (s > best_speedup) best_speedup = s, best = cJSON_GetObjectItemCaseSensitive(r, "name")->valuestring;
  }
  ck_assert_str_eq(best, "inter_bw x10");
  ck_assert_double_gt(cJSON_GetObjectItemCaseSensitive(w, "joint_over_product_of_singles")->valuedouble, 1.0);
  cJSON_Delete(w);
  const char *bad[] = {"whatif", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--scale", "flops=10", NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(bad, NULL, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "flops=10"));
  /* nothing fits on the baseline (one node), something with 10x the memory: no speedup over it
   * (the text said 0.00x, a slowdown) */
  const char *none[] = {"whatif", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--nodes", "1",
                        "--scale", "hbm_cap=10", NULL};
  g_autofree char *text = NULL;
  ck_assert_int_eq(mm_test_cli(none, &text, NULL), 0);
  ck_assert_msg(strstr(text, "baseline             (nothing fits)") && strstr(text, "hbm_cap x10"), "%s", text);
  ck_assert_msg(!strstr(text, "0.00x"), "%s", text);
}
END_TEST

/* The estimate's probes: the run takes their rows instead of simulating those points again, and
 * writes the bytes it writes without them (any --jobs, a sharded run taking only its own, a
 * resumed run only those past where it resumes). */
static char *run_with_probes(const MmSweepSystem *sys, MmSweepProbes *pr, const char *name, guint jobs, guint shards,
                             gboolean resume)
{
  g_autofree char *dir = tmp(name);
  volatile int stop = 0;
  MmSweepOptions o = {.systems = sys, .n_systems = 1, .dir = dir, .jobs = jobs, .shard = 0, .shards = shards,
                      .resume = resume, .stop = &stop, .signature = "probes", .probes = pr};
  g_auto(MmSweepStats) st = {0};
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_sweep_run(&o, &st, &error), "%s", error ? error->message : "");
  ck_assert_uint_gt(st.simulated, 0);
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL);
  char *text = NULL;
  ck_assert(g_file_get_contents(csv, &text, NULL, NULL));
  return text;
}

START_TEST(test_probes_reused)
{
  g_autofree char *model = mm_test_src(DLRM[1]), *hw = mm_test_src(DLRM[3]), *cfg = mm_test_src(DLRM[5]);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in = mm_inputs_load(model, hw, cfg, &error);
  ck_assert_msg(in != NULL, "%s", error ? error->message : "");
  g_autoptr(MmSweepSpace) sp = mm_sweep_space_new(in, NULL, &error);
  ck_assert_msg(sp != NULL, "%s", error ? error->message : "");
  MmSweepSystem sys = {in, sp, 0};
  ck_assert_uint_eq(mm_sweep_systems_index(&sys, 1), sp->n_points);
  /* the points that fit, every third of them (more than the probes hold: the rest are dropped) */
  uint64_t fit[2 * MM_SWEEP_PROBES];
  guint n = 0;
  for (uint64_t i = 0; i < sp->n_points && n < G_N_ELEMENTS(fit); i += 3) {
    MmSweepPoint p;
    mm_sweep_space_point(sp, in->model, i, &p);
    g_autoptr(MmSimulation) s = mm_simulation_prepare(in, &p.point, NULL);
    if (s && s->memory->fits) fit[n++] = i;
  }
  ck_assert_uint_gt(n, MM_SWEEP_PROBES);
  g_autoptr(MmSweepProbes) pr = mm_sweep_probe(&sys, 1, FALSE, fit, n, 2);
  guint timed = 0;
  ck_assert_double_gt(mm_sweep_probe_seconds(pr, &timed), 0);
  ck_assert_uint_eq(timed, MM_SWEEP_PROBES);
  ck_assert_uint_eq(mm_sweep_probes_left(pr), MM_SWEEP_PROBES);
  g_autofree char *plain = run_with_probes(&sys, NULL, "probes-none", 1, 1, FALSE);
  g_autofree char *taken = run_with_probes(&sys, pr, "probes-taken", 3, 1, FALSE);
  ck_assert_str_eq(plain, taken);
  ck_assert_uint_eq(mm_sweep_probes_left(pr), 0);
  /* a shard of two takes the probes of its own points only */
  g_autoptr(MmSweepProbes) pr2 = mm_sweep_probe(&sys, 1, FALSE, fit, n, 1);
  g_autofree char *half = run_with_probes(&sys, pr2, "probes-shard", 2, 2, FALSE);
  g_autofree char *half_plain = run_with_probes(&sys, NULL, "probes-shard-none", 1, 2, FALSE);
  ck_assert_str_eq(half, half_plain);
  guint even = 0;
  for (guint k = 0; k < MM_SWEEP_PROBES; k++) even += fit[k] % 2 == 0;
  ck_assert_uint_eq(mm_sweep_probes_left(pr2), MM_SWEEP_PROBES - even);
  /* --resume after a cut inside the fifth probe's row: that row is dropped and the run resumes at
   * or before its point, so the last four probes are taken and the first four, written already,
   * are not */
  g_autofree char *row = g_strdup_printf("\n%" G_GUINT64_FORMAT ",", fit[4]);
  const char *at = strstr(plain, row);
  ck_assert_ptr_nonnull(at);
  g_autofree char *rdir = tmp("probes-resume");
  g_autofree char *rcsv = g_build_filename(rdir, "points.csv", NULL), *rsig = g_build_filename(rdir, "sweep.json", NULL);
  g_autofree char *partial = g_strndup(plain, (gsize)(at - plain) + strlen(row) + 2);
  ck_assert(g_mkdir_with_parents(rdir, 0755) == 0);
  ck_assert(g_file_set_contents(rsig, "probes", -1, NULL) && g_file_set_contents(rcsv, partial, -1, NULL));
  g_autoptr(MmSweepProbes) pr3 = mm_sweep_probe(&sys, 1, FALSE, fit, n, 2);
  g_autofree char *resumed = run_with_probes(&sys, pr3, "probes-resume", 2, 1, TRUE);
  ck_assert_str_eq(resumed, plain);
  ck_assert_uint_eq(mm_sweep_probes_left(pr3), 4);
}
END_TEST

/* A sweep of @sys into a fresh folder @name with @jobs threads, a memo of @memo_bytes and with or
 * without reusing the outcomes of points of one key (@dedup); its points.csv, and how many engine
 * runs the memo answered and how many points a point of the same key did. */
static char *run_memo(const MmSweepSystem *sys, const char *name, guint jobs, gsize memo_bytes, gboolean dedup,
                      uint64_t *replayed, uint64_t *reused)
{
  g_autofree char *dir = tmp(name);
  volatile int stop = 0;
  MmSweepOptions o = {.systems = sys, .n_systems = 1, .dir = dir, .jobs = jobs, .shard = 0, .shards = 1,
                      .stop = &stop, .signature = "memo", .memo_bytes = memo_bytes, .no_dedup = !dedup};
  g_auto(MmSweepStats) st = {0};
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_sweep_run(&o, &st, &error), "%s", error ? error->message : "");
  ck_assert_msg(st.first_failure == NULL, "%s", st.first_failure);
  ck_assert_uint_gt(st.simulated, 20);
  *replayed = st.replayed;
  *reused = st.reused;
  g_autofree char *csv = g_build_filename(dir, "points.csv", NULL);
  char *text = NULL;
  ck_assert(g_file_get_contents(csv, &text, NULL, NULL));
  return text;
}

/* LLaMA-2-70B with every ZeRO stage: its fully sharded strategies have no ddp level, so their
 * three stages are one point under three indices (and lower the same programs). */
static MmInputs *memo_inputs(MmSweepSpace **sp)
{
  g_autofree char *model = mm_test_src("models/llama2-70b.json"), *hw = mm_test_src("hardware/dgx-a100-2048.json");
  g_autofree char *cfg = mm_test_src("configs/llm-pretrain-fsdp.json");
  g_autofree char *space = tmp("memo-space.json");
  ck_assert(g_file_set_contents(space, "{\"micro_batches\": [1, 2], \"recompute\": [\"none\", \"full\"], "
                                       "\"zero\": [0, 1, 2]}", -1, NULL));
  g_autoptr(GError) error = NULL;
  MmInputs *in = mm_inputs_load(model, hw, cfg, &error);
  ck_assert_msg(in != NULL, "%s", error ? error->message : "");
  *sp = mm_sweep_space_new(in, space, &error);
  ck_assert_msg(*sp != NULL, "%s", error ? error->message : "");
  return in;
}

/* The memo of engine runs changes no byte: the same rows without the memo, with it, and with a
 * budget of a few runs (kept runs pushed out again and again), for any thread count; the memo
 * answered runs (each point evaluated: the repeats of one point are the memo's to answer). */
START_TEST(test_memo_same_rows)
{
  g_autoptr(MmSweepSpace) sp = NULL;
  g_autoptr(MmInputs) in = memo_inputs(&sp);
  MmSweepSystem sys = {in, sp, 0};
  mm_sweep_systems_index(&sys, 1);
  uint64_t none = 1, big = 0, small = 0, reused = 1;
  g_autofree char *plain = run_memo(&sys, "memo-none", 1, 0, FALSE, &none, &reused);
  ck_assert_uint_eq(reused, 0);
  g_autofree char *memo = run_memo(&sys, "memo-big", 2, (gsize)64 << 20, FALSE, &big, &reused);
  g_autofree char *tight = run_memo(&sys, "memo-small", 3, (gsize)768 << 10, FALSE, &small, &reused);
  ck_assert_str_eq(plain, memo);
  ck_assert_str_eq(plain, tight);
  ck_assert_uint_eq(none, 0);
  ck_assert_uint_gt(big, 20);
  /* the runs repeat one ZeRO stage apart, more than the small budget holds: fewer replays */
  ck_assert_uint_lt(small, big);
}
END_TEST

/* A point met again under another index is evaluated once, with the same rows as evaluating every
 * point, for any thread count (and beside a memo). On one thread, the points reused are exactly
 * those whose point key (mm_sweep_point_key, computed here from the space) an earlier point has: a
 * ZeRO stage that strategies without a ddp level ignore, not one that changes a ddp level; they
 * are the points mm_sweep_space_repeat names (the estimate's count of them). */
START_TEST(test_dedup_same_rows)
{
  g_autoptr(MmSweepSpace) sp = NULL;
  g_autoptr(MmInputs) in = memo_inputs(&sp);
  MmSweepSystem sys = {in, sp, 0};
  mm_sweep_systems_index(&sys, 1);
  g_autoptr(GHashTable) keys = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  uint64_t repeats = 0, ddp_points = 0;
  for (uint64_t i = 0; i < sp->n_points; i++) {
    MmSweepPoint pt;
    mm_sweep_space_point(sp, in->model, i, &pt);
    GBytes *key = mm_sweep_point_key(&pt, 0);
    gboolean ddp = FALSE;
    for (guint l = 0; l < pt.entries[0].n_levels; l++) ddp |= pt.entries[0].levels[l].strategy == MM_STRAT_DDP;
    ddp_points += ddp;
    /* the space tells a repeat of a point of another ZeRO stage (the only dimension a point may ignore) */
    ck_assert(mm_sweep_space_repeat(sp, in->model, i) == g_hash_table_contains(keys, key));
    if (g_hash_table_contains(keys, key)) {
      repeats++;
      ck_assert(!ddp); /* a ddp level carries the stage: never the same point */
      g_bytes_unref(key);
    } else {
      g_hash_table_add(keys, key);
    }
  }
  ck_assert_uint_gt(ddp_points, 0);
  ck_assert_uint_gt(repeats, sp->n_points / 4);
  uint64_t replayed = 0, reused = 0;
  g_autofree char *each = run_memo(&sys, "dedup-none", 2, 0, FALSE, &replayed, &reused);
  ck_assert_uint_eq(reused, 0);
  g_autofree char *one = run_memo(&sys, "dedup-1", 1, 0, TRUE, &replayed, &reused);
  ck_assert_uint_eq(reused, repeats);
  ck_assert_str_eq(one, each);
  for (guint jobs = 2; jobs <= 3; jobs++) {
    g_autofree char *name = g_strdup_printf("dedup-%u", jobs);
    g_autofree char *got = run_memo(&sys, name, jobs, jobs == 3 ? (gsize)64 << 20 : 0, TRUE, &replayed, &reused);
    ck_assert_str_eq(got, each);
    ck_assert_uint_gt(reused, 0);
  }
}
END_TEST

/* mm_point_key: equal for points of equal fields whose strategies sit elsewhere in memory, and
 * different when any one field differs (a field left out of the key would merge two points). */
START_TEST(test_point_key)
{
  MmStrategyEntry a[2] = {{.key = (char *)"transformer", .n_levels = 2}, {.key = (char *)"default", .n_levels = 1}};
  a[0].levels[0] = (MmLevel){.strategy = MM_STRAT_TP, .spec = MM_DEG_NUMBER, .degree = 8, .sequence_parallel = TRUE};
  a[0].levels[1] = (MmLevel){.strategy = MM_STRAT_DDP, .spec = MM_DEG_ALL, .zero = 1};
  a[1].levels[0] = (MmLevel){.strategy = MM_STRAT_FSDP, .spec = MM_DEG_ALL};
  MmStrategyEntry *b = g_memdup2(a, sizeof a);
  b[0].key = g_strdup("transformer");
  const MmPoint base = {.nodes = 4, .micro_batch = 2, .strategies = a, .n_strategies = 2};
  MmPoint same = base;
  same.strategies = b;
  g_autoptr(GByteArray) k0 = g_byte_array_new(), k1 = g_byte_array_new();
  mm_point_key(&base, k0);
  mm_point_key(&same, k1);
  ck_assert(k0->len == k1->len && memcmp(k0->data, k1->data, k0->len) == 0);
  /* one change each: point fields, then level fields of the second level */
  for (guint c = 0; c < 27; c++) {
    MmPoint p = base;
    g_autofree MmStrategyEntry *e = g_memdup2(a, sizeof a);
    p.strategies = e;
    MmLevel *l = &e[0].levels[1];
    switch (c) {
    case 0: p.nodes = 8; break;
    case 1: p.global_batch = 64; break;
    case 2: p.micro_batch = 1; break;
    case 3: p.pipeline_degree = 2; break;
    case 4: p.virtual_stages = 2; break;
    case 5: p.seq_len = 4096; break;
    case 6: p.recompute = 1; break;
    case 7: p.schedule = 1; break;
    case 8: p.algorithm[MM_COLL_ALL_GATHER] = MM_ALGO_RING; break;
    case 9: p.scale[MM_SCALE_HBM_BW] = 2; break;
    case 10: p.n_strategies = 1; break;
    case 11: p.strategies = NULL; break;
    case 12: e[1].key = (char *)"mlp"; break;
    case 13: e[0].n_levels = 1; break;
    case 14: l->strategy = MM_STRAT_FSDP; break;
    case 15: l->spec = MM_DEG_NUMBER; break;
    case 16: l->degree = 2; break;
    case 17: l->zero = 2; break;
    case 18: l->grad_sync = MM_GRAD_SYNC_SPARSE; break;
    case 19: l->sequence_parallel = TRUE; break;
    case 20: l->experts_sharded = TRUE; break;
    case 21: l->cp_fsdp = TRUE; break;
    case 22: l->overlap_min_bytes = 1; break;
    case 23: l->overlap_chunks = 4; break;
    case 24: l->sharding = MM_SHARD_ROW; break;
    case 25: l->cp_impl = MM_CP_ALL_GATHER; break;
    case 26: l->overlap = MM_OVERLAP_ASYNC_TP; break;
    default: break;
    }
    g_autoptr(GByteArray) k = g_byte_array_new();
    mm_point_key(&p, k);
    ck_assert_msg(k->len != k0->len || memcmp(k->data, k0->data, k0->len) != 0, "change %u gives the same key", c);
  }
  g_free(b[0].key);
  g_free(b);
}
END_TEST

/* Llama-3-8B pretraining on DGX H100, as shipped. (transfer full) */
static MmInputs *llama3_8b_inputs(void)
{
  g_autofree char *model = mm_test_src("models/llama3-8b.json"), *hw = mm_test_src("hardware/dgx-h100-2048.json");
  g_autofree char *cfg = mm_test_src("configs/llama3-8b-pretrain.json");
  g_autoptr(GError) error = NULL;
  MmInputs *in = mm_inputs_load(model, hw, cfg, &error);
  ck_assert_msg(in != NULL, "%s", error ? error->message : "");
  return in;
}

/* The points of a study share the graphs of the loaded model: the same graph object, and the
 * answers of a point preparing its own; a point with its own sequence length builds its own. */
START_TEST(test_graph_cache)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in = llama3_8b_inputs();
  g_autoptr(MmGraphCache) cache = mm_graph_cache_new();
  /* the third names the model's own sequence length: the model as loaded still */
  const MmPoint pts[] = {{.nodes = 2}, {.nodes = 4, .micro_batch = 2, .recompute = 1 + MM_RECOMPUTE_FULL},
                         {.nodes = 2, .seq_len = in->model->seq_len}, {.nodes = 2, .seq_len = 4096}};
  MmGraph *first = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(pts); i++) {
    g_autoptr(MmSimulation) a = mm_simulation_prepare_cached(in, &pts[i], cache, &error);
    g_autoptr(MmSimulation) b = mm_simulation_prepare(in, &pts[i], &error);
    ck_assert_msg(a && b, "%s", error ? error->message : "");
    const gboolean own_seq = pts[i].seq_len > 0 && pts[i].seq_len != in->model->seq_len;
    ck_assert(a->graphs_shared == !own_seq && !b->graphs_shared);
    if (!first) first = a->graph;
    ck_assert(own_seq ? a->graph != first : a->graph == first);
    ck_assert_uint_eq(a->graph->n_units, b->graph->n_units);
    ck_assert_double_eq(a->memory->per_device_bytes, b->memory->per_device_bytes);
    ck_assert(mm_simulation_run(a, FALSE, &error) && mm_simulation_run(b, FALSE, &error));
    ck_assert_double_eq(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
    ck_assert_double_eq(a->metrics.compute_s, b->metrics.compute_s);
  }
}
END_TEST

/* A rejected point without a GError notes the rule it broke (mm_json_rule), which a sweep counts
 * rejections by: one check with other numbers is one rule, another check another; a point that
 * passes notes none. */
START_TEST(test_rejection_rules)
{
  g_autoptr(MmInputs) in = llama3_8b_inputs();
  /* micro-batches that divide no rank's samples (two sizes), too many pipeline stages, none wrong */
  const MmPoint pts[] = {{.nodes = 2, .micro_batch = 3}, {.nodes = 2, .micro_batch = 5},
                         {.nodes = 2, .pipeline_degree = 64}, {.nodes = 2}};
  uint64_t rule[G_N_ELEMENTS(pts)];
  char *msg[G_N_ELEMENTS(pts)] = {NULL};
  for (guint i = 0; i < G_N_ELEMENTS(pts); i++) {
    mm_json_rule_clear();
    g_autoptr(MmSimulation) quiet = mm_simulation_prepare(in, &pts[i], NULL);
    rule[i] = mm_json_rule();
    g_autoptr(GError) e = NULL;
    g_autoptr(MmSimulation) told = mm_simulation_prepare(in, &pts[i], &e);
    ck_assert((quiet == NULL) == (told == NULL));
    msg[i] = e ? g_strdup(e->message) : NULL;
  }
  ck_assert_msg(msg[0] && msg[1] && msg[2] && !msg[3], "%s / %s / %s / %s", msg[0], msg[1], msg[2], msg[3]);
  ck_assert_str_ne(msg[0], msg[1]);
  ck_assert_msg(rule[0] != 0 && rule[0] == rule[1], "%s / %s", msg[0], msg[1]);
  ck_assert_msg(rule[2] != 0 && rule[2] != rule[0], "%s / %s", msg[0], msg[2]);
  ck_assert_uint_eq(rule[3], 0);
  for (guint i = 0; i < G_N_ELEMENTS(pts); i++) g_free(msg[i]);
  /* a check's own reason (a strategy's): its numbers are no part of the rule */
  uint64_t why[3];
  const char *text[] = {"tp degree 3 does not divide heads 32", "tp degree 12 does not divide heads 40",
                        "tp degree 3 does not divide kv_heads 32"};
  for (guint i = 0; i < 3; i++) {
    mm_json_note_rule(text[i]);
    why[i] = mm_json_rule();
  }
  ck_assert(why[0] == why[1] && why[0] != why[2] && why[0] != 0);
}
END_TEST

/* Bad space files: exit 1, the file and the JSON path named. */
/* A schedule dimension: a point's schedule gives what a config naming it gives (dualpipev with its two
 * chunks, interleaved_1f1b with the config's), and points.csv names it. */
START_TEST(test_pipeline_schedules)
{
  static const char *const cfg1 =
    "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"micro_batch\":1,\"recompute\":\"none\","
    "\"pipeline\":{\"degree\":4,\"schedule\":\"1f1b\"},\"parallelism\":{\"default\":[{\"strategy\":\"tp\","
    "\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}";
  static const char *const cfg2 =
    "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"micro_batch\":1,\"recompute\":\"none\","
    "\"pipeline\":{\"degree\":4,\"schedule\":\"dualpipev\"},\"parallelism\":{\"default\":[{\"strategy\":\"tp\","
    "\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}";
  g_autofree char *c1 = mm_test_write("sched-1f1b.json", cfg1), *c2 = mm_test_write("sched-dpv.json", cfg2);
  g_autofree char *model = mm_test_src("models/llama3-8b.json"), *hw = mm_test_src("hardware/dgx-h100-2048.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmInputs) in1 = mm_inputs_load(model, hw, c1, &error);
  g_autoptr(MmInputs) in2 = mm_inputs_load(model, hw, c2, &error);
  ck_assert_msg(in1 && in2, "%s", error ? error->message : "");
  MmPoint pt = {.nodes = 4, .schedule = 1 + MM_PIPE_DUALPIPEV};
  g_autoptr(MmSimulation) a = mm_simulation_new_point(in1, &pt, FALSE, &error);
  ck_assert_msg(a != NULL, "%s", error ? error->message : "");
  MmPoint direct = {.nodes = 4};
  g_autoptr(MmSimulation) b = mm_simulation_new_point(in2, &direct, FALSE, &error);
  ck_assert_msg(b != NULL, "%s", error ? error->message : "");
  ck_assert_int_eq(a->scenario->vstages, 2);
  ck_assert_double_eq(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
  /* back to 1f1b from the dualpipev config: one chunk, 1F1B's answer */
  pt.schedule = 1 + MM_PIPE_1F1B;
  g_autoptr(MmSimulation) x = mm_simulation_new_point(in2, &pt, FALSE, &error);
  g_autoptr(MmSimulation) y = mm_simulation_new_point(in1, &direct, FALSE, &error);
  ck_assert(x && y);
  ck_assert_int_eq(x->scenario->vstages, 1);
  ck_assert_double_eq(x->metrics.iteration_time_s, y->metrics.iteration_time_s);

  /* the sweep: one row per schedule, named */
  g_autofree char *space = mm_test_write("sched-space.json", "{\"strategies\":{\"transformer\":[\"tp\",\"ddp\"]},"
                                         "\"degrees\":[8],\"pipeline_schedules\":[\"1f1b\",\"zb_h1\",\"dualpipev\"]}");
  g_autofree char *dir = tmp("sched-sweep");
  const char *args[] = {"sweep", "-m", model, "-H", hw, "-c", c1, "-n", "4", "--space", space, "--out", dir, "--quiet", NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 0);
  g_autofree char *path = g_build_filename(dir, "points.csv", NULL), *csv = NULL;
  ck_assert(g_file_get_contents(path, &csv, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  const int sc = csv_col(head, "pipeline_schedule"), vc = csv_col(head, "virtual_stages");
  guint seen[3] = {0};
  for (guint i = 1; lines[i] && lines[i][0]; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    if (strcmp(f[sc], "dualpipev") == 0) {
      seen[2]++;
      ck_assert_str_eq(f[vc], "2");
    } else {
      seen[strcmp(f[sc], "zb_h1") == 0]++;
      ck_assert_str_eq(f[vc], "1");
    }
  }
  ck_assert(seen[0] > 0 && seen[0] == seen[1] && seen[1] == seen[2]);
}
END_TEST

START_TEST(test_bad_space)
{
  static const char *const bad[][2] = {
    {"{\"strategies\": {\"transformer\": [\"tp\"]}}", "$.strategies.transformer"}, /* DLRM has none */
    {"{\"strategies\": {\"mlp\": [\"tpp\"]}}", "$.strategies.mlp[0]"},
    {"{\"strategies\": {\"mlp\": [\"cp\"]}}", "$.strategies.mlp"},
    {"{\"pipeline_degrees\": [0]}", "$.pipeline_degrees[0]"},
    {"{\"micro_batches\": \"4\"}", "$.micro_batches"},
    {"{\"recompute\": [\"some\"]}", "$.recompute[0]"},
    {"{\"zero\": [3]}", "$.zero[0]"},
    {"{\"max_levels\": 4}", "$.max_levels"},
    {"{\"colour\": 1}", "$"},
    {"{\"nodes\": [1.5]}", "$.nodes[0]"},
    {"{\"virtual_stages\": [1.7e26]}", "$.virtual_stages[0]"}, /* the fuzzer's: range before the cast */
    {"{\"pipeline_schedules\": [\"1f1b\", \"zb_h2\"]}", "$.pipeline_schedules[1]"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *name = g_strdup_printf("bad-space-%u.json", i);
    g_autofree char *space = mm_test_write(name, bad[i][0]);
    g_autofree char *dir = tmp(name);
    const char *args[] = {"sweep", DLRM[0], DLRM[1], DLRM[2], DLRM[3], DLRM[4], DLRM[5], "--out", dir, "--space", space, NULL};
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
    ck_assert_msg(strstr(err, name) && strstr(err, bad[i][1]), "case %u: %s", i, err);
  }
}
END_TEST

int main(void)
{
  Suite *s = suite_create("sweep");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_space_dlrm);
  tcase_add_test(tc, test_probes_reused);
  tcase_add_test(tc, test_graph_cache);
  tcase_add_test(tc, test_rejection_rules);
  tcase_add_test(tc, test_same_bytes_any_jobs);
  tcase_add_test(tc, test_memo_same_rows);
  tcase_add_test(tc, test_dedup_same_rows);
  tcase_add_test(tc, test_point_key);
  tcase_add_test(tc, test_resume_after_cut);
  tcase_add_test(tc, test_resume_after_kill);
  tcase_add_test(tc, test_resume_bad_last_row);
  tcase_add_test(tc, test_resume_other_nodes_or_space);
  tcase_add_test(tc, test_sigint_then_resume);
  tcase_add_test(tc, test_shards_merge);
  tcase_add_test(tc, test_merge_refuses);
  tcase_add_test(tc, test_merge_incomplete);
  tcase_add_test(tc, test_merge_one_shard);
  tcase_add_test(tc, test_merge_failed_and_stale_summary);
  tcase_add_test(tc, test_out_not_input);
  tcase_add_test(tc, test_summary);
  tcase_add_test(tc, test_summary_pareto_streamed);
  tcase_add_test(tc, test_two_systems);
  tcase_add_test(tc, test_serving_latency_bound);
  tcase_add_test(tc, test_whatif_dlrm);
  tcase_add_test(tc, test_pipeline_schedules);
  tcase_add_test(tc, test_bad_space);
  suite_add_tcase(s, tc);
  return mm_test_main(s);
}
