// OpenSSL's libcrypto (the one libcurl already loads): digests, HMAC, random bytes and
// constant-time compare. Only TidingsCrypto imports this module.
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
