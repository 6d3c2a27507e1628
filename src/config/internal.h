/* config internals: what the hardware, device and network files share (not a public header). */
#pragma once

#include "json.h"

void mm__param_clear(MmParam *p);
void mm__param_take(MmParam *dst, MmParam *src, const char *fit);
void mm__network_clear(MmNetwork *n);
gboolean mm__parse_network(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean intra,
                              int64_t gpus_per_node, MmNetwork *out, GError **error);

/* The schema tables of the device and network parts, as Markdown (docs/SCHEMA.md). */
void mm__device_write_schema(FILE *out);
void mm__network_write_schema(FILE *out);
