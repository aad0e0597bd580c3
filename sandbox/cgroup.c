/* cgroup.c: resource limits through cgroups, v2 where the host has it and
 * v1 (memory, cpu, pids) where it does not. The pure parts (detection,
 * paths, values) take text and return text; the rest writes to the
 * cgroup filesystem. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-int.h"

static const char *const ctrl_name[SBX_CG__N] = {"memory", "cpu", "pids"};

/* Copies the n-th space-separated field of line (0-based) into out. */
static bool
field(const char *line, size_t len, int n, char *out, size_t outsz)
{
	size_t i = 0, start;

	for (int f = 0;; f++) {
		while (i < len && line[i] == ' ')
			i++;
		start = i;
		while (i < len && line[i] != ' ')
			i++;
		if (start == i)
			return false;
		if (f == n) {
			size_t fl = i - start;
			if (fl >= outsz)
				return false;
			memcpy(out, line + start, fl);
			out[fl] = 0;
			return true;
		}
	}
}

/* Is tok one of the comma-separated words of list? */
static bool
has_word(const char *list, const char *tok)
{
	size_t tl = strlen(tok);

	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n == tl && memcmp(p, tok, n) == 0)
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void
unescape(char *s)
{
	char *o = s;

	for (char *i = s; *i; i++) {
		if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' &&
		    i[3] >= '0' && i[3] <= '7') {
			*o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
			i += 3;
		} else {
			*o++ = *i;
		}
	}
	*o = 0;
}

