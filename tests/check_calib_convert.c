/* check_calib_convert: vendor benchmark outputs -> calibration rows; every shipped calibration CSV reads. */
#include <glib/gstdio.h>
#include <string.h>

#include "calib/convert.h"
#include "testutil.h"

/* rocblas-bench: the two example runs of AMD's Instinct system validation guide (rocblas-bench
 * FP32 and BF16/FP16 sections), each after the command that produced it, as a user's log holds
 * them. The guide wraps the second values line for the page; here it is one line. */
static const char rocblas_log[] =
  "$ rocblas-bench -f gemm -r s -m 4000 -n 4000 -k 4000 --lda 4000 --ldb 4000 --ldc 4000 --transposeA N "
  "--transposeB T\n"
  "rocBLAS info: maximum library size per device is 0.61866 GB.\n"
  "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\n"
  "N,T,4000,4000,4000,1,4000,0,4000,4000, 97190.6, 1317\n"
  "$ rocblas-bench -f gemm_strided_batched_ex --transposeA N --transposeB T -m 1024 -n 2048 -k 512 --a_type h "
  "--lda 1024 --stride_a 4096 --b_type h --ldb 2048 --stride_b 4096 --c_type s --ldc 1024 --stride_c 2097152 "
  "--d_type s --ldd 1024 --stride_d 2097152 --compute_type s --alpha 1.1 --beta 1 --batch_count 5\n"
  "rocBLAS info: maximum library size per device is 0.61866 GB.\n"
  "transA,transB,M,N,K,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,stride_d,batch_count,rocblas-Gflops,"
  "us\n"
  "N,T,1024,2048,512,1.1,1024,4096,1,2048,4096,1024,2097152,1024,2097152,5,159783, 67.2\n";

/* rocblas-bench output without the command line or a type column (a public rocBLAS-log parser's
 * test fixture, Radeon Pro W7900): the dtype cannot be known. */
static const char rocblas_untyped[] =
  "rocBLAS version: 5.5.0.example\n"
  "Device ID 0 : AMD Radeon Pro W7900 Dual Slot gfx1100\n"
  "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,ldd,batch_count,cold_iters,hot_iters,rocblas-Gflops,us\n"
  "T,N,13824,4547,4608,1,4608,0,4608,13824,13824,1,5,20,68121,8503.93\n";

/* hipblaslt-bench: raw output published with a GEMM-tuning report for an MI350X (hipBLASLt
 * 100200, bf16 N,T 3584x512x2048), then the FP8 example of AMD's MI355X GEMM benchmark how-to
 * (f8_r inputs, bf16_r output, hipBLASLt 100100), then that line again with m = 8 (made up: a GEMV). */
static const char hipblaslt_log[] =
  "hipBLASLt version: 100200\n"
  "hipBLASLt git version: de5c1aebb6-dirty\n"
  "Query device success: there are 1 devices. (Target device ID is 0)\n"
  "Device ID 0 : AMD Instinct MI350X gfx950:sramecc+:xnack-\n"
  "with 270.6 GB memory, max. SCLK 2200 MHz, max. MCLK 1900 MHz, compute capability 9.5\n"
  "maxGridDimX 2147483647, sharedMemPerBlock 163.8 KB, maxThreadsPerBlock 1024, warpSize 64\n"
  "\n"
  "Rotating buffer 640 MiB. Needed Size: 19 MiB. Needed block count: 33 (Capped to max iters: 50)\n"
  "Is supported 1 / Total solutions: 1\n"
  "[0]:transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,"
  "stride_d,a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,swizzle_a,swizzle_b,"
  "activation_type,bias_vector,bias_type,aux_type,rotating_buffer,flush,use_gpu_timer,hipblaslt-Gflops,"
  "hipblaslt-GB/s,us\n"
  "    N,T,0,1,3584,512,2048,1,3584,7340032,0,512,1048576,3584,1835008,3584,1835008,bf16_r,bf16_r,bf16_r,bf16_r,"
  "f32_r,0,0,0,0,0,0,0,none,0,bf16_r,bf16_r,640,1,1,323283,819.066,23.2496\n"
  "    --Solution index: 300119\n"
  "    --Solution name:  Cijk_Ailk_Bjlk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x64x128_MI32x32x1_SN_LDSB0\n"
  "Is supported 1 / Total solutions: 1\n"
  "[0]:transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,"
  "stride_d,a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,activation_type,"
  "bias_vector,bias_type,aux_type,rotating_buffer,hipblaslt-Gflops,hipblaslt-GB/s,us\n"
  "    T,N,0,1,4096,65536,14336,1,14336,58720256,0,14336,939524096,4096,268435456,4096,268435456,f8_r,f8_r,"
  "bf16_r,bf16_r,f32_r,1,1,0,0,0,none,0,f32_r,bf16_r,512,3.2733e+06,608.035,2351.32\n"
  "    T,N,0,1,8,65536,14336,1,14336,58720256,0,14336,939524096,4096,268435456,4096,268435456,f8_r,f8_r,"
  "bf16_r,bf16_r,f32_r,1,1,0,0,0,none,0,f32_r,bf16_r,512,3.2733e+06,608.035,70.5\n";

