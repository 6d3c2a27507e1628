#!/usr/bin/env python3
"""Fused (flash) attention timings for madmax's calibration CSV, through the framework's own
scaled_dot_product_attention (FlashAttention / cuDNN on NVIDIA, CK / aotriton on AMD): the
vendor's attention kernel that production training runs. Appends rows in the format of
docs/CALIBRATION.md to the file named (or stdout). Needs PyTorch with a GPU; exits 0 with a
comment row when there is none."""
import sys


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("# attention (flash): skipped, no PyTorch", file=out)
        return 0
    if not torch.cuda.is_available():
        print("# attention (flash): skipped, PyTorch sees no GPU", file=out)
        return 0
    print(f"# attention (flash): torch {torch.__version__} scaled_dot_product_attention on "
          f"{torch.cuda.get_device_name(0)}", file=out)
    dev = "cuda"
    for d in (64, 128):
        for seq in (512, 1024, 2048, 4096, 8192, 16384):
            heads = max(1, 32 * 8192 // seq)
            q, k, v = (torch.randn(1, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            for causal in (False, True):
                def fwd():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                o = fwd()
                g = torch.randn_like(o)

                def bwd():
                    torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
                for name, fn, mult in (("fwd", fwd, 4.0), ("bwd", bwd, 10.0)):
                    for _ in range(3):
                        fn()
                    torch.cuda.synchronize()
                    times = []
                    for _ in range(7):
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        inner = 5
                        a.record()
                        for _ in range(inner):
                            fn()
                        b.record()
                        b.synchronize()
                        times.append(a.elapsed_time(b) * 1e-3 / inner)
                    times.sort()
                    flops = mult * seq * seq * d * heads * (0.5 if causal else 1.0)
                    nbytes = 4.0 * seq * d * heads * 2 * (2.5 if name == "bwd" else 1.0)
                    print(f"attention,attention,bf16,{seq},{seq},{d},{heads},{nbytes:.0f},{flops:.0f},"
                          f"flash;{name};causal={int(causal)},7,{times[3]:.6e},{times[0]:.6e},{times[-1]:.6e},",
                          file=out)
                    out.flush()
            del q, k, v, o, g
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
