/* conf_psl.c: the Public Suffix List, through libpsl, so that the loader
 * can refuse a wildcard that covers a whole public suffix ('*.com',
 * '*.co.uk', '*.github.io'): in an allow list, a credential's host or a
 * tenant's egress list it would take in every site anyone can register
 * under that suffix. */
#include <errno.h>
#include <pthread.h>

#include <libpsl.h>

#include "conf.h"

static const psl_ctx_t *psl;
static pthread_once_t psl_once = PTHREAD_ONCE_INIT;

/* Debian's publicsuffix data (/usr/share/publicsuffix), which
 * psl_latest() takes when it is newer than the copy built into libpsl,
 * else that copy. Loaded once, at the first check, and kept for the
 * process's life: a reload checks against the list the start loaded. */
static void
psl_load(void)
{
	psl = psl_latest(NULL);
	if (!psl)
		psl = psl_builtin();
}

int
conf_public_suffix(const char *name)
{
	pthread_once(&psl_once, psl_load);
	if (!psl)
		return -ENOENT;
	/* PSL_TYPE_ANY: the private section too (github.io, s3.amazonaws.com
	 * are as open as com). NO_STAR_RULE: a name the list does not hold
	 * is no suffix, so that '*.internal' or '*.corp' for a private
	 * namespace stays possible; every delegated top-level domain is in
	 * the list. */
	return psl_is_public_suffix2(psl, name, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) ? 1 : 0;
}