int
sbx_cg_detect(const char *mi, struct sbx_cg_layout *out)
{
	bool v1[SBX_CG__N] = {false};
	bool any_v1 = false, v2 = false;

	memset(out, 0, sizeof(*out));
	for (const char *line = mi; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char mp[PATH_MAX], fstype[32], opts[512];
		int dash = -1;

		/* Find the " - " separator: the field after it is fstype. */
		for (int f = 6; f < 40; f++) {
			char tok[PATH_MAX];
			if (!field(line, len, f, tok, sizeof(tok)))
				break;
			if (strcmp(tok, "-") == 0) {
				dash = f;
				break;
			}
		}
		if (dash > 0 && field(line, len, 4, mp, sizeof(mp)) &&
		    field(line, len, dash + 1, fstype, sizeof(fstype)) &&
		    field(line, len, dash + 3, opts, sizeof(opts))) {
			unescape(mp);
			if (strcmp(fstype, "cgroup2") == 0 && !v2) {
				v2 = true;
				snprintf(out->v2mount, sizeof(out->v2mount), "%s", mp);
			} else if (strcmp(fstype, "cgroup") == 0) {
				for (int c = 0; c < SBX_CG__N; c++) {
					if (!v1[c] && has_word(opts, ctrl_name[c])) {
						v1[c] = true;
						any_v1 = true;
						snprintf(out->mount[c], sizeof(out->mount[c]), "%s",
						         mp);
					}
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (any_v1) {
		out->version = 1;
		return 0;
	}
	if (v2) {
		out->version = 2;
		return 0;
	}
	return -ENOENT;
}

int
sbx_cg_self(const char *pc, int version, enum sbx_cg_ctrl ctrl, char *out, size_t outsz)
{
	for (const char *line = pc; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

		if (c2) {
			char ctrls[256];
			size_t cl = (size_t)(c2 - c1 - 1);
			size_t pl = len - (size_t)(c2 + 1 - line);
			bool match;

			if (cl < sizeof(ctrls)) {
				memcpy(ctrls, c1 + 1, cl);
				ctrls[cl] = 0;
				match = version == 2
				            ? (cl == 0 && (c1 - line) == 1 && line[0] == '0')
				            : has_word(ctrls, ctrl_name[ctrl]);
				if (match) {
					if (pl >= outsz)
						return -ENAMETOOLONG;
					memcpy(out, c2 + 1, pl);
					out[pl] = 0;
					/* "/" is the root: no component to add. */
					if (strcmp(out, "/") == 0)
						out[0] = 0;
					return 0;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

size_t
sbx_cg_values(int version, const struct sbx_limits *l, struct sbx_cg_kv *o)
{
	size_t n = 0;
	const unsigned long long period = 100000;

#define KV(C, F, OPT, ...)                                                                         \
	do {                                                                                       \
		o[n].ctrl = (C);                                                                   \
		o[n].file = (F);                                                                   \
		o[n].optional = (OPT);                                                             \
		snprintf(o[n].value, sizeof(o[n].value), __VA_ARGS__);                             \
		n++;                                                                               \
	} while (0)

	if (version == 1) {
		if (l->memory_mb) {
			unsigned long long b = (unsigned long long)l->memory_mb << 20;
			KV(SBX_CG_MEMORY, "memory.limit_in_bytes", false, "%llu", b);
			/* With swap accounting, swap counts too; without it
			 * the file is absent and swap is the host's choice. */
			KV(SBX_CG_MEMORY, "memory.memsw.limit_in_bytes", true, "%llu", b);
			KV(SBX_CG_MEMORY, "memory.swappiness", true, "0");
		}
		if (l->cpus_milli) {
			KV(SBX_CG_CPU, "cpu.cfs_period_us", false, "%llu", period);
			KV(SBX_CG_CPU, "cpu.cfs_quota_us", false, "%llu",
			   period * l->cpus_milli / 1000);
		}
		if (l->pids)
			KV(SBX_CG_PIDS, "pids.max", false, "%u", l->pids);
	} else {
		if (l->memory_mb) {
			KV(SBX_CG_MEMORY, "memory.max", false, "%llu",
			   (unsigned long long)l->memory_mb << 20);
			KV(SBX_CG_MEMORY, "memory.swap.max", true, "0");
		}
		if (l->cpus_milli)
			KV(SBX_CG_CPU, "cpu.max", false, "%llu %llu", period * l->cpus_milli / 1000,
			   period);
		if (l->pids)
			KV(SBX_CG_PIDS, "pids.max", false, "%u", l->pids);
	}
#undef KV
	return n;
}

int
sbx_cg_path(const char *mount, const char *self, const char *parent, const char *id, char *out,
            size_t outsz)
{
	int n = snprintf(out, outsz, "%s%s%s%s/%s", mount, self,
	                 parent[0] == '/' || !parent[0] ? "" : "/", parent, id);

	if (n < 0 || (size_t)n >= outsz)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- the host ---------------------------------------------------------- */

static char *
slurp(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 8192, len = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = malloc(cap);
	while (buf) {
		ssize_t r;
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	if (buf)
		buf[len] = 0;
	close(fd);
	return buf;
}

static int
write_file(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX + 64];
	int fd, e = 0;
	size_t n = strlen(val);

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		e = -errno;
	close(fd);
	return e;
}

static struct sbx_cg_layout layout;
static char self_path[SBX_CG__N][PATH_MAX];
static bool layout_done;
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;

static int layout_read(char *err, size_t errsz);

/* The host's layout, read once (any thread). */
static int
layout_load(char *err, size_t errsz)
{
	int rc = 0;

	pthread_mutex_lock(&layout_lock);
	if (!layout_done)
		rc = layout_read(err, errsz);
	pthread_mutex_unlock(&layout_lock);
	return rc;
}

static int
layout_read(char *err, size_t errsz)
{
	char *mi, *pc;
	int rc;

	mi = slurp("/proc/self/mountinfo");
	pc = slurp("/proc/self/cgroup");
	if (!mi || !pc) {
		free(mi);
		free(pc);
		return sbx_fail(err, errsz, -EIO,
		                "cgroups: cannot read /proc/self/mountinfo or "
		                "/proc/self/cgroup");
	}
	rc = sbx_cg_detect(mi, &layout);
	if (rc < 0) {
		rc = sbx_fail(err, errsz, rc,
		              "cgroups: no cgroup filesystem is mounted; mount "
		              "cgroup2 on /sys/fs/cgroup");
		goto out;
	}
	for (int c = 0; c < SBX_CG__N; c++) {
		if (layout.version == 1 && !layout.mount[c][0])
			continue;
		rc = sbx_cg_self(pc, layout.version, (enum sbx_cg_ctrl)c, self_path[c],
		                 sizeof(self_path[c]));
		if (rc < 0)
			self_path[c][0] = 0;
	}
	rc = 0;
	layout_done = true;
	sbx_log(SBX_LOG_INFO, "cgroups: v%d (memory %s, cpu %s, pids %s)", layout.version,
	        layout.version == 2  ? layout.v2mount
	        : layout.mount[0][0] ? layout.mount[0]
	                             : "-",
	        layout.version == 2  ? layout.v2mount
	        : layout.mount[1][0] ? layout.mount[1]
	                             : "-",
	        layout.version == 2  ? layout.v2mount
	        : layout.mount[2][0] ? layout.mount[2]
	                             : "-");
out:
	free(mi);
	free(pc);
	return rc;
}

static const char *
parent_name(void)
{
	return sbx_g.cgroup_parent[0] ? sbx_g.cgroup_parent : "sluice";
}

/* A parent starting with '/' is absolute in the hierarchy (a delegated
 * subtree on v2); otherwise it sits under the caller's own cgroup, so the
 * sandboxes stay inside whatever limits the daemon itself runs under. */
static const char *
self_for(int c)
{
	return parent_name()[0] == '/' ? "" : self_path[c];
}

int
sbx_cg_dirs(const char *id, struct sbx_cg *cg, char *err, size_t errsz)
{
	int rc;

	memset(cg, 0, sizeof(*cg));
	if ((rc = layout_load(err, errsz)) < 0)
		return rc;
	cg->version = layout.version;
	if (layout.version == 2) {
		if (sbx_cg_path(layout.v2mount, self_for(0), parent_name(), id, cg->dirs[0],
		                sizeof(cg->dirs[0])) < 0)
			return sbx_fail(err, errsz, -ENAMETOOLONG, "cgroups: path too long");
		cg->ndirs = 1;
		return 0;
	}
	for (int c = 0; c < SBX_CG__N; c++) {
		if (!layout.mount[c][0])
			continue;
		if (sbx_cg_path(layout.mount[c], self_for(c), parent_name(), id,
		                cg->dirs[cg->ndirs], sizeof(cg->dirs[0])) < 0) {
			cg->ndirs = 0;
			return sbx_fail(err, errsz, -ENAMETOOLONG, "cgroups: path too long");
		}
		cg->ndirs++;
	}
	return 0;
}

static bool
under(const char *path, const char *mount)
{
	size_t n = strlen(mount);

	return n > 1 && strncmp(path, mount, n) == 0 && path[n] == '/';
}

bool
sbx_cg_under_mount(const char *path)
{
	if (layout_load(NULL, 0) < 0)
		return false;
	if (layout.version == 2)
		return under(path, layout.v2mount);
	for (int c = 0; c < SBX_CG__N; c++)
		if (layout.mount[c][0] && under(path, layout.mount[c]))
			return true;
	return false;
}

bool
sbx_cg_populated(const char *dir)
{
	char p[PATH_MAX + 16], *txt;
	bool any;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	txt = slurp(p);
	if (!txt)
		return false;
	any = strspn(txt, "0123456789") > 0;
	free(txt);
	return any;
}

int
sbx_cg_create(const char *id, const struct sbx_limits *l, struct sbx_cg *cg, char *err,
              size_t errsz)
{
	struct sbx_cg_kv kv[SBX_CG_KV_MAX];
	size_t nkv;
	int rc;

	if ((rc = sbx_cg_dirs(id, cg, err, errsz)) < 0)
		return rc;
	if (layout.version == 2) {
		char ctl[PATH_MAX];
		/* The parent must delegate the controllers to its children. */
		snprintf(ctl, sizeof(ctl), "%s", cg->dirs[0]);
		*strrchr(ctl, '/') = 0;
		sbx_mkdir_p(ctl, 0755);
		write_file(ctl, "cgroup.subtree_control", "+memory +cpu +pids");
	}
	for (size_t i = 0; i < cg->ndirs; i++) {
		int r = sbx_mkdir_p(cg->dirs[i], 0755);
		/* A sandbox stopping meanwhile may remove the shared parent
		 * between our mkdirs: try again. */
		for (int k = 0; k < 3 && r == -ENOENT; k++)
			r = sbx_mkdir_p(cg->dirs[i], 0755);
		if (r < 0) {
			errno = -r;
			rc = sbx_fail(err, errsz, -errno, "cgroups: cannot create %s: %s",
			              cg->dirs[i], strerror(errno));
			goto fail;
		}
	}
	nkv = sbx_cg_values(layout.version, l, kv);
	for (size_t i = 0; i < nkv; i++) {
		const char *dir = NULL;
		if (layout.version == 2) {
			dir = cg->dirs[0];
		} else if (layout.mount[kv[i].ctrl][0]) {
			/* dirs[] holds the mounted controllers in order. */
			size_t k = 0;
			for (int c = 0; c < (int)kv[i].ctrl; c++)
				if (layout.mount[c][0])
					k++;
			dir = cg->dirs[k];
		}
		if (!dir) {
			rc = sbx_fail(err, errsz, -ENOTSUP,
			              "cgroups: the %s controller is not mounted; "
			              "drop that limit or mount it",
			              ctrl_name[kv[i].ctrl]);
			goto fail;
		}
		rc = write_file(dir, kv[i].file, kv[i].value);
		if (rc < 0 && !(kv[i].optional && rc == -ENOENT)) {
			rc = sbx_fail(err, errsz, rc, "cgroups: cannot write %s to %s/%s: %s",
			              kv[i].value, dir, kv[i].file, strerror(-rc));
			goto fail;
		}
	}
	return 0;
fail:
	sbx_cg_destroy(cg, NULL, 0);
	return rc;
}

int
sbx_cg_attach(const struct sbx_cg *cg, pid_t pid, char *err, size_t errsz)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (size_t i = 0; i < cg->ndirs; i++) {
		int rc = write_file(cg->dirs[i], "cgroup.procs", v);
		if (rc < 0)
			return sbx_fail(err, errsz, rc, "cgroups: cannot move %d into %s: %s",
			                (int)pid, cg->dirs[i], strerror(-rc));
	}
	return 0;
}

/* SIGKILLs every process listed in dir/cgroup.procs; how many it found. */
static int
kill_all(const char *dir)
{
	char p[PATH_MAX + 16], *txt;
	int n = 0;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	txt = slurp(p);
	if (!txt)
		return 0;
	for (char *s = txt; *s;) {
		char *end;
		long pid = strtol(s, &end, 10);
		if (end == s)
			break;
		if (pid > 0) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		s = end;
		while (*s == '\n')
			s++;
	}
	free(txt);
	return n;
}

int
sbx_cg_destroy(struct sbx_cg *cg, char *err, size_t errsz)
{
	int rc = 0;

	for (size_t i = 0; i < cg->ndirs; i++) {
		/* Processes leave a group a moment after they die: retry
		 * for up to 2 s. */
		for (int tries = 0;; tries++) {
			if (rmdir(cg->dirs[i]) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || tries >= 400) {
				rc = sbx_fail(err, errsz, -errno, "cgroups: cannot remove %s: %s",
				              cg->dirs[i], strerror(errno));
				break;
			}
			kill_all(cg->dirs[i]);
			nanosleep(&(struct timespec){0, 5000000}, NULL);
		}
		/* The shared parent goes with its last child, so that nothing
		 * of ours stays inside a cgroup someone else must remove. A
		 * concurrent start recreates it (see sbx_cg_create). */
		char *slash = strrchr(cg->dirs[i], '/');
		if (slash) {
			*slash = 0;
			rmdir(cg->dirs[i]);
			*slash = '/';
		}
	}
	cg->ndirs = 0;
	return rc;
}
