"""Calls of FMI 2.0 C functions by address from compiled code, and addresses as typed pointers (numba intrinsics).

Every argument is an int64 but the times (float64): the instance
(``fmi2Component``), the value-reference and value arrays and the event
info are addresses taken once when the FMU is loaded
(:mod:`.compiled`); each call returns the ``fmi2Status`` as int32.
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


__all__ = ["fmi2_array_call", "fmi2_completed_call", "fmi2_do_step", "fmi2_mode_call", "fmi2_pointer_call", "fmi2_time_call",
           "fmi2_vector_call", "ptr_f64", "ptr_i32", "ptr_i64"]
