/* test_refusals.c: the fleet's refusal lines (gateway/fleet/refusals.c,
 * included to reach its statics): what a sample is called, one line at
 * once per sandbox, the rest summed at its window's end with the count
 * the counter gives, entries forgotten when quiet. The sandboxes and their
 * counters are fakes; the lines are read back from the log's fd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <unistd.h>

#include "../../../gateway/fleet/refusals.c"

/* ---- fakes ------------------------------------------------------------- */

struct fake {
	struct in_addr addr[2];
	const char *id[2];
	uint64_t count[2];
	int count_rc; /* what reading a counter returns */
};

static int
fake_id_at(void *arg, struct in_addr a, char *id)
{
	struct fake *f = arg;

	for (int i = 0; i < 2; i++)
		if (f->id[i] && f->addr[i].s_addr == a.s_addr) {
			snprintf(id, GW_FLEET_ID_MAX + 1, "%s", f->id[i]);
			return 0;
		}
	return -ENOENT;
}

static int
fake_refused(void *arg, struct in_addr a, uint64_t *packets)
{
	struct fake *f = arg;

	for (int i = 0; i < 2 && !f->count_rc; i++)
		if (f->addr[i].s_addr == a.s_addr) {
			*packets = f->count[i];
			return 0;
		}
	return f->count_rc ? f->count_rc : -ENOENT;
}

static int log_rd = -1;

static int
setup(void **state)
{
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	log_rd = p[0];
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, p[1]);
	return 0;
}

/* The log's lines since the last call, each from "fleet:" on, joined by
 * '\n' (a static buffer). */
static const char *
lines(void)
{
	static char out[4096];
	char buf[4096];
	ssize_t n = read(log_rd, buf, sizeof(buf) - 1);
	size_t len = 0;

	out[0] = 0;
	if (n <= 0)
		return out;
	buf[n] = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		char *f = strstr(l, "fleet:");

		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s", len ? "\n" : "",
		                        f ? f : l);
	}
	return out;
}

static struct in_addr
ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a;
}

static struct fw_refusal
tcp(const char *src, const char *dst, uint16_t port)
{
	struct fw_refusal r = {.src = ip(src), .dst = ip(dst), .proto = IPPROTO_TCP};

	r.has_port = true;
	r.dport = port;
	return r;
}

static struct gw_refusals *
book(struct fake *f)
{
	struct gw_refusals *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->src = (struct rsource){fake_id_at, fake_refused, f};
	return r;
}

static void
book_free(struct gw_refusals *r)
{
	free_entries(r);
	free(r);
}

static size_t
entries(const struct gw_refusals *r)
{
	size_t n = 0;

	for (size_t b = 0; b < NBUCKETS; b++)
		for (const struct rent *e = r->hash[b]; e; e = e->next)
			n++;
	return n;
}

#define WALL 1700000000 /* 2023-11-14T22:13:20Z */
#define W    GW_REFUSALS_WINDOW_MS

/* ---- what a sample is called ------------------------------------------- */

static void
test_describe(void **state)
{
	struct fw_refusal r = tcp("10.88.1.7", "1.2.3.4", 5432);
	char s[80];

	(void)state;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "tcp 1.2.3.4:5432");
	r.proto = IPPROTO_UDP;
	r.dport = 53;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "udp 1.2.3.4:53");
	r.has_port = false; /* a later fragment */
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "udp 1.2.3.4");
	r.proto = IPPROTO_ICMP;
	r.has_icmp = true;
	r.icmp_type = 8;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "icmp 1.2.3.4 (type 8 code 0)");
	r.has_icmp = false;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "icmp 1.2.3.4");
	r.proto = 47;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "protocol 47 1.2.3.4");
	r.proto = IPPROTO_DCCP;
	r.has_port = true;
	r.dport = 9;
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "dccp 1.2.3.4:9");
	/* a guest's port is a number: nothing in it reaches the line as text */
	r = tcp("10.88.1.7", "255.255.255.255", 65535);
	describe(&r, s, sizeof(s));
	assert_string_equal(s, "tcp 255.255.255.255:65535");
}

/* ---- windows ------------------------------------------------------------ */

/* A sample of no sandbox (detached since) tells nothing, keeps nothing. */
static void
test_unknown_source(void **state)
{
	struct fake f = {.addr = {ip("10.88.1.7")}, .id = {"sbx-1"}};
	struct gw_refusals *r = book(&f);
	struct fw_refusal s = tcp("10.88.1.8", "1.2.3.4", 5432);

	(void)state;
	note(r, 1000, WALL, &s);
	assert_string_equal(lines(), "");
	assert_int_equal(entries(r), 0);
	assert_int_equal(flush(r, 1000 + W, WALL + 5), 0);
	book_free(r);
}

