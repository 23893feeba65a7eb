"""Which CPU kernels a machine's torch picks, as hashes of their results (one thread).

Two machines whose lines agree compute the zoo's training steps alike; a line that differs
names the library that chose another kernel: ``gemm`` (MKL's SGEMM, picked by processor
vendor and model unless ``MKL_CBWR`` pins it), ``vml`` (``exp``/``tanh``/``erf`` through
MKL's vector math, picked the same way), ``gelu`` (oneDNN's JIT, picked by instruction set
up to ``ONEDNN_MAX_CPU_ISA``), ``aten`` (softmax, layer norm, GELU's backward: torch's own
kernels, picked by ``ATEN_CPU_CAPABILITY``), ``sdpa`` (torch's attention on MKL's GEMMs). See docs/reproducibility.md.

    OMP_NUM_THREADS=1 python tools/cpu_kernels.py
    OMP_NUM_THREADS=1 MKL_CBWR=COMPATIBLE python tools/cpu_kernels.py
"""

from __future__ import annotations

import hashlib
import os
import sys


def _digest(*tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:8]


def kernel_hashes() -> dict[str, str]:
    """``{library: hash}`` of a few results computed with the kernels torch picks here."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 64, 128, generator=gen)
    gemm = [
        torch.randn(m, k, generator=gen) @ torch.randn(k, n, generator=gen)
        for m, k, n in ((1024, 64, 256), (1024, 256, 64), (1024, 64, 8000), (64, 1024, 64))
    ]
    xr = x.clone().requires_grad_()
    F.gelu(xr).sum().backward()
    q = torch.randn(2, 4, 64, 16, generator=gen)
    return {
        "gemm": _digest(*gemm),
        "vml": _digest(x.exp(), x.tanh(), torch.erf(x)),
        "gelu": _digest(F.gelu(x)),
        "aten": _digest(torch.softmax(x, -1), F.layer_norm(x, (128,)), xr.grad),
        # torch's attention kernel on MKL's GEMMs: follows both
        "sdpa": _digest(F.scaled_dot_product_attention(q, q, q)),
    }


def main() -> int:
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from lmsim._runtime import cpu_model

    settings = " ".join(
        f"{k}={os.environ[k]}"
        for k in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "LD_PRELOAD")
        if os.environ.get(k)
    )
    print(
        f"cpu: {cpu_model()}; torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"settings: {settings or 'none'}")
    for library, digest in kernel_hashes().items():
        print(f"  {library:5s} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
