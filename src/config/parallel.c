/* parallel: task + parallelism files (configs/) -> MmParallelConfig (loading only; plan/scenario.c resolves it). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "json.h"

#define CFG(f) ((gssize)offsetof(MmParallelConfig, f))
#define BIG MM_INT_MAX

static const MmField config_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, CFG(name), NULL, "display name"},
  {"task", MM_F_ENUM, TRUE, 0, 0, 0, mm_task_names, CFG(task), NULL,
   "pretrain: forward + backward + optimizer; finetune: frozen blocks skip weight gradients; inference: forward only"},
  {"global_batch", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(global_batch), "samples",
   "samples (sequences for LLMs) per iteration; give this or global_batch_tokens"},
  {"global_batch_tokens", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(global_batch_tokens), "tokens",
   "tokens per iteration; samples = tokens / the model's seq_len"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 26, 0, NULL, CFG(seq_len), "tokens",
   "train or serve at this sequence length instead of the model's (every sequence block; e.g. a "
   "long-context stage)"},
  {"micro_batch", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(micro_batch), "samples",
   "samples per data-parallel rank of the main dense block per micro-step (default: the whole "
   "local batch, no gradient accumulation)"},
  {"precision", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "dtype policy: {\"grads\": dtype, \"compute\": dtype}; grads default to each block's dtype, "
   "compute overrides every block's compute_dtype"},
  {"optimizer", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "optimizer of dense parameters (default adam, fp32 states, fp32 master weights)"},
  {"sparse_optimizer", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "optimizer of embedding_bag tables (default rowwise_adagrad, fp32 state)"},
  {"recompute", MM_F_ENUM, FALSE, 0, 0, MM_RECOMPUTE_NONE, mm_recompute_names, CFG(recompute), NULL,
   "activation recomputation: none keeps every activation; full keeps only layer inputs and "
   "recomputes the forward pass during backward; selective (Korthikanti et al. 2022) drops and "
   "recomputes only the attention core (its s x s scores; little with flash attention); op_selective is "
   "torchtitan's per-op selective checkpointing (activation_checkpoint.selective_ac_option \"op\"): each "
   "transformer layer keeps its input and the outputs of every other matmul (the 1st, 3rd, ...), of attention and "
   "of reduce-scatters and all-to-alls, and recomputes the rest (norms, activations, the other matmuls and their "
   "all-reduces and all-gathers) before its backward"},
  {"recompute_method", MM_F_ENUM, FALSE, 0, 0, MM_RECOMPUTE_UNIFORM, mm_recompute_method_names, CFG(recompute_method),
   NULL,
   "full recompute with recompute_num_layers N (Megatron-LM --recompute-method): uniform checkpoints the input of "
   "every group of N layers and recomputes them all (less memory than per layer, the same time); block recomputes "
   "the first N layers of each model chunk and keeps the activations of the rest (less time, more memory); every "
   "checkpoints every N-th layer of a stage whole and keeps the others' activations (torchtitan's layer-level "
   "selective checkpointing, selective_ac_option N; embedding and head never recomputed)"},
  {"recompute_num_layers", MM_F_INT, FALSE, 0, 1000000, 0, NULL, CFG(recompute_num_layers), "layers",
   "full recompute: N of recompute_method (Megatron-LM --recompute-num-layers, torchtitan selective_ac_option); "
   "0: uniform over single layers, or every layer with block and every"},
  {"offload_num_layers", MM_F_INT, FALSE, 0, 1000000, 0, NULL, CFG(offload_num_layers), "layers",
   "activation offload to host (Megatron-Core / Transformer Engine cpu_offloading_num_layers): the activations "
   "the first N transformer or mlp layers of each model chunk keep for backward are copied to host memory "
   "after their forward and back before their backward, over the host link and beside the compute; "
   "0: none. Needs recompute none (Megatron-Core rejects both together) and a training task"},
  {"attention_kernel", MM_F_ENUM, FALSE, 0, 0, MM_ATTN_KERNEL_DEFAULT, mm_attn_kernel_names, CFG(attention_kernel),
   NULL,
   "the flash-attention kernel the run's software calls, which times attention from that kernel's measured points "
   "in the device's attention curve: fa2 (FlashAttention-2: PyTorch SDPA's flash backend, flash-attn 2.x), fa3 "
   "(FlashAttention-3, flash-attn's hopper build), cudnn (cuDNN fused attention: Transformer Engine's "
   "FusedAttention, which it prefers on Hopper, and SDPA's cudnn backend); default: the curve's default_kernel. "
   "A device whose curve has no point of the kernel named times attention with its utilization.gemm scalar, and "
   "one with a calibration fit of attention with that fit (the kernel calibrate measured), whatever the name "
   "(describe says which). Naming a kernel for a model without flash attention is an error"},
  {"cross_entropy", MM_F_ENUM, FALSE, 0, 0, MM_XENT_FP32, mm_cross_entropy_names, CFG(cross_entropy), NULL,
   "what a training run's loss keeps for its backward, per token and vocabulary entry of the TP rank's share: "
   "fp32 (4 bytes: the softmax of the upcast logits; Megatron-LM's native and fused vocab-parallel cross "
   "entropy, torchtitan, Hugging Face), inplace (the logits' dtype: the gradient written over the logits in the "
   "forward; Transformer Engine's parallel_cross_entropy, Megatron-Core's cross_entropy_fusion_impl te, the "
   "default of Megatron-Bridge's performance recipes). Memory only; serving and inference keep nothing"},
  {"frozen", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "finetune: block names or kinds that are not trained"},
  {"fsdp_prefetch", MM_F_INT, FALSE, 0, 16, 1, NULL, CFG(fsdp_prefetch), "units",
   "FSDP: layers whose AllGather is issued ahead of the one computing"},
  {"fsdp_reshard_after_forward", MM_F_BOOL, FALSE, 0, 0, 1, NULL, CFG(fsdp_reshard), NULL,
   "FSDP: free each layer's gathered parameters after its forward and gather them again for its backward, in every "
   "micro-batch (PyTorch FSDP's default); false: gather each layer once per iteration, in its first forward, and "
   "keep it gathered across micro-batches and the backward (FSDP2 reshard_after_forward=False, as torchtitan runs "
   "FSDP with pipeline parallelism): fewer all-gathers, every unsharded layer of the stage held"},
  {"fsdp_collectives", MM_F_ENUM, FALSE, 0, 0, MM_FSDP_COLL_FLAT, mm_fsdp_coll_names, CFG(fsdp_collectives), NULL,
   "FSDP: how its all-gathers and reduce-scatters are called. flat: one per unit over its flattened parameters "
   "(PyTorch FSDP and FSDP2, Megatron's distributed optimizer). per_tensor_list: one per parameter tensor (each "
   "weight, bias and norm), on a list of per-rank views, as DeepSpeed ZeRO-3 of 2021 called them "
   "(partition_parameters.py: _allgather_param, _reduce_scatter_gradient); PyTorch's ProcessGroupNCCL copied a "
   "list output (input) one rank at a time (before all_gather_into_tensor): each tensor's call pays its own "
   "collective latency and the group's degree of copy kernels (launch_overhead_us each) plus the copied bytes at "
   "the device's HBM bandwidth"},
  {"fsdp_persistence_threshold", MM_F_INT, FALSE, 0, BIG, 100000, NULL, CFG(fsdp_persistence_threshold), "elements",
   "FSDP with per_tensor_list collectives: parameter tensors of fewer elements (whole, before sharding) are held "
   "whole by every device and never all-gathered (DeepSpeed's stage3_param_persistence_threshold, default 1e5); "
   "their gradients are reduce-scattered like the others"},
  {"fsdp_regather_recompute", MM_F_BOOL, FALSE, 0, 0, 0, NULL, CFG(fsdp_regather_recompute), NULL,
   "FSDP with full recompute (and fsdp_reshard_after_forward): a recomputed layer's forward gathers its parameters "
   "and frees them after it, and its backward gathers them again, three gathers per layer and micro-batch "
   "(DeepSpeed ZeRO-3's module hooks, which do not tell a recomputed forward from the first); false: one gather "
   "serves the recompute and the backward (PyTorch FSDP with activation checkpointing inside its units)"},
  {"ddp_bucket_MB", MM_F_NUM, FALSE, 0.001, 1e6, 25, NULL, MM_NO_OFFSET, "MB",
   "DDP: gradient bucket size per AllReduce"},
  {"ddp_overlap", MM_F_BOOL, FALSE, 0, 0, 1, NULL, CFG(ddp_overlap), NULL,
   "DDP: all-reduce each bucket as soon as its gradients exist (PyTorch DDP); false: all "
   "buckets after the backward pass (Megatron-LM before 2023)"},
  {"grad_accumulation", MM_F_ENUM, FALSE, 0, 0, MM_GRAD_ACCUM_FUSED, mm_grad_accum_names, CFG(grad_accum), NULL,
   "how each micro-batch's weight gradients join the gradient buffer (units not under FSDP, which reduce-scatters "
   "them every micro-step). fused: the weight-gradient GEMM accumulates into it (Megatron-Core's "
   "gradient_accumulation_fusion, Transformer Engine), no extra pass; separate: after every micro-batch's backward "
   "an elementwise add per parameter reads the new gradient (the block's dtype) and the buffer and writes the "
   "buffer (precision.grads): e + 2 x grads bytes per local parameter, memory bound (Megatron-LM's DDP hook "
   "main_grad.add_(grad), as it ran in 2021; PyTorch autograd's .grad accumulation)"},
  {"overlap_param_gather", MM_F_BOOL, FALSE, 0, 0, 0, NULL, CFG(overlap_param_gather), NULL,
   "ZeRO-1/2 (Megatron's distributed optimizer): all-gather the updated parameters during the next "
   "iteration's forward pass, each layer's issued while the layer before it computes and waited for by its "
   "first forward (Megatron-LM --overlap-param-gather); false: after the optimizer step, exposed. No effect "
   "without ZeRO"},
  {"collectives", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "force an algorithm per collective kind, e.g. {\"all_reduce\": \"ring\"}; unnamed kinds pick the fastest"},
  {"pipeline", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "pipeline parallelism, the outermost device digit: {\"degree\": stages, \"schedule\", "
   "\"virtual_stages\", \"layers\"}; the parallelism levels then split one stage's devices"},
  {"expert_skew", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, CFG(expert_skew), NULL,
   "expert parallelism: routing imbalance; the busiest ep rank receives (1 + skew) x the mean "
   "tokens, the others share the rest (0: even)"},
  {"moe_dispatch", MM_F_ENUM, FALSE, 0, 0, MM_MOE_DISPATCH_PER_EXPERT, mm_moe_dispatch_names, CFG(moe_dispatch), NULL,
   "expert parallelism across nodes: how the All2All moves a token's top_k copies. per_expert: each copy to its "
   "expert's GPU (NCCL all-to-all; Megatron-Core's alltoall dispatcher); per_node: once per destination node over "
   "the network, then on to the experts' GPUs over the node's links, and the reverse for the combine (DeepSeek-V3 "
   "Sec. 3.2.2, DeepEP; Megatron-Core's flex dispatcher). With the model's router_groups the nodes a token reaches "
   "are limited (node-limited routing; docs/MODEL.md, \"Expert dispatch\")"},
  {"moe_dispatch_fp8", MM_F_BOOL, FALSE, 0, 0, 0, NULL, CFG(moe_dispatch_fp8), NULL,
   "expert parallelism: the dispatch All2All moves tokens in FP8 (1 x 128 tiles with an fp32 scale: 1 + 4/128 bytes "
   "per element), and so does the gradient sent back to the experts in the backward; the combine and the "
   "dispatch's backward stay in the block's dtype (DeepSeek-V3 Sec. 3.3.4, DeepEP)"},
  {"experts", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "parallel folding (Megatron-Core): {\"ep\", \"etp\"}, the expert layers' own layout over one pipeline stage, "
   "independent of the levels of their block (which then place attention and the dense layers only); the "
   "devices left, stage devices / (ep x etp), are the expert data-parallel degree (docs/MODEL.md, \"Parallel "
   "folding\")"},
  {"inference", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "task inference: {\"prompt_tokens\", \"output_tokens\", \"cuda_graphs\", \"custom_all_reduce\"}: a prefill "
   "of the prompt, then one decode step per generated token with a KV cache (without it: one forward pass "
   "of seq_len tokens)"},
  {"parallelism", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "per block kind, block name or \"default\": a list of levels, innermost first"},
  MM_FIELDS_END,
};

typedef struct {
  int64_t degree;
  int schedule;
  int64_t virtual_stages;
  gboolean overlap_p2p;
} PipelineRaw;

static const MmField pipeline_fields[] = {
  {"degree", MM_F_INT, TRUE, 1, 1 << 20, 1, NULL, (gssize)offsetof(PipelineRaw, degree), "stages",
   "pipeline stages; device index = local + stage x (devices / degree)"},
  {"schedule", MM_F_ENUM, FALSE, 0, 0, MM_PIPE_1F1B, mm_pipe_schedule_names, (gssize)offsetof(PipelineRaw, schedule),
   NULL, "gpipe: all forwards, then all backwards; 1f1b: warm-up forwards, then one forward one backward "
   "(PipeDream-Flush, Megatron); interleaved_1f1b: 1f1b over virtual_stages model chunks per stage; zb_h1: "
   "1f1b with each backward split into its input gradient (B) and its weight gradient (W), stage s deferring s "
   "W passes into the cool-down (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024; docs/MODEL.md, "
   "\"Lowering\"); dualpipev: DeepSeek's DualPipeV, two chunks per stage in a V (stage s holds chunk s and "
   "chunk 2 x degree - 1 - s, so the first stage also computes the loss), eight phases per stage with part "
   "of the backwards split into B and W (deepseek-ai/DualPipe, dualpipev.py); at least 2 x degree "
   "micro-batches"},
  {"virtual_stages", MM_F_INT, FALSE, 1, 1024, 1, NULL, (gssize)offsetof(PipelineRaw, virtual_stages), "chunks",
   "model chunks per stage (interleaved_1f1b); chunk c of stage s holds the (c x degree + s)-th slice of layers. "
   "dualpipev: 2 (its V of chunks), the default"},
  {"overlap_p2p", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(PipelineRaw, overlap_p2p), NULL,
   "false: a stage waits for its sends and receives before computing on (Megatron-LM and DeepSpeed "
   "exchange synchronously); true: transfers overlap the next micro-batch's compute"},
  {"layers", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "layers",
   "layers per chunk in model order (degree x virtual_stages integers >= 1 summing to the model's "
   "transformer and mlp layers); default: as even as possible. Blocks before the first layer join "
   "the first chunk, the others the chunk of the layer before them"},
  MM_FIELDS_END,
};

typedef struct {
  int64_t ep, etp;
} ExpertsRaw;

static const MmField experts_fields[] = {
  {"ep", MM_F_INT, TRUE, 1, 1 << 24, 1, NULL, (gssize)offsetof(ExpertsRaw, ep), "devices",
   "expert parallelism (Megatron-Core expert_model_parallel_size): each rank of the group holds experts / ep "
   "whole experts; tokens dispatched and combined by All2All over it"},
  {"etp", MM_F_INT, FALSE, 1, 1 << 24, 0, NULL, (gssize)offsetof(ExpertsRaw, etp), "devices",
   "expert tensor parallelism (expert_tensor_parallel_size): each expert's GEMMs split over the group as "
   "Megatron's TP splits an FFN (tokens all-gathered before, reduce-scattered after); default: the block's tp degree"},
  MM_FIELDS_END,
};

static const MmField serving_fields[] = {
  {"prompt_tokens", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, (gssize)offsetof(MmServing, prompt_tokens), "tokens",
   "prompt length per sequence (the prefill)"},
  {"output_tokens", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, (gssize)offsetof(MmServing, output_tokens), "tokens",
   "tokens generated per sequence; the first comes from the prefill, each other from one decode step"},
  {"cuda_graphs", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmServing, cuda_graphs), NULL,
   "decode steps replayed from a captured CUDA/HIP graph, as vLLM, SGLang and TensorRT-LLM do by default: each "
   "kernel costs the device's graph_launch_overhead_us instead of launch_overhead_us; the prefill runs eagerly. "
   "false: an eager framework"},
  {"custom_all_reduce", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmServing, custom_all_reduce), NULL,
   "all-reduces inside a node may use the serving engines' one-shot kernel (algorithm one_shot) where it beats "
   "NCCL's choice, as vLLM, SGLang and TensorRT-LLM do by default for small messages. false: NCCL only"},
  MM_FIELDS_END,
};

typedef struct {
  int grads, compute, fp8_recipe;
  gboolean fp8_param_gather;
} PrecisionRaw;

static const MmField precision_fields[] = {
  {"grads", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, (gssize)offsetof(PrecisionRaw, grads), NULL,
   "gradient dtype (default: each block's dtype)"},
  {"compute", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, (gssize)offsetof(PrecisionRaw, compute), NULL,
   "compute dtype of every block (default: each block's compute_dtype)"},
  {"fp8_recipe", MM_F_ENUM, FALSE, 0, 0, MM_FP8_DELAYED, mm_fp8_recipe_names, (gssize)offsetof(PrecisionRaw, fp8_recipe),
   NULL,
   "training blocks that compute in fp8: the linear layers' GEMMs (forward, input and weight gradients) run in FP8, "
   "attention and elementwise kernels in bf16, and each recipe adds its casts (docs/MODEL.md, \"FP8 recipes\"): "
   "delayed (Transformer Engine's default DelayedScaling: one fused cast+transpose per operand, FP8 weights and "
   "their transposes cached for the iteration), tensorwise (current scaling: an amax pass before every cast, "
   "weights cast every micro-batch), rowwise (torchao: per-row scales, transposed operands cast again along the "
   "other axis), blockwise (1x128 and 128x128 blocks, DeepSeek-V3), mxfp8 (Blackwell, 1x32 blocks; casts as "
   "rowwise); all: every kernel at the FP8 peak without casts (an upper bound)"},
  {"fp8_param_gather", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(PrecisionRaw, fp8_param_gather), NULL,
   "FSDP and ZeRO parameter all-gathers carry the weights of the FP8 GEMMs in FP8, 1 byte per element (torchao's "
   "enable_fsdp_float8_all_gather with precompute_float8_dynamic_scale_for_fsdp, Megatron-Core's --fp8-param-gather): "
   "half a bf16 gather's bytes and gathered buffers; each shard is cast before its gather, so the cast of the whole "
   "weight before a forward GEMM becomes a cast of the shard, and the input-gradient GEMM's transposed weight a "
   "transpose of the gathered FP8 weight (read 1, write 1 byte per element; docs/MODEL.md, \"FP8 recipes\"). Needs "
   "fp8_recipe tensorwise or delayed, and fsdp_collectives flat where a block is FSDP-sharded; no effect where "
   "nothing gathers parameters"},
  MM_FIELDS_END,
};

static const MmField optimizer_fields[] = {
  {"kind", MM_F_ENUM, TRUE, 0, 0, 0, mm_optimizer_names, (gssize)offsetof(MmOptimizer, kind), NULL,
   "adam: 2 states per parameter; sgd: 0 (1 with momentum); adagrad: 1; rowwise_adagrad: 1 per row; lamb (You et al. "
   "2020): adam's 2, plus the per-layer norms of weights and update in the step; adafactor (Shazeer & Stern 2018): "
   "a factored second moment, a row and a column of each matrix (about 2 / hidden states per parameter), 1 more "
   "with momentum"},
  {"state_dtype", MM_F_ENUM, FALSE, 0, 0, MM_DTYPE_FP32, mm_dtype_names,
   (gssize)offsetof(MmOptimizer, state_dtype), NULL, "dtype of optimizer states"},
  {"master_weights", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmOptimizer, master_weights), NULL,
   "keep an fp32 copy of weights stored in a narrower dtype"},
  {"momentum", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(MmOptimizer, momentum), NULL,
   "sgd and adafactor: one momentum state per parameter"},
  {"offload", MM_F_ENUM, FALSE, 0, 0, MM_OFFLOAD_NONE, mm_offload_names, (gssize)offsetof(MmOptimizer, offload), NULL,
   "`optimizer` only: none (states, master weights and the step on the device) or cpu (DeepSpeed ZeRO-Offload, "
   "Ren et al. 2021): states and master weights in host memory, each rank's gradient shard "
   "copied to the host over the host link as its synchronization ends, the step on the CPU at the node's "
   "host memory bandwidth (`host_mem_GBps`), the updated weights copied back (docs/MODEL.md, \"Optimizer "
   "offload\")"},
  MM_FIELDS_END,
};

typedef struct {
  int strategy;
  int sharding;
  int grad_sync;
  gboolean sequence_parallel;
  int64_t zero;
  int kv_exchange;
  gboolean fsdp;
  int experts;
  int overlap;
  double overlap_min_MiB;
  int64_t overlap_chunks;
} LevelRaw;

const char *const mm_overlap_names[] = {"bulk", "collective_matmul", "async_tp", "userbuffers", "pipelined", "fused",
                                        NULL};

/* Which overlap values a level's strategy takes (a row per strategy; others take only bulk). */
static const struct {
  MmStrategy strategy;
  uint32_t values; /* 1 << MmOverlap */
  const char *allowed;
} overlap_rows[] = {
  {MM_STRAT_TP, (1u << MM_OVERLAP_BULK) | (1u << MM_OVERLAP_COLLECTIVE_MATMUL) | (1u << MM_OVERLAP_ASYNC_TP) |
                    (1u << MM_OVERLAP_USERBUFFERS),
   "bulk, collective_matmul, async_tp or userbuffers"},
  {MM_STRAT_EP, (1u << MM_OVERLAP_BULK) | (1u << MM_OVERLAP_PIPELINED), "bulk or pipelined"},
  {MM_STRAT_MP, (1u << MM_OVERLAP_BULK) | (1u << MM_OVERLAP_FUSED), "bulk or fused"},
};

