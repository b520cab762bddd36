#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/bio.h>
#include <openssl/hmac.h>
#include <openssl/decoder.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#endif
