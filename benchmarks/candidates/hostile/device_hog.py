# A hostile neighbour, appended to an honest kernel's source (benchmarks/shared_gpu.py): in its
# first forward it takes all but 256 MiB of the device's free memory and keeps it, then computes
# honestly. On a shared GPU it must be stopped with a verdict that says so, and no other job may
# be blamed for what it took.
import torch as _torch

_Honest = ModelNew  # noqa: F821 - defined by the honest source this is appended to


class ModelNew(_Honest):
    def forward(self, *args):
        if not hasattr(self, "_hoard"):
            free, _total = _torch.cuda.mem_get_info()
            self._hoard = _torch.empty(max(0, free - (256 << 20)), dtype=_torch.uint8, device="cuda")
            self._hoard.fill_(7)  # touched, so the memory is really held
        return super().forward(*args)