/* nccl-tests all_reduce_perf over 2 nodes x 8 H100 (one GPU per process: nGpus 1, 16 Rank lines),
 * from the public repository lessizzmore/create-a3mega-ztan-fork, file ztan-NCCL-test-result
 * (rows cut to four, Rank lines to the first two and last). */
static const char nccl_allreduce[] =
  "> mpirun -np 16 -npernode 8 /opt/src/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1\n"
  "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
  "validation: 1 graph: 0\n"
  "#\n"
  "# Using devices\n"
  "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  1 Group  0 Pid   6900 on ztan-mig-235z device  1 [0000:05:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  2 Group  0 Pid   6901 on ztan-mig-235z device  2 [0000:0b:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  3 Group  0 Pid   6902 on ztan-mig-235z device  3 [0000:0c:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  4 Group  0 Pid   6903 on ztan-mig-235z device  4 [0000:84:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  5 Group  0 Pid   6904 on ztan-mig-235z device  5 [0000:85:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  6 Group  0 Pid   6905 on ztan-mig-235z device  6 [0000:8b:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  7 Group  0 Pid   6906 on ztan-mig-235z device  7 [0000:8c:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  8 Group  0 Pid   6733 on ztan-mig-gq73 device  0 [0000:04:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank  9 Group  0 Pid   6734 on ztan-mig-gq73 device  1 [0000:05:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 10 Group  0 Pid   6735 on ztan-mig-gq73 device  2 [0000:0b:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 11 Group  0 Pid   6736 on ztan-mig-gq73 device  3 [0000:0c:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 12 Group  0 Pid   6737 on ztan-mig-gq73 device  4 [0000:84:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 13 Group  0 Pid   6738 on ztan-mig-gq73 device  5 [0000:85:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 14 Group  0 Pid   6739 on ztan-mig-gq73 device  6 [0000:8b:00] NVIDIA H100 80GB HBM3\n"
  "#  Rank 15 Group  0 Pid   6740 on ztan-mig-gq73 device  7 [0000:8c:00] NVIDIA H100 80GB HBM3\n"
  "#\n"
  "#                                                              out-of-place                       in-place\n"
  "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
  "#wrong\n"
  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
  "           8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0\n"
  "     1048576        262144     float     sum      -1    203.2    5.16    9.68      0    207.2    5.06    9.49      0\n"
  "  1073741824     268435456     float     sum      -1   6759.0  158.86  297.86      0   6737.4  159.37  298.82      0\n"
  "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0\n"
  "# Out of bounds values : 0 OK\n"
  "# Avg bus bandwidth    : 70.742\n";

/* nccl-tests alltoall_perf on 8 A100 (one process): microsoft/superbenchmark tests/data/nccl_alltoall.log
 * (rows cut): no root column, an empty redop, "N/A" in #wrong, size-0 rows, a NCCL INFO line; the
 * collective is known from the file name only. */