static const char *const expert_tp_names[] = {"spread", "sharded", NULL};

/* The strategies a level may name: mm_strategy_names without "pp" (pipeline stages are the
 * top-level "pipeline" object), so that the allowed values listed are the accepted ones. */
static const char *const level_strategy_names[] = {"fsdp", "tp", "ddp", "mp", "sp", "ep", "cp", "ulysses", NULL};

static MmStrategy level_strategy(int i)
{
  for (int k = 0; k < MM_STRAT_COUNT; k++)
    if (strcmp(mm_strategy_names[k], level_strategy_names[i]) == 0) return (MmStrategy)k;
  g_assert_not_reached();
}

static const MmField level_fields[] = {
  {"strategy", MM_F_ENUM, TRUE, 0, 0, 0, level_strategy_names, (gssize)offsetof(LevelRaw, strategy), NULL,
   "fsdp (ZeRO-3: shard weights, grads, optimizer; AllGather + ReduceScatter), tp (Megatron tensor "
   "parallel; activation AllReduce), sp (tp with sequence parallelism), ddp (replicate; gradient "
   "AllReduce; ZeRO-1/2 with \"zero\"), mp (embedding tables sharded; All2All), ep (experts sharded "
   "over the group, tokens dispatched by All2All; data parallel for the rest of the block), cp "
   "(context parallel: the sequence split over the group), ulysses (DeepSpeed-Ulysses: the sequence split "
   "over the group, heads split around attention by All2All). Pipeline stages: the top-level \"pipeline\""},
  {"degree", MM_F_CUSTOM, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, "devices",
   "a positive integer, \"node\" (GPUs per node), \"nodes\" (number of nodes) or \"all\" (what "
   "the other levels leave: devices / their product)"},
  {"sharding", MM_F_ENUM, FALSE, 0, 0, MM_SHARD_TABLE, mm_shard_names, (gssize)offsetof(LevelRaw, sharding),
   NULL, "mp only: table-wise, row-wise or column-wise embedding sharding"},
  {"grad_sync", MM_F_ENUM, FALSE, 0, 0, MM_GRAD_SYNC_DENSE, mm_grad_sync_names, (gssize)offsetof(LevelRaw, grad_sync),
   NULL, "ddp levels of embedding blocks: dense AllReduce of the table gradient, sparse (index all-gather, "
   "de-duplication, AllReduce of the touched rows), host (the sparse exchange through host memory, Gloo), or auto"},
  {"sequence_parallel", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(LevelRaw, sequence_parallel), NULL,
   "tp levels: Megatron sequence parallelism (AllReduce -> ReduceScatter + AllGather; norms, dropout "
   "and their activations sharded); strategy \"sp\" is tp with this set. The block's tp degree must divide its "
   "seq_len (Megatron-Core splits each sequence over the TP ranks)"},
  {"experts", MM_F_ENUM, FALSE, 0, 0, 0, expert_tp_names, (gssize)offsetof(LevelRaw, experts), NULL,
   "tp levels of MoE blocks without an ep level: spread (MAD-Max: each rank holds experts / degree whole "
   "experts; tokens dispatched and combined by All2All) or sharded (Megatron expert-TP, vLLM, SGLang, "
   "TensorRT-LLM: each rank holds a slice of every expert; an AllReduce after the experts, as a dense FFN)"},
  {"zero", MM_F_INT, FALSE, 0, 2, 0, NULL, (gssize)offsetof(LevelRaw, zero), NULL,
   "ddp levels: ZeRO stage; 1 shards optimizer states (AllReduce, then AllGather of updated weights), "
   "2 also gradients (ReduceScatter instead of AllReduce); stage 3 is strategy fsdp"},
  {"kv_exchange", MM_F_ENUM, FALSE, 0, 0, MM_CP_RING, mm_cp_impl_names, (gssize)offsetof(LevelRaw, kv_exchange),
   NULL, "cp levels: ring (ring attention: K/V chunks passed around the group, overlapped with attention "
   "blocks) or all_gather (K/V gathered before attention, as Llama 3)"},
  {"fsdp", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(LevelRaw, fsdp), NULL,
   "cp levels: FSDP shards the block's weights, gradients and optimizer states over these ranks too, as "
   "torchtitan does (FSDP over its dp_shard x cp mesh): all-gathers and reduce-scatters span the fsdp and cp "
   "ranks together, and no gradient all-reduce runs over cp; without an fsdp level the cp ranks alone shard "
   "them (torchtitan's FSDP 1, CP 8). false: cp ranks hold replicas and all-reduce their gradients"},
  {"overlap", MM_F_ENUM, FALSE, 0, 0, MM_OVERLAP_BULK, mm_overlap_names, (gssize)offsetof(LevelRaw, overlap), NULL,
   "how the level's collectives overlap the GEMMs they feed (docs/tp-overlap.md). tp levels with sequence "
   "parallelism: bulk (one collective, then the GEMM), collective_matmul (XLA: AllGather+GEMM and GEMM+ReduceScatter "
   "as a loop of bidirectional collective-permutes and partial GEMMs), async_tp (PyTorch symmetric memory: p-1 "
   "copy-engine peer copies overlapping partial GEMMs), userbuffers (Megatron-LM --tp-comm-overlap / NeMo, "
   "Transformer Engine: ring exchange for AllGather, 4-way pipelined split for ReduceScatter); ep levels: bulk or "
   "pipelined (dispatch All2All, expert GEMMs and combine All2All in overlap_chunks chunks); mp levels: bulk or "
   "fused (the embedding lookup and its All2All as one fused kernel putting slices as they finish)"},
  {"overlap_min_MiB", MM_F_NUM, FALSE, 0, 1e9, 0, NULL, (gssize)offsetof(LevelRaw, overlap_min_MiB), "MiB",
   "tp overlap: AllGathers and ReduceScatters whose full buffer is smaller stay bulk (XLA's "
   "xla_gpu_threshold_for_windowed_einsum_mib)"},
  {"overlap_chunks", MM_F_INT, FALSE, 2, 1024, 4, NULL, (gssize)offsetof(LevelRaw, overlap_chunks), "chunks",
   "ep pipelined and mp fused: pieces the exchange and its compute are split into (Tutel's pipelining degree; "
   "the fused kernel's slices are grouped into this many)"},
  MM_FIELDS_END,
};

