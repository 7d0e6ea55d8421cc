/* A first-order torque source as an FMI 2.0 co-simulation FMU, built at test time (tests/fmu_build.py).
 *
 *   T' = (T_cmd - T) / tau
 *
 * integrated exactly over each communication step for T_cmd held constant:
 * T(t + h) = T_cmd + (T(t) - T_cmd) exp(-h / tau).  Value references:
 * 0 torque (output, N m), 1 torque_cmd (input, N m), 2 tau (parameter, s),
 * 3 torque_start (parameter, N m), 4 fail_at (parameter, s: doStep returns
 * fmi2Error from this time on; negative: never; built with FAIL_BY_CRASH
 * it writes through a null pointer instead (SIGSEGV), with FAIL_BY_HANG it
 * never returns; with FAIL_AT_LOAD the library aborts as it is loaded: the
 * broken FMUs of tests/test_fmi_process.py); the Integer and Boolean
 * variables (declared only when the build asks for them): 5 enabled
 * (Boolean input: false commands 0), 6 divider (Integer input: the command
 * is torque_cmd / divider; 0 is an error), 7 step_count (Integer output:
 * steps done), 8 settled (Boolean output: |T - command| <= 1 N m).  The
 * state can be got, set and serialized (canGetAndSetFMUstate,
 * canSerializeFMUstate).  first_order3.c is its FMI 3.0 twin. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fmi2Functions.h"

typedef struct { fmi2Real v[5]; fmi2Real time; fmi2Integer divider, step_count; fmi2Boolean enabled, settled; } State;
typedef struct { State s; const fmi2CallbackFunctions *cb; } Inst;

#define NV 5
#if defined(FAIL_AT_LOAD)
__attribute__((constructor)) static void fail_at_load(void) { abort(); }  /* the library aborts as it loads */
#endif
#define DEFAULTS(s) ((s).v[2] = 0.1, (s).v[4] = -1.0, (s).divider = 1, (s).enabled = fmi2True)
#define FAIL(...) return fmi2Error

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String location,
                              const fmi2CallbackFunctions *cb, fmi2Boolean visible, fmi2Boolean logging) {
    Inst *c = (Inst *)calloc(1, sizeof(Inst));
    if (!c) return NULL;
    c->cb = cb;
    DEFAULTS(c->s);
    return c;
}
void fmi2FreeInstance(fmi2Component c) { free(c); }
const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cat[]) { return fmi2OK; }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDef, fmi2Real tol, fmi2Real t0, fmi2Boolean stopDef,
                               fmi2Real t1) { ((Inst *)c)->s.time = t0; return fmi2OK; }
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2ExitInitializationMode(fmi2Component c) { Inst *i = (Inst *)c; i->s.v[0] = i->s.v[3]; return fmi2OK; }
fmi2Status fmi2Terminate(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2Reset(fmi2Component c) { Inst *i = (Inst *)c; memset(&i->s, 0, sizeof(State)); DEFAULTS(i->s);
                                        return fmi2OK; }
fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Real value[]) {
    Inst *i = (Inst *)c;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NV) return fmi2Error; value[k] = i->s.v[vr[k]]; }
    return fmi2OK;
}
fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Real value[]) {
    Inst *i = (Inst *)c;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NV || vr[k] == 0) return fmi2Error; i->s.v[vr[k]] = value[k]; }
    return fmi2OK;
}
fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) {
    State *s = &((Inst *)c)->s;
    for (size_t k = 0; k < n; k++) {
        if (vr[k] == 6) v[k] = s->divider; else if (vr[k] == 7) v[k] = s->step_count; else return fmi2Error;
    }
    return fmi2OK;
}
fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) {
    State *s = &((Inst *)c)->s;
    for (size_t k = 0; k < n; k++) {
        if (vr[k] == 5) v[k] = s->enabled; else if (vr[k] == 8) v[k] = s->settled; else return fmi2Error;
    }
    return fmi2OK;
}
fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) { FAIL(); }
fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer v[]) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 6) return fmi2Error; ((Inst *)c)->s.divider = v[k]; }
    return fmi2OK;
}
fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 5) return fmi2Error; ((Inst *)c)->s.enabled = v[k]; }
    return fmi2OK;
}
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) { FAIL(); }
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *st) {
    State *s = *st ? (State *)*st : (State *)malloc(sizeof(State));
    if (!s) return fmi2Error;
    *s = ((Inst *)c)->s; *st = s; return fmi2OK;
}
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate st) { ((Inst *)c)->s = *(State *)st; return fmi2OK; }
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *st) { free(*st); *st = NULL; return fmi2OK; }
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate st, size_t *size) {
    *size = sizeof(State); return fmi2OK;
}
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate st, fmi2Byte b[], size_t size) {
    if (size != sizeof(State)) return fmi2Error;
    memcpy(b, st, sizeof(State)); return fmi2OK;
}
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t size, fmi2FMUstate *st) {
    if (size != sizeof(State)) return fmi2Error;
    State *s = (State *)malloc(sizeof(State));
    if (!s) return fmi2Error;
    memcpy(s, b, sizeof(State)); *st = s; return fmi2OK;
}
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                        const fmi2ValueReference z[], size_t nz, const fmi2Real dv[],
                                        fmi2Real dz[]) { FAIL(); }
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                       const fmi2Integer order[], const fmi2Real value[]) { FAIL(); }
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                        const fmi2Integer order[], fmi2Real value[]) { FAIL(); }
fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    Inst *i = (Inst *)c;
    if (i->s.v[4] >= 0.0 && t >= i->s.v[4]) {
#if defined(FAIL_BY_CRASH)
        volatile int *volatile nowhere = NULL;  /* volatile both: the write is done, not optimised away */
        *nowhere = 1;
#elif defined(FAIL_BY_HANG)
        for (;;) sleep(1);
#endif
        return fmi2Error;
    }
    if (!(h > 0.0) || !(i->s.v[2] > 0.0) || i->s.divider == 0) return fmi2Error;
    fmi2Real cmd = i->s.enabled ? i->s.v[1] / i->s.divider : 0.0;
    i->s.v[0] = cmd + (i->s.v[0] - cmd) * exp(-h / i->s.v[2]);
    i->s.step_count += 1;
    i->s.settled = fabs(i->s.v[0] - cmd) <= 1.0;
    i->s.time = t + h;
    return fmi2OK;
}
fmi2Status fmi2CancelStep(fmi2Component c) { FAIL(); }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) { FAIL(); }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *v) { FAIL(); }
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) { FAIL(); }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *v) { FAIL(); }
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) { FAIL(); }
