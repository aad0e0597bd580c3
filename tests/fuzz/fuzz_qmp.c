/* fuzz_qmp.c: libFuzzer target for what the host reads from QEMU
 * (sandbox/vm-int.h): the QMP stream and the vm saved record. A guest that
 * has taken over QEMU writes both, so every byte is hostile.
 *
 * The first input byte selects:
 *  - low two bits 3: the rest is a saved record read back from disk:
 *    json_loadb() of it (flags 0, as vm.c's json_load_file()) given to
 *    sbx_vm_saved_parse();
 *  - else: the rest is a QMP byte stream, fed (sel >> 2) + 1 bytes at a
 *    time into a SBX_QMP_LINE_MAX buffer the way qmp.c's reader does
 *    (sbx_qmp_frame(), an over-long line skipped to its newline), every
 *    line given to sbx_qmp_parse(); then framed again with a small cap.
 *
 * Besides memory errors and leaks it checks the contracts:
 *  - framing: a line never longer than the bytes buffered nor the cap,
 *    ending at a '\n'; -EMSGSIZE only with a full buffer; with a small cap
 *    the reader yields exactly the lines shorter than the cap, in order;
 *  - parse: 0 with a known kind (a value for RETURN only, names
 *    terminated), or -EPROTO with an error message and no value;
 *  - saved: 0 with the documented bounds, and the record through
 *    sbx_vm_saved_to_json() parses back to an equal record (and equal
 *    JSON); or -EINVAL with an error message; the same verdict without
 *    an error buffer.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"

#include "vm-int.h"

#define MAXL 8192 /* lines remembered per pass */

struct line {
	size_t off, len; /* in the stream */
};

static char buf[SBX_QMP_LINE_MAX];

static void
check_msg(const char *l, size_t len)
{
	struct sbx_qmp_msg m;
	char err[256] = "";
	int r = sbx_qmp_parse(l, len, &m, err, sizeof(err));

	if (r < 0) {
		CHECK(r == -EPROTO);
		CHECK(err[0] != '\0');
		CHECK(m.value == NULL);
		return;
	}
	CHECK(r == 0);
	CHECK(m.kind == SBX_QMP_GREETING || m.kind == SBX_QMP_RETURN ||
	      m.kind == SBX_QMP_ERROR || m.kind == SBX_QMP_EVENT);
	CHECK((m.kind == SBX_QMP_RETURN) == (m.value != NULL));
	CHECK(memchr(m.name, '\0', sizeof(m.name)) != NULL);
	CHECK(memchr(m.desc, '\0', sizeof(m.desc)) != NULL);
	json_decref(m.value);
}

/* qmp.c's next_line()/read_msg() over in[0..len), step bytes per read,
 * in a cap-byte buffer: the lines framed, parsed when parse is set. */
static size_t
reader(const uint8_t *in, size_t len, size_t step, size_t cap, bool parse, struct line *out,
       bool *overflow)
{
	size_t blen = 0, base = 0, fed = 0, n = 0;
	bool skipping = false;

	*overflow = false;
	for (;;) {
		size_t ll = (size_t)-1, got;
		int r = sbx_qmp_frame(buf, blen, cap, &ll);

		if (r == 1) {
			CHECK(ll < blen && ll < cap && buf[ll] == '\n');
			CHECK(memchr(buf, '\n', ll) == NULL);
			if (!skipping) {
				if (parse)
					check_msg(buf, ll);
				if (n < MAXL)
					out[n++] = (struct line){base, ll};
				else
					*overflow = true;
			}
			skipping = false;
			memmove(buf, buf + ll + 1, blen - ll - 1);
			blen -= ll + 1;
			base += ll + 1;
			continue;
		}
		if (r < 0) {
			CHECK(r == -EMSGSIZE && blen >= cap);
			skipping = true;
		} else {
			CHECK(r == 0 && blen < cap);
		}
		if (skipping) {
			base += blen;
			blen = 0;
		}
		if (fed == len)
			break;
		got = len - fed < step ? len - fed : step;
		if (got > cap - blen)
			got = cap - blen;
		memcpy(buf + blen, in + fed, got);
		blen += got;
		fed += got;
	}
	return n;
}

