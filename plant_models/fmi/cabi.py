"""Calls of FMI 2.0 and 3.0 C functions by address from compiled code, and addresses as typed pointers (numba
intrinsics).

Every argument is an int64 but the times (float64): the instance
(``fmi2Component``, ``fmi3Instance``), the value-reference and value arrays,
the event info and the flags the FMU writes are addresses taken once when
the FMU is loaded (:mod:`.compiled`); each call returns the status
(``fmi2Status``, ``fmi3Status``: the same numbers) as int32.  FMI 3.0's
``fmi3Boolean`` is C's ``bool``: a flag passed by value goes as a 32-bit 1
(the register holds 1 whatever width the callee reads), a flag the FMU
writes is read as one byte (:func:`ptr_u8`).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _pointer_from(pointee):
    def typer(typingctx, address):
        sig = types.CPointer(pointee)(address)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen
    return typer


ptr_f64 = intrinsic(_pointer_from(types.float64))
ptr_i64 = intrinsic(_pointer_from(types.int64))
ptr_i32 = intrinsic(_pointer_from(types.int32))
ptr_u8 = intrinsic(_pointer_from(types.uint8))


@intrinsic
def fmi2_array_call(typingctx, address, component, vrs, n, values):
    """``fmi2Status f(fmi2Component, const fmi2ValueReference vr[], size_t nvr, fmi2Real/fmi2Integer value[])``
    at ``address`` (fmi2SetReal, fmi2GetReal, ..., Boolean): every argument an int64 (pointers as addresses).

    Called in the real-time loop."""
    sig = types.int32(address, component, vrs, n, values)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [p, p, ir.IntType(64), p])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [builder.inttoptr(args[1], p), builder.inttoptr(args[2], p), args[3],
                                 builder.inttoptr(args[4], p)])
    return sig, codegen


@intrinsic
def fmi2_do_step(typingctx, address, component, t, h):
    """``fmi2DoStep(component, currentCommunicationPoint t, communicationStepSize h, noSetFMUStatePriorToCurrentPoint
    = fmi2True)`` at ``address``.  Called in the real-time loop."""
    sig = types.int32(address, component, t, h)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(i32, [p, ir.DoubleType(), ir.DoubleType(), i32])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [builder.inttoptr(args[1], p), args[2], args[3], ir.Constant(i32, 1)])
    return sig, codegen


@intrinsic
def fmi2_time_call(typingctx, address, component, t):
    """``fmi2SetTime(component, t)`` at ``address``.  Called in the real-time loop."""
    sig = types.int32(address, component, t)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [p, ir.DoubleType()])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], p), args[2]])
    return sig, codegen


@intrinsic
def fmi2_vector_call(typingctx, address, component, values, n):
    """``f(component, fmi2Real x[], size_t n)`` at ``address`` (fmi2SetContinuousStates, fmi2GetContinuousStates,
    fmi2GetDerivatives, fmi2GetEventIndicators).  Called in the real-time loop."""
    sig = types.int32(address, component, values, n)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [p, p, ir.IntType(64)])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                            [builder.inttoptr(args[1], p), builder.inttoptr(args[2], p), args[3]])
    return sig, codegen


@intrinsic
def fmi2_pointer_call(typingctx, address, component, pointer):
    """``f(component, void *p)`` at ``address`` (fmi2NewDiscreteStates with its event info).  Called in the
    real-time loop."""
    sig = types.int32(address, component, pointer)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [p, p])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                            [builder.inttoptr(args[1], p), builder.inttoptr(args[2], p)])
    return sig, codegen


@intrinsic
def fmi2_mode_call(typingctx, address, component):
    """``f(component)`` at ``address`` (fmi2EnterEventMode, fmi2EnterContinuousTimeMode).  Called in the real-time
    loop."""
    sig = types.int32(address, component)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [p])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], p)])
    return sig, codegen


@intrinsic
def fmi2_completed_call(typingctx, address, component, enter_event, terminate):
    """``fmi2CompletedIntegratorStep(component, noSetFMUStatePriorToCurrentPoint = fmi2True, &enterEventMode,
    &terminateSimulation)`` at ``address``.  Called in the real-time loop."""
    sig = types.int32(address, component, enter_event, terminate)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(i32, [p, i32, p, p])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                            [builder.inttoptr(args[1], p), ir.Constant(i32, 1), builder.inttoptr(args[2], p),
                             builder.inttoptr(args[3], p)])
    return sig, codegen


@intrinsic
def fmi3_array_call(typingctx, address, component, vrs, n, values):
    """``fmi3Status f(fmi3Instance, const fmi3ValueReference vr[], size_t nvr, value[], size_t nValues = nvr)`` at
    ``address`` (fmi3SetFloat64, fmi3GetInt32, ..., Boolean: scalar variables, one value each).  Called in the
    real-time loop."""
    sig = types.int32(address, component, vrs, n, values)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.IntType(32), [p, p, i64, p, i64])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [builder.inttoptr(args[1], p), builder.inttoptr(args[2], p), args[3],
                                 builder.inttoptr(args[4], p), args[3]])
    return sig, codegen


@intrinsic
def fmi3_do_step(typingctx, address, component, t, h, flags):
    """``fmi3DoStep(instance, t, h, noSetFMUStatePriorToCurrentPoint = true, &eventHandlingNeeded,
    &terminateSimulation, &earlyReturn, &lastSuccessfulTime)`` at ``address``; ``flags``: the address of a table of
    the four pointers' addresses (int64 each).  Called in the real-time loop."""
    sig = types.int32(address, component, t, h, flags)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(i32, [p, ir.DoubleType(), ir.DoubleType(), i32, p, p, p, p])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        table = builder.inttoptr(args[4], i64.as_pointer())
        refs = [builder.inttoptr(builder.load(builder.gep(table, [ir.Constant(i64, k)])), p) for k in range(4)]
        return builder.call(fn, [builder.inttoptr(args[1], p), args[2], args[3], ir.Constant(i32, 1), *refs])
    return sig, codegen


@intrinsic
def fmi3_update_call(typingctx, address, component, flags):
    """``fmi3UpdateDiscreteStates(instance, &discreteStatesNeedUpdate, &terminateSimulation,
    &nominalsOfContinuousStatesChanged, &valuesOfContinuousStatesChanged, &nextEventTimeDefined, &nextEventTime)``
    at ``address``; ``flags``: the address of a table of the six pointers' addresses.  Called in the real-time
    loop."""
    sig = types.int32(address, component, flags)

    def codegen(context, builder, signature, args):
        p = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.IntType(32), [p] * 7)
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        table = builder.inttoptr(args[2], i64.as_pointer())
        refs = [builder.inttoptr(builder.load(builder.gep(table, [ir.Constant(i64, k)])), p) for k in range(6)]
        return builder.call(fn, [builder.inttoptr(args[1], p), *refs])
    return sig, codegen


__all__ = ["fmi2_array_call", "fmi2_completed_call", "fmi2_do_step", "fmi2_mode_call", "fmi2_pointer_call", "fmi2_time_call",
           "fmi2_vector_call", "fmi3_array_call", "fmi3_do_step", "fmi3_update_call", "ptr_f64", "ptr_i32", "ptr_i64",
           "ptr_u8"]
