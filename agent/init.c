/* init.c: the agent as a VM's /init. See agent.h.
 *
 * The kernel runs /init from the initramfs with no arguments. It mounts
 * the pseudo file systems, loads the modules listed in /etc/sluice/modules,
 * optionally switches to an overlay root (erofs or ext4 read-only below, a
 * tmpfs above), sets the hostname, brings lo up and finds the virtio port
 * the host talks on; main.c then serves it forever. Nothing here exits:
 * PID 1 exiting panics the guest.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define MODULES_LIST "/etc/sluice/modules"
#define VPORTS_DIR "/sys/class/virtio-ports"
#define CMDLINE_MAX 8192
#define ROOT_WAIT_MS 5000
#define PORT_POLL_MS 20

/* ---- the command line (pure) ------------------------------------------ */

static bool
port_name_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return n > 0;
}

static bool
root_ok(const char *s, size_t n)
{
	if (n < 2 || s[0] != '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

/* One word: key k[0..kn), value v[0..vn) (has_eq false: no '=';
 * quoted: the word began with a quote). */
static int
take(struct agent_cmdline *out, const char *k, size_t kn, bool has_eq,
     const char *v, size_t vn, bool quoted, char *err, size_t errsz)
{
	static const struct {
		const char *key;
		size_t off, cap;
	} keys[] = {
		{ "sluice.root", offsetof(struct agent_cmdline, root),
		  AGENT_CMDLINE_ROOT_MAX },
		{ "sluice.port", offsetof(struct agent_cmdline, port),
		  AGENT_CMDLINE_PORT_MAX },
		{ "sluice.hostname", offsetof(struct agent_cmdline, hostname),
		  AGENT_HOSTNAME_MAX },
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char *dst = (char *)out + keys[i].off;
		bool ok;

		if (strlen(keys[i].key) != kn || memcmp(keys[i].key, k, kn))
			continue;
		if (!has_eq || vn == 0) {
			snprintf(err, errsz, "%s: want %s=VALUE", keys[i].key,
				 keys[i].key);
			return -EINVAL;
		}
		if (vn > keys[i].cap) {
			snprintf(err, errsz, "%s: value over %zu bytes",
				 keys[i].key, keys[i].cap);
			return -EINVAL;
		}
		if (quoted || memchr(v, '"', vn)) {
			snprintf(err, errsz, "%s: quotes are not allowed",
				 keys[i].key);
			return -EINVAL;
		}
		ok = i == 0 ? root_ok(v, vn)
		   : i == 1 ? port_name_ok(v, vn)
			    : agent_hostname_ok(v, vn);
		if (!ok) {
			snprintf(err, errsz, "%s: %s", keys[i].key,
				 i == 0 ? "want an absolute device path"
				 : i == 1 ? "want [A-Za-z0-9._-]"
					  : "want [A-Za-z0-9.-]");
			return -EINVAL;
		}
		memcpy(dst, v, vn);
		dst[vn] = 0;
		return 0;
	}
	return 0;
}

int
agent_cmdline_parse(const char *buf, size_t len, struct agent_cmdline *out,
		    char *err, size_t errsz)
{
	size_t i = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	snprintf(out->port, sizeof(out->port), "%s", AGENT_PORT_DEFAULT);
	while (i < len) {
		size_t start, eq = 0, end;
		bool quote = false, has_eq = false;
		char e2[256];
		int r;

		while (i < len && (buf[i] == ' ' || buf[i] == '\t' ||
				   buf[i] == '\n' || buf[i] == 0))
			i++;
		if (i >= len)
			break;
		start = i;
		for (; i < len && buf[i] != 0; i++) {
			if (!quote && (buf[i] == ' ' || buf[i] == '\t' ||
				       buf[i] == '\n'))
				break;
			if (buf[i] == '"')
				quote = !quote;
			else if (buf[i] == '=' && !has_eq) {
				has_eq = true;
				eq = i;
			}
		}
		end = i;
		/* the kernel drops a word's leading quote: "key=value" */
		if (buf[start] == '"' && has_eq && eq > start + 1) {
			start++;
			quote = true;
		}
		r = take(out, buf + start, (has_eq ? eq : end) - start, has_eq,
			 has_eq ? buf + eq + 1 : buf + end,
			 has_eq ? end - eq - 1 : 0, quote, e2, sizeof(e2));
		if (r < 0 && rc == 0) {
			rc = r;
			snprintf(err, errsz, "%s", e2);
		}
	}
	/* a bad port name falls back to the default, never to "" */
	if (out->port[0] == 0)
		snprintf(out->port, sizeof(out->port), "%s",
			 AGENT_PORT_DEFAULT);
	return rc;
}

/* ---- the virtio port -------------------------------------------------- */

int
agent_vport_find(const char *sysdir, const char *name, char *path, size_t cap)
{
	DIR *d = opendir(sysdir);
	struct dirent *e;
	int rc = -ENOENT;

	if (d == NULL)
		return -ENOENT;
	while ((e = readdir(d)) != NULL) {
		char f[512], got[128];
		ssize_t n;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(f, sizeof(f), "%s/%s/name", sysdir, e->d_name);
		fd = open(f, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, got, sizeof(got) - 1);
		close(fd);
		if (n <= 0)
			continue;
		got[n] = 0;
		if (got[n - 1] == '\n')
			got[n - 1] = 0;
		if (strcmp(got, name) != 0)
			continue;
		rc = (size_t)snprintf(path, cap, "/dev/%s", e->d_name) >= cap
			     ? -ENAMETOOLONG
			     : 0;
		break;
	}
	closedir(d);
	return rc;
}

/* ---- init's duties ---------------------------------------------------- */

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	va_list ap;

	fputs("sluice-agent: init: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void
mnt(const char *src, const char *dst, const char *type, unsigned long fl,
    const char *data)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, fl, data) < 0 && errno != EBUSY)
		say("mount %s on %s: %s", type, dst, strerror(errno));
}

