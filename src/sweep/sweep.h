/* sweep: run whole simulations (config -> report) for validation, design sweeps and what-if studies. */
#pragma once

#include "report/report.h"

G_BEGIN_DECLS

/* One complete simulation and everything it produced. */
typedef struct {
  MmModel *model;
  MmHardware *hardware;
  MmParallelConfig *config;
  MmScenario *scenario;
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

/* Changes applied to the inputs before simulating (0 / FALSE: keep the file's). */
typedef struct {
  int64_t nodes;        /* nodes of the system's design */
  int64_t global_batch; /* samples */
  int64_t micro_batch;
  int64_t pipeline_degree; /* pipeline stages */
  gboolean per_device;
} MmSimOptions;

/* Loads the three files, applies @opt (may be NULL), lowers and runs one iteration.
 * Config errors are MM_CONFIG_ERROR; engine failures MM_ENGINE_ERROR. (transfer full) */
MmSimulation *mm_simulation_new(const char *model, const char *hardware, const char *config, const MmSimOptions *opt,
                                GError **error);

/* The graph a config runs (serving: the prefill pass; else the model at its seq_len) and,
 * for serving, the decode step's in @decode (else NULL). (transfer full) */
MmGraph *mm_simulation_graphs(const MmModel *model, const MmParallelConfig *config, MmGraph **decode);

/* Builds the graphs (serving: prefill and decode passes) and runs, from loaded inputs
 * whose scenario is set. */
gboolean mm_simulation_run(MmSimulation *sim, gboolean per_device, GError **error);

/* Re-lowers and re-runs after the caller changed the hardware or config in place. */
gboolean mm_simulation_rerun(MmSimulation *sim, gboolean per_device, GError **error);
void mm_simulation_free(MmSimulation *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmSimulation, mm_simulation_free)

G_END_DECLS
