/*
 * clockshift: moves the wall clock of a process (and its children) by CLOCK_SHIFT_SECONDS,
 * for `make test-calendar`, which runs the date-sensitive e2e files a year ahead.
 *
 * LD_PRELOAD=clockshift.so CLOCK_SHIFT_SECONDS=31536000 COMMAND
 *
 * Only the wall clock moves (clock_gettime for CLOCK_REALTIME and CLOCK_REALTIME_COARSE,
 * gettimeofday, time): the monotonic and boot-time clocks, and so every timer, sleep and
 * timeout, are left alone. libfaketime moves those too (or, told not to, still converts some
 * timer deadlines), and a Swift program's Task.sleep then never wakes, so the daemon under
 * test would never poll. Statically linked programs (the Go servers some tests start) ignore
 * LD_PRELOAD and keep the real time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift(void) {
    static long seconds = -1;
    if (seconds < 0) {
        const char *s = getenv("CLOCK_SHIFT_SECONDS");
        seconds = s ? atol(s) : 0;
        if (seconds < 0) seconds = 0;
    }
    return seconds;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(clock, ts);
    if (r == 0 && ts && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift();
    return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    static int (*real)(struct timeval *, void *);
    if (!real) real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
    int r = real(tv, tz);
    if (r == 0 && tv) tv->tv_sec += shift();
    return r;
}

time_t time(time_t *t) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}
