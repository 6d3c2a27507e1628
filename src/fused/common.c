/* common: what the fused-kernel and decomposed-overlap models share: a device's resources
 * and a growing engine program. */
#include <string.h>

#include "fused.h"

G_DEFINE_QUARK(mm-fused-error-quark, mm_fused_error)

void mm_fused_res_init(const MmHardware *hw, MmFusedRes *r)
{
  memset(r, 0, sizeof *r);
  mm_comm_links(hw, &r->links);
  r->sm = r->links.n;
  r->hbm = r->links.n + 1;
  r->n = r->links.n + 2;
  for (uint32_t i = 0; i < r->links.n; i++) r->cap[i] = r->links.bw_Bps[i] / MM_PS_PER_S;
  r->cap[r->sm] = 1.0;
  r->cap[r->hbm] = hw->device.hbm_bw_Bps * hw->device.util_hbm.value / MM_PS_PER_S;
}

void mm_fused_prog_init(MmFusedProg *p, uint32_t n_streams)
{
  p->ops = g_array_new(FALSE, FALSE, sizeof(MmEngineOp));
  p->deps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->dur = g_array_new(FALSE, FALSE, sizeof(MmTime));
  p->xlink = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->xwork = g_array_new(FALSE, FALSE, sizeof(double));
  p->n_streams = n_streams;
}

void mm_fused_prog_clear(MmFusedProg *p)
{
  g_clear_pointer(&p->ops, g_array_unref);
  g_clear_pointer(&p->deps, g_array_unref);
  g_clear_pointer(&p->dur, g_array_unref);
  g_clear_pointer(&p->xlink, g_array_unref);
  g_clear_pointer(&p->xwork, g_array_unref);
}

uint32_t mm_fused_prog_op(MmFusedProg *p, uint32_t stream, double tail_s, const uint32_t *deps, uint32_t n_deps,
                          const uint32_t *res, const double *work, uint32_t n_work)
{
  g_assert(stream < p->n_streams);
  MmEngineOp op = {.stream = stream, .dep_first = p->deps->len, .n_deps = n_deps, .coll = MM_NO_COLL,
                   .xfer_first = p->xlink->len};
  g_array_append_vals(p->deps, deps, n_deps);
  for (uint32_t i = 0; i < n_work; i++) {
    if (!(work[i] > 0)) continue;
    g_array_append_val(p->xlink, res[i]);
    g_array_append_val(p->xwork, work[i]);
    op.n_xfer++;
  }
  const MmTime tail = mm_time_from_s(tail_s);
  g_array_append_val(p->ops, op);
  g_array_append_val(p->dur, tail);
  return p->ops->len - 1;
}

MmEngineProgram mm_fused_prog_view(const MmFusedProg *p, uint32_t n_resources)
{
  return (MmEngineProgram){(const MmEngineOp *)(void *)p->ops->data, p->ops->len,
                           (const uint32_t *)(void *)p->deps->data, p->n_streams,
                           (const uint32_t *)(void *)p->xlink->data, (const double *)(void *)p->xwork->data,
                           n_resources};
}
