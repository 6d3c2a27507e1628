/* bench: simulations per second of one scenario (in-process), with and without loading its three
 * files, and one --per-device run's wall time and peak RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sweep/sweep.h"

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void die(const GError *error)
{
  fprintf(stderr, "bench: %s\n", error->message);
  exit(2);
}

/* Memory, plan, engine and metrics of an already derived scenario and graph (the figure
 * earlier releases reported as us_per_sim). */
static double one_replan(const MmSimulation *sim)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmMemory) mem = mm_memory_new(sim->scenario, sim->graph);
  MmPlanOptions opt = {0};
  g_autoptr(MmPlan) plan = mm_plan_new(sim->scenario, sim->graph, &opt);
  g_autoptr(MmEngine) e = mm_engine_new(plan->engine_programs, plan->n_programs, plan->classes, plan->n_classes, &error);
  if (!e || !mm_engine_run(e, &error)) die(error);
  MmRunMetrics r;
  mm_report_run_metrics(plan, e, &r);
  (void)mem;
  return r.iteration_time_s;
}

/* A whole point from the loaded inputs: scenario, graphs, memory, plan, engine, metrics:
 * what a sweep point costs once its inputs are parsed. */
static double one_sim(const MmSimulation *sim)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) x = mm_simulation_new_point(sim->inputs, &sim->point, FALSE, &error);
  if (!x) die(error);
  return x->metrics.iteration_time_s;
}

/* The same with the whole iteration simulated (no steady-state reduction; what `madmax run` does). */
static double one_whole(const MmSimulation *sim)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) x = mm_simulation_prepare(sim->inputs, &sim->point, &error);
  if (!x) die(error);
  x->timeline = TRUE;
  if (!mm_simulation_run(x, FALSE, &error)) die(error);
  return x->metrics.iteration_time_s;
}

/* The files of the scenario being measured, for one_load. */
static const char *const *bench_files;
static int64_t bench_nodes, bench_batch;

/* Everything but the process start: load and check the three files, derive, plan, run, metrics. */
static double one_load(const MmSimulation *sim)
{
  (void)sim;
  g_autoptr(GError) error = NULL;
  const MmSimOptions opt = {.nodes = bench_nodes, .global_batch = bench_batch};
  g_autoptr(MmSimulation) x = mm_simulation_new(bench_files[0], bench_files[1], bench_files[2], &opt, &error);
  if (!x) die(error);
  return x->metrics.iteration_time_s;
}

/* Median of 7 single runs of @f, with the fastest and slowest. */
static double median7(const MmSimulation *sim, double (*f)(const MmSimulation *), double *sink, double *lo, double *hi)
{
  double t[7];
  for (int i = 0; i < 7; i++) {
    gint64 start = g_get_monotonic_time();
    *sink += f(sim);
    t[i] = (double)(g_get_monotonic_time() - start) / 1e6;
  }
  qsort(t, 7, sizeof(double), cmp_double);
  *lo = t[0];
  *hi = t[6];
  return t[3];
}

/* The median rate of 7 batches of ~0.3 s after a warm-up. */
static double rate(const MmSimulation *sim, double (*f)(const MmSimulation *), double *sink, double *lo, double *hi)
{
  for (int i = 0; i < 50; i++) *sink += f(sim);
  enum { BATCHES = 7 };
  double rates[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    gint64 start = g_get_monotonic_time();
    long n = 0;
    while (g_get_monotonic_time() - start < 300000) {
      for (int k = 0; k < 20; k++) *sink += f(sim);
      n += 20;
    }
    rates[b] = (double)n / ((double)(g_get_monotonic_time() - start) / 1e6);
  }
  qsort(rates, BATCHES, sizeof(double), cmp_double);
  *lo = rates[0];
  *hi = rates[BATCHES - 1];
  return rates[BATCHES / 2];
}