void mm_parallel_free(MmParallelConfig *c)
{
  if (!c) return;
  g_free(c->pipeline.layers);
  g_free(c->path);
  g_free(c->name);
  for (guint i = 0; i < c->n_frozen; i++) g_free(c->frozen[i]);
  g_free(c->frozen);
  for (guint i = 0; i < c->n_strategies; i++) g_free(c->strategies[i].key);
  g_free(c->strategies);
  g_free(c);
}

/* "overlap" and its parameters: a value the level's strategy takes; tp overlap needs sequence
 * parallelism (it decomposes the AllGather and ReduceScatter that SP puts around the GEMMs; Megatron-LM's
 * --tp-comm-overlap likewise requires --sequence-parallel). */
static gboolean check_overlap(const MmJsonCtx *ctx, const char *jp, const MmLevel *l, guint64 present, GError **error)
{
#define HAS(key) ((present >> mm_json_field_index(level_fields, key)) & 1)
  g_autofree char *op = g_strdup_printf("%s.overlap", jp);
  const char *allowed = NULL;
  uint32_t values = 1u << MM_OVERLAP_BULK;
  for (guint i = 0; i < G_N_ELEMENTS(overlap_rows); i++)
    if (overlap_rows[i].strategy == l->strategy) values = overlap_rows[i].values, allowed = overlap_rows[i].allowed;
  if (HAS("overlap") && !allowed) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, op, "\"overlap\" applies to tp, ep and mp levels only (this "
                  "is a %s level)", mm_strategy_names[l->strategy]);
    return FALSE;
  }
  if (!(values & (1u << l->overlap))) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, op, "\"%s\" does not apply to %s levels; they take %s",
                  mm_overlap_names[l->overlap], mm_strategy_names[l->strategy], allowed);
    return FALSE;
  }
  const gboolean tp_overlap = l->strategy == MM_STRAT_TP && l->overlap != MM_OVERLAP_BULK;
  if (tp_overlap && !l->sequence_parallel) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, op,
                  "\"%s\" decomposes the AllGather and ReduceScatter of sequence parallelism: use strategy \"sp\" "
                  "or \"sequence_parallel\": true (Megatron-LM's --tp-comm-overlap needs --sequence-parallel too)",
                  mm_overlap_names[l->overlap]);
    return FALSE;
  }
  if (l->overlap == MM_OVERLAP_FUSED && l->sharding == MM_SHARD_ROW) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, op, "\"fused\" fuses the lookup with its All2All: "
                  "row-wise sharding exchanges partial sums by ReduceScatter; use sharding \"table\" or \"column\"");
    return FALSE;
  }
  if (HAS("overlap_min_MiB") && !tp_overlap) {
    g_autofree char *kp = g_strdup_printf("%s.overlap_min_MiB", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, kp, "\"overlap_min_MiB\" applies to tp levels with a "
                  "non-bulk \"overlap\" only");
    return FALSE;
  }
  if (HAS("overlap_chunks") && l->overlap != MM_OVERLAP_PIPELINED && l->overlap != MM_OVERLAP_FUSED) {
    g_autofree char *kp = g_strdup_printf("%s.overlap_chunks", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, kp, "\"overlap_chunks\" applies to ep levels with "
                  "\"overlap\": \"pipelined\" and mp levels with \"overlap\": \"fused\" only");
    return FALSE;
  }
