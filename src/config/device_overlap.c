/* device_overlap: the device file's "overlap" object, coefficients of decomposed
 * compute-communication overlap (DIL, CIL, DMA engines; docs/FUSED.md): one row each, with its
 * default and the default's source. */
#include <stddef.h>

#include "internal.h"

#define OV(f) ((gssize)offsetof(MmDevice, overlap.f))

static const MmCoeffRow overlap_rows[] = {
  {"dil_gemm", 0, 10, 1, "fraction", 0, MM_PROV_ESTIMATE, "placeholder", OV(dil_gemm),
   "placeholder for the decomposition-loss coefficients"},
  MM_COEFF_ROWS_END,
};

gboolean mm__device_parse_overlap(const MmJsonCtx *ctx, const cJSON *obj, MmDevice *out, GError **error)
{
  return mm__coeffs_parse(ctx, obj, "$.overlap", overlap_rows, out, error);
}

void mm__device_overlap_clear(MmDevice *d)
{
  mm__coeffs_clear(overlap_rows, d);
}

void mm__device_overlap_schema(FILE *out)
{
  mm__coeffs_schema(out, "`overlap`",
                    "Coefficients of decomposed compute-communication overlap, each `{value, provenance, "
                    "source}`; an absent key takes the default below.",
                    overlap_rows);
}
