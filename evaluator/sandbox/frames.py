"""Reads one worker's result stream as it arrives, handing tensor bytes on instead of keeping them.

Runs in the trusted evaluator, on the thread that drains a job's pipe. Frames are parsed
incrementally (`sandbox.wire` format). A frame's header is checked (the job's nonce, sizes that
match the declared tensors) before its data is read; then each tensor's bytes go, in the
pieces they arrive in, to the receiver a `sink` gives for that frame (the judge), and the
frame is kept as (header, [the receiver's answer]). Frames no sink takes are buffered and
decoded as before, within `max_buffered` bytes. What is kept is bounded per job: at most
`max_messages` messages, and headers that take at most `max_header_bytes` once decoded (ring
pieces are not kept, so a job may send any number of them). The stream is untrusted: the
first thing that is not a frame the harness could have written stops reading, with the
reason; going past a limit stops it as an overflow, with the limit (`overflow_reason`).
"""

from __future__ import annotations

import struct
from typing import Callable, Protocol

import orjson

from ...common.vocab import Kind
from . import wire
from .ring import Geometry

_LEN = struct.Struct("<Q")
MAX_HEADER = 1 << 20
MAX_STREAMED_FRAME = 1 << 42  # data that is handed on is not held here
# Kept per job. An honest job keeps at most about 60 messages (50 trials and a dozen reports),
# whose headers take some kilobytes decoded, 5.6 MB at the most the protocol allows (50 trials
# of 100 outputs, a timing report of 10,000 runs).
MAX_MESSAGES = 4096
MAX_HEADER_BYTES = 16 << 20
# What a decoded header takes, at most, for each value in it: a Python object (a float, a list,
# a dict, a string) and its place in its container. Its text alone would understate that more
# than twentyfold ("[[],[],...]"); every value but the first follows a ",", "[", "{" or ":".
VALUE_BYTES = 80


class Receiver(Protocol):
    def write(self, index: int, offset: int, data) -> None: ...

    def close(self) -> dict: ...

    def abort(self) -> None: ...


class Forwarder(Receiver, Protocol):
    """A receiver that can take bytes straight from the job's pipe, without their passing
    through this process's memory."""

    def forward(self, index: int, offset: int, fd: int, n: int) -> None: ...


Sink = Callable[[dict, list], "Receiver | None"]


class RingPieces(Protocol):
    """The evaluator's end of a job's ring (see `sandbox.ring`): its shape, and where an announced
    piece goes (to the receiver that takes it, or, for one nobody takes, only back to the worker)."""

    geometry: Geometry

    def piece(self, receiver: Receiver, index: int, offset: int, n: int, slot: int) -> None: ...

    def intact(self) -> bool:
        """Whether the ring's memory still has its size (`ring.intact`): a slot of a shrunk one
        faults the judge that reads it, so a piece there is refused as forged."""
        ...


class Overflow(Exception):
    """More kept than allowed: buffered bytes, messages or header bytes (the limit is its message)."""


