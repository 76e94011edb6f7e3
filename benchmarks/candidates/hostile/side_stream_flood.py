# A hostile neighbour, appended to an honest kernel's source (benchmarks/shared_gpu.py): at each
# forward it queues about 20 s of large matrix products on a side stream, then returns the honest
# output at once. It must cost seconds, not the time limit, and must not slow anyone's timing.
import torch as _torch

_Honest = ModelNew  # noqa: F821 - defined by the honest source this is appended to
_PRODUCTS = 1200  # 8192^3 fp32 products: about 17 ms each on an H200


class ModelNew(_Honest):
    def forward(self, *args):
        out = super().forward(*args)
        if not hasattr(self, "_side"):
            self._side = _torch.cuda.Stream()
            self._a = _torch.randn(8192, 8192, device=out.device)
        self._side.wait_stream(_torch.cuda.current_stream())
        with _torch.cuda.stream(self._side):
            for _ in range(_PRODUCTS):
                self._a @ self._a
        return out