static const char nccl_alltoall[] =
  "# nThread 1 nGpus 8 minBytes 1 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 validation: 0\n"
  "#\n"
  "# Using devices\n"
  "#   Rank  0 Pid 167261 on localhost device  0 [0x00] A100-SXM4-40GB\n"
  "#   Rank  1 Pid 167261 on localhost device  1 [0x00] A100-SXM4-40GB\n"
  "#   Rank  2 Pid 167261 on localhost device  2 [0x00] A100-SXM4-40GB\n"
  "#   Rank  3 Pid 167261 on localhost device  3 [0x00] A100-SXM4-40GB\n"
  "#   Rank  4 Pid 167261 on localhost device  4 [0x00] A100-SXM4-40GB\n"
  "#   Rank  5 Pid 167261 on localhost device  5 [0x00] A100-SXM4-40GB\n"
  "#   Rank  6 Pid 167261 on localhost device  6 [0x00] A100-SXM4-40GB\n"
  "#   Rank  7 Pid 167261 on localhost device  7 [0x00] A100-SXM4-40GB\n"
  "#\n"
  "#                                                     out-of-place                       in-place\n"
  "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
  "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
  "hostname:3442:3442 [0] NCCL INFO Launch mode Parallel\n"
  "           0             0   float             1.63    0.00    0.00    N/A     1.38    0.00    0.00    N/A\n"
  "           0             0   float             1.35    0.00    0.00    N/A     1.34    0.00    0.00    N/A\n"
  "          32             1   float            89.00    0.00    0.00    N/A    85.13    0.00    0.00    N/A\n"
  "  8589934592     268435456   float            33508  256.36  224.31    N/A    33234  258.47  226.16    N/A\n"
  "# Out of bounds values : 0 OK\n"
  "# Avg bus bandwidth    : 58.6481\n"
  "#\n";

static MmCalibTable *convert_ok(const char *format, const char *name, const char *text)
{
  g_autofree char *path = mm_test_write(name, text);
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_convert(format, path, t, &error), "%s", error ? error->message : "");
  return g_steal_pointer(&t);
}

static const MmCalibRow *row(const MmCalibTable *t, guint i)
{
  ck_assert_uint_lt(i, t->rows->len);
  return t->rows->pdata[i];
}

static void assert_gemm(const MmCalibRow *r, const char *bench, const char *dtype, double m, double n, double k,
                        double batch, double bytes, double seconds)
{
  ck_assert_str_eq(r->bench, bench);
  ck_assert_str_eq(r->kind, bench);
  ck_assert_str_eq(r->dtype, dtype);
  ck_assert_double_eq(r->m, m);
  ck_assert_double_eq(r->n, n);
  ck_assert_double_eq(r->k, k);
  ck_assert_double_eq(r->batch, batch);
  ck_assert_double_eq(r->flops, 2 * m * n * k * batch);
  ck_assert_double_eq(r->bytes, bytes);
  ck_assert_double_eq_tol(r->median_s, seconds, seconds * 1e-12);
  ck_assert(r->min_s == r->median_s && r->max_s == r->median_s);
  ck_assert_int_eq(r->reps, 0);
  ck_assert_str_eq(r->variant, "vendor");
}

START_TEST(test_rocblas)
{
  g_autoptr(MmCalibTable) t = convert_ok("rocblas-bench", "rocblas.log", rocblas_log);
  ck_assert_uint_eq(t->rows->len, 2);
  assert_gemm(row(t, 0), "gemm", "fp32", 4000, 4000, 4000, 1, 4.0 * 3 * 4000 * 4000, 1317e-6);
  /* fp16 inputs, fp32 output (--d_type s), 5 problems */
  assert_gemm(row(t, 1), "gemm", "fp16", 1024, 2048, 512, 5, (2.0 * (1024 * 512 + 512 * 2048) + 4.0 * 1024 * 2048) * 5,
              67.2e-6);
  /* the converted rate is the tool's own: 159783 GFLOP/s */
  ck_assert_double_eq_tol(row(t, 1)->flops / row(t, 1)->median_s / 1e9, 159783, 10);
  ck_assert_str_eq(row(t, 0)->source, "rocblas-bench rocblas.log");
  ck_assert_str_eq(mm_calib_table_meta(t, "source"), "converted from rocblas-bench output rocblas.log");
  ck_assert_str_eq(mm_calib_table_meta(t, "platform"), "rocm");
}
END_TEST

