/* The binary of an exported plant FMU (gearbox-hil fmu): an FMI 2.0 co-simulation library that runs the
 * plant in a gearbox-hil process of its own and steps it over a local channel, in lockstep (Linux: a Unix
 * socket pair; Windows: loopback TCP with a token; proxy_channel.h, the platform side, included here).
 *
 * Why a separate process: an importer (FMPy, a master written in C, libcosim) loads this library into its
 * own process; embedding a Python interpreter there ties the importer's heap and threads to Python's (the
 * PythonFMU route corrupted the importer's heap at exit and failed a second instance).  Here the library
 * only spawns a child (posix_spawn, CreateProcess), writes requests and reads replies; a crash or an exit of the child is
 * an fmi2Error of the calls that follow, never a signal in the importer (MSG_NOSIGNAL, no shared memory).
 * Each instance has its own child: many instances per process, fmi2FreeInstance ends and reaps it.
 *
 * One round trip per communication step: the library keeps the inputs set (sent with the step) and the
 * outputs of the last step, initialization, reset or state set (each of those replies carries them), so
 * fmi2SetReal of inputs and fmi2GetReal of inputs or outputs need no message; parameters go to the child.
 *
 * Messages (native byte order, one machine): a request is a header {uint32 op, uint32 n, double a, double b}
 * and a payload of n items (op-specific); a reply is {int32 status, uint32 bytes} and that many bytes
 * (values, a state, or the error's text).  The protocol's other end is plant_models/fmi/proxy_server.py;
 * the operation numbers below must match it.
 *
 * The child is `PYTHON -m plant_models.fmi.proxy_server CHANNEL RESOURCES` (CHANNEL: its descriptor, or
 * tcp:PORT:TOKEN): PYTHON is $GEARBOX_HIL_PYTHON, else the first line of resources/python (the interpreter
 * the FMU was exported with; not on Windows), else python3 (Windows: python). */
#define _GNU_SOURCE
#include "proxy_channel.h"
#include <stdarg.h>
#include <stdint.h>
#include "fmi2Functions.h"

enum { OP_SET_REAL = 1, OP_GET_REAL = 2, OP_DO_STEP = 3, OP_EXIT_INIT = 4, OP_RESET = 5, OP_GET_STATE = 6,
       OP_SET_STATE = 7, OP_QUIT = 8 };
enum { START_TIMEOUT_MS = 600000 };         /* the first start may compile the plant's kernels */
enum { CALL_TIMEOUT_MS = 120000 };          /* a step that takes longer: the plant process hangs */
#define MAX_REPLY_BYTES ((uint32_t)1 << 30) /* a reply's bound: larger is a broken child */

typedef struct { uint32_t op, n; double a, b; } Request;
typedef struct { int32_t status; uint32_t bytes; } Reply;

typedef struct {
    sock_t fd;              /* our end of the channel; NO_SOCKET once the child is gone */
    proc_t pid;
    char *name;
    const fmi2CallbackFunctions *cb;
    unsigned char *buf;     /* the last reply's payload */
    size_t len, cap;
    uint32_t n_in, n_out;   /* value references: inputs 0 .., outputs n_in .., parameters n_in + n_out .. */
    double *u, *y;          /* the inputs as set here, the outputs as of the last reply that carried them */
    int dirty;              /* inputs set here that the child has not seen */
} Inst;

typedef struct { size_t size; unsigned char bytes[]; } State;  /* an fmi2FMUstate: the child's state bytes */

static void say(Inst *c, fmi2Status st, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (c && c->cb && c->cb->logger)
        c->cb->logger(c->cb->componentEnvironment, c->name, st, st >= fmi2Error ? "logStatusError" : "logAll",
                      "%s", text);
    else
        fprintf(stderr, "gearbox-hil fmu: %s\n", text);
}

/* The child gone: reap it (ending it if it still runs) and say why it is gone. */
static void bury(Inst *c, const char *why) {
    if (c->fd != NO_SOCKET) channel_close(c->fd);
    c->fd = NO_SOCKET;
    if (c->pid == NO_PROC) return;
    char text[128];
    proc_reap(c->pid, text, sizeof text);
    if (why) say(c, fmi2Error, "%s: %s", why, *text ? text : "the plant process is gone");
    c->pid = NO_PROC;
}

