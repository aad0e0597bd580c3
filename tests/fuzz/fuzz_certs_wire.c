/* fuzz_certs_wire.c: libFuzzer target for certs/wire.c and the host check
 * in certs/ca.c, the parsers the signer runs on the daemon's bytes and the
 * daemon runs on the signer's.
 *
 * Input: one whole message. Besides memory errors it checks the
 * contracts: a decoded message encodes back to exactly the input; a
 * refused one leaves a reason and an all-zero message; a MINT's host is
 * one certs_host_check() accepts, and an accepted host is in normal form
 * (no uppercase, no trailing dot, no '*', an IP literal as inet_ntop()
 * writes it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "certs.h"

static void
check_host(const uint8_t *p, size_t n)
{
	uint8_t addr[16];
	char back[INET6_ADDRSTRLEN];
	int kind = certs_host_check((const char *)p, n, addr);

	if (kind < 0) {
		CHECK(kind == -EINVAL);
		return;
	}
	CHECK(n >= 1 && n <= CERTS_HOST_MAX);
	CHECK(p[n - 1] != '.' && !memchr(p, '*', n) && !memchr(p, 0, n));
	for (size_t i = 0; i < n; i++)
		CHECK(!(p[i] >= 'A' && p[i] <= 'Z'));
	if (kind == CERTS_HOST_IP4 || kind == CERTS_HOST_IP6) {
		CHECK(inet_ntop(kind == CERTS_HOST_IP4 ? AF_INET : AF_INET6, addr, back,
		                sizeof(back)) != NULL);
		CHECK(strlen(back) == n && memcmp(back, p, n) == 0);
	} else {
		CHECK(kind == CERTS_HOST_DNS);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[CERTS_WIRE_MAX];
	struct certs_msg m, zero;
	char err[128];
	int rc, n;

	memset(&zero, 0, sizeof(zero));
	err[0] = 0;
	rc = certs_wire_decode(data, size, &m, err, sizeof(err));
	if (rc < 0) {
		CHECK(rc == -EINVAL && err[0] != 0);
		CHECK(memcmp(&m, &zero, sizeof(m)) == 0);
	} else {
		CHECK(rc == 0 && m.len <= size);
		n = certs_wire_encode(out, sizeof(out), &m);
		CHECK(n >= 0 && (size_t)n == size && memcmp(out, data, size) == 0);
		if (m.type == CERTS_MSG_MINT)
			CHECK(certs_host_check((const char *)m.payload, m.len, out) > 0);
	}
	if (size >= CERTS_WIRE_HDR)
		check_host(data + CERTS_WIRE_HDR, size - CERTS_WIRE_HDR);
	check_host(data, size);
	return 0;
}