#undef HAS
  return TRUE;
}

static gboolean parse_level(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, MmLevel *out,
                            GError **error)
{
  LevelRaw raw = {0};
  guint64 present = 0;
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "a level object {strategy, degree}", error))
    return FALSE;
  g_autofree char *sp = g_strdup_printf("%s.strategy", jp);
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "strategy");
  if (cJSON_IsString(st) && strcmp(st->valuestring, "pp") == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, sp,
                  "pipeline stages are not a level: give the top-level \"pipeline\": {\"degree\": N} (stages "
                  "are the outermost device digit) and list the levels of one stage here");
    return FALSE;
  }
  if (!mm_json_apply(ctx, obj, jp, level_fields, &raw, &present, error)) return FALSE;
  const MmStrategy given = level_strategy(raw.strategy);
  out->strategy = given;
  out->sharding = (MmShardKind)raw.sharding;
  out->grad_sync = (MmGradSync)raw.grad_sync;
  if (((present >> mm_json_field_index(level_fields, "grad_sync")) & 1) && out->strategy != MM_STRAT_DDP) {
    g_autofree char *gp = g_strdup_printf("%s.grad_sync", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, gp, "\"grad_sync\" applies to ddp levels only");
    return FALSE;
  }
  if (out->strategy == MM_STRAT_SP) { /* Megatron's name for tp + sequence parallelism */
    out->strategy = MM_STRAT_TP;
    raw.sequence_parallel = TRUE;
  }
  out->sequence_parallel = raw.sequence_parallel;
  out->experts_sharded = raw.experts == 1;
  out->zero = (int)raw.zero;
  out->cp_impl = (MmCpImpl)raw.kv_exchange;
  out->cp_fsdp = raw.fsdp;
  out->overlap = (MmOverlap)raw.overlap;
  out->overlap_min_bytes = raw.overlap_min_MiB * 1048576.0;
  out->overlap_chunks = raw.overlap_chunks;
  static const struct {
    const char *key;
    MmStrategy only;
  } scoped[] = {{"sequence_parallel", MM_STRAT_TP}, {"experts", MM_STRAT_TP}, {"zero", MM_STRAT_DDP},
                {"kv_exchange", MM_STRAT_CP}, {"fsdp", MM_STRAT_CP}};
  for (guint k = 0; k < G_N_ELEMENTS(scoped); k++) {
    if (((present >> mm_json_field_index(level_fields, scoped[k].key)) & 1) && out->strategy != scoped[k].only &&
        !(scoped[k].only == MM_STRAT_TP && given == MM_STRAT_SP)) {
      g_autofree char *kp = g_strdup_printf("%s.%s", jp, scoped[k].key);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, kp, "\"%s\" applies to %s levels only", scoped[k].key,
                    mm_strategy_names[scoped[k].only]);
      return FALSE;
    }
  }
  if (!check_overlap(ctx, jp, out, present, error)) return FALSE;
  if (((present >> mm_json_field_index(level_fields, "sharding")) & 1) && out->strategy != MM_STRAT_MP) {
    g_autofree char *shp = g_strdup_printf("%s.sharding", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, shp, "\"sharding\" applies to mp levels only");
    return FALSE;
  }
  const cJSON *deg = cJSON_GetObjectItemCaseSensitive(obj, "degree");
  g_autofree char *dp = g_strdup_printf("%s.degree", jp);
  if (cJSON_IsString(deg)) {
    static const char *const names[] = {"node", "nodes", "all", NULL};
    static const MmDegreeSpec specs[] = {MM_DEG_NODE, MM_DEG_NODES, MM_DEG_ALL};
    for (int i = 0; names[i]; i++) {
      if (strcmp(deg->valuestring, names[i]) == 0) {
        out->spec = specs[i];
        out->degree = 0;
        return TRUE;
      }
    }
    g_autofree char *got = mm_json_describe_value(deg);
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, dp,
                  "unknown degree %s; expected a positive integer, \"node\", \"nodes\" or \"all\"", got);
    return FALSE;
  }
  static const MmField deg_field = {"degree", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL,
                                    (gssize)offsetof(MmLevel, degree), NULL, NULL};
  out->spec = MM_DEG_NUMBER;
  return mm_json_apply_field(ctx, &deg_field, deg, dp, out, error);
}

