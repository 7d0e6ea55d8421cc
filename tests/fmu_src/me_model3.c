/* The FMI 3.0 model-exchange twins of me_model.c (same models, same arithmetic, so the same numbers), built at
 * test time (tests/fmu_build.py) with weak stubs for the functions not defined here.  Value references and
 * variables as in me_model.c; types: Float64, bounces Int32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fmi3Functions.h"

#ifdef BALL
#define NR 9
#define NX 2
#define NZ 1
#define DER0 2  /* value reference of the first derivative */
#else
#define NR 6
#define NX 1
#define NZ 0
#define DER0 4
#endif

typedef struct { fmi3Float64 r[NR]; fmi3Float64 time; fmi3Int32 bounces, boosted; } State;
typedef struct { State s; } Inst;

static void defaults(State *s) {
    memset(s, 0, sizeof(State));
#ifdef BALL
    s->r[4] = 9.81; s->r[5] = 0.8; s->r[6] = 1.0;
#else
    s->r[2] = 0.1; s->r[5] = -1.0;
#endif
}

static void derivatives(State *s) {
#ifdef BALL
    s->r[2] = s->r[1]; s->r[3] = -s->r[4];
#else
    s->r[4] = ((s->boosted ? 2.0 : 1.0) * s->r[1] - s->r[0]) / s->r[2];
#endif
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token, fmi3String resources,
                                          fmi3Boolean visible, fmi3Boolean logging, fmi3InstanceEnvironment env,
                                          fmi3LogMessageCallback log) {
    Inst *c = (Inst *)calloc(1, sizeof(Inst));
    if (!c) return NULL;
    defaults(&c->s);
    return c;
}
void fmi3FreeInstance(fmi3Instance c) { free(c); }
const char *fmi3GetVersion(void) { return fmi3Version; }
fmi3Status fmi3SetDebugLogging(fmi3Instance c, fmi3Boolean on, size_t n, const fmi3String cat[]) { return fmi3OK; }
fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean tolDef, fmi3Float64 tol, fmi3Float64 t0,
                                       fmi3Boolean stopDef, fmi3Float64 t1) {
    ((Inst *)c)->s.time = t0; return fmi3OK;
}
fmi3Status fmi3ExitInitializationMode(fmi3Instance c) {
    State *s = &((Inst *)c)->s;
#ifdef BALL
    s->r[0] = s->r[6]; s->r[1] = 0.0;
#else
    s->r[0] = s->r[3];
#endif
    return fmi3OK;
}
fmi3Status fmi3Terminate(fmi3Instance c) { return fmi3OK; }
fmi3Status fmi3Reset(fmi3Instance c) { defaults(&((Inst *)c)->s); return fmi3OK; }
fmi3Status fmi3GetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Float64 value[], size_t nv) {
    State *s = &((Inst *)c)->s;
    derivatives(s);
    for (size_t k = 0; k < n; k++) {
        if (vr[k] >= NR || (NR == 9 && vr[k] == 7)) return fmi3Error;
        value[k] = s->r[vr[k]];
    }
    return fmi3OK;
}
fmi3Status fmi3SetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3Float64 value[],
                          size_t nv) {
    State *s = &((Inst *)c)->s;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NR) return fmi3Error; s->r[vr[k]] = value[k]; }
    return fmi3OK;
}
fmi3Status fmi3GetInt32(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Int32 v[], size_t nv) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 7) return fmi3Error; v[k] = ((Inst *)c)->s.bounces; }
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
fmi3Status fmi3EnterEventMode(fmi3Instance c) { return fmi3OK; }
fmi3Status fmi3UpdateDiscreteStates(fmi3Instance c, fmi3Boolean *needUpdate, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *valuesChanged,
                                    fmi3Boolean *nextTimeDefined, fmi3Float64 *nextTime) {
    State *s = &((Inst *)c)->s;
    *needUpdate = fmi3False; *terminate = fmi3False; *nominalsChanged = fmi3False; *valuesChanged = fmi3False;
    *nextTimeDefined = fmi3False; *nextTime = 0.0;
#ifdef BALL
    if (s->r[0] <= 0.0 && s->r[1] < 0.0) {
        s->r[0] = 0.0; s->r[1] = -s->r[5] * s->r[1]; s->bounces += 1; s->r[8] = s->time;
        *valuesChanged = fmi3True;
    }
#else
    if (s->r[5] >= 0.0 && !s->boosted && s->time >= s->r[5]) s->boosted = 1;
    if (s->r[5] >= 0.0 && !s->boosted) { *nextTimeDefined = fmi3True; *nextTime = s->r[5]; }
#endif
    return fmi3OK;
}
fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance c) { return fmi3OK; }
fmi3Status fmi3CompletedIntegratorStep(fmi3Instance c, fmi3Boolean noSetPrior, fmi3Boolean *enterEventMode,
                                       fmi3Boolean *terminate) {
    *enterEventMode = fmi3False; *terminate = fmi3False; return fmi3OK;
}
fmi3Status fmi3SetTime(fmi3Instance c, fmi3Float64 t) { ((Inst *)c)->s.time = t; return fmi3OK; }
fmi3Status fmi3SetContinuousStates(fmi3Instance c, const fmi3Float64 x[], size_t nx) {
    if (nx != NX) return fmi3Error;
    for (size_t k = 0; k < nx; k++) ((Inst *)c)->s.r[k] = x[k];
    return fmi3OK;
}
fmi3Status fmi3GetContinuousStates(fmi3Instance c, fmi3Float64 x[], size_t nx) {
    if (nx != NX) return fmi3Error;
    for (size_t k = 0; k < nx; k++) x[k] = ((Inst *)c)->s.r[k];
    return fmi3OK;
}
fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance c, fmi3Float64 dx[], size_t nx) {
    State *s = &((Inst *)c)->s;
    if (nx != NX) return fmi3Error;
    derivatives(s);
    for (size_t k = 0; k < nx; k++) dx[k] = s->r[DER0 + k];
    return fmi3OK;
}
fmi3Status fmi3GetEventIndicators(fmi3Instance c, fmi3Float64 z[], size_t nz) {
    if (nz != NZ) return fmi3Error;
#ifdef BALL
    z[0] = ((Inst *)c)->s.r[0];
#endif
    return fmi3OK;
}
fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance c, fmi3Float64 x[], size_t nx) {
    for (size_t k = 0; k < nx; k++) x[k] = 1.0;
    return fmi3OK;
}
