/* Two FMI 2.0 model-exchange FMUs from one source, built at test time (tests/fmu_build.py) with fmi_stubs.c:
 *
 * lag (default):  x' = (b u - x) / tau, x = torque (N m, output), u = torque_cmd (N m, input), b = 1, and 2
 *                 from the time event at boost_at on; value references 0 torque, 1 torque_cmd, 2 tau (s,
 *                 tunable), 3 torque_start (N m), 4 der(torque) (N m/s), 5 boost_at (s; negative: never);
 *                 no event indicator.
 * ball (-DBALL):  h' = v, v' = -g; one event indicator z = h; at an event with h <= 0 and v < 0 the ball
 *                 bounces: h = 0, v = -e v, bounces += 1.  Value references 0 h (m, output), 1 v (m/s,
 *                 output), 2 der(h), 3 der(v), 4 g (m/s2), 5 e (-), 6 h_start (m), 7 bounces (Integer output),
 *                 8 t_bounce (s, output: the time of the last bounce, as the importer set it).
 *
 * The state can be got, set and serialized. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

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

typedef struct { fmi2Real r[NR]; fmi2Real time; fmi2Integer bounces, boosted; } State;
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

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String location,
                              const fmi2CallbackFunctions *cb, fmi2Boolean visible, fmi2Boolean logging) {
    Inst *c = (Inst *)calloc(1, sizeof(Inst));
    if (!c) return NULL;
    defaults(&c->s);
    return c;
}
void fmi2FreeInstance(fmi2Component c) { free(c); }
const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cat[]) { return fmi2OK; }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDef, fmi2Real tol, fmi2Real t0, fmi2Boolean stopDef,
                               fmi2Real t1) { ((Inst *)c)->s.time = t0; return fmi2OK; }
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    State *s = &((Inst *)c)->s;
#ifdef BALL
    s->r[0] = s->r[6]; s->r[1] = 0.0;
#else
    s->r[0] = s->r[3];
#endif
    return fmi2OK;
}
fmi2Status fmi2Terminate(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2Reset(fmi2Component c) { defaults(&((Inst *)c)->s); return fmi2OK; }
fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Real value[]) {
    State *s = &((Inst *)c)->s;
    derivatives(s);
    for (size_t k = 0; k < n; k++) {
        if (vr[k] >= NR || (NR == 9 && vr[k] == 7)) return fmi2Error;
        value[k] = s->r[vr[k]];
    }
    return fmi2OK;
}
fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Real value[]) {
    State *s = &((Inst *)c)->s;
    for (size_t k = 0; k < n; k++) { if (vr[k] >= NR) return fmi2Error; s->r[vr[k]] = value[k]; }
    return fmi2OK;
}
fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) {
    for (size_t k = 0; k < n; k++) { if (vr[k] != 7) return fmi2Error; v[k] = ((Inst *)c)->s.bounces; }
    return fmi2OK;
}
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
fmi2Status fmi2EnterEventMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    State *s = &((Inst *)c)->s;
    memset(info, 0, sizeof(fmi2EventInfo));
#ifdef BALL
    if (s->r[0] <= 0.0 && s->r[1] < 0.0) {
        s->r[0] = 0.0; s->r[1] = -s->r[5] * s->r[1]; s->bounces += 1; s->r[8] = s->time;
        info->valuesOfContinuousStatesChanged = fmi2True;
    }
#else
    if (s->r[5] >= 0.0 && !s->boosted && s->time >= s->r[5]) s->boosted = 1;
    if (s->r[5] >= 0.0 && !s->boosted) { info->nextEventTimeDefined = fmi2True; info->nextEventTime = s->r[5]; }
#endif
    return fmi2OK;
}
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior, fmi2Boolean *enterEventMode,
                                       fmi2Boolean *terminate) {
    *enterEventMode = fmi2False; *terminate = fmi2False; return fmi2OK;
}
fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { ((Inst *)c)->s.time = t; return fmi2OK; }
fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    if (nx != NX) return fmi2Error;
    for (size_t k = 0; k < nx; k++) ((Inst *)c)->s.r[k] = x[k];
    return fmi2OK;
}
fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    if (nx != NX) return fmi2Error;
    for (size_t k = 0; k < nx; k++) x[k] = ((Inst *)c)->s.r[k];
    return fmi2OK;
}
fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t nx) {
    State *s = &((Inst *)c)->s;
    if (nx != NX) return fmi2Error;
    derivatives(s);
    for (size_t k = 0; k < nx; k++) dx[k] = s->r[DER0 + k];
    return fmi2OK;
}
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t nz) {
    if (nz != NZ) return fmi2Error;
#ifdef BALL
    z[0] = ((Inst *)c)->s.r[0];
#endif
    return fmi2OK;
}
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    for (size_t k = 0; k < nx; k++) x[k] = 1.0;
    return fmi2OK;
}
