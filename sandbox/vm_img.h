/* vm_img.h: vm_img.c's templates and helpers, for vm.c (and rpc.c: the
 * template trees). */
#ifndef SLUICE_SBX_VM_IMG_H
#define SLUICE_SBX_VM_IMG_H

#include <stdint.h>

#include "vm-int.h"

#define SBX_VM_TPL_MAGIC 0x766d7470u /* "vmtp" */

/* A vm template (handed out cast to struct sbx_template *). */
struct sbx_vm_tpl {
	uint32_t magic;
	enum sbx_template_kind kind;
	char image[PATH_MAX]; /* the erofs image */
};

/* The root filesystem tree of the template req names, for a backend that
 * hands a tree to someone else (rpc): busybox is the ns tree, dir the
 * operator's, host a tree built once into <cache_dir>/tree/host-KEY (the
 * busybox tree plus the host's programs, as vm's host image holds).
 * *key: a hash of its inputs (the same as the vm image's name). 0 or
 * -errno with err. */
int sbx_tpl_tree(const struct sbx_template_req *req, char *root, size_t rootsz, uint64_t *key,
                 char *err, size_t errsz);

int sbx_vm_tpl_ensure(const struct sbx_template_req *req, struct sbx_vm_tpl **out, char *err,
                      size_t errsz);

/* FNV-1a 64 over bytes, and over a path and its stat (size, mtime, inode,
 * mode; the path alone when it does not exist). */
uint64_t sbx_vm_hash(uint64_t h, const void *p, size_t n);
uint64_t sbx_vm_hash_stat(uint64_t h, const char *path);
#define SBX_VM_HASH_INIT 1469598103934665603ull

/* Runs argv (PATH searched) to its end with stdout and stderr appended to
 * log (NULL: /dev/null): 0, or -EIO / -errno with err set. */
int sbx_vm_run(const char *const argv[], const char *log, char *err, size_t errsz);

#endif