static gboolean parse_parallelism(const MmJsonCtx *ctx, const cJSON *obj, MmParallelConfig *c,
                                  GError **error)
{
  int n = cJSON_GetArraySize(obj);
  if (n == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, "$.parallelism",
                  "expected at least one entry (e.g. \"default\": [{\"strategy\": \"fsdp\", \"degree\": \"all\"}])");
    return FALSE;
  }
  c->strategies = g_new0(MmStrategyEntry, (gsize)n);
  for (const cJSON *it = obj->child; it; it = it->next) {
    MmStrategyEntry *e = &c->strategies[c->n_strategies++];
    e->key = g_strdup(it->string);
    g_autofree char *jp = g_strdup_printf("$.parallelism.%s", it->string);
    for (guint j = 0; j + 1 < c->n_strategies; j++) {
      if (strcmp(c->strategies[j].key, e->key) == 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "key appears twice");
        return FALSE;
      }
    }
    if (!mm_json_expect(ctx, it, jp, cJSON_Array, "a list of levels, innermost first", error)) return FALSE;
    int nl = cJSON_GetArraySize(it);
    if (nl == 0 || nl > MM_MAX_LEVELS) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jp, "expected 1 to %d levels, got %d", MM_MAX_LEVELS, nl);
      return FALSE;
    }
    guint all = 0;
    for (const cJSON *lv = it->child; lv; lv = lv->next) {
      g_autofree char *lp = g_strdup_printf("%s[%u]", jp, e->n_levels);
      MmLevel *l = &e->levels[e->n_levels++];
      if (!parse_level(ctx, lv, lp, l, error)) return FALSE;
      if (l->spec == MM_DEG_ALL && ++all > 1) {
        g_autofree char *dp = g_strdup_printf("%s.degree", lp);
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                      "only one level per list may use \"all\" (it takes what the others leave)");
        return FALSE;
      }
    }
  }
  return TRUE;
}