int main(int argc, char **argv)
{
  gboolean per_device = FALSE, single = FALSE, once = FALSE; /* single: large scenarios, median of 7 single runs */
  mm_simulation_tune_allocator(); /* as madmax's main() */
  int64_t nodes = 0, batch = 0, profile = 0;
  int nargs = 0;
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "--per-device") == 0) per_device = TRUE;
    else if (strcmp(argv[i], "--single") == 0) single = TRUE;
    else if (strcmp(argv[i], "--once") == 0) once = TRUE;
    else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc && (profile = g_ascii_strtoll(argv[i + 1], NULL, 10)) > 0)
      i++;
    else if (strcmp(argv[i], "--global-batch") == 0 && i + 1 < argc &&
             (batch = g_ascii_strtoll(argv[i + 1], NULL, 10)) > 0)
      i++;
    else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc && (nodes = g_ascii_strtoll(argv[i + 1], NULL, 10)) > 0) i++;
    else nargs = -1;
  }
  if (argc < 4 || nargs < 0 || per_device + single + once > 1) {
    fprintf(stderr, "usage: madmax-bench MODEL HARDWARE CONFIG [--per-device | --once | --single] [--nodes N] "
                    "[--global-batch SAMPLES] [--profile N]\n"
                    "  (none)        simulations per second: plan + engine + metrics, a whole point, with loading\n"
                    "  --per-device  one run simulating every device: wall time (loading included) and peak RSS\n"
                    "  --once        the same for one symmetric run\n"
                    "  --single      a large scenario: median of 7 single runs, reduced and whole\n"
                    "  --profile N   N plan + engine + metrics runs, nothing timed (for callgrind: instructions / N)\n");
    return 1;
  }
  g_autoptr(GError) error = NULL;
  gint64 t0 = g_get_monotonic_time();
  MmSimOptions opt = {.per_device = per_device, .timeline = TRUE, .nodes = nodes, .global_batch = batch}; /* whole programs: their op counts */
  g_autoptr(MmSimulation) sim = mm_simulation_new(argv[1], argv[2], argv[3], &opt, &error);
  if (!sim) {
    fprintf(stderr, "bench: %s\n", error->message);
    return 1;
  }
  if (per_device || once) {
    double wall = (double)(g_get_monotonic_time() - t0) / 1e6;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("wall_s=%.4f peak_rss_mb=%.1f devices=%" G_GINT64_FORMAT " events=%" G_GUINT64_FORMAT
           " iteration_s=%.9g\n",
           wall, (double)ru.ru_maxrss / 1024.0, sim->scenario->devices, sim->metrics.events,
           sim->metrics.iteration_time_s);
    return 0;
  }
  double sink = 0;
  if (profile > 0) {
    for (int64_t i = 0; i < profile; i++) sink += one_replan(sim);
    printf("runs=%" G_GINT64_FORMAT " checksum %.6g\n", profile, sink);
    return 0;
  }
  if (single) {
    double lo, hi, wlo, whi;
    const double t = median7(sim, one_sim, &sink, &lo, &hi), w = median7(sim, one_whole, &sink, &wlo, &whi);
    g_autoptr(MmSimulation) x = mm_simulation_new_point(sim->inputs, &sim->point, FALSE, &error);
    if (!x) die(error);
    uint32_t ops = 0;
    for (uint32_t p = 0; p < sim->plan->n_programs; p++) ops += sim->plan->programs[p].n_ops;
    printf("sim_s=%.4f whole_s=%.4f steady_micro=%u micro=%" G_GINT64_FORMAT " programs=%u ops=%u events=%" G_GUINT64_FORMAT
           " (min %.4f, max %.4f; whole min %.4f, max %.4f; checksum %.6g)\n",
           t, w, x->steady_micro_steps, sim->scenario->micro_steps, sim->plan->n_programs, ops, sim->metrics.events, lo,
           hi, wlo, whi, sink);
    return 0;
  }
  bench_files = (const char *const *)argv + 1;
  bench_nodes = nodes;
  bench_batch = batch;
  double lo, hi, plo, phi, llo, lhi;
  const double sims = rate(sim, one_replan, &sink, &lo, &hi);
  const double points = rate(sim, one_sim, &sink, &plo, &phi);
  const double loads = rate(sim, one_load, &sink, &llo, &lhi);
  printf("sims_per_s=%.0f us_per_sim=%.2f points_per_s=%.0f us_per_point=%.2f loads_per_s=%.0f us_per_load=%.2f ops=%u "
         "events=%" G_GUINT64_FORMAT " (plan+engine min %.0f, max %.0f; point min %.0f, max %.0f; with loading min %.0f, "
         "max %.0f; checksum %.6g)\n",
         sims, 1e6 / sims, points, 1e6 / points, loads, 1e6 / loads, sim->plan->programs[0].n_ops, sim->metrics.events,
         lo, hi, plo, phi, llo, lhi, sink);
  return 0;
}
