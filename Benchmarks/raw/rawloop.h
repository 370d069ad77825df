/*
 * The libuv <-> libcurl multi glue of the raw C benchmarks (rawbench.c,
 * rawdownload.c): one libuv loop drives one multi handle through the socket
 * action API: CURLMOPT_SOCKETFUNCTION -> one uv_poll_t per socket,
 * CURLMOPT_TIMERFUNCTION -> one uv_timer_t. Everything runs on the loop's
 * thread. Each program defines check_info() (acts on finished transfers) and
 * sets raw_program (its name, for messages) before anything else.
 *
 * By default a socket's uv_poll_t is closed on CURL_POLL_REMOVE and made
 * anew when curl watches the socket again, as libcurl's multi-uv example
 * does: on a kept-alive connection that is ~6 epoll_ctl calls per request.
 * With raw_keep_watches set (rawbench --keep-watches, a reference row) a
 * watch lives as long as its socket and stays armed between requests, as
 * Hydra's SocketWatch does; each easy handle then needs
 * raw_use_close_callback(), so that a socket's watch is closed before it.
 */
#ifndef HYDRA_RAWLOOP_H
#define HYDRA_RAWLOOP_H
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

static const char *raw_program = "raw";
static uv_loop_t *loop;
static CURLM *multi;
static uv_timer_t timer;

/* The program's: drains curl_multi_info_read and acts on what finished. */
static void check_info(void);

static void die(const char *what, const char *detail) {
    fprintf(stderr, "%s: %s: %s\n", raw_program, what, detail);
    exit(2);
}

typedef struct {
    uv_poll_t poll; /* must stay first: the close callback frees the handle */
    curl_socket_t fd;
} sock_ctx_t;

static int raw_keep_watches;
/* With raw_keep_watches: the watch of each open socket, by descriptor. */
#define RAW_MAX_FD 65536
static sock_ctx_t *watch_by_fd[RAW_MAX_FD];

static void on_poll(uv_poll_t *handle, int status, int events) {
    sock_ctx_t *ctx = (sock_ctx_t *)handle;
    curl_socket_t fd = ctx->fd; /* ctx may be closed by the socket callback below */
    int flags = 0;
    int running;
    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    curl_multi_socket_action(multi, fd, flags, &running);
    check_info();
}

static void on_timeout(uv_timer_t *t) {
    int running;
    (void)t;
    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_info();
}

/* CURLMOPT_TIMERFUNCTION: only (re)arm or stop the uv timer here. */
static int timer_cb(CURLM *m, long timeout_ms, void *userp) {
    (void)m;
    (void)userp;
    if (timeout_ms < 0)
        uv_timer_stop(&timer);
    else
        uv_timer_start(&timer, on_timeout, (uint64_t)timeout_ms, 0); /* 0 = asap */
    return 0;
}

static void on_close_free(uv_handle_t *h) { free(h); }

/* CURLMOPT_SOCKETFUNCTION: one uv_poll_t per socket, created on first use. */
static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    sock_ctx_t *ctx = socketp;
    (void)easy;
    (void)userp;
    if (raw_keep_watches) {
        if (fd < 0 || fd >= RAW_MAX_FD) die("socket_cb", "descriptor out of range");
        if (!ctx) ctx = watch_by_fd[fd];
        if (what == CURL_POLL_REMOVE) return 0; /* stays armed; closed with its socket */
    }
    if (what == CURL_POLL_REMOVE) {
        if (ctx) {
            uv_poll_stop(&ctx->poll);
            uv_close((uv_handle_t *)&ctx->poll, on_close_free);
            curl_multi_assign(multi, fd, NULL);
        }
        return 0;
    }
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx) die("calloc", strerror(errno));
        ctx->fd = fd;
        int r = uv_poll_init_socket(loop, &ctx->poll, fd);
        if (r < 0) die("uv_poll_init_socket", uv_strerror(r));
        if (raw_keep_watches) watch_by_fd[fd] = ctx;
        curl_multi_assign(multi, fd, ctx);
    } else if (!socketp) {
        curl_multi_assign(multi, fd, ctx); /* a kept watch: curl forgot it on REMOVE */
    }
    int events = 0;
    if (what & CURL_POLL_IN) events |= UV_READABLE;
    if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
    int r = uv_poll_start(&ctx->poll, events, on_poll);
    if (r < 0) die("uv_poll_start", uv_strerror(r));
    return 0;
}

static void close_leftover(uv_handle_t *h, void *arg) {
    (void)arg;
    if (uv_is_closing(h)) return;
    uv_close(h, h->type == UV_POLL ? on_close_free : NULL);
}

static long parse_pos(const char *s, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0) die(what, "must be a positive integer");
    return v;
}

/* Copies up to `max` DONE messages into `done` and returns how many: all are
 * read before any handle is removed (removing one invalidates the messages). */
static int raw_collect_done(CURLMsg *done, long max) {
    CURLMsg *msg;
    int pending, n = 0;
    while ((msg = curl_multi_info_read(multi, &pending)) != NULL) {
        if (msg->msg == CURLMSG_DONE && n < max) done[n++] = *msg;
    }
    return n;
}

/* CURLOPT_CLOSESOCKETFUNCTION with raw_keep_watches: the socket's watch is
 * closed first (libuv must not watch a descriptor closed under it). */
static int close_socket_cb(void *clientp, curl_socket_t fd) {
    (void)clientp;
    if (fd >= 0 && fd < RAW_MAX_FD && watch_by_fd[fd]) {
        uv_close((uv_handle_t *)&watch_by_fd[fd]->poll, on_close_free);
        watch_by_fd[fd] = NULL;
    }
    return close(fd);
}

static inline void raw_use_close_callback(CURL *easy) {
    if (raw_keep_watches) curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, close_socket_cb);
}

/* Sets the multi handle's socket and timer callbacks to the ones above. */
static void raw_loop_attach(void) {
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
}

#endif