static gboolean parse_pipeline(const MmJsonCtx *ctx, const cJSON *obj, MmParallelConfig *c, GError **error)
{
  MmPipeline *p = &c->pipeline;
  p->degree = 1;
  p->schedule = MM_PIPE_1F1B;
  p->virtual_stages = 1;
  if (!obj) return TRUE;
  PipelineRaw raw = {0};
  guint64 present = 0;
  if (!mm_json_apply(ctx, obj, "$.pipeline", pipeline_fields, &raw, &present, error)) return FALSE;
  p->degree = raw.degree;
  p->schedule = (MmPipeSchedule)raw.schedule;
  p->virtual_stages = raw.virtual_stages;
  p->overlap_p2p = raw.overlap_p2p;
  if (p->schedule == MM_PIPE_DUALPIPEV) {
    if (p->virtual_stages != 1 && p->virtual_stages != 2) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.virtual_stages",
                    "dualpipev holds two chunks per stage; expected 2 (or no virtual_stages), got %" G_GINT64_FORMAT,
                    p->virtual_stages);
      return FALSE;
    }
    p->virtual_stages = mm_pipe_schedule_vstages(p->schedule, p->degree, 0); /* one stage: no V, no chunks */
  } else if (p->virtual_stages > 1 && p->schedule != MM_PIPE_INTERLEAVED) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.virtual_stages",
                  "virtual stages need \"schedule\": \"interleaved_1f1b\" (schedule is \"%s\")",
                  mm_pipe_schedule_names[p->schedule]);
    return FALSE;
  }
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(obj, "layers");
  if (layers) {
    int n = cJSON_GetArraySize(layers);
    if (n != (int)(p->degree * p->virtual_stages)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.layers",
                    "expected %" G_GINT64_FORMAT " entries (degree x virtual_stages), got %d",
                    p->degree * p->virtual_stages, n);
      return FALSE;
    }
    p->layers = g_new0(int64_t, (gsize)n + 1);
    static const MmField lf = {"layers", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, 0, NULL, NULL};
    for (const cJSON *it = layers->child; it; it = it->next) {
      g_autofree char *jp = g_strdup_printf("$.pipeline.layers[%u]", p->n_layers);
      if (!mm_json_apply_field(ctx, &lf, it, jp, &p->layers[p->n_layers], error)) return FALSE;
      p->n_layers++;
    }
  }
  return TRUE;
}