class FrameReader:
    def __init__(self, nonce: str | None, sink: Sink | None = None, max_buffered: int = 1 << 32,
                 on_message: Callable[[dict, list], None] | None = None, ring: RingPieces | None = None,
                 max_messages: int = MAX_MESSAGES, max_header_bytes: int = MAX_HEADER_BYTES) -> None:
        self.nonce, self.sink, self.max_buffered = nonce, sink, max_buffered
        self.max_messages, self.max_header_bytes = max_messages, max_header_bytes
        self.ring = ring
        self._ring_frame: dict | None = None  # a frame whose tensors come through the ring, piece by piece
        self.on_message = on_message  # told of each message as it completes (a job's results so far)
        self.messages: list[tuple[dict, list]] = []
        self.error: str | None = None
        self.overflow = False
        self.overflow_reason: str | None = None  # the limit it went past
        self._pending = bytearray()  # bytes of the prefix and header being assembled
        self._buffered = 0
        self._kept = 0  # messages kept or being read, and what their headers take decoded
        self._header_bytes = 0
        self._frame: dict | None = None  # the frame being read: head, sizes, position
        self._receiver: Receiver | None = None

    @property
    def stopped(self) -> bool:
        return self.error is not None or self.overflow

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.stopped:
            try:
                view = self._step(view)
            except (wire.WireError, ValueError, TypeError) as exc:
                self._fail(str(exc))
            except Overflow as exc:
                self.overflow, self.overflow_reason = True, str(exc)
                self._abort()

    def forwarding(self) -> tuple[Forwarder, int, int, int] | None:
        """(receiver, tensor index, offset, bytes left in that tensor) while the next bytes of the
        stream are tensor data for a receiver that can take them from the pipe itself; else None."""
        frame, receiver = self._frame, self._receiver
        if frame is None or receiver is None or self.stopped or not hasattr(receiver, "forward"):
            return None
        i = frame["blob"]
        if i >= len(frame["sizes"]):
            return None
        return receiver, i, frame["offset"], frame["sizes"][i] - frame["offset"]  # type: ignore[return-value]

    def forwarded(self, n: int) -> None:
        """`n` bytes of the current tensor went to the receiver straight from the pipe."""
        frame = self._frame
        assert frame is not None  # only after forwarding() named a tensor
        frame["offset"] += n
        if frame["offset"] == frame["sizes"][frame["blob"]]:
            frame["blob"] += 1
            frame["offset"] = 0
            self._advance()

    def finish(self) -> tuple[list[tuple[dict, list]], str | None, bool]:
        """The messages, why reading stopped (None if it did not), whether a frame was cut off."""
        truncated = not self.stopped and (self._frame is not None or self._ring_frame is not None
                                          or len(self._pending) > 0)
        if truncated:
            self._abort()
        return self.messages, self.error, truncated

    # --- parsing ---------------------------------------------------------------------------
    def _step(self, view: memoryview) -> memoryview:
        if self._frame is None:
            return self._read_header(view)
        frame = self._frame
        if frame["blob"] < len(frame["sizes"]):
            i = frame["blob"]
            want = frame["sizes"][i] - frame["offset"]
            piece, view = view[:want], view[want:]
            if self._receiver is not None:
                if len(piece):
                    self._receiver.write(i, frame["offset"], piece)
            else:
                frame["data"][i] += piece
            frame["offset"] += len(piece)
            if frame["offset"] == frame["sizes"][i]:
                frame["blob"] += 1
                frame["offset"] = 0
                self._advance()
            return view
        skip = min(frame["tail"], len(view))
        frame["tail"] -= skip
        self._advance()
        return view[skip:]

    def _read_header(self, view: memoryview) -> memoryview:
        need = 2 * _LEN.size
        if len(self._pending) < need:
            take = need - len(self._pending)
            self._pending += view[:take]
            view = view[take:]
            if len(self._pending) < need:
                return view
        total, hlen = _LEN.unpack_from(self._pending, 0)[0], _LEN.unpack_from(self._pending, _LEN.size)[0]
        if hlen > MAX_HEADER or total > MAX_STREAMED_FRAME or hlen + _LEN.size > total:
            raise wire.WireError("frame length out of range")
        want = need + hlen - len(self._pending)
        self._pending += view[:want]
        view = view[want:]
        if len(self._pending) < need + hlen:
            return view
        raw = bytes(self._pending[need:need + hlen])
        try:
            outer = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise wire.WireError(f"bad header: {exc}") from None
        self._pending = bytearray()
        self._start_frame(outer, total, hlen, decoded_bytes(raw))
        return view

    def _start_frame(self, outer, total: int, hlen: int, cost: int) -> None:
        if not isinstance(outer, dict) or not isinstance(outer.get("h"), dict) or not isinstance(outer.get("n"), list):
            raise wire.WireError("bad header shape")
        head, sizes = outer["h"], outer["n"]
        if not all(isinstance(n, int) and n >= 0 for n in sizes):
            raise wire.WireError("blob length out of range")
        tail = total - _LEN.size - hlen - sum(sizes)
        if not 0 <= tail < wire.ALIGN:
            raise wire.WireError("frame length does not match its blobs")
        metas = wire.check_frame(head, sizes, self.nonce)
        if head.get("kind") == Kind.piece or self._ring_frame is not None or "ring" in head:
            if sizes or tail:
                raise wire.WireError("a ring frame or piece that carries bytes on the pipe")
            if head.get("kind") == Kind.piece:
                self._piece(head)
            elif self._ring_frame is not None:
                raise wire.WireError("a frame inside a ring frame's pieces")
            else:
                self._keep(cost)
                self._start_ring_frame(head)
            return
        self._keep(cost)
        self._receiver = self.sink(head, metas) if (self.sink is not None and sizes) else None
        if self._receiver is None:
            self._buffered += sum(sizes)
            if self._buffered > self.max_buffered:
                raise Overflow(f"more than {_size(self.max_buffered)} of tensors kept")
        self._frame = {"head": head, "metas": metas, "sizes": sizes, "blob": 0, "offset": 0, "tail": tail,
                       "data": [bytearray() for _ in sizes]}
        self._advance()

    def _keep(self, cost: int) -> None:
        """Count one more message to keep, whose header takes `cost` bytes decoded, before any of
        it is read on or handed to a sink."""
        self._kept += 1
        self._header_bytes += cost
        if self._kept > self.max_messages:
            raise Overflow(f"more than {self.max_messages} messages")
        if self._header_bytes > self.max_header_bytes:
            raise Overflow(f"more than {_size(self.max_header_bytes)} of message headers")

    def _start_ring_frame(self, head: dict) -> None:
        """A frame whose tensors' descriptions came under "ring": their bytes follow as pieces."""
        metas = head.get("ring")
        if self.ring is None or self.sink is None:
            raise wire.WireError("a ring frame from a job that has no ring")
        if not isinstance(metas, list):
            raise wire.WireError("bad ring frame")
        sizes = [wire.checked_nbytes(m) for m in metas]
        head = {k: v for k, v in head.items() if k != "ring"}
        head["tensors"] = metas  # read on as any frame's would be
        receiver = self.sink(head, metas)
        if receiver is None:
            raise wire.WireError("a ring frame of a kind whose tensors must come on the pipe")
        self._ring_frame = {"head": head, "sizes": sizes, "index": 0, "offset": 0,
                            "itemsizes": [wire.ITEMSIZE[m["dtype"]] for m in metas]}
        self._receiver = receiver
        self._ring_advance()

    def _piece(self, head: dict) -> None:
        """The next piece of the ring frame being read: it must be exactly the bytes that come
        next, within a slot; the receiver takes it from there."""
        frame, ring, receiver = self._ring_frame, self.ring, self._receiver
        if frame is None or ring is None or receiver is None:
            raise wire.WireError("a piece outside a ring frame")
        if head.get("abort") is True:  # the worker failed mid-frame: its error report comes next
            self._abort()
            return
        values = [head.get(k) for k in ("index", "offset", "n", "slot")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise wire.WireError("bad piece")
        index, offset, n, slot = (int(v) for v in values)  # type: ignore[arg-type]  # ints, checked above
        if index != frame["index"] or offset != frame["offset"] or not 0 < n <= ring.geometry.slot_bytes \
                or offset + n > frame["sizes"][index] or not 0 <= slot < ring.geometry.slots \
                or n % frame["itemsizes"][index]:
            raise wire.WireError("a piece out of order, outside its output or its ring, or splitting an element")
        if not ring.intact():
            raise wire.WireError("a piece in a ring whose memory shrank")
        ring.piece(receiver, index, offset, n, slot)
        frame["offset"] += n
        self._ring_advance()

    def _ring_advance(self) -> None:
        frame = self._ring_frame
        assert frame is not None  # called while a ring frame is being read
        sizes = frame["sizes"]
        while frame["index"] < len(sizes) and frame["offset"] == sizes[frame["index"]]:
            frame["index"] += 1
            frame["offset"] = 0
        if frame["index"] == len(sizes):
            self._ring_frame = None
            receiver, self._receiver = self._receiver, None
            assert receiver is not None  # set with the ring frame
            self._deliver(frame["head"], [receiver.close()])

    def _advance(self) -> None:
        """Step over empty tensors; complete the frame once its data and padding are read."""
        frame = self._frame
        assert frame is not None  # called while a frame is being read
        while frame["blob"] < len(frame["sizes"]) and frame["sizes"][frame["blob"]] == 0:
            frame["blob"] += 1
        if frame["blob"] == len(frame["sizes"]) and frame["tail"] == 0:
            self._complete()

    def _complete(self) -> None:
        frame, self._frame = self._frame, None
        assert frame is not None  # called once a frame's data is read
        if self._receiver is not None:
            receiver, self._receiver = self._receiver, None
            self._deliver(frame["head"], [receiver.close()])
        else:
            self._deliver(frame["head"], [wire.decode_tensor(m, memoryview(b))
                                          for m, b in zip(frame["metas"], frame["data"])])

    def _deliver(self, head: dict, payload: list) -> None:
        """A complete message: kept, and told to whoever follows the job's results."""
        self.messages.append((head, payload))
        if self.on_message is not None:
            self.on_message(head, payload)

    def _abort(self) -> None:
        if self._receiver is not None:
            self._receiver.abort()
            self._receiver = None
        self._frame = None
        self._ring_frame = None

    def _fail(self, reason: str) -> None:
        self.error = reason
        self._abort()


def decoded_bytes(raw: bytes) -> int:
    """At most the memory a JSON header of these bytes takes once decoded (see VALUE_BYTES)."""
    values = 1 + raw.count(b",") + raw.count(b"[") + raw.count(b"{") + raw.count(b":")
    return len(raw) + VALUE_BYTES * values


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


class Discard:
    """A receiver whose bytes are dropped: outputs nobody needs, or a frame the judge turned away
    before they came (then `answer` is its refusal)."""

    def __init__(self, answer: dict | None = None) -> None:
        self.answer = answer if answer is not None else {"discarded": True}

    def write(self, index: int, offset: int, data) -> None:
        pass

    def close(self) -> dict:
        return self.answer

    def abort(self) -> None:
        pass
