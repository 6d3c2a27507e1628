/* testutil: helpers shared by the check test programs. */
#pragma once

#include <check.h>
#include <glib.h>

/* Absolute path of a file in the source tree (MM_SOURCE_DIR). (transfer full) */
char *mm_test_src(const char *rel);

/* Writes @text to a new file NAME in a per-process temporary directory. (transfer full) */
char *mm_test_write(const char *name, const char *text);

/* The per-process temporary directory (created on first use). (transfer none) */
const char *mm_test_tmpdir(void);

/* Runs the madmax binary (MM_BINARY) with @args (NULL-terminated, without
 * argv[0]) in the source directory; returns its exit status and captures
 * stdout/stderr (either may be NULL). */
int mm_test_cli(const char *const *args, char **out, char **err);

/* Runs a check suite in a fresh SRunner; returns the process exit code. */
int mm_test_main(Suite *s);
