/* fuzz_dnsmsg.c: libFuzzer target for gateway/proto/dnsmsg.c.
 *
 * Input: a DNS message as a guest would send it. Besides memory errors it
 * checks the contracts: a question the parser reports lies inside the
 * message, its name is NUL-terminated at name_len and lowercase, and the
 * answer written to it (with two addresses, over UDP and over TCP, and
 * into buffers too small) never exceeds its buffer, echoes the id, sets
 * QR, and over UDP stays within what the query allowed.
 */
#include <string.h>

#include <netinet/in.h>

#include "fuzz.h"

/* by path: the CMake target links no library that exports gateway/ */
#include "dnsmsg.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = { 0, 11, 12, 40, 512, 2048 };
	struct gw_dns_query q;
	enum gw_dns_parse r = gw_dns_query_parse(data, size, &q);
	struct in_addr a[2] = { { htonl(0xc6120001) }, { htonl(0xc6120002) } };
	uint8_t out[2048];

	if (r == GW_DNS_DROP)
		return 0;
	CHECK(q.qlen == 0 || (q.qoff == GW_DNS_HEADER_LEN && q.qoff + q.qlen <= size));
	CHECK(strlen(q.name) == q.name_len);
	for (size_t i = 0; i < q.name_len; i++)
		CHECK(!(q.name[i] >= 'A' && q.name[i] <= 'Z'));
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int udp = 0; udp < 2; udp++) {
			enum gw_dns_rcode rc = r == GW_DNS_QUERY ? GW_DNS_NOERROR : q.rcode;
			size_t n = gw_dns_answer(&q, data, rc, a, 2, 30, udp, out, sizes[s]);
			size_t cap = q.edns ? (q.edns_udp < GW_DNS_EDNS_UDP ? q.edns_udp : GW_DNS_EDNS_UDP)
					    : GW_DNS_UDP_MAX;

			CHECK(n <= sizes[s]);
			CHECK(n == 0 || n >= GW_DNS_HEADER_LEN);
			if (udp)
				CHECK(n <= cap);
			if (n) {
				CHECK(out[0] == data[0] && out[1] == data[1]);
				CHECK(out[2] & 0x80);
			}
		}
	}
	return 0;
}