static int write_all(Inst *c, const void *p, size_t n) {
    const char *s = (const char *)p;
    while (n > 0) {
        ssize_t k = send(c->fd, s, (int)(n < (1u << 30) ? n : (1u << 30)), MSG_NOSIGNAL);
        if (k < 0 && last_error_is_interrupt()) continue;
        if (k <= 0) return -1;
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(Inst *c, void *p, size_t n, int timeout_ms) {
    char *s = (char *)p;
    long end = now_ms() + timeout_ms;
    while (n > 0) {
        struct pollfd pf = {c->fd, POLLIN, 0};
        long left = end - now_ms();
        if (left <= 0) return -2;
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && last_error_is_interrupt()) continue;
        if (r == 0) return -2;
        if (r < 0) return -1;
        ssize_t k = recv(c->fd, s, (int)(n < (1u << 30) ? n : (1u << 30)), 0);
        if (k < 0 && last_error_is_interrupt()) continue;
        if (k <= 0) return -1;
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read one reply into c->buf; its status, or fmi2Error (child gone, logged) / the child's message logged. */
static fmi2Status receive(Inst *c, const char *what, int timeout_ms) {
    Reply rep;
    int r = read_all(c, &rep, sizeof rep, timeout_ms);
    if (r == 0 && rep.bytes > MAX_REPLY_BYTES) r = -1;
    if (r == 0 && rep.bytes + 1 > c->cap) {
        unsigned char *b = (unsigned char *)realloc(c->buf, rep.bytes + 1);
        if (!b) r = -1; else { c->buf = b; c->cap = rep.bytes + 1; }
    }
    if (r == 0 && rep.bytes) r = read_all(c, c->buf, rep.bytes, timeout_ms);
    c->len = r == 0 ? rep.bytes : 0;
    if (r != 0) {
        if (r == -2) proc_kill(c->pid);
        bury(c, r == -2 ? "no answer in time (the plant process was ended)" : what);
        return fmi2Error;
    }
    if (rep.status != fmi2OK) {
        c->buf[rep.bytes] = 0;
        say(c, (fmi2Status)rep.status, "%s: %s", what, (const char *)c->buf);
    }
    return (fmi2Status)rep.status;
}

/* One request (header, then up to two payload parts) and its reply. */
static fmi2Status call(Inst *c, const char *what, uint32_t op, uint32_t n, double a, double b, const void *p1,
                       size_t n1, const void *p2, size_t n2) {
    if (!c || c->fd == NO_SOCKET) {
        if (c) say(c, fmi2Error, "%s: the plant process is gone", what);
        return fmi2Error;
    }
    Request q = {op, n, a, b};
    if (write_all(c, &q, sizeof q) || (n1 && write_all(c, p1, n1)) || (n2 && write_all(c, p2, n2))) {
        bury(c, what);
        return fmi2Error;
    }
    return receive(c, what, CALL_TIMEOUT_MS);
}

/* The resource folder's path from its file: URI (file:///a/b, file:/a/b, percent-escapes decoded). */
static char *resource_path(const char *uri) {
    if (!uri) return NULL;
    if (strncmp(uri, "file://", 7) == 0) uri += 7; else if (strncmp(uri, "file:", 5) == 0) uri += 5;
    if (strncmp(uri, "localhost/", 10) == 0) uri += 9;
    char *out = (char *)malloc(strlen(uri) + 1), *o = out;
    if (!out) return NULL;
    for (const char *s = uri; *s; s++) {
        unsigned v;
        if (s[0] == '%' && s[1] && s[2] && sscanf(s + 1, "%2x", &v) == 1) { *o++ = (char)v; s += 2; }
        else *o++ = *s;
    }
    *o = 0;
#ifdef _WIN32
    if (out[0] == '/' && out[1] && out[2] == ':') memmove(out, out + 1, strlen(out));  /* /C:/x -> C:/x */
#endif
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = 0;
    return out;
}

static void python_of(const char *res, char *py, size_t size) {
    const char *env = getenv("GEARBOX_HIL_PYTHON");
    if (env && *env) { snprintf(py, size, "%s", env); return; }
    snprintf(py, size, DEFAULT_PYTHON);
#ifdef _WIN32
    return;  /* resources/python names the exporting (Linux) machine's interpreter */
#endif
    char path[4096];
    snprintf(path, sizeof path, "%s/python", res);
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fgets(py, (int)size, f)) py[strcspn(py, "\r\n")] = 0;
    if (!*py) snprintf(py, size, DEFAULT_PYTHON);
    fclose(f);
}

static int spawn(Inst *c, const char *res) {
    char py[4096], err[4096 + 256];
    python_of(res, py, sizeof py);
    c->fd = channel_start(&c->pid, py, res, START_TIMEOUT_MS, err, sizeof err);
    if (c->fd == NO_SOCKET) {
        say(c, fmi2Error, "%s", err);
        bury(c, NULL);  /* a child that started but did not connect */
        return -1;
    }
    return 0;
}

/* The child's first reply: {uint32 n_in, n_out}, then its inputs and outputs (n_in + n_out doubles). */
static int hello(Inst *c) {
    uint32_t n[2];
    if (c->len < sizeof n) return 0;
    memcpy(n, c->buf, sizeof n);
    if (c->len != sizeof n + ((size_t)n[0] + n[1]) * sizeof(double)) return 0;
    c->n_in = n[0];
    c->n_out = n[1];
    c->u = (double *)calloc(n[0] + 1, sizeof(double));
    c->y = (double *)calloc(n[1] + 1, sizeof(double));
    if (!c->u || !c->y) return 0;
    memcpy(c->u, c->buf + sizeof n, n[0] * sizeof(double));
    memcpy(c->y, c->buf + sizeof n + n[0] * sizeof(double), n[1] * sizeof(double));
    return 1;
}

/* A reply that carries the outputs (and, with_inputs, the inputs first): kept here. */
static fmi2Status keep(Inst *c, fmi2Status st, int with_inputs) {
    size_t ni = with_inputs ? c->n_in : 0;
    if (st > fmi2Warning) return st;
    if (c->len != (ni + c->n_out) * sizeof(double)) {
        say(c, fmi2Error, "a reply of %zu bytes, not %zu", c->len, (ni + c->n_out) * sizeof(double));
        return fmi2Error;
    }
    memcpy(c->u, c->buf, ni * sizeof(double));
    memcpy(c->y, c->buf + ni * sizeof(double), c->n_out * sizeof(double));
    return st;
}

/* The inputs set here sent to the child (before a request that reads its inputs). */
static fmi2Status flush(Inst *c, const char *what) {
    if (!c->dirty) return fmi2OK;
    uint32_t *vr = (uint32_t *)malloc((c->n_in + 1) * sizeof(uint32_t));
    if (!vr) return fmi2Error;
    for (uint32_t k = 0; k < c->n_in; k++) vr[k] = k;
    fmi2Status st = call(c, what, OP_SET_REAL, c->n_in, 0.0, 0.0, vr, c->n_in * sizeof *vr, c->u,
                         c->n_in * sizeof(double));
    free(vr);
    if (st <= fmi2Warning) c->dirty = 0;
    return st;
}

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String location,
                              const fmi2CallbackFunctions *cb, fmi2Boolean visible, fmi2Boolean logging) {
    Inst *c = (Inst *)calloc(1, sizeof(Inst));
    if (!c) return NULL;
    c->fd = NO_SOCKET;
    c->pid = NO_PROC;
    c->cb = cb;
    c->name = strdup(name ? name : "");
    if (type != fmi2CoSimulation) {
        say(c, fmi2Error, "fmi2Instantiate: only co-simulation is supported");
        fmi2FreeInstance(c);
        return NULL;
    }
    char *res = resource_path(location);
    int ok = res && spawn(c, res) == 0 && receive(c, "fmi2Instantiate", START_TIMEOUT_MS) == fmi2OK
             && hello(c);
    free(res);
    if (!ok) {
        fmi2FreeInstance(c);
        return NULL;
    }
    return c;
}

void fmi2FreeInstance(fmi2Component comp) {
    Inst *c = (Inst *)comp;
    if (!c) return;
    if (c->fd != NO_SOCKET) {
        Request q = {OP_QUIT, 0, 0.0, 0.0};
        write_all(c, &q, sizeof q);
    }
    bury(c, NULL);
    free(c->u);
    free(c->y);
    free(c->buf);
    free(c->name);
    free(c);
}

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cat[]) { return fmi2OK; }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tol_defined, fmi2Real tol, fmi2Real t0,
                               fmi2Boolean stop_defined, fmi2Real t1) {
    if (t0 != 0.0) {
        say((Inst *)c, fmi2Error, "fmi2SetupExperiment: the plant starts at t = 0 (got %g)", t0);
        return fmi2Error;
    }
    return c && ((Inst *)c)->fd != NO_SOCKET ? fmi2OK : fmi2Error;
}
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { return c && ((Inst *)c)->fd != NO_SOCKET ? fmi2OK : fmi2Error; }
fmi2Status fmi2ExitInitializationMode(fmi2Component comp) {
    Inst *c = (Inst *)comp;
    if (!c) return fmi2Error;
    fmi2Status st = call(c, "fmi2ExitInitializationMode", OP_EXIT_INIT, c->n_in, 0.0, 0.0, c->u,
                         c->n_in * sizeof(double), NULL, 0);
    if (st <= fmi2Warning) c->dirty = 0;
    return keep(c, st, 0);
}
fmi2Status fmi2Terminate(fmi2Component c) { return c && ((Inst *)c)->fd != NO_SOCKET ? fmi2OK : fmi2Error; }
fmi2Status fmi2Reset(fmi2Component comp) {
    Inst *c = (Inst *)comp;
    if (!c) return fmi2Error;
    c->dirty = 0;  /* the inputs are the start's again */
    return keep(c, call(c, "fmi2Reset", OP_RESET, 0, 0.0, 0.0, NULL, 0, NULL, 0), 1);
}

