/* fuzz: what the libFuzzer harnesses share (built with -DMM_FUZZ=ON; see scripts/fuzz.sh). */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#ifndef MM_CJSON_AUTOPTR_DEFINED /* shared with the other headers that define it */
#define MM_CJSON_AUTOPTR_DEFINED
G_DEFINE_AUTOPTR_CLEANUP_FUNC(cJSON, cJSON_Delete)
#endif

/* libFuzzer's entry points. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Makes GLib criticals and warnings fatal: a g_return_if_fail reached from an input is a bug. */
void mm_fuzz_init(void);

/* The source tree (MM_SOURCE_DIR, else the one the harness was built from). (transfer none) */
const char *mm_fuzz_src(void);
/* A path under it. (transfer full) */
char *mm_fuzz_path(const char *rel);

/* @data as a NUL-terminated string, or NULL when it holds a NUL (the loaders refuse those
 * files before parsing). (transfer full) */
char *mm_fuzz_text(const uint8_t *data, size_t size);

/* A per-process temporary directory, removed at exit. (transfer none) */
const char *mm_fuzz_tmpdir(void);
/* Writes @data to @name under it (subdirectories created). (transfer full: the path) */
char *mm_fuzz_write(const char *name, const uint8_t *data, size_t size);

/* Aborts (a crash libFuzzer reports) when @what does not hold. */
#define mm_fuzz_require(cond, ...)                                                                               \
  do {                                                                                                            \
    if (!(cond)) mm_fuzz_fail(__FILE__, __LINE__, __VA_ARGS__);                                                  \
  } while (0)
G_NORETURN void mm_fuzz_fail(const char *file, int line, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* Every number in @doc is finite (madmax documents never carry NaN or infinities). */
void mm_fuzz_require_finite(const cJSON *doc, const char *what);

/* Simulates a small dense transformer and a small DLRM under a few fixed configs on @hw (at
 * most @nodes of its nodes): a system the loader accepts must simulate without an internal
 * error, and its run documents hold only finite numbers. */
void mm_fuzz_simulate_small(const MmHardware *hw, int64_t nodes);
