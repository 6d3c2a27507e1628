/* convert: vendor benchmark outputs (rocblas-bench, hipblaslt-bench, nccl-tests) -> calibration rows
 * in the docs/CALIBRATION.md convention. */
#pragma once

#include "calib.h"

G_BEGIN_DECLS

/* Reads @path, the saved output of the tool named @format, and appends one row per measured call
 * to @t (plus the header lines "source" and, where the output shows them, "device", "arch", "blas",
 * "platform"). Formats:
 *   "rocblas-bench"   rocblas-bench GEMM results: a "transA,transB,M,N,K,...,rocblas-Gflops,us"
 *                     header line and its values lines; the dtype comes from an a_type column or,
 *                     failing that, from the rocblas-bench command line (-r, --a_type) in the file;
 *   "hipblaslt-bench" hipblaslt-bench results: "[0]:transA,transB,...,m,n,k,...,hipblaslt-Gflops,
 *                     hipblaslt-GB/s,us" and its values lines;
 *   "nccl-tests"      nccl-tests / rccl-tests stdout (also "rccl-tests"): the size/count/type/.../
 *                     time/algbw/busbw table, two rows per size (variants out_of_place, in_place).
 * GEMM rows: bench gemm (gemv when m <= 16), flops 2mnk x batch, bytes the operands read and the
 * output written once, variant "vendor". Collective rows: m the ranks, bytes the message size.
 * On any error @t is left as it was and @error (MM_CALIB_ERROR_INPUT) names the file, the line and
 * what was expected there. */
gboolean mm_calib_convert(const char *format, const char *path, MmCalibTable *t, GError **error);

/* The format names mm_calib_convert() knows, NULL-terminated. (transfer none) */
const char *const *mm_calib_convert_formats(void);

G_END_DECLS