START_TEST(test_hipblaslt)
{
  g_autoptr(MmCalibTable) t = convert_ok("hipblaslt-bench", "hipblaslt.log", hipblaslt_log);
  ck_assert_uint_eq(t->rows->len, 3);
  assert_gemm(row(t, 0), "gemm", "bf16", 3584, 512, 2048, 1, 2.0 * (3584 * 2048 + 2048 * 512) + 2.0 * 3584 * 512,
              23.2496e-6);
  ck_assert_double_eq_tol(row(t, 0)->flops / row(t, 0)->median_s / 1e9, 323283, 30);
  /* fp8 inputs (1 byte), bf16 output (2 bytes) */
  assert_gemm(row(t, 1), "gemm", "fp8", 4096, 65536, 14336, 1,
              1.0 * (4096.0 * 14336 + 14336.0 * 65536) + 2.0 * 4096 * 65536, 2351.32e-6);
  ck_assert_double_eq_tol(row(t, 1)->flops / row(t, 1)->median_s / 1e9, 3.2733e6, 500);
  assert_gemm(row(t, 2), "gemv", "fp8", 8, 65536, 14336, 1, 1.0 * (8.0 * 14336 + 14336.0 * 65536) + 2.0 * 8 * 65536,
              70.5e-6);
  ck_assert_str_eq(mm_calib_table_meta(t, "device"), "AMD Instinct MI350X");
  ck_assert_str_eq(mm_calib_table_meta(t, "arch"), "gfx950");
  ck_assert_str_eq(mm_calib_table_meta(t, "blas"), "hipBLASLt 100200");
}
END_TEST

START_TEST(test_nccl)
{
  g_autoptr(MmCalibTable) t = convert_ok("nccl-tests", "ztan-NCCL-test-result", nccl_allreduce);
  ck_assert_uint_eq(t->rows->len, 8);
  const MmCalibRow *oop = row(t, 0), *ip = row(t, 1), *big = row(t, 6);
  ck_assert_str_eq(oop->bench, "allreduce");
  ck_assert_str_eq(oop->kind, "");
  ck_assert_str_eq(oop->dtype, "fp32");
  ck_assert_double_eq(oop->m, 16); /* 16 Rank lines, nGpus 1 */
  ck_assert_double_eq(oop->bytes, 8);
  ck_assert_double_eq(oop->flops, 0);
  ck_assert_str_eq(oop->variant, "out_of_place");
  ck_assert_double_eq_tol(oop->median_s, 135.8e-6, 1e-15);
  ck_assert_str_eq(ip->variant, "in_place");
  ck_assert_double_eq_tol(ip->median_s, 123.5e-6, 1e-15);
  ck_assert_double_eq(big->bytes, 8589934592.0);
  ck_assert_double_eq_tol(big->median_s, 47535e-6, 1e-12);
  ck_assert_int_eq(big->reps, 0);
  ck_assert(big->min_s == big->median_s && big->max_s == big->median_s);
  ck_assert_str_eq(mm_calib_table_meta(t, "device"), "NVIDIA H100 80GB HBM3");

  g_autoptr(MmCalibTable) a = convert_ok("nccl-tests", "nccl_alltoall.log", nccl_alltoall);
  ck_assert_uint_eq(a->rows->len, 4); /* the size-0 rows are dropped */
  ck_assert_str_eq(row(a, 0)->bench, "alltoall");
  ck_assert_double_eq(row(a, 0)->m, 8);
  ck_assert_double_eq(row(a, 0)->bytes, 32);
  ck_assert_double_eq_tol(row(a, 0)->median_s, 89e-6, 1e-15);
  ck_assert_double_eq_tol(row(a, 3)->median_s, 33234e-6, 1e-12);
  ck_assert_str_eq(mm_calib_table_meta(a, "device"), "A100-SXM4-40GB");
}
END_TEST

