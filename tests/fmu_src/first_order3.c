/* The FMI 3.0 co-simulation twin of first_order.c (same model, same arithmetic, so the same numbers), built
 * at test time (tests/fmu_build.py) together with fmi_stubs.c, which answers the FMI functions this model does
 * not implement with an error.  Value references as in first_order.c; the types are FMI 3.0's: torque,
 * torque_cmd, tau, torque_start, fail_at Float64; enabled Boolean input; divider Int32 input; step_count Int64
 * output; settled Boolean output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fmi3Functions.h"

typedef struct { fmi3Float64 v[5]; fmi3Float64 time; fmi3Int32 divider; fmi3Int64 step_count;
                 fmi3Boolean enabled, settled; } State;
typedef struct { State s; } Inst;

#define NV 5
#define DEFAULTS(s) ((s).v[2] = 0.1, (s).v[4] = -1.0, (s).divider = 1, (s).enabled = fmi3True)

fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources, fmi3Boolean visible,
                                         fmi3Boolean logging, fmi3Boolean eventModeUsed, fmi3Boolean earlyReturn,
                                         const fmi3ValueReference req[], size_t nReq, fmi3InstanceEnvironment env,
                                         fmi3LogMessageCallback log, fmi3IntermediateUpdateCallback update) {
    Inst *c = (Inst *)calloc(1, sizeof(Inst));
    if (!c) return NULL;
    DEFAULTS(c->s);
    return c;
}
void fmi3FreeInstance(fmi3Instance c) { free(c); }
const char *fmi3GetVersion(void) { return fmi3Version; }
fmi3Status fmi3SetDebugLogging(fmi3Instance c, fmi3Boolean on, size_t n, const fmi3String cat[]) { return fmi3OK; }
fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean tolDef, fmi3Float64 tol, fmi3Float64 t0,
                                       fmi3Boolean stopDef, fmi3Float64 t1) {
    ((Inst *)c)->s.time = t0; return fmi3OK;
}
fmi3Status fmi3ExitInitializationMode(fmi3Instance c) { Inst *i = (Inst *)c; i->s.v[0] = i->s.v[3]; return fmi3OK; }
fmi3Status fmi3Terminate(fmi3Instance c) { return fmi3OK; }
fmi3Status fmi3Reset(fmi3Instance c) { Inst *i = (Inst *)c; memset(&i->s, 0, sizeof(State)); DEFAULTS(i->s);
                                       return fmi3OK; }
fmi3Status fmi3GetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Float64 value[], size_t nv) {
    Inst *i = (Inst *)c;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NV) return fmi3Error; value[k] = i->s.v[vr[k]]; }
    return fmi3OK;
}
fmi3Status fmi3SetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3Float64 value[],
                          size_t nv) {
    Inst *i = (Inst *)c;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NV || vr[k] == 0) return fmi3Error; i->s.v[vr[k]] = value[k]; }
    return fmi3OK;
}
fmi3Status fmi3GetInt32(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Int32 v[], size_t nv) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 6) return fmi3Error; v[k] = ((Inst *)c)->s.divider; }
    return fmi3OK;
}
fmi3Status fmi3SetInt32(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3Int32 v[], size_t nv) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 6) return fmi3Error; ((Inst *)c)->s.divider = v[k]; }
    return fmi3OK;
}
fmi3Status fmi3GetInt64(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Int64 v[], size_t nv) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 7) return fmi3Error; v[k] = ((Inst *)c)->s.step_count; }
    return fmi3OK;
}
fmi3Status fmi3GetBoolean(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Boolean v[], size_t nv) {
    State *s = &((Inst *)c)->s;
    for (size_t k = 0; k < n; k++) {
        if (vr[k] == 5) v[k] = s->enabled; else if (vr[k] == 8) v[k] = s->settled; else return fmi3Error;
    }
    return fmi3OK;
}
fmi3Status fmi3SetBoolean(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3Boolean v[],
                          size_t nv) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 5) return fmi3Error; ((Inst *)c)->s.enabled = v[k]; }
    return fmi3OK;
}
fmi3Status fmi3GetFMUState(fmi3Instance c, fmi3FMUState *st) {
    State *s = *st ? (State *)*st : (State *)malloc(sizeof(State));
    if (!s) return fmi3Error;
    *s = ((Inst *)c)->s; *st = s; return fmi3OK;
}
fmi3Status fmi3SetFMUState(fmi3Instance c, fmi3FMUState st) { ((Inst *)c)->s = *(State *)st; return fmi3OK; }
fmi3Status fmi3FreeFMUState(fmi3Instance c, fmi3FMUState *st) { free(*st); *st = NULL; return fmi3OK; }
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance c, fmi3FMUState st, size_t *size) {
    *size = sizeof(State); return fmi3OK;
}
fmi3Status fmi3SerializeFMUState(fmi3Instance c, fmi3FMUState st, fmi3Byte b[], size_t size) {
    if (size != sizeof(State)) return fmi3Error;
    memcpy(b, st, sizeof(State)); return fmi3OK;
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance c, const fmi3Byte b[], size_t size, fmi3FMUState *st) {
    if (size != sizeof(State)) return fmi3Error;
    State *s = (State *)malloc(sizeof(State));
    if (!s) return fmi3Error;
    memcpy(s, b, sizeof(State)); *st = s; return fmi3OK;
}
fmi3Status fmi3DoStep(fmi3Instance c, fmi3Float64 t, fmi3Float64 h, fmi3Boolean noSetPrior, fmi3Boolean *event,
                      fmi3Boolean *terminate, fmi3Boolean *early, fmi3Float64 *lastTime) {
    Inst *i = (Inst *)c;
    *event = fmi3False; *terminate = fmi3False; *early = fmi3False; *lastTime = t;
    if (i->s.v[4] >= 0.0 && t >= i->s.v[4]) return fmi3Error;
    if (!(h > 0.0) || !(i->s.v[2] > 0.0) || i->s.divider == 0) return fmi3Error;
    fmi3Float64 cmd = i->s.enabled ? i->s.v[1] / i->s.divider : 0.0;
    i->s.v[0] = cmd + (i->s.v[0] - cmd) * exp(-h / i->s.v[2]);
    i->s.step_count += 1;
    i->s.settled = fabs(i->s.v[0] - cmd) <= 1.0;
    i->s.time = t + h; *lastTime = t + h;
    return fmi3OK;
}
