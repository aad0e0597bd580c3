/* fuzz_tlshello.c: libFuzzer target for gateway/tlshello.c.
 *
 * Input: the bytes a client sends first on a TLS door. Besides memory
 * errors (every call gets a buffer of exactly its length, so a read past
 * it is caught), it checks the contracts of tlshello.h: a result and its
 * fields agree (need past the input on NEED_MORE, the record inside the
 * input on OK, a valid lowercase name, a message on errors); a call is a
 * pure function of its input; a prefix gives NEED_MORE or the input's own
 * result, OK only once the first record is whole; a caller's limit
 * below the record's length gives TOO_BIG instead.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* by path: the CMake target links no library that exports gateway/ */
#include "tlshello.h"


static void
check_fields(enum gw_tlshello_result r, const struct gw_tlshello *o, size_t len)
{
	CHECK((unsigned)r < GW_TLSHELLO__COUNT);
	CHECK(strcmp(gw_tlshello_result_name(r), "?") != 0);
	if (r == GW_TLSHELLO_NEED_MORE) {
		CHECK(o->need > len && o->need <= GW_TLSHELLO_BUF_MAX);
		CHECK(o->msg == NULL);
	} else {
		CHECK(o->need == 0);
	}
	if (r == GW_TLSHELLO_OK) {
		CHECK(o->msg == NULL);
		CHECK(o->record_len > GW_TLSHELLO_HEADER && o->record_len <= len);
		CHECK(o->sni_len >= 1 && o->sni_len <= 253 && strlen(o->sni) == o->sni_len);
		for (size_t i = 0; i < o->sni_len; i++) {
			char c = o->sni[i];

			CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			      c == '.');
		}
		CHECK(o->sni[0] != '.' && o->sni[o->sni_len - 1] != '.');
	} else {
		CHECK(o->sni_len == 0 && o->sni[0] == '\0');
	}
	if (r != GW_TLSHELLO_OK && r != GW_TLSHELLO_NEED_MORE) {
		CHECK(o->msg != NULL);
		CHECK(o->at <= (o->record_len ? o->record_len : len));
	}
	if (r != GW_TLSHELLO_OK && r != GW_TLSHELLO_NO_SNI)
		CHECK(!o->alpn_h2 && !o->alpn_http11);
}

/* in[0..len) in a buffer of exactly len bytes. */
static enum gw_tlshello_result
parse_exact(const uint8_t *in, size_t len, size_t max_record, struct gw_tlshello *o)
{
	uint8_t *b = malloc(len ? len : 1);
	enum gw_tlshello_result r;

	CHECK(b != NULL);
	if (len)
		memcpy(b, in, len);
	r = gw_tlshello_parse(len ? b : NULL, len, max_record, o);
	free(b);
	check_fields(r, o, len);
	return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_tlshello o, o2;
	enum gw_tlshello_result r;
	size_t stride = size > 1024 ? 37 : 1;

	if (size > GW_TLSHELLO_BUF_MAX + 64)
		size = GW_TLSHELLO_BUF_MAX + 64;
	r = parse_exact(data, size, 0, &o);
	CHECK(gw_tlshello_parse(data, size, 0, &o2) == r);
	CHECK(memcmp(&o, &o2, sizeof(o)) == 0);

	for (size_t k = 0; k < size; k += (size - k > 8 ? stride : 1)) {
		enum gw_tlshello_result rk = parse_exact(data, k, 0, &o2);

		if (rk == GW_TLSHELLO_NEED_MORE) {
			CHECK(r != GW_TLSHELLO_OK || k < o.record_len);
			continue;
		}
		/* OK comes with the first record whole, and stays */
		CHECK(r != GW_TLSHELLO_NEED_MORE);
		CHECK(r != GW_TLSHELLO_OK || k >= o.record_len);
		CHECK(rk == r);
		if (r == GW_TLSHELLO_OK)
			CHECK(memcmp(&o, &o2, sizeof(o)) == 0);
	}

	/* a caller's limit one short of the record: TOO_BIG, or the same
	 * error found before the length (not TLS) */
	if (o.record_len > GW_TLSHELLO_HEADER + 1) {
		enum gw_tlshello_result rl =
		    parse_exact(data, size, o.record_len - GW_TLSHELLO_HEADER - 1, &o2);

		CHECK(rl == GW_TLSHELLO_TOO_BIG);
	}
	return 0;
}
