/*
 * rawbench: the floor of Hydra's remote-worker stack, in plain C.
 *
 *   rawbench URL REQUESTS CONCURRENCY [--same-options | --keep-watches]
 *
 * With --same-options each transfer also gets the options Hydra sets for a
 * default remote job (Accept-Encoding gzip/deflate with transparent decoding,
 * the line given as a header as Hydra gives it,
 * redirects followed up to 5, 30 s total and 10 s connect timeouts, response
 * header lines kept, the URL handed over parsed once with CURLOPT_CURLU beside
 * its normalized text), and the result is named "raw-c-same": the same HTTP
 * work in plain C, so the ratio to it measures Hydra's own overhead.
 * With --keep-watches (named "raw-c-armed") the options are the plain ones
 * but each socket's uv_poll_t stays armed between requests, as Hydra's
 * remote worker keeps it (see rawloop.h): a reference row, the floor with
 * that loop.
 *
 * One libuv loop drives one libcurl multi handle through the multi socket API
 * (rawloop.h: CURLMOPT_SOCKETFUNCTION -> one uv_poll_t per socket,
 * CURLMOPT_TIMERFUNCTION -> one uv_timer_t). CONCURRENCY easy handles are kept in flight; a finished
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

#include "rawloop.h"

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


static slot_t *slots;
static CURLMsg *done_buf; /* DONE messages collected before acting on them */
static long target, started, completed, failed, concurrency;
static int warming;           /* warm-up phase: slots are not re-added */
static long warm_left, warm_failed;
static uint64_t t_start, t_end;


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
    int ndone = raw_collect_done(done_buf, concurrency);
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


int main(int argc, char **argv) {
    int same_options = argc == 5 && strcmp(argv[4], "--same-options") == 0;
    raw_keep_watches = argc == 5 && strcmp(argv[4], "--keep-watches") == 0;
    if (argc != 4 && !same_options && !raw_keep_watches) {
        fprintf(stderr, "usage: %s URL REQUESTS CONCURRENCY [--same-options | --keep-watches]\n", argv[0]);
        return 2;
    }
    raw_program = "rawbench";
    const char *url = argv[1];
    target = parse_pos(argv[2], "REQUESTS");
    concurrency = parse_pos(argv[3], "CONCURRENCY");
    long nslots = concurrency < target ? concurrency : target;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", "failed");
    loop = uv_default_loop();
    uv_timer_init(loop, &timer);

    multi = curl_multi_init();
    if (!multi) die("curl_multi_init", "failed");
    raw_loop_attach();
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, concurrency);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, concurrency);

    struct curl_slist *accept_encoding_header = curl_slist_append(NULL, "Accept-Encoding: gzip, deflate");
    if (!accept_encoding_header) die("curl_slist_append", "failed");
    /* As Hydra does (its ParsedURL): the URL parsed once with curl's own flags
     * for CURLOPT_URL, given as a handle together with its normalized text;
     * curl 7.88 otherwise parses and reprints it for every request. */
    CURLU *parsed_url = NULL;
    char *normalized_url = NULL;
    if (same_options) {
        parsed_url = curl_url();
        if (!parsed_url
            || curl_url_set(parsed_url, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK
            || curl_url_get(parsed_url, CURLUPART_URL, &normalized_url, 0) != CURLUE_OK)
            die("curl_url_set", "the URL does not parse");
    }

    slots = calloc((size_t)nslots, sizeof(*slots));
    done_buf = calloc((size_t)concurrency, sizeof(*done_buf));
    if (!slots || !done_buf) die("calloc", strerror(errno));
    for (long i = 0; i < nslots; i++) {
        CURL *e = curl_easy_init();
        if (!e) die("curl_easy_init", "failed");
        slots[i].easy = e;
        if (same_options) {
            curl_easy_setopt(e, CURLOPT_CURLU, parsed_url);
            curl_easy_setopt(e, CURLOPT_URL, normalized_url);
        } else {
            curl_easy_setopt(e, CURLOPT_URL, url);
        }
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
        raw_use_close_callback(e);
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
           "\"seconds\":%.6f,\"rps\":%.1f}\n", same_options ? "raw-c-same" : raw_keep_watches ? "raw-c-armed" : "raw-c",
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
    curl_free(normalized_url);
    curl_url_cleanup(parsed_url);
    uv_walk(loop, close_leftover, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    free(slots);
    free(done_buf);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