static void
console(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);

	if (fd < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

static void
load_modules(void)
{
	FILE *f = fopen(MODULES_LIST, "re");
	char line[512];

	if (f == NULL) {
		if (errno != ENOENT)
			say("%s: %s", MODULES_LIST, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\r\n");
		int fd;

		line[n] = 0;
		if (n == 0 || line[0] == '#')
			continue;
		fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			say("module %s: %s", line, strerror(errno));
			continue;
		}
		if (syscall(SYS_finit_module, fd, "", 0) < 0 &&
		    errno != EEXIST)
			say("module %s: finit_module: %s", line,
			    strerror(errno));
		close(fd);
	}
	fclose(f);
}

/* The overlay root: dev read-only below, a tmpfs above, at /newroot;
 * then /dev /proc /sys /run /tmp move into it and it becomes /. */
static void
switch_root(const char *dev)
{
	static const char *const moved[] = { "/dev", "/proc", "/sys", "/run",
					     "/tmp" };
	struct stat st;
	int waited = 0;

	/* the disk's node appears once virtio_blk has probed it */
	while (stat(dev, &st) < 0 && waited < ROOT_WAIT_MS) {
		sleep_ms(10);
		waited += 10;
	}
	mkdir("/.sluice", 0700);
	mkdir("/.sluice/lower", 0755);
	mkdir("/.sluice/rw", 0755);
	if (mount(dev, "/.sluice/lower", "erofs", MS_RDONLY, NULL) < 0 &&
	    mount(dev, "/.sluice/lower", "ext4", MS_RDONLY, "noload") < 0) {
		say("root %s: mount (erofs, ext4): %s; staying on the "
		    "initramfs", dev, strerror(errno));
		return;
	}
	if (mount("tmpfs", "/.sluice/rw", "tmpfs", 0, "mode=0755") < 0) {
		say("root: tmpfs: %s; staying on the initramfs",
		    strerror(errno));
		return;
	}
	mkdir("/.sluice/rw/upper", 0755);
	mkdir("/.sluice/rw/work", 0755);
	mkdir("/newroot", 0755);
	if (mount("overlay", "/newroot", "overlay", 0,
		  "lowerdir=/.sluice/lower,upperdir=/.sluice/rw/upper,"
		  "workdir=/.sluice/rw/work") < 0) {
		say("root: overlay: %s; staying on the initramfs",
		    strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		char to[64];

		snprintf(to, sizeof(to), "/newroot%s", moved[i]);
		mkdir(to, 0755);
		if (mount(moved[i], to, NULL, MS_MOVE, NULL) < 0)
			say("root: move %s: %s", moved[i], strerror(errno));
	}
	if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 ||
	    chroot(".") < 0 || chdir("/") < 0)
		say("root: switch: %s", strerror(errno));
}

static void
lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0) {
		say("lo: socket: %s", strerror(errno));
		return;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		say("lo: SIOCGIFFLAGS: %s", strerror(errno));
	} else {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			say("lo: up: %s", strerror(errno));
	}
	close(s);
}

void
agent_vm_init(char *port, size_t cap)
{
	struct agent_cmdline cl;
	char buf[CMDLINE_MAX], err[256];
	ssize_t n = 0;
	int fd, waited = 0;

	mnt("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	console();
	mnt("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mnt("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mnt("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mnt("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mnt("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666");
	mnt("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");

	fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	if (agent_cmdline_parse(buf, (size_t)n, &cl, err, sizeof(err)) < 0)
		say("kernel command line: %s (ignored)", err);

	load_modules();
	if (cl.root[0])
		switch_root(cl.root);
	if (cl.hostname[0] && sethostname(cl.hostname, strlen(cl.hostname)) < 0)
		say("sethostname %s: %s", cl.hostname, strerror(errno));
	lo_up();

	/* The kernel gives init HOME=/ and TERM=linux; commands want a
	 * PATH and root's home. */
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		       "/sbin:/bin", 0);
	setenv("HOME", "/root", 1);

	for (;;) {
		int rc = agent_vport_find(VPORTS_DIR, cl.port, port, cap);

		if (rc == 0)
			return;
		if (rc != -ENOENT) {
			say("virtio port %s: %s", cl.port, strerror(-rc));
			sleep_ms(1000);
			continue;
		}
		if (waited == 5000)
			say("still waiting for the virtio port named %s "
			    "(in %s)", cl.port, VPORTS_DIR);
		sleep_ms(PORT_POLL_MS);
		waited += PORT_POLL_MS;
	}
}
