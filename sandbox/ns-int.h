/* ns-int.h: between ns.c (the parent side of the `ns` backend) and
 * ns_child.c (the sandbox's first process, from clone() to exec). */
#ifndef SLUICE_SANDBOX_NS_INT_H
#define SLUICE_SANDBOX_NS_INT_H

#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>

#include "sandbox-int.h"

#define NS_MOUNTS_MAX 32
#define NS_ENV_MAX    128
#define NS_MASKS_MAX  4

/* A host directory bound into the guest, idmapped (see ns_child.c). */
struct ns_bind {
	char src[PATH_MAX];
	char dst[PATH_MAX]; /* full host-side path under plan.root */
	bool ro;
};

/* Everything the child needs, prepared by the parent (the child
 * allocates nothing). */
struct ns_plan {
	char dir[PATH_MAX];   /* the state directory; the overlay's layers
	                         are named relative to it (lower, upper, work) */
	char lower[PATH_MAX]; /* the template's root, idmapped onto dir/lower */
	char root[PATH_MAX];  /* dir/root, where the overlay goes */
	size_t nbinds;
	struct ns_bind binds[SBX_TPL_BINDS + NS_MOUNTS_MAX];
	size_t nmasks; /* host-side paths under root hidden by an empty tmpfs */
	char masks[NS_MASKS_MAX][PATH_MAX];
	char proc[PATH_MAX + 8], tmp[PATH_MAX + 8], dev[PATH_MAX + 8];
	char dev_opts[96], tmp_opts[96], mask_opts[96]; /* tmpfs options, the guest's root
	                                                   owning them */
	char hostname[64];
	char cwd[512];
	uint32_t idmap; /* host id of guest 0 */
	int userns_fd;  /* the user namespace whose map that is */
	int exe_fd;     /* O_PATH of the agent, or -1 */
	int sock_fd, go_fd, err_fd;
	int cap_last;
	char *argv[8];
	char *envp[NS_ENV_MAX + 2];
	unsigned short nfilter;
	struct sock_filter filter[SBX_SECCOMP_MAX];
};

/* What a child that failed writes to the error pipe before exit(127). */
struct ns_child_err {
	int err;
	char step[200];
};

/* The child: clone()'s fn, arg a struct ns_plan. Returns only by exec. */
int sbx_ns_child_main(void *plan);

#endif
