/* fuzz_convert: the calibration inputs read from files: the first byte picks a converter of
 * mm_calib_convert (rocblas-bench, hipblaslt-bench, nccl-tests) or the calibration CSV reader, the
 * rest is the file. Each either succeeds or reports MM_CALIB_ERROR_INPUT; what it accepts must be
 * rows of finite, non-negative numbers and positive times that the CSV writer and reader keep. */
#include <math.h>
#include <stdio.h>

#include "calib/convert.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0) return 0;
  static const char *const formats[] = {"rocblas-bench", "hipblaslt-bench", "nccl-tests", NULL};
  const char *format = formats[data[0] % G_N_ELEMENTS(formats)];
  g_autofree char *path = mm_fuzz_write("input.txt", data + 1, size - 1);
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  gboolean ok = format ? mm_calib_convert(format, path, t, &error) : mm_calib_csv_read(path, t, &error);
  if (!ok) {
    mm_fuzz_require(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT) ||
                      (!format && error->domain == G_FILE_ERROR),
                    "%s: rejected without an input error", format ? format : "csv");
    return 0;
  }
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    const double v[] = {r->m, r->n, r->k, r->batch, r->bytes, r->flops};
    for (guint c = 0; c < G_N_ELEMENTS(v); c++) mm_fuzz_require(isfinite(v[c]) && v[c] >= 0, "row %u: a bad number", i);
    mm_fuzz_require(r->median_s > 0 && isfinite(r->max_s) && r->min_s <= r->median_s && r->median_s <= r->max_s,
                    "row %u: bad times", i);
  }
  /* what was accepted survives the CSV */
  g_autofree char *csv = g_build_filename(mm_fuzz_tmpdir(), "out.csv", NULL);
  g_autofree char *text = mm_calib_csv_text(t);
  mm_fuzz_require(g_file_set_contents(csv, text, -1, NULL), "cannot write %s", csv);
  g_autoptr(MmCalibTable) back = mm_calib_table_new();
  g_autoptr(GError) error2 = NULL;
  mm_fuzz_require(mm_calib_csv_read(csv, back, &error2), "written rows do not read back: %s", error2->message);
  mm_fuzz_require(back->rows->len == t->rows->len, "rows lost in the CSV");
  return 0;
}
