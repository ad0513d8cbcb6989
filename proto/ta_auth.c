/* ta_auth.c: the secret file and the proofs of the Auth exchange (see ta_auth.h). */
#include "ta_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* Role labels hashed in front of the nonces. */
static const char *const role_label[] = {"tileatom-auth-v1 client", "tileatom-auth-v1 server"};

int ta_auth_load(const char *path, ta_auth_secret *out, char *msg, size_t msg_size)
{
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(msg, msg_size, "cannot open the auth file %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(msg, msg_size, "cannot inspect the auth file %s: %s", path,
		         strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(msg, msg_size, "the auth file %s is not a regular file", path);
		close(fd);
		return -1;
	}
	/* as ssh does for its keys: a file someone else owns is a secret they chose */
	uid_t me = geteuid();
	if (st.st_uid != me && st.st_uid != 0) {
		snprintf(msg, msg_size,
		         "the auth file %s belongs to uid %u: it must belong to the user running "
		         "this program (uid %u) or to root (chown %u %s)",
		         path, (unsigned)st.st_uid, (unsigned)me, (unsigned)me, path);
		close(fd);
		return -1;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(msg, msg_size,
		         "the auth file %s has mode %04o: group and others must have no access "
		         "(chmod 600 %s)",
		         path, (unsigned)(st.st_mode & 07777), path);
		close(fd);
		return -1;
	}
	uint8_t buf[TA_AUTH_SECRET_MAX + 3];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(msg, msg_size, "cannot read the auth file %s: %s", path,
			         strerror(errno));
			close(fd);
			OPENSSL_cleanse(buf, sizeof(buf));
			return -1;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have == sizeof(buf))
			break;
	}
	close(fd);
	if (have > 0 && buf[have - 1] == '\n')
		have--;
	if (have > 0 && buf[have - 1] == '\r')
		have--;
	int rc = -1;
	if (have > TA_AUTH_SECRET_MAX)
		snprintf(msg, msg_size, "the auth file %s holds more than %d bytes", path,
		         TA_AUTH_SECRET_MAX);
	else if (have < TA_AUTH_SECRET_MIN)
		snprintf(msg, msg_size,
		         "the auth file %s holds %zu bytes: a secret needs at least %d (e.g. 32 "
		         "hex digits: openssl rand -hex 16)",
		         path, have, TA_AUTH_SECRET_MIN);
	else if (memchr(buf, '\0', have))
		snprintf(msg, msg_size, "the auth file %s holds a NUL byte", path);
	else {
		memcpy(out->bytes, buf, have);
		out->len = have;
		rc = 0;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return rc;
}

int ta_auth_proof(const ta_auth_secret *secret, ta_auth_role role,
                  const uint8_t server_nonce[TA_AUTH_NONCE], const uint8_t *client_nonce,
                  size_t client_nonce_len, uint8_t out[TA_AUTH_PROOF])
{
	const char *label = role_label[role == TA_AUTH_SERVER ? 1 : 0];
	size_t label_len = strlen(label);
	uint8_t data[64 + TA_AUTH_NONCE + TA_AUTH_CLIENT_NONCE_MAX];
	if (client_nonce_len > TA_AUTH_CLIENT_NONCE_MAX || label_len > 64)
		return -1;
	memcpy(data, label, label_len);
	memcpy(data + label_len, server_nonce, TA_AUTH_NONCE);
	if (client_nonce_len)
		memcpy(data + label_len + TA_AUTH_NONCE, client_nonce, client_nonce_len);
	unsigned int out_len = 0;
	const unsigned char *mac =
	    HMAC(EVP_sha256(), secret->bytes, (int)secret->len, data,
	         label_len + TA_AUTH_NONCE + client_nonce_len, out, &out_len);
	return mac && out_len == TA_AUTH_PROOF ? 0 : -1;
}

int ta_auth_random(uint8_t *buf, size_t n)
{
	return n <= 0x7fffffff && RAND_bytes(buf, (int)n) == 1 ? 0 : -1;
}

bool ta_auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void ta_auth_wipe(ta_auth_secret *secret)
{
	OPENSSL_cleanse(secret, sizeof(*secret));
}
