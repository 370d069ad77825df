/*
 * rawdownload: the ceiling of the download row (resources.md), in plain C.
 *
 *   rawdownload PREFIX FILES CONCURRENCY OUTDIR [none|inline|pool]
 *
 * Fetches PREFIX0 .. PREFIX(FILES-1), CONCURRENCY in flight on one libcurl
 * multi handle driven by one libuv loop (the socket-action API, as rawbench
 * and Hydra's remote worker; rawloop.h), and saves body i as OUTDIR/i. The last argument
 * says what is done with the digest the resource manager must take of every
 * byte (resources.md puts `sha256` in every result and in the index):
 *
 *   none    each chunk written to its file as it arrives (what
 *           `curl --parallel -o` does: the baseline's own work in C)
 *   inline  the same, and each chunk hashed (SHA-256) on the loop thread
 *           as it arrives: one thread does everything
 *   pool    the body kept in memory, then written and hashed in one piece on
 *           libuv's thread pool (uv_queue_work; UV_THREADPOOL_SIZE threads, 4
 *           by default): the loop only receives, as in Hydra. Body buffers
 *           are reused once stored (no fresh pages per file), which a
 *           repository with a memory tier cannot always do
 *
 * SHA-256 is OpenSSL's (EVP), the fastest on the machines this runs on
 * (SHA-NI; `openssl speed -evp sha256`). No temporary file, no rename, no
 * index, no memory tier: with the digest this is less work than any
 * repository can do, so its rate over curl's is the best ratio the download
 * row can show on this machine.
 *
 * Prints one JSON line:
 *   {"name":"raw-download-MODE","files":N,"concurrency":C,"bytes":B,
 *    "seconds":S,"mbps":M,"cpuSeconds":U}
 * cpuSeconds is the process's user + system time over the whole run.
 *
 * Build: gcc -O2 -Wall -o rawdownload rawdownload.c \
 *            $(pkg-config --cflags --libs libuv libcurl libcrypto)
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "rawloop.h"

enum mode { MODE_NONE, MODE_INLINE, MODE_POOL };

typedef struct {
    CURL *easy;
    long index;       /* the file this slot fetches now */
    int fd;           /* none / inline: the open output file */
    EVP_MD_CTX *sha;  /* inline: the running digest */
    char *buf;        /* pool: the body so far */
    size_t len, cap;
} slot_t;

/* pool: one finished body on its way through the thread pool. */
typedef struct {
    uv_work_t req;
    char *buf;
    size_t len, cap;
    long index;
    int failed;
} job_t;

static enum mode mode;
static const char *prefix, *outdir;
static long files, next_index, finished, failed, nslots;
static size_t total_bytes;
static CURLMsg *done_buf;
/* pool: stored bodies' buffers, ready for the next transfers (loop thread only). */
#define SPARE_MAX 64
static char *spare_buf[SPARE_MAX];
static size_t spare_cap[SPARE_MAX];
static int spare_count;

static int open_output(long index) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%ld", outdir, index);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(path, strerror(errno));
    return fd;
}

static int write_all(int fd, const char *data, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp) {
    slot_t *s = userp;
    size_t n = size * nmemb;
    if (mode == MODE_POOL) {
        if (s->len + n > s->cap) {
            size_t cap = s->cap ? s->cap : 65536;
            while (cap < s->len + n) cap *= 2;
            char *nb = realloc(s->buf, cap);
            if (!nb) return 0;
            s->buf = nb;
            s->cap = cap;
        }
        memcpy(s->buf + s->len, data, n);
        s->len += n;
        return n;
    }
    if (write_all(s->fd, data, n) != 0) return 0;
    if (mode == MODE_INLINE && EVP_DigestUpdate(s->sha, data, n) != 1) return 0;
    s->len += n;
    return n;
}

/* pool: on a thread-pool thread; touches only its job. */
static void store_body(uv_work_t *req) {
    job_t *job = req->data;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    int fd = open_output(job->index);
    job->failed = write_all(fd, job->buf, job->len) != 0
        || EVP_Digest(job->buf, job->len, digest, &digest_len, EVP_sha256(), NULL) != 1;
    if (close(fd) != 0) job->failed = 1;
}

static void file_done(int bad) {
    failed += bad;
    if (++finished == files) uv_stop(loop);
}

/* pool: back on the loop thread. */
static void body_stored(uv_work_t *req, int status) {
    job_t *job = req->data;
    file_done(status != 0 || job->failed);
    if (spare_count < SPARE_MAX) {
        spare_buf[spare_count] = job->buf;
        spare_cap[spare_count++] = job->cap;
    } else {
        free(job->buf);
    }
    free(job);
}

static void start_next(slot_t *s) {
    char url[4096];
    s->index = next_index++;
    s->len = 0;
    snprintf(url, sizeof(url), "%s%ld", prefix, s->index);
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    if (mode != MODE_POOL) s->fd = open_output(s->index);
    if (mode == MODE_INLINE && EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL) != 1) die("EVP_DigestInit_ex", "failed");
    CURLMcode mc = curl_multi_add_handle(multi, s->easy);
    if (mc != CURLM_OK) die("curl_multi_add_handle", curl_multi_strerror(mc));
}

