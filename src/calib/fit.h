/* fit: measurement rows -> fitted efficiency models -> a calibrated device file. */
#pragma once

#include <cjson/cJSON.h>

#include "calib.h"

G_BEGIN_DECLS

typedef struct {
  cJSON *calibration;     /* the device file's "calibration" block (owned) */
  double launch_us;       /* measured per-kernel launch overhead (0: none measured) */
  double graph_launch_us; /* measured per-kernel graph replay overhead (0: none measured) */
  GString *report;        /* the fits as a text table (owned) */
} MmCalibResult;

/* Fits the rows of @t against device @dev (its peaks, HBM bandwidth and, where @t has no
 * launch bench, its launch overhead): a roofline_t0 model per (kind, dtype) with GEMM, GEMV
 * or attention rows, a bandwidth_t0 model for copies (hbm.elementwise) and lookups
 * (hbm.lookup); least squares on log time (Nelder-Mead, deterministic), every fourth call by
 * size held out of a second fit and predicted by it. Calls within 5% of the launch overhead
 * are left out. DIL/CIL rows become time ratios (calibration.overlap). @what names the
 * measurements in the block's source. */
gboolean mm_calib_fit(const MmCalibTable *t, const MmDevice *dev, const char *what, MmCalibResult *out,
                      GError **error);
void mm_calib_result_clear(MmCalibResult *r);

/* @base_root (a device file's JSON, from @base_path) with @r's calibration block, its
 * measured launch overheads and " (calibrated)" after the name, as the text of a device file
 * checked to load (errors name @out_path). (transfer full) */
char *mm_calib_device_text(const char *base_path, const cJSON *base_root, const MmCalibResult *r,
                           const char *out_path, GError **error);

G_END_DECLS
