// The libcurl C API as HydraHTTP sees it, plus fixed-signature wrappers for
// the variadic functions Swift cannot call (one per argument type).
#ifndef HYDRA_CCURL_SHIM_H
#define HYDRA_CCURL_SHIM_H
#include <curl/curl.h>
#include <sys/types.h>
#include <string.h>

static inline CURLcode hydra_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hydra_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hydra_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hydra_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*hydra_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode hydra_easy_setopt_data_cb(CURL *h, CURLoption o, hydra_data_cb v) { return curl_easy_setopt(h, o, v); }

typedef int (*hydra_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode hydra_easy_setopt_xferinfo_cb(CURL *h, hydra_xferinfo_cb v) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v); }

typedef curl_socket_t (*hydra_opensocket_cb)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode hydra_easy_setopt_opensocket_cb(CURL *h, hydra_opensocket_cb v) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, v); }
typedef int (*hydra_closesocket_cb)(void *clientp, curl_socket_t item);
static inline CURLcode hydra_easy_setopt_closesocket_cb(CURL *h, hydra_closesocket_cb v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }

static inline CURLcode hydra_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode hydra_easy_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode hydra_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode hydra_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode hydra_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode hydra_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }

typedef int (*hydra_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
static inline CURLMcode hydra_multi_setopt_socket_cb(CURLM *m, hydra_socket_cb v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }

typedef int (*hydra_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
static inline CURLMcode hydra_multi_setopt_timer_cb(CURLM *m, hydra_timer_cb v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

/// The `data.result` of a CURLMsg (a union Swift imports awkwardly).
static inline CURLcode hydra_msg_result(const CURLMsg *m) { return m->data.result; }

typedef int (*hydra_seek_cb)(void *userdata, curl_off_t offset, int origin);
static inline CURLcode hydra_easy_setopt_seek_cb(CURL *h, hydra_seek_cb v) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, v); }

// Finding secrets in response bytes (HydraHTTP's SecretMasking): glibc's
// memmem (a GNU extension Swift's Glibc module leaves out), except for the
// common small case. For a needle of 32 bytes or more glibc builds a 256-entry
// shift table on every call (~300 instructions before the first byte is read),
// and every response of a request with a token is searched twice (body and
// header block), usually a few hundred bytes each. There, memchr for the first
// byte and memcmp at each candidate costs far less; its worst case (every byte
// a candidate) is bounded by the limits: 1 KiB of haystack x 128 bytes of needle.
extern void *memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen);
static inline const void *hydra_memmem(const void *h, size_t hl, const void *n, size_t nl) {
    if (nl == 0) return h;
    if (hl < nl) return NULL;
    if (hl > 1024 || nl > 128) return memmem(h, hl, n, nl);
    const unsigned char *at = (const unsigned char *)h;
    const unsigned char *last = at + (hl - nl);
    const unsigned char first = *(const unsigned char *)n;
    while (at <= last) {
        at = (const unsigned char *)memchr(at, first, (size_t)(last - at) + 1);
        if (at == NULL) return NULL;
        if (memcmp(at + 1, (const unsigned char *)n + 1, nl - 1) == 0) return at;
        at++;
    }
    return NULL;
}

#endif