static int all_below(const fmi2ValueReference vr[], size_t n, uint32_t end) {
    for (size_t k = 0; k < n; k++) if (vr[k] >= end) return 0;
    return 1;
}

fmi2Status fmi2GetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, fmi2Real value[]) {
    Inst *c = (Inst *)comp;
    if (n == 0) return fmi2OK;
    if (!c) return fmi2Error;
    if (c->fd != NO_SOCKET && all_below(vr, n, c->n_in + c->n_out)) {  /* inputs and outputs: kept here */
        for (size_t k = 0; k < n; k++) value[k] = vr[k] < c->n_in ? c->u[vr[k]] : c->y[vr[k] - c->n_in];
        return fmi2OK;
    }
    fmi2Status st = call(c, "fmi2GetReal", OP_GET_REAL, (uint32_t)n, 0.0, 0.0, vr, n * sizeof *vr, NULL, 0);
    if (st <= fmi2Warning) memcpy(value, c->buf, n * sizeof *value);
    return st;
}
fmi2Status fmi2SetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, const fmi2Real value[]) {
    Inst *c = (Inst *)comp;
    if (n == 0) return fmi2OK;
    if (!c) return fmi2Error;
    if (c->fd != NO_SOCKET && all_below(vr, n, c->n_in)) {  /* inputs: kept here, sent with the next step */
        for (size_t k = 0; k < n; k++) c->u[vr[k]] = value[k];
        c->dirty = 1;
        return fmi2OK;
    }
    fmi2Status st = call(c, "fmi2SetReal", OP_SET_REAL, (uint32_t)n, 0.0, 0.0, vr, n * sizeof *vr, value,
                         n * sizeof *value);
    if (st <= fmi2Warning)  /* the child took the inputs among them too */
        for (size_t k = 0; k < n; k++) if (vr[k] < c->n_in) c->u[vr[k]] = value[k];
    return st;
}

