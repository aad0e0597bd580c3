/* fuzz_tar.c: libFuzzer target for the tar decoder (agent/tar.c), which
 * reads archives a sandbox or a user sends (cp -r both ways).
 *
 * The input is decoded twice, whole and in pieces of a size taken from
 * its first byte; both runs must give the same results (entries, data
 * checksums, the final state). Contracts checked on every ENTRY: the
 * name passes agent_tar_name_check() again unchanged (relative, no "..",
 * no empty or "." component), a link has a target and no size, a
 * directory has no size, the root is a directory, the mode fits 07777;
 * DATA never exceeds the entry's size, and the sizes add up; an ERROR
 * has a reason. Each entry is encoded again with agent_tar_header() and
 * decoded: the same entry must come back. No file system is touched.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "tar.h"

#define MAXE 64

struct run {
	unsigned n;
	uint64_t sum[MAXE];
	enum agent_tar_dec_result last;
	uint64_t entries;
};

static struct agent_tar_dec dec, dec2;
static uint8_t enc[AGENT_TAR_HDR_MAX + 2 * AGENT_TAR_BLOCK];

static void
check_entry(const struct agent_tar_entry *e)
{
	static char norm[AGENT_TAR_NAME_MAX + 1];
	static struct agent_tar_entry copy;
	bool is_dir;
	size_t used;
	const uint8_t *p;
	size_t dl;
	long n;
	enum agent_tar_dec_result r;

	CHECK(e->mode <= 07777);
	CHECK(e->name[0] != '/');
	if (e->name[0]) {
		CHECK(agent_tar_name_check(e->name, strlen(e->name), norm, sizeof(norm),
					   &is_dir) == NULL);
		CHECK(strcmp(norm, e->name) == 0);
	} else {
		CHECK(e->type == AGENT_TAR_DIR);
	}
	if (e->type == AGENT_TAR_SYMLINK)
		CHECK(e->link[0] != '\0' && e->size == 0);
	if (e->type == AGENT_TAR_DIR)
		CHECK(e->size == 0);
	/* encode again, decode again: the same entry */
	copy = *e;
	if (copy.type != AGENT_TAR_SYMLINK)
		copy.link[0] = '\0';
	n = agent_tar_header(enc, sizeof(enc), &copy);
	CHECK(n > 0 && n % AGENT_TAR_BLOCK == 0);
	agent_tar_dec_init(&dec2);
	r = agent_tar_dec_feed(&dec2, enc, (size_t)n, &used, &p, &dl);
	CHECK(r == AGENT_TAR_ENTRY);
	CHECK(dec2.ent.type == copy.type);
	CHECK(strcmp(dec2.ent.name, copy.name) == 0);
	CHECK(strcmp(dec2.ent.link, copy.link) == 0);
	CHECK(dec2.ent.size == copy.size);
	CHECK(dec2.ent.mode == copy.mode);
	CHECK(dec2.ent.mtime == (copy.mtime < 0 ? copy.mtime : copy.mtime));
}

static void
run(const uint8_t *in, size_t len, size_t step, struct run *out)
{
	uint64_t want = 0, got = 0;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	agent_tar_dec_init(&dec);
	out->last = AGENT_TAR_AGAIN;
	while (off < len) {
		size_t avail = len - off < step ? len - off : step, used;
		const uint8_t *p;
		size_t dl;
		enum agent_tar_dec_result r = agent_tar_dec_feed(&dec, in + off, avail, &used, &p,
								 &dl);

		CHECK(used <= avail);
		off += used;
		out->last = r;
		if (r == AGENT_TAR_ERROR) {
			CHECK(dec.err[0] != '\0');
			break;
		}
		if (r == AGENT_TAR_AGAIN)
			CHECK(used == avail);
		if (r == AGENT_TAR_ENTRY) {
			CHECK(got == want);
			check_entry(&dec.ent);
			want = dec.ent.type == AGENT_TAR_FILE ? dec.ent.size : 0;
			got = 0;
			if (out->n < MAXE)
				out->n++;
		}
		if (r == AGENT_TAR_DATA) {
			CHECK(dl > 0 && p >= in && p + dl <= in + len);
			got += dl;
			CHECK(got <= want);
			for (size_t i = 0; i < dl; i++)
				out->sum[out->n ? out->n - 1 : 0] =
					out->sum[out->n ? out->n - 1 : 0] * 31 + p[i];
		}
		if (r == AGENT_TAR_END)
			break;
	}
	if (out->last != AGENT_TAR_ERROR && out->last != AGENT_TAR_END) {
		CHECK(!agent_tar_dec_finish(&dec));
		CHECK(dec.err[0] != '\0');
		out->last = AGENT_TAR_ERROR;
	}
	out->entries = dec.entries;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run a, b;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)data[0] * 7 + 1;
	run(data + 1, size - 1, size, &a);
	run(data + 1, size - 1, step, &b);
	CHECK(a.last == b.last);
	CHECK(a.n == b.n);
	CHECK(a.entries == b.entries);
	CHECK(memcmp(a.sum, b.sum, sizeof(a.sum)) == 0);
	return 0;
}
