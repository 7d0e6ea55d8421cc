/* The platform side of the exported FMU's library (proxy_fmu.c, which includes this file): the channel to
 * the plant process and the process itself, for Linux (the default) and Windows (win64, cross-built with
 * MinGW-w64).
 *
 * Two channels, the same byte stream for the protocol above them:
 * - a Unix socket pair, one end passed to the child as descriptor 3 (Linux, the default; argument "3");
 * - loopback TCP (Windows, where a child cannot inherit a socket pair; on Linux with -DPROXY_TCP, which
 *   the tests build to run this path here): the library listens on 127.0.0.1 at a port the system picks,
 *   passes "tcp:PORT:TOKEN" to the child, which connects and sends the token first (32 hex digits from the
 *   system's random source: another local process that connects first is refused, not served); then the
 *   listening socket is closed.  TCP_NODELAY on both ends (a request and its reply are small; Nagle's
 *   delay would stall every step).
 * Processes: posix_spawn and waitpid, or CreateProcess and WaitForSingleObject.  A crash of the child is
 * the end of the stream; writes never raise SIGPIPE (MSG_NOSIGNAL; Windows has no such signal). */
#ifndef GEARBOX_HIL_PROXY_CHANNEL_H
#define GEARBOX_HIL_PROXY_CHANNEL_H

#if defined(_WIN32) || defined(PROXY_TCP)
#define CHANNEL_TCP 1
#endif

#ifdef _WIN32
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0600  /* WSAPoll */
#endif
#define _CRT_RAND_S          /* rand_s: the system's random source */
#define WIN32_LEAN_AND_MEAN
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef SOCKET sock_t;
typedef HANDLE proc_t;
typedef long long ssize_t;
#define NO_SOCKET INVALID_SOCKET
#define NO_PROC NULL
#define MSG_NOSIGNAL 0
#define poll WSAPoll
#define DEFAULT_PYTHON "python"
static void close_socket(sock_t s) { closesocket(s); }
static long now_ms(void) { return (long)GetTickCount64(); }
static int last_error_is_interrupt(void) { return 0; }
#else
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
typedef int sock_t;
typedef pid_t proc_t;
#define NO_SOCKET (-1)
#define NO_PROC ((pid_t)-1)
#define DEFAULT_PYTHON "python3"
enum { CHILD_FD = 3 };  /* the socket's number in the child (socket-pair channel) */
static void close_socket(sock_t s) { close(s); }
static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}
static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }
static int last_error_is_interrupt(void) { return errno == EINTR; }
#endif

enum { TOKEN_CHARS = 32 };

/* -- the process ---------------------------------------------------------------------------------------- */
/* End the child now (a hang, a broken stream). */
static void proc_kill(proc_t p) {
    if (p == NO_PROC) return;
#ifdef _WIN32
    TerminateProcess(p, 137);
#else
    kill(p, SIGKILL);
#endif
}

/* Wait up to 2 s for the child to exit, then end it; why it ended as text ("" if unknown). */
static void proc_reap(proc_t p, char *why, size_t size) {
    why[0] = 0;
    if (p == NO_PROC) return;
#ifdef _WIN32
    if (WaitForSingleObject(p, 2000) != WAIT_OBJECT_0) {
        TerminateProcess(p, 137);
        WaitForSingleObject(p, INFINITE);
    }
    DWORD code = 0;
    if (GetExitCodeProcess(p, &code)) snprintf(why, size, "the plant process exited with code %lu", (unsigned long)code);
    CloseHandle(p);
#else
    int status = 0;
    pid_t r = 0;
    for (int k = 0; k < 200 && (r = waitpid(p, &status, WNOHANG)) == 0; k++) sleep_ms(10);
    if (r == 0) {
        kill(p, SIGKILL);
        r = waitpid(p, &status, 0);
    }
    if (r > 0 && WIFSIGNALED(status))
        snprintf(why, size, "the plant process ended by signal %d", WTERMSIG(status));
    else if (r > 0 && WIFEXITED(status))
        snprintf(why, size, "the plant process exited with code %d", WEXITSTATUS(status));
#endif
}

#ifdef CHANNEL_TCP
/* Whether the child has ended (without reaping it). */
static int proc_gone(proc_t p) {
#ifdef _WIN32
    return WaitForSingleObject(p, 0) == WAIT_OBJECT_0;
#else
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)p, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p;
#endif
}
#endif

/* Start PY -m plant_models.fmi.proxy_server CHANNEL RES; `inherit` (socket-pair channel) becomes descriptor
 * CHILD_FD in the child.  0, or an error's text in `err`. */
