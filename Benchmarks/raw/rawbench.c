/*
 * rawbench: the floor of Hydra's remote-worker stack, in plain C.
 *
 *   rawbench URL REQUESTS CONCURRENCY [--same-options]
 *
 * With --same-options each transfer also gets the options Hydra sets for a
 * default remote job (Accept-Encoding gzip/deflate with transparent decoding,
 * the line given as a header as Hydra gives it,
 * redirects followed up to 5, 30 s total and 10 s connect timeouts, response
 * header lines kept), and the result is named "raw-c-same": the same HTTP
 * work in plain C, so the ratio to it measures Hydra's own overhead.
 *
 * One libuv loop drives one libcurl multi handle through the multi socket API
 * (CURLMOPT_SOCKETFUNCTION -> one uv_poll_t per socket, CURLMOPT_TIMERFUNCTION
 * -> one uv_timer_t). CONCURRENCY easy handles are kept in flight; a finished
 * handle is removed and re-added for the next request so its connection is
 * reused (keep-alive). The write callback appends the body to a per-handle
 * growable buffer (bytes kept, then discarded on completion) and each response
 * must be HTTP 200, otherwise it counts as failed.
 *
 * Like `hydra-bench remote`, it first runs an untimed warm-up of one request
 * per slot (this opens the CONCURRENCY connections), then times REQUESTS.
 *
 * Prints one JSON line:
 *   {"name":"raw-c","concurrency":C,"requests":N,"failed":F,"seconds":S,"rps":R}
 *
 * Build: gcc -O2 -Wall -o rawbench rawbench.c $(pkg-config --cflags --libs libuv libcurl)
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct {
    CURL *easy;
    char *buf;
    size_t len;
    size_t cap;
    char headers[2048]; /* header lines of the current response (--same-options) */
    size_t headers_len;
} slot_t;

/* Keeps each response's header lines, as a client that reports headers must. */
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
    slot_t *slot = userdata;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) slot->headers_len = 0;
    if (slot->headers_len + n <= sizeof(slot->headers)) {
        memcpy(slot->headers + slot->headers_len, ptr, n);
        slot->headers_len += n;
    }
    return n;
}

typedef struct {
    uv_poll_t poll; /* must stay first: the close callback frees the handle */
    curl_socket_t fd;
} sock_ctx_t;

static uv_loop_t *loop;
static CURLM *multi;
static uv_timer_t timer;
static slot_t *slots;
static CURLMsg *done_buf; /* DONE messages collected before acting on them */
static long target, started, completed, failed, concurrency;
static int warming;           /* warm-up phase: slots are not re-added */
static long warm_left, warm_failed;
static uint64_t t_start, t_end;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rawbench: %s: %s\n", what, detail);
    exit(2);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp) {
    slot_t *s = userp;
    size_t n = size * nmemb;
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n) cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb) return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    return n;
}

static void start_next(slot_t *s) {
    s->len = 0;
    started++;
    CURLMcode mc = curl_multi_add_handle(multi, s->easy);
    if (mc != CURLM_OK) die("curl_multi_add_handle", curl_multi_strerror(mc));
}

/* Drain curl_multi_info_read: collect every DONE message first (easy handle and
 * result are read before the handle is removed), then act on them. */
static void check_info(void) {
    CURLMsg *msg;
    int pending, ndone = 0;
    while ((msg = curl_multi_info_read(multi, &pending)) != NULL) {
        if (msg->msg == CURLMSG_DONE && ndone < concurrency) done_buf[ndone++] = *msg;
    }
    for (int i = 0; i < ndone; i++) {
        CURL *easy = done_buf[i].easy_handle;
        CURLcode rc = done_buf[i].data.result;
        slot_t *s = NULL;
        long code = 0;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
        int bad = rc != CURLE_OK || code != 200 || s->len == 0;
        if (bad && failed + warm_failed < 5)
            fprintf(stderr, "rawbench: request failed: %s (HTTP %ld)\n",
                    curl_easy_strerror(rc), code);
        s->len = 0; /* discard the body */
        curl_multi_remove_handle(multi, easy);
        if (warming) {
            warm_failed += bad;
            if (--warm_left == 0) uv_stop(loop);
            continue;
        }
        failed += bad;
        completed++;
        if (started < target) {
            start_next(s);
        } else if (completed == target) {
            t_end = uv_hrtime();
            uv_stop(loop);
        }
    }
}

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
        curl_multi_assign(multi, fd, ctx);
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

