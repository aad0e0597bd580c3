/* seccomp.c: the guest's seccomp filter, written by hand as classic BPF
 * (no libseccomp). Default allow; a deny list answers EPERM for module
 * loading, kexec, mounting, namespace creation and entry, keyrings, bpf,
 * perf, swap, reboot, clock setting and the like. clone3 answers ENOSYS
 * so libc falls back to clone, whose flags the filter can inspect. A
 * foreign architecture (and x32 on x86-64) is killed. Ptrace stays
 * allowed: the pid namespace leaves nothing outside to attach to. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "sandbox-int.h"

#if defined(__x86_64__)
#define SBX_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SBX_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "sandbox/seccomp.c: add this architecture's AUDIT_ARCH"
#endif

const int sbx_seccomp_denied[] = {
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_reboot,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_move_mount,
    SYS_open_tree,
    SYS_mount_setattr,
    SYS_unshare,
    SYS_setns,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_swapon,
    SYS_swapoff,
    SYS_acct,
    SYS_quotactl,
    SYS_settimeofday,
    SYS_clock_settime,
    SYS_clock_adjtime,
    SYS_adjtimex,
    SYS_syslog,
    SYS_vhangup,
    SYS_lookup_dcookie,
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
    SYS_pidfd_getfd,
#if defined(__x86_64__)
    SYS_iopl,
    SYS_ioperm,
    SYS_uselib,
    SYS__sysctl,
    SYS_ustat,
    SYS_sysfs,
    SYS_create_module,
    SYS_get_kernel_syms,
    SYS_query_module,
    SYS_nfsservctl,
    SYS_modify_ldt,
#endif
};
const size_t sbx_seccomp_ndenied = sizeof(sbx_seccomp_denied) / sizeof(sbx_seccomp_denied[0]);

/* Namespace-creating clone flags: any of them is refused. */
#define SBX_CLONE_NS_MASK                                                                          \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET)
/* (CLONE_NEWTIME is 0x80, which clone() reads as part of the exit signal;
 * time namespaces need unshare or clone3, both refused.) */

size_t
sbx_seccomp_build(struct sock_filter *f)
{
	size_t n = 0;
	const unsigned nr_off = offsetof(struct seccomp_data, nr);

#define EMIT(...) (f[n++] = (struct sock_filter)__VA_ARGS__)
	/* Right architecture, or die. */
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SBX_AUDIT_ARCH, 1, 0));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr_off));
#if defined(__x86_64__)
	/* x32 numbers have bit 30 set: a second syscall table, refused. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
	/* The deny list: each entry jumps to the EPERM return at the end. */
	for (size_t i = 0; i < sbx_seccomp_ndenied; i++) {
		/* Distance from the instruction after this one to the EPERM
		 * return: the rest of the list, then the clone3 pair (2), the
		 * clone check (3) and the allow return (1). */
		unsigned to_eperm = (unsigned)(sbx_seccomp_ndenied - 1 - i) + 2 + 3 + 1;
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)sbx_seccomp_denied[i],
		              (unsigned char)to_eperm, 0));
	}
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
	/* clone: flags are argument 0 on x86-64 and arm64; the namespace bits
	 * sit in the low word. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 2));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SBX_CLONE_NS_MASK, 1, 0));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
#undef EMIT
	return n;
}
