/* sweep: whole simulations of points (loaded inputs x overrides -> report), the unit of sweeps and what-if studies. */
#pragma once

#include "report/report.h"

G_BEGIN_DECLS

/* The three loaded input files of a study: parsed once, never edited, shared by every
 * point (and thread) that simulates them. */
typedef struct {
  MmModel *model;
  MmHardware *hardware;
  MmParallelConfig *config;
} MmInputs;

/* Loads the three files (config errors are MM_CONFIG_ERROR). (transfer full) */
MmInputs *mm_inputs_load(const char *model, const char *hardware, const char *config, GError **error);
void mm_inputs_free(MmInputs *in);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmInputs, mm_inputs_free)

/* One complete simulation of one point and everything it produced. */
typedef struct {
  MmInputs *owned;          /* the inputs when the simulation loaded them itself (else NULL) */
  const MmInputs *inputs;   /* (transfer none) */
  MmPoint point;
  MmScenario *scenario;
  /* the model, system and config as this point sees them (the scenario's views; read only) */
  const MmModel *model;
  const MmHardware *hardware;
  const MmParallelConfig *config;
  MmGraph *graph;
  MmMemory *memory;
  MmPlan *plan;
  MmEngine *engine;
  MmRunMetrics metrics;     /* the iteration (serving: the prefill) */
  /* serving only: one decode step, and the request-level figures */
  MmGraph *decode_graph;
  MmPlan *decode_plan;
  MmEngine *decode_engine;
  MmRunMetrics decode_metrics;
  MmServingMetrics serving;
} MmSimulation;

/* Simulates point @pt (NULL: the files as loaded) of @in, which must outlive the result:
 * derives the scenario, builds the graphs (serving: prefill and decode passes), memory,
 * plan and engine, runs one iteration. Config errors are MM_CONFIG_ERROR; engine failures
 * MM_ENGINE_ERROR. (transfer full) */
MmSimulation *mm_simulation_new_point(const MmInputs *in, const MmPoint *pt, gboolean per_device, GError **error);

/* Changes applied to the inputs before simulating (0 / FALSE: keep the file's). */
typedef struct {
  int64_t nodes;        /* nodes of the system's design */
  int64_t global_batch; /* samples */
  int64_t micro_batch;
  int64_t pipeline_degree; /* pipeline stages */
  gboolean per_device;
} MmSimOptions;

/* Loads the three files and simulates the point @opt describes (may be NULL). (transfer full) */
MmSimulation *mm_simulation_new(const char *model, const char *hardware, const char *config, const MmSimOptions *opt,
                                GError **error);

/* The graph a scenario runs (serving: the prefill pass; else the model at its seq_len) and,
 * for serving, the decode step's in @decode (else NULL). (transfer full) */
MmGraph *mm_simulation_graphs(const MmScenario *s, MmGraph **decode);

void mm_simulation_free(MmSimulation *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmSimulation, mm_simulation_free)

G_END_DECLS
