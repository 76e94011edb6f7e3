"""How fast the judge's read loop takes frames off its socket, with no GPU and no workers.

A thread sends 2 GiB as chunk messages of each size in `--mb` over a socket pair, as the evaluator
relays a worker's outputs (pieces of at most the pipe's buffer, 1 or 8 MB; whole blobs are larger);
the reader decodes them the way the judge does (`wire.receive_messages`: straight into one reused
buffer) and, for comparison, through a buffered reader (as it read them before). Prints GB/s for each.

    python benchmarks/wire_read.py [--mb 1 8 32]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

from adaexplore.evaluator.sandbox import wire


def buffered_messages(sock: socket.socket):
    """The frames read through a buffered reader, as the judge read them before."""
    stream = sock.makefile("rb")
    while len(prefix := stream.read(8)) == 8:
        yield wire.unpack(stream.read(int.from_bytes(prefix, "little")))


def rate(mode: str, frame: bytes, frames: int) -> float:
    ours, theirs = socket.socketpair()

    def send() -> None:
        for _ in range(frames):
            ours.sendall(frame)
        ours.close()

    sender = threading.Thread(target=send)
    t0 = time.perf_counter()
    sender.start()
    messages = wire.receive_messages(theirs) if mode == "receive" else buffered_messages(theirs)
    received = sum(len(blobs[0]) for _, blobs in messages)
    sender.join()
    theirs.close()
    return received / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, nargs="+", default=[1, 8, 32], help="megabytes per chunk message")
    args = ap.parse_args()
    for mb in args.mb:
        frame = wire.pack({"op": "chunk", "req": "r", "index": 0, "offset": 0}, [bytes(mb << 20)])
        frames = max(1, 2048 // mb)
        # twice each: the spread shows the machine's noise
        rates = {mode: [rate(mode, frame, frames) for _ in range(2)] for mode in ("buffered", "receive")}
        print(f"{mb:3d} MB frames: " + ", ".join(f"{mode} {' / '.join(f'{r:.2f}' for r in rs)} GB/s"
                                               for mode, rs in rates.items()))


if __name__ == "__main__":
    main()