static fmi2Status none(fmi2Component c, const char *what, size_t n) {
    if (n == 0) return fmi2OK;
    say((Inst *)c, fmi2Error, "%s: the plant has Real variables only", what);
    return fmi2Error;
}
fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) {
    return none(c, "fmi2GetInteger", n);
}
fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) {
    return none(c, "fmi2GetBoolean", n);
}
fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) {
    return none(c, "fmi2GetString", n);
}
fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer v[]) {
    return none(c, "fmi2SetInteger", n);
}
fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) {
    return none(c, "fmi2SetBoolean", n);
}
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) {
    return none(c, "fmi2SetString", n);
}

/* -- state: the child's plant state as bytes, kept here (fmi2FMUstate) until freed ------------------------- */
static State *state_of(const void *bytes, size_t size) {
    State *s = (State *)malloc(sizeof(State) + size);
    if (!s) return NULL;
    s->size = size;
    memcpy(s->bytes, bytes, size);
    return s;
}
fmi2Status fmi2GetFMUstate(fmi2Component comp, fmi2FMUstate *st) {
    Inst *c = (Inst *)comp;
    if (!c || flush(c, "fmi2GetFMUstate") > fmi2Warning) return fmi2Error;  /* the inputs set are in the state */
    fmi2Status r = call(c, "fmi2GetFMUstate", OP_GET_STATE, 0, 0.0, 0.0, NULL, 0, NULL, 0);
    if (r > fmi2Warning) return r;
    State *s = state_of(c->buf, c->len);  /* the reply's payload is the state */
    if (!s) return fmi2Error;
    free(*st);  /* a state given back to be overwritten */
    *st = s;
    return fmi2OK;
}
fmi2Status fmi2SetFMUstate(fmi2Component comp, fmi2FMUstate st) {
    Inst *c = (Inst *)comp;
    State *s = (State *)st;
    if (!s || !c) return fmi2Error;
    c->dirty = 0;  /* the state's inputs replace those set here */
    return keep(c, call(c, "fmi2SetFMUstate", OP_SET_STATE, (uint32_t)s->size, 0.0, 0.0, s->bytes, s->size,
                        NULL, 0), 1);
}
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *st) {
    if (st) { free(*st); *st = NULL; }
    return fmi2OK;
}
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate st, size_t *size) {
    if (!st) return fmi2Error;
    *size = sizeof(uint64_t) + ((State *)st)->size;
    return fmi2OK;
}
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate st, fmi2Byte b[], size_t size) {
    State *s = (State *)st;
    if (!s || size != sizeof(uint64_t) + s->size) return fmi2Error;
    uint64_t n = s->size;
    memcpy(b, &n, sizeof n);
    memcpy(b + sizeof n, s->bytes, s->size);
    return fmi2OK;
}
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t size, fmi2FMUstate *st) {
    uint64_t n;
    if (size < sizeof n) return fmi2Error;
    memcpy(&n, b, sizeof n);
    if (n != size - sizeof n) return fmi2Error;
    State *s = state_of(b + sizeof n, (size_t)n);
    if (!s) return fmi2Error;
    *st = s;
    return fmi2OK;
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                        const fmi2ValueReference z[], size_t nz, const fmi2Real dv[],
                                        fmi2Real dz[]) {
    say((Inst *)c, fmi2Error, "fmi2GetDirectionalDerivative: not provided");
    return fmi2Error;
}

/* -- co-simulation ------------------------------------------------------------------------------------------ */
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                       const fmi2Integer order[], const fmi2Real value[]) {
    say((Inst *)c, fmi2Error, "fmi2SetRealInputDerivatives: inputs are held over a step");
    return fmi2Error;
}
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                        const fmi2Integer order[], fmi2Real value[]) {
    say((Inst *)c, fmi2Error, "fmi2GetRealOutputDerivatives: not provided");
    return fmi2Error;
}
fmi2Status fmi2DoStep(fmi2Component comp, fmi2Real t, fmi2Real h, fmi2Boolean no_set_prior) {
    Inst *c = (Inst *)comp;
    if (!c) return fmi2Error;
    fmi2Status st = call(c, "fmi2DoStep", OP_DO_STEP, c->n_in, t, h, c->u, c->n_in * sizeof(double), NULL, 0);
    if (st <= fmi2Warning) c->dirty = 0;
    return keep(c, st, 0);
}
fmi2Status fmi2CancelStep(fmi2Component c) { return fmi2Error; }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) { return fmi2Discard; }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) { return fmi2Discard; }
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) { return fmi2Discard; }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) { return fmi2Discard; }
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) { return fmi2Discard; }