static void default_optimizer(MmOptimizer *o, MmOptimizerKind kind)
{
  memset(o, 0, sizeof *o);
  o->kind = kind;
  o->state_dtype = MM_DTYPE_FP32;
  o->master_weights = TRUE;
}

static MmParallelConfig *config_from_json(const char *path, const cJSON *root, GError **error)
{
  MmJsonCtx ctx = {path};
  g_autoptr(MmParallelConfig) c = g_new0(MmParallelConfig, 1);
  c->path = g_strdup(path);
  guint64 present = 0;
  if (!mm_json_apply(&ctx, root, "$", config_fields, c, &present, error)) return NULL;
#define GIVEN(key) ((present >> mm_json_field_index(config_fields, key)) & 1)
  if (GIVEN("global_batch") == GIVEN("global_batch_tokens")) {
    mm_json_error(error, GIVEN("global_batch") ? MM_CONFIG_ERROR_INCONSISTENT : MM_CONFIG_ERROR_MISSING_KEY,
                  &ctx, "$", "give exactly one of \"global_batch\" (samples) and \"global_batch_tokens\"");
    return NULL;
  }
  if ((GIVEN("recompute_method") || GIVEN("recompute_num_layers")) && c->recompute != MM_RECOMPUTE_FULL) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx,
                  GIVEN("recompute_method") ? "$.recompute_method" : "$.recompute_num_layers",
                  "applies to \"recompute\": \"full\" (recompute is \"%s\")", mm_recompute_names[c->recompute]);
    return NULL;
  }
  if (c->offload_num_layers > 0 && (c->recompute != MM_RECOMPUTE_NONE || c->task == MM_TASK_INFERENCE)) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.offload_num_layers",
                  "needs a training task and \"recompute\": \"none\" (task is \"%s\", recompute \"%s\"; "
                  "Megatron-Core rejects cpu_offloading with recomputation)",
                  mm_task_names[c->task], mm_recompute_names[c->recompute]);
    return NULL;
  }
  const cJSON *bucket = cJSON_GetObjectItemCaseSensitive(root, "ddp_bucket_MB");
  c->ddp_bucket_bytes = (bucket ? bucket->valuedouble : 25.0) * 1e6;

  PrecisionRaw prec = {-1, -1, MM_FP8_DELAYED, FALSE};
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "precision");
  if (p && !mm_json_apply(&ctx, p, "$.precision", precision_fields, &prec, NULL, error)) return NULL;
  c->grads_set = prec.grads >= 0;
  c->grad_dtype = c->grads_set ? (MmDtype)prec.grads : MM_DTYPE_FP32;
  c->compute_set = prec.compute >= 0;
  c->compute_dtype = c->compute_set ? (MmDtype)prec.compute : MM_DTYPE_FP32;
  c->fp8_recipe = (MmFp8Recipe)prec.fp8_recipe;
  c->fp8_param_gather = prec.fp8_param_gather;
  if (c->fp8_param_gather && c->fp8_recipe != MM_FP8_TENSORWISE && c->fp8_recipe != MM_FP8_DELAYED) {
    /* torchao gathers float8 for tensorwise scaling only; Megatron-Core's fp8 parameters are delayed or current */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.precision.fp8_param_gather",
                  "expected false with fp8_recipe \"%s\": FP8 parameter all-gathers need fp8_recipe \"tensorwise\" "
                  "or \"delayed\"", mm_fp8_recipe_names[c->fp8_recipe]);
    return NULL;
  }

  default_optimizer(&c->optimizer, MM_OPT_ADAM);
  default_optimizer(&c->sparse_optimizer, MM_OPT_ROWWISE_ADAGRAD);
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
  if (o && !mm_json_apply(&ctx, o, "$.optimizer", optimizer_fields, &c->optimizer, NULL, error)) return NULL;
  o = cJSON_GetObjectItemCaseSensitive(root, "sparse_optimizer");
  if (o && !mm_json_apply(&ctx, o, "$.sparse_optimizer", optimizer_fields, &c->sparse_optimizer, NULL, error))
    return NULL;
  if (c->sparse_optimizer.offload != MM_OFFLOAD_NONE) {
    /* embedding tables update in place inside their fused backward (FBGEMM TBE) */
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.sparse_optimizer.offload",
                  "expected \"none\": embedding tables update in place in their fused backward; offload applies "
                  "to \"optimizer\" (dense parameters)");
    return NULL;
  }
  if (c->optimizer.momentum && c->optimizer.kind != MM_OPT_SGD && c->optimizer.kind != MM_OPT_ADAFACTOR) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.optimizer.momentum",
                  "momentum applies to sgd and adafactor only");
    return NULL;
  }

  const cJSON *frozen = cJSON_GetObjectItemCaseSensitive(root, "frozen");
  if (frozen) {
    if (c->task != MM_TASK_FINETUNE) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.frozen",
                    "\"frozen\" applies to task \"finetune\" only (task is \"%s\")", mm_task_names[c->task]);
      return NULL;
    }
    int n = cJSON_GetArraySize(frozen);
    c->frozen = g_new0(char *, (gsize)n + 1);
    int i = 0;
    for (const cJSON *it = frozen->child; it; it = it->next, i++) {
      g_autofree char *jp = g_strdup_printf("$.frozen[%d]", i);
      if (!mm_json_expect(&ctx, it, jp, cJSON_String, "a block name or kind", error)) return NULL;
      c->frozen[c->n_frozen++] = g_strdup(it->valuestring);
    }
  }
  if (c->task == MM_TASK_FINETUNE && c->n_frozen == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$",
                  "task \"finetune\" needs \"frozen\": the blocks (names or kinds) that are not trained");
    return NULL;
  }
  const cJSON *colls = cJSON_GetObjectItemCaseSensitive(root, "collectives");
  if (colls) {
    MmField cf[MM_COLL_COUNT + 1];
    for (int k = 0; k < MM_COLL_COUNT; k++)
      cf[k] = (MmField){mm_coll_names[k], MM_F_ENUM, FALSE, 0, 0, MM_ALGO_AUTO, mm_algorithm_names,
                        (gssize)(k * (int)sizeof(MmAlgorithm)), NULL, NULL};
    cf[MM_COLL_COUNT] = (MmField)MM_FIELDS_END;
    if (!mm_json_apply(&ctx, colls, "$.collectives", cf, c->algorithm, NULL, error)) return NULL;
  }
  if (!parse_parallelism(&ctx, cJSON_GetObjectItemCaseSensitive(root, "parallelism"), c, error)) return NULL;
  if (!parse_pipeline(&ctx, cJSON_GetObjectItemCaseSensitive(root, "pipeline"), c, error)) return NULL;
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(root, "experts");
  if (ex) {
    ExpertsRaw er = {0, 0};
    if (!mm_json_apply(&ctx, ex, "$.experts", experts_fields, &er, NULL, error)) return NULL;
    c->experts_ep = er.ep;
    c->experts_etp = er.etp;
  }
  const cJSON *inf = cJSON_GetObjectItemCaseSensitive(root, "inference");
  if (inf) {
    if (c->task != MM_TASK_INFERENCE) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.inference",
                    "\"inference\" applies to task \"inference\" only (task is \"%s\")", mm_task_names[c->task]);
      return NULL;
    }
    if (!mm_json_apply(&ctx, inf, "$.inference", serving_fields, &c->serving, NULL, error)) return NULL;
    c->serving.present = TRUE;
  }
