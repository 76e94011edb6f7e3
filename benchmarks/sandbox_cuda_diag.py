"""Which sandbox layer keeps CUDA from starting in a worker: enter it with one layer changed at a time.

Run on a GPU machine (as root, like the server there): `python benchmarks/sandbox_cuda_diag.py`.
For each variant a forked child enters the sandbox of `evaluator/sandbox/confine.py` with one
step left out or one mount made writable again, then initialises CUDA and adds a tensor; the
output says OK or the error, and for the full sandbox the child's mount table. This is how the
read-only `/proc` that CUDA needs writable was found (benchmarks/RESULTS.md, 2026-12-01).
"""

from __future__ import annotations

import ctypes
import os
import sys

from adaexplore.evaluator.sandbox import confine, seccomp


def writable_again(path: str, recursive: bool) -> int:
    attr = (ctypes.c_uint64 * 4)(0, 1, 0, 0)  # clear MOUNT_ATTR_RDONLY
    return ctypes.CDLL(None, use_errno=True).syscall(442, -100, path.encode(), 0x8000 if recursive else 0,
                                                     ctypes.byref(attr), 32)


def report() -> None:
    """What the job sees of the GPU: its uid, its /dev, and whether each device node opens."""
    print("uid", os.getuid(), "gid", os.getgid())
    for name in sorted(os.listdir("/dev")):
        path = f"/dev/{name}"
        if name.startswith("nvidia") and not os.path.isdir(path):
            try:
                os.close(os.open(path, os.O_RDWR))
                opened = "opens"
            except OSError as exc:
                opened = f"{type(exc).__name__} {exc.errno}"
            print(path, oct(os.stat(path).st_mode), opened)
    for path in ("/proc/driver/nvidia/params", "/sys/bus/pci/devices", "/dev/shm", "/etc/ld.so.cache"):
        print(path, os.path.exists(path))


def variant(name: str) -> None:
    """Runs in the forked child: change one layer, enter the sandbox, start CUDA."""
    read_only = confine._read_only_everywhere
    become = confine._become
    if "no seccomp" in name:
        seccomp.install = lambda: True
    if "no unix-socket rule" in name:
        seccomp._SOCKET = 99999  # no call has this number: the rule never matches
    if "root uid" in name:
        confine._become = lambda uid: become(0)
    if name == "no read-only view":
        confine._read_only_everywhere = lambda writable: None
    elif name.startswith("writable "):
        path = name.split(" ", 1)[1]
        confine._read_only_everywhere = lambda writable: (read_only(writable), writable_again(path, path != "/"))
    confine.enter(confine.Plan(gpu=True))
    if name == "full":
        report()
    import torch

    torch.cuda.init()
    print("OK", float(torch.ones(4, device="cuda").sum()))


def main() -> int:
    names = ["full", "no seccomp", "no unix-socket rule", "root uid", "root uid, no seccomp", "no read-only view",
             "writable /sys"]
    for name in names:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            try:
                variant(name)
            except BaseException as exc:  # noqa: BLE001 - the report is the point
                print("FAIL", type(exc).__name__, str(exc)[:200])
                if name == "full":
                    print(open("/proc/self/mountinfo").read()[:2500])
            sys.stdout.flush()
            os._exit(0)
        os.close(w)
        out = b""
        while chunk := os.read(r, 65536):
            out += chunk
        os.waitpid(pid, 0)
        print(f"== {name}: {out.decode(errors='replace').strip()[-3000:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