static void
qmp_stream(const uint8_t *in, size_t len, size_t step)
{
	static struct line a[MAXL], b[MAXL];
	size_t cap = 8 + step, na, nb, j = 0;
	bool ova, ovb;

	if (len > SBX_QMP_LINE_MAX * 4)
		return;
	na = reader(in, len, step, SBX_QMP_LINE_MAX, true, a, &ova);
	nb = reader(in, len, step, cap, false, b, &ovb);
	if (ova || ovb)
		return;
	/* the small cap keeps exactly the lines shorter than it */
	for (size_t i = 0; i < na; i++) {
		if (a[i].len >= cap)
			continue;
		CHECK(j < nb && b[j].off == a[i].off && b[j].len == a[i].len);
		j++;
	}
	CHECK(j == nb);
}

static void
check_saved_fields(const struct sbx_vm_saved *sv)
{
	size_t il = strlen(sv->id), sl = strlen(sv->state_dir);

	CHECK(sbx_id_ok(sv->id));
	CHECK(sv->pid >= 2 && sv->pid <= 4194304);
	CHECK(sv->state_dir[0] == '/' && sl > il + 1 && sl < 108 - 12);
	CHECK(sv->state_dir[sl - il - 1] == '/' && strcmp(sv->state_dir + sl - il, sv->id) == 0);
	CHECK(strstr(sv->state_dir, "/../") == NULL && strstr(sv->state_dir, "/./") == NULL);
	CHECK(sv->cg_version == 1 || sv->cg_version == 2);
	CHECK(sv->ncg >= 1 && sv->ncg <= SBX_CG__N);
	CHECK(sv->cg_version == 1 || sv->ncg == 1);
	for (size_t i = 0; i < sv->ncg; i++) {
		size_t cl = strlen(sv->cg[i]);

		CHECK(sv->cg[i][0] == '/' && cl > il + 1);
		CHECK(strcmp(sv->cg[i] + cl - il, sv->id) == 0);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(sv->cg[i], sv->cg[k]) != 0);
	}
	CHECK(strspn(sv->snap, "0123456789abcdef") == strlen(sv->snap));
	CHECK(sv->peer_ifname[0] != '\0' || sv->peer_netns[0] == '\0');
	CHECK(sv->peer_ifname[0] == '\0' || sbx_ifname_ok(sv->peer_ifname));
	CHECK(sv->peer_ifindex >= 0);
}

static bool
saved_equal(const struct sbx_vm_saved *a, const struct sbx_vm_saved *b)
{
	if (strcmp(a->id, b->id) || a->pid != b->pid || a->start_time != b->start_time ||
	    strcmp(a->state_dir, b->state_dir) || a->cg_version != b->cg_version ||
	    a->ncg != b->ncg || strcmp(a->snap, b->snap) || strcmp(a->peer_netns, b->peer_netns) ||
	    strcmp(a->peer_ifname, b->peer_ifname) || a->peer_ifindex != b->peer_ifindex ||
	    a->peer_netns_ino != b->peer_netns_ino)
		return false;
	for (size_t i = 0; i < a->ncg; i++)
		if (strcmp(a->cg[i], b->cg[i]))
			return false;
	return true;
}

static void
saved(const uint8_t *in, size_t len)
{
	static struct sbx_vm_saved sv, sv2, sv3;
	char err[256] = "";
	json_t *j = json_loadb((const char *)in, len, 0, NULL), *j2, *j3;
	int r;

	if (!j)
		return;
	r = sbx_vm_saved_parse(j, &sv, err, sizeof(err));
	CHECK(sbx_vm_saved_parse(j, &sv2, NULL, 0) == r);
	json_decref(j);
	if (r < 0) {
		CHECK(r == -EINVAL && err[0] != '\0');
		return;
	}
	CHECK(r == 0);
	check_saved_fields(&sv);

	/* written again (sbx_save) and read back: the same record */
	j2 = sbx_vm_saved_to_json(&sv);
	CHECK(j2 != NULL);
	err[0] = '\0';
	r = sbx_vm_saved_parse(j2, &sv2, err, sizeof(err));
	CHECK(r == 0);
	CHECK(saved_equal(&sv, &sv2));
	j3 = sbx_vm_saved_to_json(&sv2);
	CHECK(j3 != NULL && json_equal(j2, j3));
	CHECK(sbx_vm_saved_parse(j3, &sv3, NULL, 0) == 0 && saved_equal(&sv2, &sv3));
	json_decref(j3);
	json_decref(j2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t sel;

	if (size < 1)
		return 0;
	sel = data[0];
	if ((sel & 3) == 3)
		saved(data + 1, size - 1);
	else
		qmp_stream(data + 1, size - 1, (size_t)(sel >> 2) + 1);
	return 0;
}
