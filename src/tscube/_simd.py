"""Vector loads, arithmetic and stores that numba's loops do not compile to, written as
LLVM vector IR (numba has no SIMD types).

The k-means kernel adds a sample's row to its centre's sums, and shifts, scales and
transposes a tile of samples into float32 columns. Written as loops over the features,
LLVM either checks at every sample that the sums do not overlap the data (the loop
vectoriser's run-time alias test) or keeps every element scalar (a store to the tile
may change the next feature's value, for all it knows). Here each row is one vector
load: the arrays are never views of each other, which the callers guarantee.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def compiles_for_avx512() -> bool:
    """Whether numba compiles for AVX-512 here: its target's features (``NUMBA_CPU_FEATURES``,
    else the host's, as numba takes them). numba's cache is keyed by the target, so a
    kernel whose layout follows this keeps one version per target."""
    features = numba.config.CPU_FEATURES
    if features is not None:
        return "+avx512f" in features.split(",")
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get("avx512f", False))


def _row_pointer(context, builder, array_type, array, row, row_type):
    """Pointer to ``array[row, 0]`` (no bounds or wraparound checks: the caller keeps
    ``row`` inside)."""
    data = context.make_array(array_type)(context, builder, array)
    index = [context.cast(builder, row, row_type, types.intp), context.get_constant(types.intp, 0)]
    return cgutils.get_item_pointer(context, builder, array_type, data, index, wraparound=False)


def _load_row(context, builder, array_type, pointer, count):
    element = context.get_data_type(array_type.dtype)
    vector = ir.VectorType(element, count)
    align = context.get_abi_sizeof(element)
    return builder.load(builder.bitcast(pointer, vector.as_pointer()), align=align, typ=vector)


def _c_rows(array, dtype=None):
    return (isinstance(array, types.Array) and array.ndim == 2 and array.layout == "C"
            and (dtype is None or array.dtype == dtype))


@intrinsic
def add_row(typingctx, sums, k, X, row, features):
    """``sums[k, :D] += X[row, :D]`` with ``D = len(features)`` (a tuple, whose length is
    part of its type): one vector add of float64 rows of C-ordered 2-D arrays."""
    if not (_c_rows(sums, types.float64) and _c_rows(X, types.float64) and isinstance(features, types.UniTuple)):
        return None
    count = features.count

    def codegen(context, builder, signature, args):
        sums_type, k_type, x_type, row_type, _ = signature.args
        target = _row_pointer(context, builder, sums_type, args[0], args[1], k_type)
        source = _row_pointer(context, builder, x_type, args[2], args[3], row_type)
        total = builder.fadd(_load_row(context, builder, sums_type, target, count),
                             _load_row(context, builder, x_type, source, count))
        builder.store(total, builder.bitcast(target, total.type.as_pointer()), align=8)
        return context.get_dummy_value()

    return types.void(sums, k, X, row, features), codegen


#: Samples :func:`transpose_scaled` takes at a time: two 4 × 4 blocks per four features.
TRANSPOSE_WIDTH = 8


def _mask(lanes):
    return ir.Constant(ir.VectorType(ir.IntType(32), len(lanes)), list(lanes))


def _transpose4(builder, pieces):
    """The 4 × 4 transpose of four 4-lane vectors (eight two-source shuffles)."""
    def shuffle(a, b, lanes):
        return builder.shuffle_vector(a, b, _mask(lanes))

    p0, p1, p2, p3 = pieces
    low01, low23 = shuffle(p0, p1, (0, 4, 1, 5)), shuffle(p2, p3, (0, 4, 1, 5))
    high01, high23 = shuffle(p0, p1, (2, 6, 3, 7)), shuffle(p2, p3, (2, 6, 3, 7))
    return (shuffle(low01, low23, (0, 1, 4, 5)), shuffle(low01, low23, (2, 3, 6, 7)),
            shuffle(high01, high23, (0, 1, 4, 5)), shuffle(high01, high23, (2, 3, 6, 7)))


@intrinsic
def transpose_scaled(typingctx, out, column, X, row, origin, scale, features):
    """``out[j, column + i] = float32((X[row + i, j] − origin[j]) × scale)`` for
    ``i < TRANSPOSE_WIDTH`` and ``j < D = len(features)``: each row one float64 vector
    load, shift, scale and rounding to float32; then 4 × 4 blocks of (rows, features)
    transposed by shuffles and stored as four-sample float32 vectors, one per feature
    (``out``: float32, C-ordered, ``D`` rows; ``origin``: D float64s)."""
    if not (_c_rows(out, types.float32) and _c_rows(X, types.float64) and isinstance(features, types.UniTuple)
            and isinstance(origin, types.Array) and origin.ndim == 1 and origin.layout == "C"
            and origin.dtype == types.float64 and scale == types.float64):
        return None
    count = features.count

    def codegen(context, builder, signature, args):
        out_type, column_type, x_type, row_type, origin_type, _, _ = signature.args
        out_arr, column, x_arr, row, origin_arr, scale = args[:6]
        f64, f32, i32 = ir.DoubleType(), ir.FloatType(), ir.IntType(32)
        origin_data = context.make_array(origin_type)(context, builder, origin_arr).data
        shift = builder.load(builder.bitcast(origin_data, ir.VectorType(f64, count).as_pointer()), align=8,
                             typ=ir.VectorType(f64, count))
        factor = ir.Constant(ir.VectorType(f64, count), ir.Undefined)
        for j in range(count):  # the scale in every lane
            factor = builder.insert_element(factor, scale, ir.Constant(i32, j))
        first_row = context.cast(builder, row, row_type, types.intp)
        rows = []
        for i in range(TRANSPOSE_WIDTH):
            index = builder.add(first_row, context.get_constant(types.intp, i))
            pointer = _row_pointer(context, builder, x_type, x_arr, index, types.intp)
            values = builder.fmul(builder.fsub(_load_row(context, builder, x_type, pointer, count), shift), factor)
            rows.append(builder.fptrunc(values, ir.VectorType(f32, count)))
        first_column = context.cast(builder, column, column_type, types.intp)
        for f0 in range(0, count, 4):
            # four features' lanes of a row (a feature past D repeats the last: not stored)
            lanes = _mask([min(f0 + q, count - 1) for q in range(4)])
            for r0 in range(0, TRANSPOSE_WIDTH, 4):
                pieces = [builder.shuffle_vector(rows[r0 + q], rows[r0 + q], lanes) for q in range(4)]
                for q, samples in enumerate(_transpose4(builder, pieces)):
                    if f0 + q >= count:
                        break
                    pointer = _row_pointer(context, builder, out_type, out_arr,
                                           context.get_constant(types.intp, f0 + q), types.intp)
                    pointer = builder.gep(pointer, [builder.add(first_column, context.get_constant(types.intp, r0))])
                    builder.store(samples, builder.bitcast(pointer, samples.type.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(out, column, X, row, origin, scale, features), codegen