static int proc_start(proc_t *out, const char *py, const char *channel, const char *res, sock_t inherit,
                      char *err, size_t size) {
#ifdef _WIN32
    (void)inherit;
    size_t n = strlen(py) + strlen(channel) + strlen(res) + 64;
    char *cmd = (char *)malloc(n);
    if (!cmd) return -1;
    snprintf(cmd, n, "\"%s\" -m plant_models.fmi.proxy_server %s \"%s\"", py, channel, res);
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    BOOL ok = CreateProcessA(NULL, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi);
    free(cmd);
    if (!ok) {
        snprintf(err, size, "cannot start the plant process %s: Windows error %lu", py, (unsigned long)GetLastError());
        return -1;
    }
    CloseHandle(pi.hThread);
    *out = pi.hProcess;
    return 0;
#else
    char *argv[] = {(char *)py, "-m", "plant_models.fmi.proxy_server", (char *)channel, (char *)res, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);  /* the child's prints go to stderr, never into the channel */
    if (inherit != NO_SOCKET) {
        if (inherit == CHILD_FD) {  /* dup2 onto itself keeps close-on-exec: move it away first */
            posix_spawn_file_actions_adddup2(&fa, inherit, CHILD_FD + 1);
            posix_spawn_file_actions_adddup2(&fa, CHILD_FD + 1, CHILD_FD);
        } else {
            posix_spawn_file_actions_adddup2(&fa, inherit, CHILD_FD);
        }
    }
    int r = posix_spawnp(out, py, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) {
        snprintf(err, size, "cannot start the plant process %s: %s", py, strerror(r));
        return -1;
    }
    return 0;
#endif
}

/* -- the channel ---------------------------------------------------------------------------------------- */
#ifdef CHANNEL_TCP
static int random_token(char *token) {
    unsigned char bytes[TOKEN_CHARS / 2];
#ifdef _WIN32
    for (size_t k = 0; k < sizeof bytes; k++) {
        unsigned int v;
        if (rand_s(&v) != 0) return -1;
        bytes[k] = (unsigned char)v;
    }
#else
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f) fclose(f);
    if (got != sizeof bytes) return -1;
#endif
    for (size_t k = 0; k < sizeof bytes; k++) snprintf(token + 2 * k, 3, "%02x", bytes[k]);
    return 0;
}

static void no_delay(sock_t s) {
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *)&one, sizeof one);
}

/* A socket listening on 127.0.0.1 at a port the system picks (its number in `port`), or NO_SOCKET. */
static sock_t listen_loopback(unsigned *port) {
    sock_t s = socket(AF_INET, SOCK_STREAM, 0);
    if (s == NO_SOCKET) return NO_SOCKET;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 4) != 0
        || getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close_socket(s);
        return NO_SOCKET;
    }
    *port = ntohs(a.sin_port);
    return s;
}

/* The child's connection on `ls` that sends `token` first (others are closed), within `timeout_ms`, watching
 * the child: NO_SOCKET if it ends or the time runs out. */
static sock_t accept_child(sock_t ls, const char *token, proc_t p, int timeout_ms) {
    long end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        if (proc_gone(p)) return NO_SOCKET;
        struct pollfd pf;
        pf.fd = ls;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, 200) <= 0) continue;
        sock_t s = accept(ls, NULL, NULL);
        if (s == NO_SOCKET) continue;
        char got[TOKEN_CHARS];
        size_t n = 0;
        long until = now_ms() + 5000;  /* the token comes right after the connection */
        while (n < sizeof got && now_ms() < until) {
            struct pollfd q;
            q.fd = s;
            q.events = POLLIN;
            q.revents = 0;
            if (poll(&q, 1, 200) <= 0) continue;
            ssize_t k = recv(s, got + n, (int)(sizeof got - n), 0);
            if (k <= 0) break;
            n += (size_t)k;
        }
        if (n == sizeof got && memcmp(got, token, sizeof got) == 0) {
            no_delay(s);
            return s;
        }
        close_socket(s);  /* not our child */
    }
    return NO_SOCKET;
}
#endif

/* The child started with its end of the channel; our end, or NO_SOCKET (the error's text in `err`). */
static sock_t channel_start(proc_t *p, const char *py, const char *res, int timeout_ms, char *err, size_t size) {
#ifdef CHANNEL_TCP
#ifdef _WIN32
    WSADATA wsa;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) {
        snprintf(err, size, "cannot start Winsock");
        return NO_SOCKET;
    }
#endif
    char token[TOKEN_CHARS + 1], channel[64];
    unsigned port = 0;
    sock_t ls = NO_SOCKET, s = NO_SOCKET;
    if (random_token(token) != 0)
        snprintf(err, size, "no random token for the plant process's connection");
    else if ((ls = listen_loopback(&port)) == NO_SOCKET)
        snprintf(err, size, "cannot listen on the loopback interface");
    else {
        snprintf(channel, sizeof channel, "tcp:%u:%s", port, token);
        if (proc_start(p, py, channel, res, NO_SOCKET, err, size) == 0
            && (s = accept_child(ls, token, *p, timeout_ms)) == NO_SOCKET)
            snprintf(err, size, "the plant process did not connect");
        close_socket(ls);
    }
#ifdef _WIN32
    if (s == NO_SOCKET) WSACleanup();
#endif
    return s;
#else
    (void)timeout_ms;
    int sv[2];
    char channel[16];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, size, "cannot make a socket pair: %s", strerror(errno));
        return NO_SOCKET;
    }
    snprintf(channel, sizeof channel, "%d", CHILD_FD);
    int r = proc_start(p, py, channel, res, sv[1], err, size);
    close(sv[1]);
    if (r != 0) {
        close(sv[0]);
        return NO_SOCKET;
    }
    return sv[0];
#endif
}

/* Our end closed (the child sees the end of its stream). */
static void channel_close(sock_t s) {
    close_socket(s);
#ifdef _WIN32
    WSACleanup();
#endif
}

#endif
