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

/* The device file's optional "fused" object (@obj NULL: every default) and "overlap" object
 * (src/config/device_fused.c, device_overlap.c). */
gboolean mm__device_parse_fused(const MmJsonCtx *ctx, const cJSON *obj, MmDevice *out, GError **error);
void mm__device_fused_clear(MmDevice *d);
void mm__device_fused_schema(FILE *out);
gboolean mm__device_parse_overlap(const MmJsonCtx *ctx, const cJSON *obj, MmDevice *out, GError **error);
void mm__device_overlap_clear(MmDevice *d);
void mm__device_overlap_schema(FILE *out);

/* A behavioural coefficient of a device (the "fused" and "overlap" objects): written as
 * {value, provenance, source}; absent, it takes the row's default, whose source says where
 * that number comes from (a paper's figure, a stated estimate). */
typedef struct {
  const char *key;
  double min, max;           /* inclusive range of the value, in the JSON unit */
  double scale;              /* JSON unit -> the struct's SI unit (1e-6 for us -> s) */
  const char *unit;          /* the JSON unit, for docs ("us", "fraction", "x") */
  double def;                /* default, in the JSON unit */
  MmProvenance def_provenance;
  const char *def_source;    /* where the default comes from */
  gssize offset;             /* of the MmUtil in MmDevice */
  const char *doc;           /* what it is, one line */
} MmCoeffRow;
#define MM_COEFF_ROWS_END {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}

/* Parses @obj (NULL: every default) at @jp by @rows into @out's MmUtil fields; rejects unknown
 * keys, values out of range and wrong types with the file and JSON path. Sources are owned by
 * @out (free with mm__coeffs_clear). */
gboolean mm__coeffs_parse(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, const MmCoeffRow *rows,
                          MmDevice *out, GError **error);
void mm__coeffs_clear(const MmCoeffRow *rows, MmDevice *d);
/* The rows as a Markdown table under @title (docs/SCHEMA.md). */
void mm__coeffs_schema(FILE *out, const char *title, const char *intro, const MmCoeffRow *rows);
