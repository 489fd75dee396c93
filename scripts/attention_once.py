"""One attention forward call (bf16, 4 x 4096 x 16 heads x 128), asyncpipe's or torch's cuDNN SDPA, for a profiler:
python3 scripts/attention_once.py asyncpipe|cudnn 0|1 (causal)."""
import sys

import torch

from asyncpipe.kernels.attention import attention

who, causal = sys.argv[1], sys.argv[2] == "1"
q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
if who == "asyncpipe":
    attention(q, k, v, causal=causal)
else:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                         is_causal=causal)
torch.cuda.synchronize()
