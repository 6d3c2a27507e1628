/* dtype: element types and the enum name tables every config file shares. */
#include "config.h"

const char *const mm_dtype_names[] = {"fp32", "tf32", "fp16", "bf16", "fp8", "int8", NULL};

double mm_dtype_bytes(MmDtype d)
{
  static const double bytes[MM_DTYPE_COUNT] = {4, 4, 2, 2, 1, 1};
  g_return_val_if_fail(d < MM_DTYPE_COUNT, 0);
  return bytes[d];
}

const char *mm_dtype_name(MmDtype d)
{
  g_return_val_if_fail(d < MM_DTYPE_COUNT, "?");
  return mm_dtype_names[d];
}

const char *const mm_block_kind_names[] = {"embedding_bag", "mlp", "interaction", "transformer",
                                           "token_embedding", "lm_head", NULL};
const char *const mm_provenance_names[] = {"datasheet", "paper", "measurement", "calibration",
                                           "estimate", NULL};
const char *const mm_topology_names[] = {"switch", "full_mesh", "ring", "fat_tree", "rail",
                                         "torus2d", "torus3d", NULL};
const char *const mm_task_names[] = {"pretrain", "finetune", "inference", NULL};
const char *const mm_strategy_names[] = {"fsdp", "tp", "ddp", "mp", "pp", "sp", "ep", "cp", NULL};
const char *const mm_shard_names[] = {"table", "row", "column", NULL};
const char *const mm_optimizer_names[] = {"adam", "sgd", "adagrad", "rowwise_adagrad", NULL};
const char *const mm_recompute_names[] = {"none", "full", NULL};

/* Schema enums are parsed through int slots; make sure enums are int-sized. */
G_STATIC_ASSERT(sizeof(MmDtype) == sizeof(int));
G_STATIC_ASSERT(sizeof(MmBlockKind) == sizeof(int));
G_STATIC_ASSERT(sizeof(MmTopology) == sizeof(int));
