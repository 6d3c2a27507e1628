/* calib: measurements of kernels on a device (GPU harness, CPU backend, published data) ->
 * fitted efficiency -> a calibrated device file. The CSV format is docs/CALIBRATION.md. */
#pragma once

#include <glib.h>
#include <stdio.h>

#include "config/config.h"

G_BEGIN_DECLS

#define MM_CALIB_ERROR mm_calib_error_quark()
GQuark mm_calib_error_quark(void);
typedef enum {
  MM_CALIB_ERROR_INPUT,   /* a measurement file or option is malformed (exit 1) */
  MM_CALIB_ERROR_FIT,     /* too few or inconsistent measurements to fit (exit 1) */
  MM_CALIB_ERROR_BACKEND, /* a backend failed while measuring (exit 2) */
} MmCalibError;

/* One measured call: what ran (bench, the madmax kernel kind it calibrates, dtype, shape,
 * variant), its work (HBM bytes, FLOPs per call) and its time per call (median, min, max of
 * `reps` repetitions). `source` cites where a published row came from ("" for the file's own
 * run). The columns of docs/CALIBRATION.md, in order. */
typedef struct {
  char *bench;   /* launch, graph_launch, copy, gemm, gemv, attention, lookup, dil_gemm, dil_copy,
                  * cil_gemm, cil_copy, peer, fused_*, or a collective (allreduce, ...) */
  char *kind;    /* gemm, gemv, attention, interaction, elementwise, lookup, or "" */
  char *dtype;   /* bf16, fp16, fp8, fp32, ... or "" */
  double m, n, k, batch;
  double bytes, flops;
  char *variant; /* ';'-separated tags: vendor, tiled, kernel, dma, flash;fwd;causal=0, split_m=4, ... */
  int reps;
  double median_s, min_s, max_s;
  char *source;
} MmCalibRow;

/* A measurement file: its rows and its "# key: value" header lines (device, platform, arch,
 * driver_version, blas, power_limit, date, ...) in file order. */
typedef struct {
  GPtrArray *rows;  /* MmCalibRow*, owned */
  GPtrArray *keys;  /* char*, owned; keys[i] goes with values[i] */
  GPtrArray *values;
} MmCalibTable;

MmCalibTable *mm_calib_table_new(void);
void mm_calib_table_free(MmCalibTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmCalibTable, mm_calib_table_free)
/* Appends a copy of @r (its strings duplicated; NULL strings become ""). */
void mm_calib_table_add(MmCalibTable *t, const MmCalibRow *r);
/* Sets header @key to @value (replacing an earlier value). */
void mm_calib_table_set_meta(MmCalibTable *t, const char *key, const char *value);
/* The value of header @key, or NULL. (transfer none) */
const char *mm_calib_table_meta(const MmCalibTable *t, const char *key);

/* Reads a calibration CSV (docs/CALIBRATION.md) into @t (appending). Errors name the file,
 * the line and the column. */
gboolean mm_calib_csv_read(const char *path, MmCalibTable *t, GError **error);
/* @t in the same format (header lines, the column line, one line per row). (transfer full) */
char *mm_calib_csv_text(const MmCalibTable *t);

/* ---- the CPU backend (src/calib/cpu.c) ------------------------------------ */

typedef struct {
  guint threads; /* worker threads (0: all cores): the "workgroups" */
  gboolean quick; /* a small grid (CI and tests) */
  guint reps;     /* repetitions per point (0: 5) */
} MmCalibCpuOptions;

/* Runs the calibration harness on the CPU: the same benches as the GPU harness (GEMM over a
 * grid of shapes, GEMV, attention, embedding-bag pooling, copies by kernel and by memcpy,
 * "launch" (a task dispatched to the pool and awaited), DIL (a GEMM split n ways by M and by
 * K), CIL (a GEMM concurrent with a copy)), appending rows and header lines to @out. */
gboolean mm_calib_cpu_run(const MmCalibCpuOptions *opt, MmCalibTable *out, GError **error);

G_END_DECLS