/* The first refusal at once; the next ones in the window summed into one
 * line at its end, naming the latest, with the counter's count; then a
 * quiet window forgets the sandbox. */
static void
test_window(void **state)
{
	struct fake f = {.addr = {ip("10.88.1.7")}, .id = {"sbx-1"}, .count = {1}};
	struct gw_refusals *r = book(&f);
	struct fw_refusal s = tcp("10.88.1.7", "1.2.3.4", 5432);

	(void)state;
	note(r, 1000, WALL, &s);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried tcp 1.2.3.4:5432 (refused)");
	f.count[0] = 40; /* 39 more, sampled three times */
	s.dport = 5433;
	note(r, 1500, WALL, &s);
	s.proto = IPPROTO_UDP;
	s.dport = 53;
	note(r, 2000, WALL + 1, &s);
	note(r, 1000 + W - 1, WALL + 4, &s);
	assert_string_equal(lines(), "");
	assert_int_equal(flush(r, 1000 + W - 1, WALL + 4), 1000 + W);
	assert_string_equal(lines(), "");
	assert_int_equal(flush(r, 1000 + W, WALL + 5), 1000 + 2 * W);
	assert_string_equal(lines(),
	                    "fleet: sandbox sbx-1 tried udp 1.2.3.4:53 (refused; 38 more since "
	                    "22:13:20Z)");
	assert_int_equal(entries(r), 1);
	/* nothing in the next window: forgotten, and the next refusal is
	 * told at once, as a first */
	assert_int_equal(flush(r, 1000 + 2 * W, WALL + 10), 0);
	assert_string_equal(lines(), "");
	assert_int_equal(entries(r), 0);
	f.count[0] = 50;
	note(r, 1000 + 3 * W, WALL + 15, &s);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried udp 1.2.3.4:53 (refused)");
	book_free(r);
}

/* A sample after its window closed, before the timer came: told at once,
 * with the count since the line before. */
static void
test_late_sample(void **state)
{
	struct fake f = {.addr = {ip("10.88.1.7")}, .id = {"sbx-1"}, .count = {3}};
	struct gw_refusals *r = book(&f);
	struct fw_refusal s = tcp("10.88.1.7", "1.2.3.4", 22);

	(void)state;
	note(r, 0, WALL, &s);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried tcp 1.2.3.4:22 (refused)");
	f.count[0] = 4; /* just this one: no "more" */
	note(r, W, WALL + 5, &s);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried tcp 1.2.3.4:22 (refused)");
	f.count[0] = 14;
	note(r, 2 * W + 7, WALL + 10, &s);
	assert_string_equal(lines(),
	                    "fleet: sandbox sbx-1 tried tcp 1.2.3.4:22 (refused; 9 more since "
	                    "22:13:25Z)");
	book_free(r);
}

/* Each sandbox has its own window; an address that went to another
 * sandbox starts a new story; a counter that cannot be read gives a line
 * without a count. */
static void
test_sandboxes(void **state)
{
	struct fake f = {
	    .addr = {ip("10.88.1.7"), ip("10.88.1.8")}, .id = {"sbx-1", "sbx-2"}, .count = {1, 1}};
	struct gw_refusals *r = book(&f);
	struct fw_refusal s1 = tcp("10.88.1.7", "1.2.3.4", 1), s2 = tcp("10.88.1.8", "1.2.3.4", 2);

	(void)state;
	note(r, 0, WALL, &s1);
	note(r, 10, WALL, &s2);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried tcp 1.2.3.4:1 (refused)\n"
	                             "fleet: sandbox sbx-2 tried tcp 1.2.3.4:2 (refused)");
	note(r, 20, WALL, &s1);
	note(r, 30, WALL, &s2);
	assert_string_equal(lines(), "");
	assert_int_equal(entries(r), 2);
	/* 10.88.1.8 is sbx-3's now: its refusal is its own first */
	f.id[1] = "sbx-3";
	note(r, 40, WALL, &s2);
	assert_string_equal(lines(), "fleet: sandbox sbx-3 tried tcp 1.2.3.4:2 (refused)");
	assert_int_equal(entries(r), 2);
	f.count_rc = -EIO;
	f.count[0] = 9;
	assert_int_equal(flush(r, W, WALL + 5), 40 + W);
	assert_string_equal(lines(), "fleet: sandbox sbx-1 tried tcp 1.2.3.4:1 (refused)");
	book_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_describe),  cmocka_unit_test(test_unknown_source),
	    cmocka_unit_test(test_window),    cmocka_unit_test(test_late_sample),
	    cmocka_unit_test(test_sandboxes),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
