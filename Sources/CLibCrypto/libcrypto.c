#include "CLibCrypto.h"

#include "CDynamicLoad.h"
#include <pthread.h>
#include <stdio.h>

// Every libcrypto function called, resolved by name when the library is loaded.
#define TIDINGS_CRYPTO_FUNCTIONS(X) \
    X(EVP_MD_fetch) X(EVP_Digest) X(HMAC) X(CRYPTO_memcmp) X(RAND_bytes) X(ERR_get_error)

TIDINGS_DL_TABLE(TIDINGS_CRYPTO_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;
/// SHA-256 of the default provider, fetched once: an EVP_sha256() handed to every call would
/// make OpenSSL 3 look the implementation up again each time.
static EVP_MD *sha256;

static void load(void) {
    failed = tidings_dl_load("libcrypto.so.3", "libssl3 (libssl3t64 from Debian 13)", names, slots, slot_count,
                             error, sizeof error);
    if (!failed && (sha256 = CALL(EVP_MD_fetch)(NULL, "SHA256", NULL)) == NULL) {
        snprintf(error, sizeof error, "libcrypto.so.3 has no SHA-256 in its default provider");
        failed = 1;
    }
}

const char *tidings_crypto_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

// Each wrapper has exactly its libcrypto function's type (checked here), and forwards.
TIDINGS_DL_SAME_TYPE(CRYPTO_memcmp)
TIDINGS_DL_SAME_TYPE(RAND_bytes)
TIDINGS_DL_SAME_TYPE(ERR_get_error)

int tidings_hmac_sha256(const void *key, int key_len, const unsigned char *data, size_t data_len,
                        unsigned char *out) {
    unsigned int length = 0;
    return CALL(HMAC)(sha256, key, key_len, data, data_len, out, &length) != NULL && length == 32;
}
int tidings_sha256_libcrypto(const void *data, size_t count, unsigned char *out) {
    unsigned int length = 0;
    return CALL(EVP_Digest)(data, count, out, &length, sha256, NULL) == 1 && length == 32;
}
int tidings_CRYPTO_memcmp(const void *a, const void *b, size_t len) { return CALL(CRYPTO_memcmp)(a, b, len); }
int tidings_RAND_bytes(unsigned char *buf, int num) { return CALL(RAND_bytes)(buf, num); }
unsigned long tidings_ERR_get_error(void) { return CALL(ERR_get_error)(); }
