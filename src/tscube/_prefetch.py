"""A software prefetch for numba kernels (LLVM's ``llvm.prefetch``; numba has none)."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch_row(typingctx, array, row, col):
    """Ask the cache for the line holding ``array[row, col]`` (2-D array, no bounds or
    wraparound checks: the caller keeps the indices inside). A hint: no effect on values."""
    if not (isinstance(array, types.Array) and array.ndim == 2):
        return None
    sig = types.void(array, row, col)

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        data = context.make_array(array_type)(context, builder, args[0])
        index = [context.cast(builder, args[1], signature.args[1], types.intp),
                 context.cast(builder, args[2], signature.args[2], types.intp)]
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, index, wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        # read access, high temporal locality (keep in all cache levels), data cache
        builder.call(function, [builder.bitcast(pointer, byte_pointer), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
