/* testutil: helpers shared by the check test programs. */
#pragma once

#include <check.h>
#include <glib.h>

#include "sweep/sweep.h"

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

/* Simulates a scenario; each argument is a path under the source tree, or inline JSON
 * when it starts with '{'. NULL (and @error) when the inputs are rejected. */
MmSimulation *mm_test_sim(const char *model, const char *hw, const char *cfg, const MmSimOptions *opt,
                          GError **error);

/* The same, failing the test when the scenario is rejected, with the whole iteration simulated
 * (MmSimulation.timeline). @nodes > 0 resizes the system. */
MmSimulation *mm_test_sim_ok(const char *model, const char *hw, const char *cfg, int64_t nodes);

/* A one-node system of 8 A100-80GB behind NVSwitch, as inline JSON. (transfer full) */
char *mm_test_node8(void);

/* The layer of @role in unit @unit of @g (fails the test when there is none). */
const MmLayer *mm_test_layer(const MmGraph *g, guint unit, MmLayerRole role);

/* A FIFO's read end, opened without waiting for a writer (what is written must fit its buffer). */
int mm_test_fifo_reader(const char *path);
/* What the writers wrote into the FIFO @fd once they are gone; closes @fd. (transfer full) */
char *mm_test_fifo_drain(int fd);

/* Runs a check suite in a fresh SRunner; returns the process exit code. */
int mm_test_main(Suite *s);
