// OpenSSL's libcrypto (the one libcurl loads; DESIGN §15), loaded at first use: the binary does
// not link it (no DT_NEEDED), so a run that signs nothing and serves no status page never maps
// it. HMAC-SHA256, constant-time compare and random bytes come from it (SHA-256 alone is
// TidingsCrypto's own code: fingerprints are taken in every run). Its headers give the types;
// its functions are called through the tidings_ wrappers below, valid once
// tidings_crypto_load() has returned NULL. Only TidingsCrypto (and its tests) import this module.
#pragma once
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/// Loads libcrypto.so.3, once per process: NULL, or why not (the soname and the Debian package
/// to install). Thread-safe.
const char *tidings_crypto_load(void);

/// HMAC-SHA256 of `data` under `key` into `out` (32 bytes): 1, or 0 if libcrypto failed.
int tidings_hmac_sha256(const void *key, int key_len, const unsigned char *data, size_t data_len,
                        unsigned char *out);
/// SHA-256 of `data` into `out` (32 bytes), by libcrypto (the tests' oracle for TidingsCrypto's
/// own SHA-256): 1, or 0 if libcrypto failed.
int tidings_sha256_libcrypto(const void *data, size_t count, unsigned char *out);
int tidings_CRYPTO_memcmp(const void *a, const void *b, size_t len);
int tidings_RAND_bytes(unsigned char *buf, int num);
unsigned long tidings_ERR_get_error(void);
