"""Device memory that two processes share through a file descriptor (CUDA's virtual memory API).

Used by the judge, which makes the memory and exports it as a file descriptor, and by a worker,
which gets that descriptor with its job and maps the same memory into its own address space.
The descriptor is the only way in: unlike a legacy CUDA IPC handle (64 bytes that open the
memory for any process that learns them), it is a capability held by the processes it was
handed to, so no other job can reach this memory. Calls go to the driver (`libcuda`) through ctypes; both processes
must already have their CUDA context (torch made it current on the calling thread).
"""

from __future__ import annotations

import ctypes
import os

import torch

_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_MINIMUM = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM


class VmmError(RuntimeError):
    """The driver refused a call (the caller falls back to streaming)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_lib: list[ctypes.CDLL] = []


def _driver() -> ctypes.CDLL:
    if not _lib:
        try:
            _lib.append(ctypes.CDLL("libcuda.so.1"))
        except OSError as exc:
            raise VmmError(f"no CUDA driver library: {exc}") from None
    return _lib[0]


def _call(name: str, *args) -> None:
    result = getattr(_driver(), name)(*args)
    if result != 0:
        raise VmmError(f"{name} failed with CUDA driver error {result}")


def _with_context(device: int) -> None:
    """Make sure this thread's current context is torch's on `device` (the driver calls need one)."""
    torch.cuda.set_device(device)
    torch.empty(1, device=torch.device("cuda", device))


def _prop(device: int) -> _AllocProp:
    prop = _AllocProp()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device)
    return prop


class _Interface:
    """What torch.as_tensor reads to wrap memory it does not own (`__cuda_array_interface__`)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


class SharedDeviceMemory:
    """`nbytes` of device memory mapped into this process, as a flat uint8 tensor (`tensor`)."""

    def __init__(self, handle: int, nbytes: int, device: int) -> None:
        self.handle, self.nbytes, self.device = handle, nbytes, device
        self.ptr = 0
        ptr = ctypes.c_uint64()
        try:
            _call("cuMemAddressReserve", ctypes.byref(ptr), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                  ctypes.c_uint64(0), ctypes.c_ulonglong(0))
            self.ptr = ptr.value
            _call("cuMemMap", ptr, ctypes.c_size_t(nbytes), ctypes.c_size_t(0), ctypes.c_ulonglong(handle),
                  ctypes.c_ulonglong(0))
            access = _AccessDesc(_Location(_ON_DEVICE, device), _READ_WRITE)
            _call("cuMemSetAccess", ptr, ctypes.c_size_t(nbytes), ctypes.byref(access), ctypes.c_size_t(1))
        except VmmError:
            self.close()
            raise
        self.tensor = torch.as_tensor(_Interface(self.ptr, nbytes), device=torch.device("cuda", device))

    @classmethod
    def create(cls, nbytes: int, device: int) -> "SharedDeviceMemory":
        """New exportable device memory of at least `nbytes` (rounded up to the driver's granularity)."""
        _with_context(device)
        prop = _prop(device)
        grain = ctypes.c_size_t()
        _call("cuMemGetAllocationGranularity", ctypes.byref(grain), ctypes.byref(prop), ctypes.c_int(_MINIMUM))
        size = -(-nbytes // grain.value) * grain.value
        handle = ctypes.c_ulonglong()
        _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0))
        try:
            return cls(handle.value, size, device)
        except VmmError:
            _driver().cuMemRelease(handle)
            raise

    @classmethod
    def attach(cls, fd: int, nbytes: int, device: int) -> "SharedDeviceMemory":
        """The memory another process exported as `fd` (at least `nbytes` of it), mapped here."""
        _with_context(device)
        handle = ctypes.c_ulonglong()
        _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), ctypes.c_int(_POSIX_FD))
        try:
            return cls(handle.value, nbytes, device)
        except VmmError:
            _driver().cuMemRelease(handle)
            raise

    def export(self) -> int:
        """A new file descriptor for this memory, to hand to one other process."""
        fd = ctypes.c_int(-1)
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), ctypes.c_ulonglong(self.handle),
              ctypes.c_int(_POSIX_FD), ctypes.c_ulonglong(0))
        os.set_inheritable(fd.value, False)
        return fd.value

    def close(self) -> None:
        """Unmap and let go: the driver frees the memory once no process maps it any more."""
        lib = _driver()
        if self.ptr:
            torch.cuda.synchronize(self.device)  # nothing of ours still reads or writes it
            lib.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            lib.cuMemAddressFree(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            self.ptr = 0
        if self.handle:
            lib.cuMemRelease(ctypes.c_ulonglong(self.handle))
            self.handle = 0
