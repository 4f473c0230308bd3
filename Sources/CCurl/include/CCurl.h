// libcurl (TidingsCurl's HTTP, mail and certificate transfers), loaded at first use: the binary
// does not link it (no DT_NEEDED), so a command that makes no request (`--version`, `status`,
// `sources`, `config check`) never maps it and the ~30 libraries it needs (7 MiB: DESIGN §15).
// Its headers (libcurl4-openssl-dev's) give the types and constants; its functions are called
// through the tidings_ wrappers below, valid once tidings_curl_load() has returned NULL.
// The setopt/getinfo wrappers also give the C variadics typed forms Swift can call.
#pragma once
#include <curl/curl.h>

/// Loads libcurl.so.4 and runs curl_global_init, once per process: NULL, or why not (the
/// soname and the Debian package to install). Thread-safe.
const char *tidings_curl_load(void);

CURL *tidings_curl_easy_init(void);
void tidings_curl_easy_cleanup(CURL *curl);
void tidings_curl_easy_reset(CURL *curl);
const char *tidings_curl_easy_strerror(CURLcode code);
CURLcode tidings_curl_easy_send(CURL *curl, const void *buffer, size_t buflen, size_t *n);
CURLcode tidings_curl_easy_recv(CURL *curl, void *buffer, size_t buflen, size_t *n);
struct curl_slist *tidings_curl_slist_append(struct curl_slist *list, const char *data);
void tidings_curl_slist_free_all(struct curl_slist *list);
CURLM *tidings_curl_multi_init(void);
CURLMcode tidings_curl_multi_cleanup(CURLM *multi_handle);
CURLMcode tidings_curl_multi_add_handle(CURLM *multi_handle, CURL *curl_handle);
CURLMcode tidings_curl_multi_remove_handle(CURLM *multi_handle, CURL *curl_handle);
CURLMcode tidings_curl_multi_perform(CURLM *multi_handle, int *running_handles);
CURLMsg *tidings_curl_multi_info_read(CURLM *multi_handle, int *msgs_in_queue);
CURLMcode tidings_curl_multi_poll(CURLM *multi_handle, struct curl_waitfd extra_fds[], unsigned int extra_nfds,
                                  int timeout_ms, int *ret);
CURLMcode tidings_curl_multi_wakeup(CURLM *multi_handle);
const char *tidings_curl_multi_strerror(CURLMcode code);

// Typed forms of curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo.
CURLcode tidings_curl_easy_setopt_long(CURL *h, CURLoption o, long v);
CURLcode tidings_curl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v);
CURLcode tidings_curl_easy_setopt_str(CURL *h, CURLoption o, const char *v);
CURLcode tidings_curl_easy_setopt_ptr(CURL *h, CURLoption o, void *v);
CURLcode tidings_curl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v);
/// Write and header callbacks share this signature.
CURLcode tidings_curl_easy_setopt_callback(CURL *h, CURLoption o, curl_write_callback v);
CURLcode tidings_curl_easy_setopt_opensocket(CURL *h, curl_opensocket_callback v);
CURLMcode tidings_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v);
CURLcode tidings_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v);
CURLcode tidings_curl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v);
CURLcode tidings_curl_easy_getinfo_certinfo(CURL *h, struct curl_certinfo **v);
CURLcode tidings_curl_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *v);
CURLcode tidings_curl_easy_getinfo_str(CURL *h, CURLINFO i, char **v);
