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

/* A table of coefficients: the device file's object @key (absent: every default), its rows, its
 * schema text, and a check across rows (NULL: none) run after they are read. */
typedef struct {
  const char *key;
  const char *intro; /* docs/SCHEMA.md */
  const MmCoeffRow *rows;
  gboolean (*check)(const MmJsonCtx *ctx, const MmDevice *d, GError **error);
} MmCoeffTable;

extern const MmCoeffTable mm__fused_coeffs;   /* src/config/device_fused.c */
extern const MmCoeffTable mm__overlap_coeffs; /* src/config/device_overlap.c */

/* Reads every coefficient table of device file @root into @out: rejects unknown keys, values out
 * of range and wrong types with the file and JSON path. Sources are owned by @out (free with
 * mm__device_coeffs_clear). */
gboolean mm__device_parse_coeffs(const MmJsonCtx *ctx, const cJSON *root, MmDevice *out, GError **error);
void mm__device_coeffs_clear(MmDevice *d);
/* The tables as Markdown (docs/SCHEMA.md). */
void mm__device_coeffs_schema(FILE *out);