#undef GIVEN
  return g_steal_pointer(&c);
}

MmParallelConfig *mm_parallel_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  return root ? config_from_json(path, root, error) : NULL;
}

MmParallelConfig *mm_parallel_parse(const char *path, const char *text, gsize len, GError **error)
{
  g_autoptr(cJSON) root = mm_json_parse_text(path, text, len, error);
  return root ? config_from_json(path, root, error) : NULL;
}

const MmStrategyEntry *mm_parallel_strategy_for(const MmParallelConfig *c, const MmBlock *b)
{
  const MmStrategyEntry *by_kind = NULL, *by_default = NULL;
  for (guint i = 0; i < c->n_strategies; i++) {
    const MmStrategyEntry *e = &c->strategies[i];
    if (strcmp(e->key, b->name) == 0) return e;
    if (strcmp(e->key, mm_block_kind_names[b->kind]) == 0) by_kind = e;
    if (strcmp(e->key, "default") == 0) by_default = e;
  }
  return by_kind ? by_kind : by_default;
}

void mm_parallel_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Parallelism + task file (`configs/*.json`)",
                       "What to run and how to split it. The same file serves every system size "
                       "when degrees are written as \"node\", \"nodes\" or \"all\".",
                       config_fields);
  mm_json_write_schema(out, "`precision`", "", precision_fields);
  mm_json_write_schema(out, "`optimizer` / `sparse_optimizer`",
                       "Bytes per trained parameter: adam and lamb 2 x state, sgd 0 (+1 state with "
                       "momentum), adagrad 1 x state, rowwise_adagrad 1 state per row, adafactor 2 / hidden x state "
                       "(+1 with momentum); plus 4 "
                       "(fp32 master copy) when master_weights and the weights are narrower than fp32.",
                       optimizer_fields);
  mm_json_write_schema(out, "`pipeline`",
                       "Pipeline stages are the outermost digit of the device index; the "
                       "parallelism levels' degrees multiply to the devices of one stage.",
                       pipeline_fields);
  mm_json_write_schema(out, "`experts` (parallel folding)",
                       "The expert layers of every transformer block with experts take this layout instead of "
                       "their block's levels: ETP innermost, then EP, then EDP = stage devices / (ep x etp) "
                       "(Megatron-Core's expert RankGenerator). Expert gradients are averaged over EDP (ZeRO as "
                       "the block's ddp levels); the block's levels place attention and the dense layers.",
                       experts_fields);
  mm_json_write_schema(out, "`inference` (serving)",
                       "A prefill of the prompt, then decode steps at the mean context (prompt + "
                       "output / 2). By default the decode step runs as vLLM, SGLang and TensorRT-LLM "
                       "run it (cuda_graphs, custom_all_reduce); with both false, as an eager "
                       "framework on NCCL (FasterTransformer 2022) would.",
                       serving_fields);
  mm_json_write_schema(out, "`parallelism.<key>[i]` (one level)",
                       "Keys of `parallelism`: a block kind, a block name, or `default`; a block "
                       "uses its name's entry, else its kind's, else `default`. Levels are listed "
                       "innermost first: [tp node, fsdp all] is MAD-Max's ((TP),(FSDP)). The "
                       "degrees must multiply to the number of devices.",
                       level_fields);
}
