// The typed wrappers below take the place of curl.h's type-checking macros.
#define CURL_DISABLE_TYPECHECK
#include "CCurl.h"

#include "CDynamicLoad.h"
#include <pthread.h>

// Every libcurl function called, resolved by name when the library is loaded.
#define CURL_FUNCTIONS(X)                                                                             \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_reset) X(curl_easy_setopt) \
    X(curl_easy_getinfo) X(curl_easy_strerror) X(curl_easy_send) X(curl_easy_recv) X(curl_slist_append) \
    X(curl_slist_free_all) X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_setopt)               \
    X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_perform) X(curl_multi_info_read)  \
    X(curl_multi_poll) X(curl_multi_wakeup) X(curl_multi_strerror)

TIDINGS_DL_TABLE(CURL_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;

// curl_global_init is not thread-safe on its own: here it runs once, under pthread_once.
static void load(void) {
    failed = tidings_dl_load("libcurl.so.4", "libcurl4", names, slots, slot_count, error, sizeof error);
    if (!failed) CALL(curl_global_init)(CURL_GLOBAL_DEFAULT);
}

const char *tidings_curl_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

// Each wrapper has exactly its libcurl function's type (checked here), and forwards.
TIDINGS_DL_SAME_TYPE(curl_easy_init)
TIDINGS_DL_SAME_TYPE(curl_easy_cleanup)
TIDINGS_DL_SAME_TYPE(curl_easy_reset)
TIDINGS_DL_SAME_TYPE(curl_easy_strerror)
TIDINGS_DL_SAME_TYPE(curl_easy_send)
TIDINGS_DL_SAME_TYPE(curl_easy_recv)
TIDINGS_DL_SAME_TYPE(curl_slist_append)
TIDINGS_DL_SAME_TYPE(curl_slist_free_all)
TIDINGS_DL_SAME_TYPE(curl_multi_init)
TIDINGS_DL_SAME_TYPE(curl_multi_cleanup)
TIDINGS_DL_SAME_TYPE(curl_multi_add_handle)
TIDINGS_DL_SAME_TYPE(curl_multi_remove_handle)
TIDINGS_DL_SAME_TYPE(curl_multi_perform)
TIDINGS_DL_SAME_TYPE(curl_multi_info_read)
TIDINGS_DL_SAME_TYPE(curl_multi_poll)
TIDINGS_DL_SAME_TYPE(curl_multi_wakeup)
TIDINGS_DL_SAME_TYPE(curl_multi_strerror)

CURL *tidings_curl_easy_init(void) { return CALL(curl_easy_init)(); }
void tidings_curl_easy_cleanup(CURL *curl) {
    if (curl) CALL(curl_easy_cleanup)(curl);
}
void tidings_curl_easy_reset(CURL *curl) { CALL(curl_easy_reset)(curl); }
const char *tidings_curl_easy_strerror(CURLcode code) { return CALL(curl_easy_strerror)(code); }
CURLcode tidings_curl_easy_send(CURL *curl, const void *buffer, size_t buflen, size_t *n) {
    return CALL(curl_easy_send)(curl, buffer, buflen, n);
}
CURLcode tidings_curl_easy_recv(CURL *curl, void *buffer, size_t buflen, size_t *n) {
    return CALL(curl_easy_recv)(curl, buffer, buflen, n);
}
struct curl_slist *tidings_curl_slist_append(struct curl_slist *list, const char *data) {
    return CALL(curl_slist_append)(list, data);
}
// NULL is nothing to free, whether or not libcurl was loaded (a transfer that never ran).
void tidings_curl_slist_free_all(struct curl_slist *list) {
    if (list) CALL(curl_slist_free_all)(list);
}
CURLM *tidings_curl_multi_init(void) { return CALL(curl_multi_init)(); }
CURLMcode tidings_curl_multi_cleanup(CURLM *multi_handle) { return CALL(curl_multi_cleanup)(multi_handle); }
CURLMcode tidings_curl_multi_add_handle(CURLM *multi_handle, CURL *curl_handle) {
    return CALL(curl_multi_add_handle)(multi_handle, curl_handle);
}
CURLMcode tidings_curl_multi_remove_handle(CURLM *multi_handle, CURL *curl_handle) {
    return CALL(curl_multi_remove_handle)(multi_handle, curl_handle);
}
CURLMcode tidings_curl_multi_perform(CURLM *multi_handle, int *running_handles) {
    return CALL(curl_multi_perform)(multi_handle, running_handles);
}
CURLMsg *tidings_curl_multi_info_read(CURLM *multi_handle, int *msgs_in_queue) {
    return CALL(curl_multi_info_read)(multi_handle, msgs_in_queue);
}
CURLMcode tidings_curl_multi_poll(CURLM *multi_handle, struct curl_waitfd extra_fds[], unsigned int extra_nfds,
                                  int timeout_ms, int *ret) {
    return CALL(curl_multi_poll)(multi_handle, extra_fds, extra_nfds, timeout_ms, ret);
}
CURLMcode tidings_curl_multi_wakeup(CURLM *multi_handle) { return CALL(curl_multi_wakeup)(multi_handle); }
const char *tidings_curl_multi_strerror(CURLMcode code) { return CALL(curl_multi_strerror)(code); }

// curl.h makes curl_easy_setopt and friends type-checking macros under GCC and clang; the
// pointers are called as the variadic functions they are.
CURLcode tidings_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return CALL(curl_easy_setopt)(h, o, v); }
CURLcode tidings_curl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return CALL(curl_easy_setopt)(h, o, v); }
CURLcode tidings_curl_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return CALL(curl_easy_setopt)(h, o, v); }
CURLcode tidings_curl_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return CALL(curl_easy_setopt)(h, o, v); }
CURLcode tidings_curl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) {
    return CALL(curl_easy_setopt)(h, o, v);
}
CURLcode tidings_curl_easy_setopt_callback(CURL *h, CURLoption o, curl_write_callback v) {
    return CALL(curl_easy_setopt)(h, o, v);
}
CURLcode tidings_curl_easy_setopt_opensocket(CURL *h, curl_opensocket_callback v) {
    return CALL(curl_easy_setopt)(h, CURLOPT_OPENSOCKETFUNCTION, v);
}
CURLMcode tidings_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return CALL(curl_multi_setopt)(m, o, v); }
CURLcode tidings_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return CALL(curl_easy_getinfo)(h, i, v); }
CURLcode tidings_curl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return CALL(curl_easy_getinfo)(h, i, v); }
CURLcode tidings_curl_easy_getinfo_certinfo(CURL *h, struct curl_certinfo **v) {
    return CALL(curl_easy_getinfo)(h, CURLINFO_CERTINFO, v);
}
CURLcode tidings_curl_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *v) {
    return CALL(curl_easy_getinfo)(h, i, v);
}
CURLcode tidings_curl_easy_getinfo_str(CURL *h, CURLINFO i, char **v) { return CALL(curl_easy_getinfo)(h, i, v); }
