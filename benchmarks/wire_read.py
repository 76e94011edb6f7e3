"""How fast the judge's read loop takes frames off its socket, with no GPU and no workers.

A thread sends `--frames` chunk messages of `--mb` megabytes each over a socket pair, as the
evaluator relays a worker's outputs; the reader decodes them the way the judge does
(`wire.receive_messages`: straight into one reused buffer) and, for comparison, through a
buffered reader (`wire.read_messages`). Prints GB/s for each.

    python benchmarks/wire_read.py [--mb 32] [--frames 64]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

from adaexplore.evaluator.sandbox import wire


def rate(mode: str, frame: bytes, frames: int) -> float:
    ours, theirs = socket.socketpair()

    def send() -> None:
        for _ in range(frames):
            ours.sendall(frame)
        ours.close()

    sender = threading.Thread(target=send)
    t0 = time.perf_counter()
    sender.start()
    messages = wire.receive_messages(theirs) if mode == "receive" else wire.read_messages(theirs.makefile("rb"))
    received = sum(len(blobs[0]) for _, blobs in messages)
    sender.join()
    theirs.close()
    return received / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=32, help="megabytes per chunk message")
    ap.add_argument("--frames", type=int, default=64)
    args = ap.parse_args()
    frame = wire.pack({"op": "chunk", "req": "r", "index": 0, "offset": 0}, [bytes(args.mb << 20)])
    for mode in ("buffered", "receive", "buffered", "receive"):  # alternated: the machine's drift shows
        print(f"{mode:9s} {rate(mode, frame, args.frames):.2f} GB/s")


if __name__ == "__main__":
    main()