/* One finished transfer: its file is closed (none, inline) or handed to the
 * pool (pool); the slot goes on with the next file. */
static void finish_slot(slot_t *s, int bad) {
    total_bytes += s->len;
    if (mode == MODE_POOL) {
        job_t *job = calloc(1, sizeof(*job));
        if (!job) die("calloc", strerror(errno));
        job->req.data = job;
        job->buf = s->buf;
        job->len = s->len;
        job->cap = s->cap;
        job->index = s->index;
        s->buf = NULL;
        s->cap = 0;
        if (spare_count > 0) {
            s->buf = spare_buf[--spare_count];
            s->cap = spare_cap[spare_count];
        }
        if (bad) {
            free(job->buf);
            free(job);
            file_done(1);
        } else {
            int r = uv_queue_work(loop, &job->req, store_body, body_stored);
            if (r < 0) die("uv_queue_work", uv_strerror(r));
        }
    } else {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int digest_len = 0;
        if (mode == MODE_INLINE && EVP_DigestFinal_ex(s->sha, digest, &digest_len) != 1) bad = 1;
        if (close(s->fd) != 0) bad = 1;
        s->fd = -1;
        file_done(bad);
    }
    if (next_index < files) start_next(s);
}

/* Drains curl_multi_info_read first (easy handle and result are read before
 * the handle is removed), then acts on what finished. */
static void check_info(void) {
    int ndone = raw_collect_done(done_buf, nslots);
    for (int i = 0; i < ndone; i++) {
        CURL *easy = done_buf[i].easy_handle;
        CURLcode rc = done_buf[i].data.result;
        slot_t *s = NULL;
        long code = 0;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
        int bad = rc != CURLE_OK || code != 200;
        if (bad && failed < 5) fprintf(stderr, "rawdownload: file %ld failed: %s (HTTP %ld)\n", s->index, curl_easy_strerror(rc), code);
        curl_multi_remove_handle(multi, easy);
        finish_slot(s, bad);
    }
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s PREFIX FILES CONCURRENCY OUTDIR [none|inline|pool]\n", argv[0]);
        return 2;
    }
    raw_program = "rawdownload";
    prefix = argv[1];
    files = parse_pos(argv[2], "FILES");
    long concurrency = parse_pos(argv[3], "CONCURRENCY");
    outdir = argv[4];
    const char *mode_name = argc == 6 ? argv[5] : "pool";
    if (strcmp(mode_name, "none") == 0) mode = MODE_NONE;
    else if (strcmp(mode_name, "inline") == 0) mode = MODE_INLINE;
    else if (strcmp(mode_name, "pool") == 0) mode = MODE_POOL;
    else die("mode", "expected none, inline or pool");
    nslots = concurrency < files ? concurrency : files;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", "failed");
    loop = uv_default_loop();
    uv_timer_init(loop, &timer);
    multi = curl_multi_init();
    if (!multi) die("curl_multi_init", "failed");
    raw_loop_attach();
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, concurrency);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, concurrency);

    slot_t *slots = calloc((size_t)nslots, sizeof(*slots));
    done_buf = calloc((size_t)nslots, sizeof(*done_buf));
    if (!slots || !done_buf) die("calloc", strerror(errno));
    for (long i = 0; i < nslots; i++) {
        CURL *e = curl_easy_init();
        if (!e) die("curl_easy_init", "failed");
        slots[i].easy = e;
        slots[i].fd = -1;
        if (mode == MODE_INLINE && !(slots[i].sha = EVP_MD_CTX_new())) die("EVP_MD_CTX_new", "failed");
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
    }

    /* Timed from the first request, connections included, as curl --parallel
     * and hydra-bench resource-download are. */
    double cpu_before = cpu_seconds();
    uint64_t t_start = uv_hrtime();
    for (long i = 0; i < nslots; i++) start_next(&slots[i]);
    uv_run(loop, UV_RUN_DEFAULT);
    uint64_t t_end = uv_hrtime();
    double cpu = cpu_seconds() - cpu_before;
    if (finished != files) {
        fprintf(stderr, "rawdownload: loop ended after %ld of %ld files\n", finished, files);
        failed += files - finished;
    }

    double seconds = (double)(t_end - t_start) / 1e9;
    printf("{\"name\":\"raw-download-%s\",\"files\":%ld,\"concurrency\":%ld,\"bytes\":%zu,"
           "\"seconds\":%.3f,\"mbps\":%.3f,\"cpuSeconds\":%.3f}\n",
           mode_name, files, concurrency, total_bytes, seconds,
           seconds > 0 ? (double)total_bytes / 1048576 / seconds : 0.0, cpu);
    fflush(stdout);

    for (long i = 0; i < nslots; i++) {
        curl_multi_remove_handle(multi, slots[i].easy); /* no-op if not added */
        curl_easy_cleanup(slots[i].easy);
        if (slots[i].sha) EVP_MD_CTX_free(slots[i].sha);
        free(slots[i].buf);
    }
    curl_multi_cleanup(multi);
    uv_walk(loop, close_leftover, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    while (spare_count > 0) free(spare_buf[--spare_count]);
    free(slots);
    free(done_buf);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
