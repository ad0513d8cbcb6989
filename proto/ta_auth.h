/* ta_auth.h: the challenge-response of tileatom's Auth request, shared by the daemon and the
 * client library (proto/tileatom.proto states the exchange). The shared secret is the text
 * of a file readable by its owner only (a trailing newline is not part of it); proofs are
 * HMAC-SHA256 over a role label, the daemon's nonce and the client's nonce (OpenSSL's
 * libcrypto: HMAC, RAND_bytes, CRYPTO_memcmp). Nothing here keeps state. */
#ifndef TA_AUTH_H
#define TA_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the daemon's nonce (HelloResponse.auth_nonce). */
#define TA_AUTH_NONCE 32
/* Bytes of the client nonce the library sends; the daemon accepts MIN..MAX. */
#define TA_AUTH_CLIENT_NONCE     32
#define TA_AUTH_CLIENT_NONCE_MIN 16
#define TA_AUTH_CLIENT_NONCE_MAX 64
/* Bytes of a proof (HMAC-SHA256). */
#define TA_AUTH_PROOF 32
/* Largest secret accepted, bytes. */
#define TA_AUTH_SECRET_MAX 1024
/* Shortest secret accepted, bytes (16: e.g. 32 hex digits carry 128 bits). */
#define TA_AUTH_SECRET_MIN 16

/* Which side a proof speaks for: the labels differ, so that one side's proof is never
 * valid for the other. */
typedef enum ta_auth_role {
	TA_AUTH_CLIENT = 0, /* proof: the client knows the secret */
	TA_AUTH_SERVER = 1  /* server_proof: the daemon knows the secret */
} ta_auth_role;

/* A secret read from a file. */
typedef struct ta_auth_secret {
	uint8_t bytes[TA_AUTH_SECRET_MAX]; /* the secret */
	size_t len;                        /* bytes used */
} ta_auth_secret;

/* Reads the secret from path: the file must be a regular file owned by the effective user
 * or root that neither its group nor others may read or write (mode 0600 or 0400), hold
 * TA_AUTH_SECRET_MIN to TA_AUTH_SECRET_MAX bytes after one trailing newline (or CRLF) is dropped,
 * and no NUL. Returns 0, or -1 with a message naming the file and the problem in msg. */
int ta_auth_load(const char *path, ta_auth_secret *out, char *msg, size_t msg_size);
/* Computes the proof of role over the two nonces into out. Returns 0, or -1 when libcrypto
 * fails. */
int ta_auth_proof(const ta_auth_secret *secret, ta_auth_role role,
                  const uint8_t server_nonce[TA_AUTH_NONCE], const uint8_t *client_nonce,
                  size_t client_nonce_len, uint8_t out[TA_AUTH_PROOF]);
/* Fills buf with n cryptographically random bytes. Returns 0, or -1 on failure. */
int ta_auth_random(uint8_t *buf, size_t n);
/* Constant-time comparison of two n-byte strings. */
bool ta_auth_equal(const uint8_t *a, const uint8_t *b, size_t n);
/* Overwrites the secret before its memory is released. */
void ta_auth_wipe(ta_auth_secret *secret);

#ifdef __cplusplus
}
#endif
#endif /* TA_AUTH_H */
