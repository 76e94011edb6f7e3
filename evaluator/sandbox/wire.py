"""Framing and tensor encoding for the pipes between evaluator processes.

Used by every process: the trusted evaluator, the warm parent and the workers. Bytes that come
out of a candidate's process are untrusted: they are decoded here with orjson and raw buffers
only (never pickle), and every size is checked.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import orjson

MAX_FRAME = 1 << 31  # a single frame over 2 GiB is refused
ALIGN = 64
_LEN = struct.Struct("<Q")

# dtypes that may travel; anything else in a message is a protocol error
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64",
)


ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
            "uint8": 1, "bool": 1, "complex64": 8}


class WireError(ValueError):
    """A message did not decode: the sender is broken or hostile."""


def frame_ends(obj: dict, sizes: list[int]) -> tuple[bytes, bytes]:
    """What goes before and after a message's blobs of these sizes: the length prefix and JSON
    header, and the padding.

    Padding (spaces after the header, zeros after the last blob; both ignored by :func:`unpack`)
    keeps every frame and its first blob at a multiple of ALIGN bytes in the stream, so the
    reader can use tensors in its receive buffer in place.
    """
    head = orjson.dumps({"h": obj, "n": sizes})
    head += b" " * (-(2 * _LEN.size + len(head)) % ALIGN)
    data = sum(sizes)
    tail = -data % ALIGN
    return _LEN.pack(_LEN.size + len(head) + data + tail) + _LEN.pack(len(head)) + head, bytes(tail)


def _frame_parts(obj: dict, blobs: list | None = None) -> list:
    """One message, in pieces: prefix and header, the raw blobs, padding."""
    blobs = [memoryview(b).cast("B") for b in blobs or []]
    prefix, tail = frame_ends(obj, [len(b) for b in blobs])
    return [prefix, *blobs, tail]


def pack(obj: dict, blobs: list | None = None) -> bytes:
    """One message as a single buffer (small messages)."""
    return b"".join(_frame_parts(obj, blobs))


def write_message(fd: int, obj: dict, blobs: list | None = None) -> None:
    """Write one message without first joining large blobs into one buffer."""
    for part in _frame_parts(obj, blobs):
        if len(part):
            write_frame(fd, part)


def unpack(body: bytes | bytearray | memoryview) -> tuple[dict, list[memoryview]]:
    """Inverse of :func:`pack` without the outer length prefix."""
    view = memoryview(body)
    if len(view) < _LEN.size:
        raise WireError("truncated message")
    (hlen,) = _LEN.unpack_from(view, 0)
    if hlen > len(view) - _LEN.size:
        raise WireError("header length out of range")
    try:
        head = orjson.loads(view[_LEN.size:_LEN.size + hlen])
    except orjson.JSONDecodeError as exc:
        raise WireError(f"bad header: {exc}") from None
    if not isinstance(head, dict) or not isinstance(head.get("h"), dict) or not isinstance(head.get("n"), list):
        raise WireError("bad header shape")
    pos = _LEN.size + hlen
    blobs = []
    for n in head["n"]:
        if not isinstance(n, int) or n < 0 or pos + n > len(view):
            raise WireError("blob length out of range")
        blobs.append(view[pos:pos + n])
        pos += n
    return head["h"], blobs


def split_frames(buf) -> tuple[list, bool]:
    """Split a byte stream of length-prefixed frames into the complete ones, and whether bytes
    that are not a whole frame remain (a writer that stopped mid-frame). A length no writer
    could have meant is an error. Given a memoryview, the frames are views into it (no copy)."""
    frames: list[Any] = []
    pos = 0
    while pos < len(buf):
        if pos + _LEN.size > len(buf):
            return frames, True
        (n,) = _LEN.unpack_from(buf, pos)
        if n > MAX_FRAME:
            raise WireError("frame length out of range")
        if pos + _LEN.size + n > len(buf):
            return frames, True
        pos += _LEN.size
        frames.append(buf[pos:pos + n])
        pos += n
    return frames, False


def write_frame(fd: int, data: bytes | memoryview) -> None:
    """Write all of `data` (already framed by :func:`pack`) to a file descriptor."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _recv_exact(sock, view: memoryview) -> bool:
    """Fill `view` from a socket; False at a clean end of stream before its first byte."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            if got == 0:
                return False
            raise WireError("stream ended inside a frame")
        got += n
    return True


def receive_messages(sock):
    """Yield (header, blobs) for each frame read from a socket, until it ends cleanly.

    Frames are received straight into one buffer, reused (a buffered reader's reads of large
    frames copy and reallocate: a quarter of the speed): each message's blobs are views into it,
    valid only until the next message is asked for. (A worker's pipe is read by `FrameReader`.)"""
    buf = bytearray(1 << 20)
    while True:
        if not _recv_exact(sock, memoryview(buf)[:_LEN.size]):
            return
        (n,) = _LEN.unpack_from(buf, 0)
        if n > MAX_FRAME:
            raise WireError("frame too large")
        if n > len(buf):
            buf = bytearray(n)  # a new one: views of the last message may still be held
        view = memoryview(buf)[:n]
        if not _recv_exact(sock, view):
            raise WireError("stream ended inside a frame")
        yield unpack(view)


# --- tensors -------------------------------------------------------------------------

def sendable(t) -> tuple[dict, Any]:
    """A tensor's description and its bytes as a flat uint8 tensor where it lies (None if empty):
    detached, contiguous, of a dtype that may travel (others go as float32)."""
    import torch

    c = t.detach()
    dtype = str(c.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        c = c.to(torch.float32)
        dtype = "float32"
    c = c.contiguous()
    return {"dtype": dtype, "shape": list(c.shape)}, (c.reshape(-1).view(torch.uint8) if c.numel() else None)


def encode_tensor(t) -> tuple[dict, bytes | memoryview]:
    """Describe a tensor and copy its bytes (moved to CPU, made contiguous)."""
    meta, flat = sendable(t)
    # A view of the tensor's own memory (the array keeps it alive): large outputs are not copied.
    return meta, (memoryview(flat.to("cpu").numpy()) if flat is not None else b"")


STAGING_BYTES = 32 << 20
_staging: list = []  # this process's pinned host buffer for GPU tensors, made on first use


def _staging_buffer():
    import torch

    if not _staging:
        try:  # pinned: copies from the GPU run at full speed and touch no fresh pages
            _staging.append(torch.empty(STAGING_BYTES, dtype=torch.uint8, pin_memory=True))
        except RuntimeError:
            _staging.append(torch.empty(STAGING_BYTES, dtype=torch.uint8))
    return _staging[0]


def write_tensors(fd: int, obj: dict, tensors: list) -> None:
    """Write one message carrying tensors. A GPU tensor's bytes pass through one small pinned
    buffer, piece by piece: a gigabyte output is never copied whole into host memory, which
    (fresh pages, a pageable copy) cost more than the pipe itself."""
    write_described(fd, obj, [sendable(t) for t in tensors])


def write_described(fd: int, obj: dict, described: list) -> None:
    """`write_tensors` for tensors already made sendable (`sendable`)."""
    if described:
        obj = {**obj, "tensors": [meta for meta, _ in described]}
    flats = [flat for _, flat in described if flat is not None]
    prefix, tail = frame_ends(obj, [flat.numel() if flat is not None else 0 for _, flat in described])
    write_frame(fd, prefix)
    for flat in flats:
        if flat.device.type == "cpu":
            write_frame(fd, memoryview(flat.numpy()))
            continue
        staging = _staging_buffer()
        for start in range(0, flat.numel(), staging.numel()):
            n = min(staging.numel(), flat.numel() - start)
            staging[:n].copy_(flat[start:start + n])
            write_frame(fd, memoryview(staging[:n].numpy()))
    if tail:
        write_frame(fd, tail)


def check_meta(meta, nbytes: int) -> None:
    """Raise WireError unless `meta` describes a tensor of exactly `nbytes` bytes."""
    if checked_nbytes(meta) != nbytes:
        raise WireError("tensor byte count does not match its shape")


def checked_nbytes(meta) -> int:
    """The byte count a tensor description declares, once it is one (an allowed dtype, a shape
    of at most 16 non-negative dimensions); raises WireError otherwise."""
    if not isinstance(meta, dict):
        raise WireError("bad tensor description")
    dtype_name, shape = meta.get("dtype"), meta.get("shape")
    if dtype_name not in DTYPES:
        raise WireError(f"dtype not allowed: {dtype_name!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 16:
        raise WireError("bad shape")
    return meta_nbytes(meta)


def meta_nbytes(meta: dict) -> int:
    """The byte count a tensor description (one `check_meta` accepts) declares."""
    return _numel(meta["shape"]) * ITEMSIZE[meta["dtype"]]


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def check_frame(head: dict, sizes: list[int], nonce: str | None) -> list:
    """The tensor descriptions of a worker's frame, once it is checked to be one the harness could
    have written: the job's nonce, one valid description per blob. Raises WireError otherwise."""
    if nonce is not None and head.get("nonce") != nonce:
        raise WireError("a message without the job's nonce")
    metas = head.get("tensors", [])
    if not isinstance(metas, list) or len(metas) != len(sizes):
        raise WireError("tensor count mismatch")
    for meta, n in zip(metas, sizes):
        check_meta(meta, n)
    return metas


def decode_tensor(meta: dict, raw: memoryview):
    """Rebuild a CPU tensor from :func:`encode_tensor` output, checking every field."""
    import torch

    check_meta(meta, len(raw))
    dtype, shape = getattr(torch, meta["dtype"]), meta["shape"]
    if _numel(shape) == 0:
        return torch.empty(shape, dtype=dtype)
    # The evaluator's own receive buffer is used in place where aligned; anything else is copied.
    flat = torch.frombuffer(raw if isinstance(raw, memoryview) and not raw.readonly else bytearray(raw),
                            dtype=torch.uint8)
    if flat.data_ptr() % 16:  # the buffer itself is only as aligned as the allocator made it
        flat = flat.clone()
    return flat.view(dtype).reshape(shape)
