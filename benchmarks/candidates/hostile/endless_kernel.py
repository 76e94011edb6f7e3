# A hostile neighbour, appended to an honest kernel's source (benchmarks/shared_gpu.py): after the
# honest forward it launches a Triton kernel that spins on a flag nobody ever sets, so every
# synchronize after it waits forever. It must cost seconds, not the time limit.
import torch as _torch
import triton as _triton
import triton.language as _tl

_Honest = ModelNew  # noqa: F821 - defined by the honest source this is appended to


@_triton.jit
def _spin_on_flag(flag_ptr):
    seen = _tl.load(flag_ptr, volatile=True)
    while seen == 0:
        seen = _tl.load(flag_ptr, volatile=True)


class ModelNew(_Honest):
    def forward(self, *args):
        out = super().forward(*args)
        flag = _torch.zeros(1, dtype=_torch.int32, device=out.device)
        _spin_on_flag[(1,)](flag)
        return out