int main(int argc, char **argv) {
    int same_options = argc == 5 && strcmp(argv[4], "--same-options") == 0;
    if (argc != 4 && !same_options) {
        fprintf(stderr, "usage: %s URL REQUESTS CONCURRENCY [--same-options]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    target = parse_pos(argv[2], "REQUESTS");
    concurrency = parse_pos(argv[3], "CONCURRENCY");
    long nslots = concurrency < target ? concurrency : target;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", "failed");
    loop = uv_default_loop();
    uv_timer_init(loop, &timer);

    multi = curl_multi_init();
    if (!multi) die("curl_multi_init", "failed");
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, concurrency);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, concurrency);

    struct curl_slist *accept_encoding_header = curl_slist_append(NULL, "Accept-Encoding: gzip, deflate");
    if (!accept_encoding_header) die("curl_slist_append", "failed");

    slots = calloc((size_t)nslots, sizeof(*slots));
    done_buf = calloc((size_t)concurrency, sizeof(*done_buf));
    if (!slots || !done_buf) die("calloc", strerror(errno));
    for (long i = 0; i < nslots; i++) {
        CURL *e = curl_easy_init();
        if (!e) die("curl_easy_init", "failed");
        slots[i].easy = e;
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
        if (same_options) {
            /* As Hydra does: the Accept-Encoding line given as a header (curl 7.88
             * formats its own line anew per request, byte by byte), the option
             * set too so that curl decodes gzip and deflate bodies. */
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, accept_encoding_header);
            curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip, deflate");
            curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
            curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
            curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
            curl_easy_setopt(e, CURLOPT_HEADERDATA, &slots[i]);
        }
    }

    /* Untimed warm-up: one request per slot, all in flight, then wait. */
    warming = 1;
    warm_left = nslots;
    for (long i = 0; i < nslots; i++) {
        slots[i].len = 0;
        CURLMcode mc = curl_multi_add_handle(multi, slots[i].easy);
        if (mc != CURLM_OK) die("curl_multi_add_handle", curl_multi_strerror(mc));
    }
    uv_run(loop, UV_RUN_DEFAULT);
    if (warm_left != 0) die("warm-up", "loop ended early");
    if (warm_failed)
        fprintf(stderr, "rawbench: %ld of %ld warm-up requests failed\n", warm_failed, nslots);
    warming = 0;

    t_start = uv_hrtime();
    for (long i = 0; i < nslots; i++) start_next(&slots[i]);
    uv_run(loop, UV_RUN_DEFAULT);
    if (completed != target) {
        fprintf(stderr, "rawbench: loop ended after %ld of %ld requests\n", completed, target);
        failed += target - completed;
        t_end = uv_hrtime();
    }

    double seconds = (double)(t_end - t_start) / 1e9;
    printf("{\"name\":\"%s\",\"concurrency\":%ld,\"requests\":%ld,\"failed\":%ld,"
           "\"seconds\":%.6f,\"rps\":%.1f}\n", same_options ? "raw-c-same" : "raw-c",
           concurrency, target, failed, seconds, seconds > 0 ? (double)target / seconds : 0.0);
    fflush(stdout);

    /* Teardown: all transfers are removed already; cleanup closes cached
     * connections (may call socket_cb with CURL_POLL_REMOVE), then close what
     * is left on the loop and let the close callbacks run. */
    for (long i = 0; i < nslots; i++) {
        curl_multi_remove_handle(multi, slots[i].easy); /* no-op if not added */
        curl_easy_cleanup(slots[i].easy);
        free(slots[i].buf);
    }
    curl_multi_cleanup(multi);
    multi = NULL;
    curl_slist_free_all(accept_encoding_header);
    uv_walk(loop, close_leftover, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    free(slots);
    free(done_buf);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
