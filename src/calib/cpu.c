#include "calib/calib.h"
gboolean mm_calib_cpu_run(const MmCalibCpuOptions *opt, MmCalibTable *out, GError **error)
{ (void)opt; (void)out; g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "the CPU backend is not part of this revision yet"); return FALSE; }
