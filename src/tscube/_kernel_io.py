"""Positional file reads and writes callable from numba kernels (POSIX ``pread``/``pwrite``).

A kernel that streams a file through a small buffer (read a part, update it, write it
elsewhere) keeps the part in the core's cache only if it does the I/O itself: a return to
Python per part costs more than the part's arithmetic. The calls are emitted as calls of
the C library's ``pread``/``pwrite`` by name (linked when the kernel is loaded, so kernels
that use them can be cached on disk), on file descriptors the caller opened.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._jit import jit


def _positional_io(name: str):
    """An intrinsic ``name(fd, address, size, offset) -> int64`` calling the C function."""

    @intrinsic
    def call(typingctx, fd, address, size, offset):
        sig = types.int64(types.int64, types.uintp, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            byte_pointer = ir.PointerType(ir.IntType(8))
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(i64, [ir.IntType(32), byte_pointer, i64, i64]), name)
            return builder.call(function, [builder.trunc(args[0], ir.IntType(32)),
                                           builder.inttoptr(args[1], byte_pointer), args[2], args[3]])

        return sig, codegen

    return call


_pread = _positional_io("pread")
_pwrite = _positional_io("pwrite")


@jit(nogil=True, error_model="numpy")
def _transfer(fd, array, at, write):
    """Move the bytes of the contiguous ``array`` from (``write``: to) file ``fd`` at offset
    ``at``, in as many calls as the system needs; False if a call moves nothing or fails."""
    size = array.size * array.itemsize
    done = 0
    while done < size:
        if write:
            moved = _pwrite(fd, array.ctypes.data + done, size - done, at + done)
        else:
            moved = _pread(fd, array.ctypes.data + done, size - done, at + done)
        if moved <= 0:
            return False
        done += moved
    return True


@jit(nogil=True, error_model="numpy")
def read_exactly(fd, array, at):
    """Fill the contiguous ``array`` with the bytes of file ``fd`` from offset ``at``;
    False if the file ends first or a read fails."""
    return _transfer(fd, array, at, False)


@jit(nogil=True, error_model="numpy")
def write_exactly(fd, array, at):
    """Write the bytes of the contiguous ``array`` into file ``fd`` from offset ``at``;
    False if a write fails (or writes nothing)."""
    return _transfer(fd, array, at, True)
