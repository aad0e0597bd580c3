/* site.c: is this request a web page's? (site.h) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "site.h"

#define SHOW_MAX 80 /* bytes of a refused value quoted back */

/* A refused value for the message: at most SHOW_MAX bytes, printable
 * ASCII only (a page chose it: it reaches a log line and a JSON string). */
static void
show(const struct gw_site_field *f, char *out, size_t outsz)
{
	size_t n = f->len < SHOW_MAX ? f->len : SHOW_MAX, o = 0;

	for (size_t i = 0; i < n && o + 1 < outsz; i++) {
		unsigned char ch = (unsigned char)f->p[i];

		out[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	out[o] = '\0';
	if (f->len > n && o + 4 < outsz)
		strcat(out, "...");
}

static bool
ieq(const char *p, size_t len, const char *s)
{
	return len == strlen(s) && strncasecmp(p, s, len) == 0;
}

static uint16_t
self_port(const struct sockaddr *sa)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;

	if (sa->sa_family == AF_INET6) {
		memcpy(&s6, sa, sizeof(s6));
		return ntohs(s6.sin6_port);
	}
	memcpy(&s4, sa, sizeof(s4));
	return ntohs(s4.sin_port);
}

/* The host of an authority, an IP literal: the listener's address (any,
 * for a wildcard listener of the same family). */
static bool
ip_is_self(const struct sockaddr *self, const char *host, size_t hlen, bool v6)
{
	char buf[INET6_ADDRSTRLEN];
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;

	if (hlen == 0 || hlen >= sizeof(buf))
		return false;
	memcpy(buf, host, hlen);
	buf[hlen] = '\0';
	if (v6) {
		struct in6_addr a;

		if (self->sa_family != AF_INET6 || inet_pton(AF_INET6, buf, &a) != 1)
			return false;
		memcpy(&s6, self, sizeof(s6));
		return IN6_IS_ADDR_UNSPECIFIED(&s6.sin6_addr) ||
		       memcmp(&a, &s6.sin6_addr, sizeof(a)) == 0;
	} else {
		struct in_addr a;

		if (self->sa_family != AF_INET || inet_pton(AF_INET, buf, &a) != 1)
			return false;
		memcpy(&s4, self, sizeof(s4));
		return s4.sin_addr.s_addr == htonl(INADDR_ANY) || a.s_addr == s4.sin_addr.s_addr;
	}
}

/* host[:port] as Host, or an Origin after its scheme, may name this
 * listener: its address (or "localhost") and its port (80 when none). */
static bool
authority_ok(const struct sockaddr *self, const char *p, size_t len)
{
	const char *host = p, *port = NULL;
	size_t hlen = len, plen = 0;
	unsigned long v = 80;
	bool v6 = false;

	if (len == 0)
		return false;
	if (p[0] == '[') {
		const char *rb = memchr(p, ']', len);

		if (!rb)
			return false;
		v6 = true;
		host = p + 1;
		hlen = (size_t)(rb - host);
		if ((size_t)(rb - p) + 1 < len) {
			if (rb[1] != ':')
				return false;
			port = rb + 2;
			plen = len - (size_t)(port - p);
		}
	} else {
		for (size_t i = len; i > 0; i--) {
			if (p[i - 1] == ':') {
				hlen = i - 1;
				port = p + i;
				plen = len - i;
				break;
			}
		}
	}
	if (port) {
		if (plen == 0 || plen > 5)
			return false;
		v = 0;
		for (size_t i = 0; i < plen; i++) {
			if (port[i] < '0' || port[i] > '9')
				return false;
			v = v * 10 + (unsigned long)(port[i] - '0');
		}
	}
	if (v != self_port(self))
		return false;
	if (!v6 && ieq(host, hlen, "localhost"))
		return true;
	return ip_is_self(self, host, hlen, v6);
}

/* The listener, as a URL's authority for the message. */
static void
self_text(const struct gw_site_self *self, char *out, size_t outsz)
{
	char a[INET6_ADDRSTRLEN] = "?";
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;

	if (self->addr->sa_family == AF_INET6) {
		memcpy(&s6, self->addr, sizeof(s6));
		if (IN6_IS_ADDR_UNSPECIFIED(&s6.sin6_addr))
			snprintf(out, outsz, "[an address of this host]:%u", ntohs(s6.sin6_port));
		else
			snprintf(out, outsz, "[%s]:%u",
			         inet_ntop(AF_INET6, &s6.sin6_addr, a, sizeof(a)) ? a : "?",
			         ntohs(s6.sin6_port));
		return;
	}
	memcpy(&s4, self->addr, sizeof(s4));
	if (s4.sin_addr.s_addr == htonl(INADDR_ANY))
		snprintf(out, outsz, "(an address of this host):%u", ntohs(s4.sin_port));
	else
		snprintf(out, outsz, "%s:%u",
		         inet_ntop(AF_INET, &s4.sin_addr, a, sizeof(a)) ? a : "?",
		         ntohs(s4.sin_port));
}

#define NOT_FOR_PAGES "the API is for the sluice command, scripts and programs, not for web pages"

enum gw_site_verdict
gw_site_check(const struct gw_site_self *self, const struct gw_site_field *host,
              const struct gw_site_field *origin, const struct gw_site_field *fetch_site, char *msg,
              size_t msgsz)
{
	char v[SHOW_MAX + 8], own[INET6_ADDRSTRLEN + 40];

	/* 1. What the browser says of the page that made the request. */
	if (fetch_site->n > 1) {
		snprintf(msg, msgsz, "Sec-Fetch-Site given %u times: refused; " NOT_FOR_PAGES,
		         fetch_site->n);
		return GW_SITE_FETCH_SITE;
	}
	if (fetch_site->n == 1 && !ieq(fetch_site->p, fetch_site->len, "same-origin") &&
	    !ieq(fetch_site->p, fetch_site->len, "none")) {
		show(fetch_site, v, sizeof(v));
		snprintf(msg, msgsz,
		         "Sec-Fetch-Site: %s: a request a web page made from another origin is "
		         "refused; " NOT_FOR_PAGES,
		         v);
		return GW_SITE_FETCH_SITE;
	}
	/* 2. The page's origin, where the browser names it. */
	if (origin->n > 1) {
		snprintf(msg, msgsz, "Origin given %u times: refused; " NOT_FOR_PAGES, origin->n);
		return GW_SITE_ORIGIN;
	}
	if (origin->n == 1 &&
	    (self->is_unix || origin->len < 7 || strncasecmp(origin->p, "http://", 7) != 0 ||
	     !authority_ok(self->addr, origin->p + 7, origin->len - 7))) {
		show(origin, v, sizeof(v));
		snprintf(msg, msgsz,
		         "Origin: %s: a request from a web page of another origin is "
		         "refused; " NOT_FOR_PAGES,
		         v);
		return GW_SITE_ORIGIN;
	}
	/* 3. The name the request was sent to (rebinding: a page's own
	 * name, resolved to this address). */
	if (self->is_unix)
		return GW_SITE_OK;
	if (host->n == 1 && authority_ok(self->addr, host->p, host->len))
		return GW_SITE_OK;
	self_text(self, own, sizeof(own));
	if (host->n == 0)
		snprintf(v, sizeof(v), "(none)");
	else
		show(host, v, sizeof(v));
	snprintf(msg, msgsz,
	         "Host: %s is not this API's address: refused, as a web page could reach the "
	         "API under a name of its own (DNS rebinding); send Host: %s or localhost:%u",
	         v, own, self_port(self->addr));
	return GW_SITE_HOST;
}

const char *
gw_site_code(enum gw_site_verdict v)
{
	switch (v) {
	case GW_SITE_FETCH_SITE:
		return "cross-site";
	case GW_SITE_ORIGIN:
		return "bad-origin";
	case GW_SITE_HOST:
		return "bad-host";
	default:
		return NULL;
	}
}
