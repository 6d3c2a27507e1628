/* validate: predictions against published measurements, case by case (configs/validation/). */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

/* Faults of a cases file itself. A model, hardware or config file a case names keeps its
 * MM_CONFIG_ERROR; a failed simulation its MM_ENGINE_ERROR. */
#define MM_VALIDATE_ERROR (mm_validate_error_quark())
GQuark mm_validate_error_quark(void);
typedef enum {
  MM_VALIDATE_ERROR_IO,      /* the cases file is missing or unreadable */
  MM_VALIDATE_ERROR_PARSE,   /* not JSON, truncated JSON */
  MM_VALIDATE_ERROR_INVALID, /* a key missing, unknown, of the wrong type or out of range; a bad point */
  MM_VALIDATE_ERROR_METRIC,  /* a metric the case's config does not produce (serving metric, training config) */
} MmValidateError;

typedef struct {
  char *id;
  char *group;
  char *source;
  char *metric;      /* what was measured (see docs/VALIDATION.md) */
  char *unit;
  double measured;
  double predicted;
  double error_frac; /* predicted / measured - 1 */
  gboolean fits;
  char *note;
  char *curve;       /* collective curves: the case a point belongs to (NULL otherwise) */
} MmValidationRow;

typedef struct {
  char *path;
  char *name;
  GPtrArray *rows;    /* MmValidationRow */
  GPtrArray *skipped; /* char * "id: reason" */
  double median_abs_error, p90_abs_error, worst_abs_error;
  char *worst_id;
} MmValidation;

/* Runs every case of a cases file (under configs/validation/): each names a model,
 * a system (and a node count), a config, the metric the source measured and its
 * value. Relative paths are taken from the cases file's "root", itself relative to
 * the cases file unless absolute. Errors: see MM_VALIDATE_ERROR. (transfer full) */
MmValidation *mm_validation_run(const char *cases_path, GError **error);
/* The same, each case's device replaced by its calibrated sibling where one exists
 * (devices/X-calibrated.json, written by `madmax calibrate`; mm_hardware_use_calibrated). */
MmValidation *mm_validation_run_calibrated(const char *cases_path, gboolean calibrated, GError **error);
/* The files running @cases_path reads besides it (an output over one would destroy it): each
 * case's model, system and config, and the files the systems name (device, fit files; with
 * @calibrated the calibrated devices used; mm_hardware_list_files), appended to @paths with a label each in
 * @labels ("CASES.json's model", "CASES.json's hardware's device"); both take g_free'd strings.
 * What does not parse adds nothing (the run reports it). */
void mm_validation_inputs(const char *cases_path, gboolean calibrated, GPtrArray *labels, GPtrArray *paths);
void mm_validation_free(MmValidation *v);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmValidation, mm_validation_free)

cJSON *mm_validation_json(const MmValidation *v);
void mm_validation_text(FILE *out, const MmValidation *v, gboolean markdown);

G_END_DECLS
