/* dtype: element types and the enum name tables every config file shares. */
#include <string.h>

#include "config.h"

const char *const mm_dtype_names[] = {"fp32", "tf32", "fp16", "bf16", "fp8", "int8", NULL};

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
const char *const mm_strategy_names[] = {"fsdp", "tp", "ddp", "mp", "pp", "sp", "ep", "cp", "ulysses", NULL};
const char *const mm_shard_names[] = {"table", "row", "column", NULL};
const char *const mm_optimizer_names[] = {"adam", "sgd", "adagrad", "rowwise_adagrad", "lamb", "adafactor", NULL};
const char *const mm_offload_names[] = {"none", "cpu", NULL};
const char *const mm_recompute_names[] = {"none", "full", "selective", "op_selective", NULL};
const char *const mm_recompute_method_names[] = {"uniform", "block", "every", NULL};
const char *const mm_fp8_recipe_names[] = {"delayed", "tensorwise", "rowwise", "blockwise", "mxfp8", "all", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_fp8_recipe_names) == MM_FP8_COUNT + 1);
const char *const mm_pipe_schedule_names[] = {"gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "dualpipev", NULL};
const char *const mm_cp_impl_names[] = {"ring", "all_gather", NULL};
const char *const mm_moe_dispatch_names[] = {"per_expert", "per_node", NULL};
const char *const mm_grad_accum_names[] = {"fused", "separate", NULL};
const char *const mm_fsdp_coll_names[] = {"flat", "per_tensor_list", NULL};
const char *const mm_coll_names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p",
                                     "broadcast",  "permute",    NULL};
const char *const mm_algorithm_names[] = {"auto", "ring", "tree", "direct", "two_phase", "halving_doubling",
                                          "hierarchical", "in_network", "pairwise", "one_shot", "host", NULL};
const char *const mm_grad_sync_names[] = {"dense", "sparse", "host", "auto", NULL};
const char *const mm_kernel_kind_names[] = {"gemm", "gemv", "attention", "interaction", "elementwise", "lookup",
                                            NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_kernel_kind_names) == MM_KERNEL_KIND_COUNT + 1);
const char *const mm_kernel_pass_names[] = {"fwd", "bwd", NULL};
const char *const mm_attn_kernel_names[] = {"default", "fa2", "fa3", "cudnn", NULL};
const char *const mm_cross_entropy_names[] = {"fp32", "inplace", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_attn_kernel_names) == MM_ATTN_KERNEL_COUNT + 1);
G_STATIC_ASSERT(G_N_ELEMENTS(mm_coll_names) == MM_COLL_COUNT + 1);
G_STATIC_ASSERT(G_N_ELEMENTS(mm_algorithm_names) == MM_ALGO_COUNT + 1);

/* Schema enums are parsed through int slots; make sure enums are int-sized. */
G_STATIC_ASSERT(sizeof(MmDtype) == sizeof(int));
G_STATIC_ASSERT(sizeof(MmBlockKind) == sizeof(int));
G_STATIC_ASSERT(sizeof(MmTopology) == sizeof(int));
G_STATIC_ASSERT(sizeof(MmAlgorithm) == sizeof(int));

int mm_name_index(const char *const *names, const char *name)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}
