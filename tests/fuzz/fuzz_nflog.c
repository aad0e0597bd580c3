/* fuzz_nflog.c: libFuzzer target for nft/nflog.c's fw_log_parse(): the
 * NFLOG records the refuse chain sends the daemon. The kernel writes the
 * netlink framing, but each record's payload is a guest's packet, cut at
 * the rule's snaplen: every byte of it is hostile.
 *
 * Input: the bytes of one read from the socket (copied to an aligned
 * buffer, as the daemon's receive buffer is). Besides memory errors it
 * checks the contracts: the result is -EPROTO or the number of records
 * reported; a record has a port only for a protocol with ports, ICMP
 * fields only for ICMP, never both; and a prefix of the input never
 * reports a record the whole input does not (the same, in order).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "nflog.h"

#define MAXR 4096

struct seen {
	struct fw_refusal r[MAXR];
	size_t n;
};

static void
seen_cb(void *arg, const struct fw_refusal *r)
{
	struct seen *s = arg;

	CHECK(!(r->has_port && r->has_icmp));
	if (r->has_port)
		CHECK(r->proto == IPPROTO_TCP || r->proto == IPPROTO_UDP ||
		      r->proto == IPPROTO_UDPLITE || r->proto == IPPROTO_SCTP ||
		      r->proto == IPPROTO_DCCP);
	if (r->has_icmp)
		CHECK(r->proto == IPPROTO_ICMP);
	if (s->n < MAXR)
		s->r[s->n] = *r;
	s->n++;
}

static struct seen whole, part;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = calloc(1, size ? size : 1);
	size_t cut;
	int n, m;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	whole.n = 0;
	n = fw_log_parse(buf, size, seen_cb, &whole);
	CHECK(n == -EPROTO || (n >= 0 && (size_t)n == whole.n));
	/* a prefix: the first byte says where to cut */
	cut = size ? (size_t)data[0] * size / 256 : 0;
	part.n = 0;
	m = fw_log_parse(buf, cut, seen_cb, &part);
	CHECK(m == -EPROTO || (m >= 0 && (size_t)m == part.n));
	CHECK(part.n <= whole.n);
	for (size_t i = 0; i < part.n && i < MAXR; i++)
		CHECK(memcmp(&part.r[i], &whole.r[i], sizeof(part.r[i])) == 0);
	free(buf);
	return 0;
}