/* Converted rows written as a calibration CSV read back unchanged; converting appends. */
START_TEST(test_round_trip)
{
  g_autoptr(MmCalibTable) t = convert_ok("hipblaslt-bench", "h.log", hipblaslt_log);
  g_autofree char *nccl = mm_test_write("all_reduce.txt", nccl_allreduce);
  ck_assert(mm_calib_convert("nccl-tests", nccl, t, NULL));
  ck_assert_uint_eq(t->rows->len, 11);
  g_autofree char *text = mm_calib_csv_text(t);
  g_autofree char *path = mm_test_write("converted.csv", text);
  g_autoptr(MmCalibTable) back = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(mm_calib_csv_read(path, back, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(back->rows->len, t->rows->len);
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *x = t->rows->pdata[i], *y = back->rows->pdata[i];
    ck_assert_str_eq(x->bench, y->bench);
    ck_assert_double_eq(x->bytes, y->bytes);
    ck_assert_double_eq(x->flops, y->flops);
    ck_assert_double_eq_tol(x->median_s, y->median_s, x->median_s * 1e-6);
  }
}
END_TEST

/* Malformed inputs: each is an error naming the file and (where one is to blame) the line, and
 * leaves the table as it was. */
typedef struct {
  const char *format, *text;
  gsize len;  /* 0: strlen(text) */
  guint line; /* the line the message names, 0: none */
} BadCase;

#define RB_COLS "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\n"
#define RB_HEAD "rocblas-bench -f gemm -r s\n" RB_COLS
#define RB_NUL RB_HEAD "N,T,40\0\0,4000,4000,1,4000,0,4000,4000,9,1317\n"
#define HL_HEAD "[0]:transA,transB,batch_count,m,n,k,a_type,d_type,hipblaslt-Gflops,hipblaslt-GB/s,us\n"
#define NC_HEAD "# nThread 1 nGpus 8 minBytes 8\n# all_reduce_perf\n"
#define NC_NUL NC_HEAD "  1048576  262144  float  sum  -1  203.2  5.16\0  9.68  0  207.2  5.06  9.49  0\n"
#define NC_ROW(t) "  1048576  262144  float  sum  -1  " t "  5.16  9.68  0  207.2  5.06  9.49  0\n"

static const BadCase bad_cases[] = {
  {"rocblas-bench", "", 0, 0},
  {"hipblaslt-bench", "", 0, 0},
  {"nccl-tests", "", 0, 0},
  {"rocblas-bench", "\n\n   \n", 0, 0},
  {"rocblas-bench", RB_HEAD, 0, 3},                                       /* no values line */
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0\n", 0, 3},       /* truncated */
  {"rocblas-bench", RB_HEAD "N,T,4k,4000,4000,1,4000,0,4000,4000,9,1317\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,1e300,4000,4000,1,4000,0,4000,4000,9,1317\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,0,4000,4000,1,4000,0,4000,4000,9,1317\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000.5,4000,4000,1,4000,0,4000,4000,9,1317\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0,4000,4000,9,-1317\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0,4000,4000,9,nan\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0,4000,4000,9,inf\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0,4000,4000,9,1e999\n", 0, 3},
  {"rocblas-bench", RB_HEAD "N,T,4000,4000,4000,1,4000,0,4000,4000,9,\n", 0, 3},
  {"rocblas-bench", rocblas_untyped, 0, 4},                               /* no dtype anywhere */
  {"rocblas-bench", "rocblas-bench -f gemm -r c\n" RB_COLS "N,T,4,4,4,1,4,0,4,4,9,13\n", 0, 3}, /* complex */
  {"rocblas-bench", "transA,transB,M,N,K,rocblas-Gflops\nN,T,4,4,4,9\n", 0, 1},               /* no us */
  {"rocblas-bench", "transA,transB,N,K,rocblas-Gflops,us\nN,T,4,4,9,1\n", 0, 1},               /* no M */
  {"rocblas-bench", RB_NUL, sizeof RB_NUL - 1, 3},                        /* NUL bytes */
  {"hipblaslt-bench", HL_HEAD, 0, 2},
  {"hipblaslt-bench", HL_HEAD "    N,T,1,64,64,64,bf16_r,bf16_r,1,1\n", 0, 2},
  {"hipblaslt-bench", HL_HEAD "    N,T,1,64,64,64,q9_r,bf16_r,1,1,1\n", 0, 2},
  {"hipblaslt-bench", HL_HEAD "    N,T,-2,64,64,64,bf16_r,bf16_r,1,1,1\n", 0, 2},
  {"hipblaslt-bench", RB_HEAD "N,T,4,4,4,1,4,0,4,4,9,13\n", 0, 0},       /* a rocblas-bench log */
  {"nccl-tests", "# nThread 1 nGpus 8\n" NC_ROW("203.2"), 0, 0},          /* which collective? */
  {"nccl-tests", "# all_reduce_perf\n" NC_ROW("203.2"), 0, 0},            /* how many ranks? */
  {"nccl-tests", NC_HEAD "# nothing measured\n", 0, 0},
  {"nccl-tests", NC_HEAD "  1048576  262144  float  sum  -1  203.2  5.16\n", 0, 3},
  {"nccl-tests", NC_HEAD NC_ROW("fast"), 0, 3},
  {"nccl-tests", NC_HEAD NC_ROW("0"), 0, 3},
  {"nccl-tests", NC_HEAD NC_ROW("1e400"), 0, 3},
  {"nccl-tests", NC_HEAD "  1048576  262144  quad  sum  -1  203.2  5.16  9.68  0  207.2  5.06  9.49  0\n", 0, 3},
  {"nccl-tests", NC_HEAD "  99999999999999999999999  262144  float  sum  -1  1  5  9  0  2  5  9  0\n", 0, 3},
  {"nccl-tests", "# nThread x nGpus 8\n# all_reduce_perf\n" NC_ROW("203.2"), 0, 1},
  {"nccl-tests", NC_NUL, sizeof NC_NUL - 1, 3},
};

START_TEST(test_bad_input)
{
  const BadCase *c = &bad_cases[_i];
  g_autofree char *name = g_strdup_printf("bad%d.txt", _i);
  g_autofree char *path = g_build_filename(mm_test_tmpdir(), name, NULL);
  gsize len = c->len ? c->len : strlen(c->text);
  ck_assert(g_file_set_contents(path, c->text, (gssize)len, NULL));
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(!mm_calib_convert(c->format, path, t, &error), "case %d converted", _i);
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
  ck_assert_uint_eq(t->rows->len, 0);
  ck_assert_uint_eq(t->keys->len, 0);
  g_autofree char *where = c->line ? g_strdup_printf("%s:%u: ", path, c->line) : g_strdup_printf("%s: ", path);
  ck_assert_msg(g_str_has_prefix(error->message, where), "case %d: \"%s\" does not start with \"%s\"", _i,
                error->message, where);
}
END_TEST

START_TEST(test_unknown_format_and_file)
{
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  g_autoptr(GError) error = NULL;
  g_autofree char *path = mm_test_write("x.log", nccl_allreduce);
  ck_assert(!mm_calib_convert("cublas-bench", path, t, &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
  for (const char *const *f = mm_calib_convert_formats(); *f; f++) ck_assert_ptr_nonnull(strstr(error->message, *f));
  g_clear_error(&error);
  g_autofree char *missing = g_build_filename(mm_test_tmpdir(), "missing.log", NULL);
  ck_assert(!mm_calib_convert("nccl-tests", missing, t, &error));
  ck_assert(g_error_matches(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT));
  ck_assert_uint_eq(t->rows->len, 0);
}
END_TEST

/* Every calibration CSV shipped in hardware/calibration reads without error. */
START_TEST(test_shipped_csvs_read)
{
  g_autofree char *dir = mm_test_src("hardware/calibration");
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  ck_assert_ptr_nonnull(d);
  guint n = 0;
  for (const char *name; (name = g_dir_read_name(d));) {
    if (!g_str_has_suffix(name, ".csv")) continue;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(MmCalibTable) t = mm_calib_table_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(mm_calib_csv_read(path, t, &error), "%s", error ? error->message : "");
    ck_assert_msg(mm_calib_table_meta(t, "device") != NULL, "%s: no # device: line", name);
    n++;
  }
  ck_assert_uint_ge(n, 1);
}
END_TEST

/* public-h100.csv's 8 GiB all-reduce, derived from the published busbw 480.16 GB/s on 8 ranks by
 * nccl-tests' factor 2(n-1)/n, is the time the same source prints: 31307 us. */
START_TEST(test_public_busbw_matches_time)
{
  g_autofree char *path = mm_test_src("hardware/calibration/public-h100.csv");
  g_autoptr(MmCalibTable) t = mm_calib_table_new();
  ck_assert(mm_calib_csv_read(path, t, NULL));
  guint found = 0;
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    if (strcmp(r->bench, "allreduce") || r->m != 8 || r->bytes != 8589934592.0 || !strstr(r->source, "dgxh100"))
      continue;
    ck_assert_double_eq_tol(r->median_s, 31307e-6, 1e-6);
    found++;
  }
  ck_assert_uint_eq(found, 1);
}
END_TEST

static Suite *calib_convert_suite(void)
{
  Suite *s = suite_create("calib_convert");
  TCase *tc = tcase_create("convert");
  tcase_add_test(tc, test_rocblas);
  tcase_add_test(tc, test_hipblaslt);
  tcase_add_test(tc, test_nccl);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_unknown_format_and_file);
  tcase_add_test(tc, test_shipped_csvs_read);
  tcase_add_test(tc, test_public_busbw_matches_time);
  suite_add_tcase(s, tc);
  TCase *bad = tcase_create("bad_input");
  tcase_add_loop_test(bad, test_bad_input, 0, (int)G_N_ELEMENTS(bad_cases));
  suite_add_tcase(s, bad);
  return s;
}

int main(void)
{
  return mm_test_main(calib_convert_suite());
}
