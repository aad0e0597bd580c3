/* sup_podman.c: the methods of sluice-supervisor-podman (sup_podman.h).
 *
 * Every podman invocation is a child bounded by a deadline (sup_run.h):
 * the call's remaining deadline_ms, capped by --timeout-s (and for
 * environment.ensure by --env-timeout-s). podman always gets the
 * supervisor's own storage (--root, --runroot, --tmpdir), so nothing here
 * touches the machine's default store. A sandbox is the container
 * "sluice-ID" labelled sluice.id=ID; its handle is that name. A template is
 * the image localhost/sluice-env:KEY imported offline from the root tree
 * sluiced names; its ref is that name. Both are checked on the way back in
 * (they become podman arguments). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sup_podman.h"
#include "sup_run.h"

#define IMG_PREFIX "localhost/sluice-env:"
#define NAME_PREFIX "sluice-"
#define LABEL "sluice.id"
#define EXEC_CAP (1u << 20)   /* sandbox.exec's stdout and stderr */
#define FILE_CAP (2u << 20)   /* file.read / file.write */
#define LIST_CAP (4u << 20)   /* podman ps output */

/* ---- small helpers ------------------------------------------------------ */

static int
fail(struct sup_err *e, int code, const char *reason, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->reason = reason;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

struct av {
	char *v[256];
	size_t n;
	bool over;
};

static void
av_add(struct av *a, const char *s)
{
	if (a->n + 1 >= sizeof(a->v) / sizeof(a->v[0]) || !s) {
		a->over = true;
		return;
	}
	a->v[a->n] = strdup(s);
	if (!a->v[a->n])
		a->over = true;
	else
		a->v[++a->n] = NULL;
}

static void __attribute__((format(printf, 2, 3)))
av_addf(struct av *a, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		a->over = true;
		return;
	}
	av_add(a, buf);
}

static void
av_free(struct av *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	a->n = 0;
}

/* podman with the supervisor's storage, then the subcommand. */
static void
av_podman(struct av *a, const struct sup_cfg *c, const char *sub)
{
	a->n = 0;
	a->over = false;
	a->v[0] = NULL;
	av_add(a, c->podman);
	av_add(a, "--root");
	av_add(a, c->root);
	av_add(a, "--runroot");
	av_add(a, c->runroot);
	av_add(a, "--tmpdir");
	av_add(a, c->tmpdir);
	av_add(a, "--cgroup-manager");
	av_add(a, c->cgroup_manager);
	av_add(a, "--events-backend");
	av_add(a, "file");
	av_add(a, sub);
}

/* The time a child may take: the call's deadline capped by cap_ms. */
static int
budget(long long deadline_ms, int cap_ms)
{
	long long left = deadline_ms - sup_now_ms();

	if (left > cap_ms)
		left = cap_ms;
	return left < 1 ? 0 : (int)left;
}

/* Runs a with stdout kept up to cap. Returns 0 when it ran (r->status
 * says how it ended), else fills e. */
static int
run(struct av *a, int timeout_ms, size_t cap, struct sup_run *r, struct sup_err *e)
{
	memset(r, 0, sizeof(*r));
	if (a->over) {
		av_free(a);
		return fail(e, SUP_E_PARAMS, "too_long", "the request does not fit a podman command line");
	}
	if (timeout_ms <= 0) {
		av_free(a);
		return fail(e, SUP_E_TIMEOUT, "deadline", "the call's deadline has passed");
	}
	r->argv = a->v;
	r->in_fd = -1;
	r->out_cap = cap;
	r->timeout_ms = timeout_ms;
	int rc = sup_run(r);
	if (rc < 0) {
		sup_run_free(r);
		av_free(a);
		return fail(e, SUP_E_FAILED, "spawn", "cannot run podman: %s", strerror(-rc));
	}
	return 0;
}

static bool
ok(const struct sup_run *r)
{
	return !r->timed_out && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
}

/* A failed podman run as an error: timed out, not found, or failed. */
static int
run_fail(struct sup_run *r, struct av *a, const char *what, struct sup_err *e)
{
	char why[400];

	r->argv = a->v;
	sup_run_why(r, why, sizeof(why));
	if (r->timed_out)
		fail(e, SUP_E_TIMEOUT, "timeout", "%s: timed out after %d ms", what, r->timeout_ms);
	else if (strcasestr(r->err, "no such container") || strcasestr(r->err, "no container with"))
		fail(e, SUP_E_NOTFOUND, "gone", "%s: no such sandbox", what);
	else
		fail(e, SUP_E_FAILED, "engine", "%s: %s", what, why);
	sup_run_free(r);
	av_free(a);
	return -1;
}

static bool
is_hex(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* A sluice id: [A-Za-z0-9_.-]{1,64}, not starting with '-' or '.'. */
static bool
is_id(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 || s[0] == '-' || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
			return false;
	return true;
}

/* An absolute path with no NUL, no "..", and none of the characters
 * podman's own syntaxes use (',' ':' in -v and cp), no newline. */
static bool
is_path(json_t *j)
{
	const char *s = json_string_value(j);

	if (!s || strlen(s) != json_string_length(j) || s[0] != '/' || strlen(s) > 4000)
		return false;
	if (strpbrk(s, ",:\n\r") || strstr(s, "/../") ||
	    (strlen(s) >= 3 && !strcmp(s + strlen(s) - 3, "/..")))
		return false;
	return true;
}

static const char *
str(json_t *params, const char *key)
{
	json_t *j = json_object_get(params, key);
	const char *s = json_string_value(j);

	if (!s || strlen(s) != json_string_length(j))
		return NULL;
	return s;
}

/* A handle is the container name "sluice-ID". */
static const char *
handle(json_t *params, struct sup_err *e)
{
	const char *h = str(params, "handle");

	if (!h || strncmp(h, NAME_PREFIX, strlen(NAME_PREFIX)) || !is_id(h + strlen(NAME_PREFIX))) {
		fail(e, SUP_E_PARAMS, "handle", "handle: not a handle this supervisor gave");
		return NULL;
	}
	return h;
}

static const char *
find_exec(const char *name, char *buf, size_t n)
{
	static const char *const extra[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					    "/usr/bin", "/sbin", "/bin"};
	const char *path = getenv("PATH");

	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? name : NULL;
	if (path) {
		const char *p = path;
		while (*p) {
			size_t l = strcspn(p, ":");
			if (l > 0 && (size_t)snprintf(buf, n, "%.*s/%s", (int)l, p, name) < n &&
			    access(buf, X_OK) == 0)
				return buf;
			p += l;
			if (*p == ':')
				p++;
		}
	}
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		if ((size_t)snprintf(buf, n, "%s/%s", extra[i], name) < n && access(buf, X_OK) == 0)
			return buf;
	return NULL;
}

/* ---- the engine: can podman run here? ----------------------------------- */

static pthread_mutex_t engine_mu = PTHREAD_MUTEX_INITIALIZER;
static char engine_version[64];
static bool engine_ok;

/* Whether podman works here (its info answered once); why not in e. */
static bool
engine(const struct sup_cfg *c, long long deadline_ms, struct sup_err *e)
{
	char buf[512];
	struct av a;
	struct sup_run r;

	pthread_mutex_lock(&engine_mu);
	if (engine_ok) {
		pthread_mutex_unlock(&engine_mu);
		return true;
	}
	if (!c->podman || access(c->podman, X_OK) != 0) {
		pthread_mutex_unlock(&engine_mu);
		fail(e, SUP_E_UNAVAILABLE, "no_podman", "podman is not installed (%s)",
		     c->podman ? c->podman : "not found in PATH");
		return false;
	}
	if (!find_exec(c->runtime, buf, sizeof(buf))) {
		pthread_mutex_unlock(&engine_mu);
		fail(e, SUP_E_UNAVAILABLE, "no_runtime", "the OCI runtime %s is not installed",
		     c->runtime);
		return false;
	}
	av_podman(&a, c, "info");
	av_add(&a, "--format");
	av_add(&a, "{{.Version.Version}}");
	if (run(&a, budget(deadline_ms, c->timeout_ms), 4096, &r, e) < 0) {
		pthread_mutex_unlock(&engine_mu);
		return false;
	}
	if (!ok(&r)) {
		pthread_mutex_unlock(&engine_mu);
		run_fail(&r, &a, "podman info", e);
		if (e->code != SUP_E_TIMEOUT)
			e->code = SUP_E_UNAVAILABLE;
		e->reason = "podman_info";
		return false;
	}
	size_t l = strcspn(r.out, "\n");
	snprintf(engine_version, sizeof(engine_version), "%.*s", (int)l, r.out);
	engine_ok = true;
	pthread_mutex_unlock(&engine_mu);
	sup_run_free(&r);
	av_free(&a);
	return true;
}

static int
m_capabilities(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	struct sup_err why = {0};
	char buf[512];
	bool avail;
	json_t *iso;

	json_t *proto = json_object_get(p, "protocol");
	if (proto && (!json_is_integer(proto) || json_integer_value(proto) < 1))
		return fail(e, SUP_E_PARAMS, "protocol", "protocol: a positive integer");
	avail = engine(c, dl, &why);
	iso = json_array();
	json_array_append_new(iso, json_string("standard"));
	if (c->enhanced && find_exec(c->enhanced, buf, sizeof(buf)))
		json_array_append_new(iso, json_string("enhanced"));
	*res = json_pack("{s:i, s:s+, s:b, s:o, s:b, s:{s:b, s:b, s:b}}", "protocol", 1, "engine",
			 "podman ", avail ? engine_version : "", "available", avail, "isolation",
			 iso, "park", 0, "limits", "memory", 1, "cpus", 1, "pids", 1);
	if (*res && !avail)
		json_object_set_new(*res, "reason", json_string(why.msg));
	return *res ? 0 : fail(e, SUP_E_FAILED, "nomem", "out of memory");
}

/* ---- listing ------------------------------------------------------------ */

/* The sandboxes podman knows (labelled sluice.id), as {id, handle,
 * running}. */
static json_t *
list(const struct sup_cfg *c, long long dl, struct sup_err *e)
{
	struct av a;
	struct sup_run r;
	json_error_t je;

	av_podman(&a, c, "ps");
	av_add(&a, "-a");
	av_add(&a, "--filter");
	av_add(&a, "label=" LABEL);
	av_add(&a, "--format");
	av_add(&a, "json");
	if (run(&a, budget(dl, c->timeout_ms), LIST_CAP, &r, e) < 0)
		return NULL;
	if (!ok(&r)) {
		run_fail(&r, &a, "podman ps", e);
		return NULL;
	}
	json_t *all = r.out_trunc ? NULL : json_loadb(r.out, r.out_len, 0, &je);
	sup_run_free(&r);
	av_free(&a);
	if (!json_is_array(all)) {
		json_decref(all);
		fail(e, SUP_E_FAILED, "engine", "podman ps: unreadable output");
		return NULL;
	}
	json_t *out = json_array(), *it;
	size_t i;
	json_array_foreach (all, i, it) {
		const char *id = json_string_value(json_object_get(json_object_get(it, "Labels"), LABEL));
		const char *name = json_string_value(json_array_get(json_object_get(it, "Names"), 0));
		const char *state = json_string_value(json_object_get(it, "State"));
		if (!id || !name)
			continue;
		json_array_append_new(out, json_pack("{s:s, s:s, s:b}", "id", id, "handle", name,
						     "running", state && !strcmp(state, "running")));
	}
	json_decref(all);
	return out;
}

static int
m_list(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	(void)p;
	if (!engine(c, dl, e))
		return -1;
	json_t *l = list(c, dl, e);
	if (!l)
		return -1;
	*res = json_pack("{s:o}", "sandboxes", l);
	return 0;
}

static int
m_capacity(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	(void)p;
	if (!engine(c, dl, e))
		return -1;
	json_t *l = list(c, dl, e), *it;
	size_t i, n = 0;
	if (!l)
		return -1;
	json_array_foreach (l, i, it)
		n += json_is_true(json_object_get(it, "running"));
	json_decref(l);
	*res = json_pack("{s:I, s:o}", "running", (json_int_t)n, "max",
			 c->max >= 0 ? json_integer(c->max) : json_null());
	return 0;
}

/* ---- templates ---------------------------------------------------------- */

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *
ref_of(json_t *p, struct sup_err *e)
{
	const char *ref = str(p, "ref");

	if (!ref || strncmp(ref, IMG_PREFIX, strlen(IMG_PREFIX)) ||
	    !is_hex(ref + strlen(IMG_PREFIX), 64)) {
		fail(e, SUP_E_PARAMS, "ref", "ref: not a reference this supervisor gave");
		return NULL;
	}
	return ref;
}

/* 0: the image exists, 1: it does not, -1: e says why. */
static int
image_exists(const struct sup_cfg *c, const char *ref, long long dl, struct sup_err *e)
{
	struct av a;
	struct sup_run r;

	av_podman(&a, c, "image");
	av_add(&a, "exists");
	av_add(&a, ref);
	if (run(&a, budget(dl, c->timeout_ms), 4096, &r, e) < 0)
		return -1;
	if (!r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) <= 1) {
		int rc = WEXITSTATUS(r.status);
		sup_run_free(&r);
		av_free(&a);
		return rc;
	}
	return run_fail(&r, &a, "podman image exists", e);
}

/* tar -C root -cf - . | podman import - ref, under one watchdog. */
static int
import(const struct sup_cfg *c, const char *root, const char *ref, long long dl,
       struct sup_err *e)
{
	int tmo = budget(dl, c->env_timeout_ms), pp[2];
	long long end = sup_now_ms() + tmo;
	struct av a, t = {.n = 0};
	struct sup_run r;
	bool tar_killed = false;

	if (tmo <= 0)
		return fail(e, SUP_E_TIMEOUT, "deadline", "the call's deadline has passed");
	if (pipe2(pp, O_CLOEXEC) < 0)
		return fail(e, SUP_E_FAILED, "pipe", "pipe: %s", strerror(errno));
	av_add(&t, c->tar);
	av_add(&t, "-C");
	av_add(&t, root);
	av_add(&t, "--numeric-owner");
	av_add(&t, "-cf");
	av_add(&t, "-");
	av_add(&t, ".");
	pid_t tar = t.over ? -ENOMEM : sup_spawn(t.v, -1, pp[1]);
	av_free(&t);
	close(pp[1]);
	if (tar < 0) {
		close(pp[0]);
		return fail(e, SUP_E_FAILED, "spawn", "cannot run tar: %s", strerror((int)-tar));
	}
	av_podman(&a, c, "import");
	av_add(&a, "--quiet");
	av_add(&a, "-");
	av_add(&a, ref);
	memset(&r, 0, sizeof(r));
	r.argv = a.v;
	r.in_fd = pp[0];
	r.out_cap = 4096;
	r.timeout_ms = tmo;
	int rc = sup_run(&r);
	close(pp[0]);
	/* podman is gone: tar ends too (EPIPE) or at the same deadline. */
	int tst = sup_reap(tar, rc < 0 || r.timed_out ? 0 : end, &tar_killed);
	if (rc < 0) {
		av_free(&a);
		return fail(e, SUP_E_FAILED, "spawn", "cannot run podman: %s", strerror(-rc));
	}
	if (r.timed_out || tar_killed) {
		sup_run_free(&r);
		av_free(&a);
		return fail(e, SUP_E_TIMEOUT, "timeout",
			    "environment preparation timed out after %d ms (--env-timeout-s)", tmo);
	}
	if (!ok(&r))
		return run_fail(&r, &a, "podman import", e);
	sup_run_free(&r);
	av_free(&a);
	if (!WIFEXITED(tst) || WEXITSTATUS(tst) != 0)
		return fail(e, SUP_E_FAILED, "tar", "tar of %s failed (status %d)", root, tst);
	return 0;
}

static int
m_env_ensure(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *kind = str(p, "kind"), *key = str(p, "key");
	json_t *rootj = json_object_get(p, "root");
	char ref[128];
	struct stat st;

	if (!kind || (strcmp(kind, "busybox") && strcmp(kind, "host") && strcmp(kind, "dir")))
		return fail(e, SUP_E_PARAMS, "kind", "kind: busybox, host or dir");
	if (!key || !is_hex(key, 64))
		return fail(e, SUP_E_PARAMS, "key", "key: 1 to 64 lowercase hex digits");
	if (!is_path(rootj))
		return fail(e, SUP_E_PARAMS, "root", "root: an absolute path");
	const char *root = json_string_value(rootj);
	if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
		return fail(e, SUP_E_PARAMS, "root", "root %s: not a directory", root);
	if (!engine(c, dl, e))
		return -1;
	snprintf(ref, sizeof(ref), IMG_PREFIX "%s", key);
	/* One preparation at a time: the same key twice imports once. */
	pthread_mutex_lock(&env_mu);
	int ex = image_exists(c, ref, dl, e);
	if (ex == 1)
		ex = import(c, root, ref, dl, e);
	pthread_mutex_unlock(&env_mu);
	if (ex < 0)
		return -1;
	*res = json_pack("{s:s}", "ref", ref);
	return 0;
}

static int
m_env_release(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *ref = ref_of(p, e);
	struct av a;
	struct sup_run r;

	if (!ref || !engine(c, dl, e))
		return -1;
	av_podman(&a, c, "rmi");
	av_add(&a, "-i");
	av_add(&a, ref);
	if (run(&a, budget(dl, c->timeout_ms), 4096, &r, e) < 0)
		return -1;
	/* An image a container still uses stays cached: released all the
	 * same (a later start, or this sluiced's next ensure, uses it). */
	if (!ok(&r) && !(!r.timed_out && strcasestr(r.err, "in use")))
		return run_fail(&r, &a, "podman rmi", e);
	sup_run_free(&r);
	av_free(&a);
	*res = json_object();
	return 0;
}

/* ---- sandboxes ---------------------------------------------------------- */

/* The env entries into a 0600 file for --env-file (values stay off every
 * command line). Each "NAME=VALUE", NAME [A-Za-z_][A-Za-z0-9_]*, no
 * newline. */
static int
env_file(const struct sup_cfg *c, json_t *env, char *path, size_t n, struct sup_err *e)
{
	json_t *it;
	size_t i;

	if (env && !json_is_array(env))
		return fail(e, SUP_E_PARAMS, "env", "env: an array of NAME=VALUE");
	json_array_foreach (env, i, it) {
		const char *s = json_string_value(it);
		if (!s || strlen(s) != json_string_length(it) || strpbrk(s, "\n\r"))
			return fail(e, SUP_E_PARAMS, "env", "env[%zu]: a NAME=VALUE line", i);
		size_t k = 0;
		while ((s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= 'a' && s[k] <= 'z') || s[k] == '_' ||
		       (k > 0 && s[k] >= '0' && s[k] <= '9'))
			k++;
		if (k == 0 || s[k] != '=')
			return fail(e, SUP_E_PARAMS, "env", "env[%zu]: a NAME=VALUE line", i);
	}
	snprintf(path, n, "%s/env.XXXXXX", c->state_dir);
	int fd = mkstemp(path);
	if (fd < 0)
		return fail(e, SUP_E_FAILED, "state_dir", "env file in %s: %s", c->state_dir,
			    strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(path);
		return fail(e, SUP_E_FAILED, "nomem", "env file: %s", strerror(errno));
	}
	json_array_foreach (env, i, it)
		fprintf(f, "%s\n", json_string_value(it));
	if (fclose(f) != 0) {
		unlink(path);
		return fail(e, SUP_E_FAILED, "state_dir", "env file: %s", strerror(errno));
	}
	return 0;
}

static unsigned long
lim(json_t *limits, const char *key, bool *bad)
{
	json_t *j = json_object_get(limits, key);

	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > (1L << 40)) {
		*bad = true;
		return 0;
	}
	return (unsigned long)json_integer_value(j);
}

/* The host pid of a running container; 0 when not running; -1 (e) when
 * podman does not know it. */
static long
inspect_pid(const struct sup_cfg *c, const char *name, long long dl, char *label, size_t ln,
	    struct sup_err *e)
{
	struct av a;
	struct sup_run r;
	long pid = 0;
	char run_s[16] = "", lab[128] = "";

	av_podman(&a, c, "inspect");
	av_add(&a, "--type");
	av_add(&a, "container");
	av_add(&a, "--format");
	av_add(&a, "{{.State.Running}} {{.State.Pid}} {{index .Config.Labels \"" LABEL "\"}}");
	av_add(&a, name);
	if (run(&a, budget(dl, c->timeout_ms), 4096, &r, e) < 0)
		return -1;
	if (!ok(&r)) {
		if (!r.timed_out && strcasestr(r.err, "no such")) {
			sup_run_free(&r);
			av_free(&a);
			fail(e, SUP_E_NOTFOUND, "gone", "%s: no such sandbox", name);
			return -1;
		}
		run_fail(&r, &a, "podman inspect", e);
		return -1;
	}
	if (sscanf(r.out, "%15s %ld %127s", run_s, &pid, lab) < 2)
		pid = -2;
	sup_run_free(&r);
	av_free(&a);
	if (pid == -2) {
		fail(e, SUP_E_FAILED, "engine", "podman inspect: unreadable output");
		return -1;
	}
	if (label)
		snprintf(label, ln, "%s", lab);
	return strcmp(run_s, "true") ? 0 : pid;
}

static void
remove_container(const struct sup_cfg *c, const char *name, int grace_s, long long dl)
{
	struct av a;
	struct sup_run r;
	struct sup_err e;

	av_podman(&a, c, "rm");
	av_add(&a, "-f");
	av_add(&a, "-i");
	av_add(&a, "-t");
	av_addf(&a, "%d", grace_s);
	av_add(&a, name);
	if (run(&a, budget(dl, c->timeout_ms), 4096, &r, &e) == 0) {
		sup_run_free(&r);
		av_free(&a);
	}
}

static int
m_start(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *id = str(p, "id"), *iso = str(p, "isolation"), *ref, *rt;
	const char *cwd = str(p, "cwd"), *host = str(p, "hostname");
	json_t *limits = json_object_get(p, "limits"), *mounts = json_object_get(p, "mounts");
	json_t *cmd = json_object_get(p, "command"), *net = json_object_get(p, "network"), *it;
	char name[128], rtbuf[512], envp[512] = "";
	bool bad = false;
	size_t i;
	struct av a;
	struct sup_run r;

	if (!id || !is_id(id))
		return fail(e, SUP_E_PARAMS, "id", "id: [A-Za-z0-9_.-], 1 to 64");
	if (!(ref = ref_of(p, e)))
		return -1;
	if (iso && strcmp(iso, "standard") && strcmp(iso, "enhanced"))
		return fail(e, SUP_E_PARAMS, "isolation", "isolation: standard or enhanced");
	if (limits && !json_is_object(limits) && !json_is_null(limits))
		return fail(e, SUP_E_PARAMS, "limits", "limits: an object");
	unsigned long mem = lim(limits, "memory_mb", &bad), cpus = lim(limits, "cpus_milli", &bad),
		      pids = lim(limits, "pids", &bad);
	if (bad)
		return fail(e, SUP_E_PARAMS, "limits", "limits: non-negative integers");
	if (mounts && !json_is_array(mounts) && !json_is_null(mounts))
		return fail(e, SUP_E_PARAMS, "mounts", "mounts: an array");
	json_array_foreach (mounts, i, it) {
		json_t *ro = json_object_get(it, "read_only"), *src = json_object_get(it, "source");
		const char *sp = json_string_value(src);
		if (!sp || sp[0] != '/' || strlen(sp) != json_string_length(src) ||
		    !is_path(json_object_get(it, "target")) || (ro && !json_is_boolean(ro)))
			return fail(e, SUP_E_PARAMS, "mounts",
				    "mounts[%zu]: source and target absolute paths", i);
	}
	if (!json_is_array(cmd) || json_array_size(cmd) == 0)
		return fail(e, SUP_E_PARAMS, "command", "command: a non-empty array of strings");
	json_array_foreach (cmd, i, it)
		if (!json_is_string(it) || strlen(json_string_value(it)) != json_string_length(it))
			return fail(e, SUP_E_PARAMS, "command", "command[%zu]: a string", i);
	if (cwd && (cwd[0] != '/' || strpbrk(cwd, "\n")))
		return fail(e, SUP_E_PARAMS, "cwd", "cwd: an absolute path");
	if (host && !is_id(host))
		return fail(e, SUP_E_PARAMS, "hostname", "hostname: letters, digits, '-', '_', '.'");
	const char *netns = NULL;
	if (net && !json_is_null(net)) {
		json_t *nsj = json_object_get(net, "netns");
		if (!json_is_object(net) || !is_path(nsj))
			return fail(e, SUP_E_PARAMS, "network", "network: {\"netns\": PATH} or null");
		netns = json_string_value(nsj);
		if (access(netns, F_OK) != 0)
			return fail(e, SUP_E_PARAMS, "network", "network namespace %s: %s", netns,
				    strerror(errno));
	}
	/* The runtime: never a silent downgrade. */
	if (iso && !strcmp(iso, "enhanced")) {
		if (!c->enhanced)
			return fail(e, SUP_E_RUNTIME, "runtime_missing",
				    "isolation enhanced: no runtime configured (--enhanced-runtime)");
		if (!(rt = find_exec(c->enhanced, rtbuf, sizeof(rtbuf))))
			return fail(e, SUP_E_RUNTIME, "runtime_missing",
				    "isolation enhanced: runtime %s is not installed", c->enhanced);
	} else {
		rt = c->runtime;
	}
	if (!engine(c, dl, e))
		return -1;
	if (c->max >= 0) {
		json_t *l = list(c, dl, e);
		size_t n = 0;
		if (!l)
			return -1;
		json_array_foreach (l, i, it)
			n += json_is_true(json_object_get(it, "running"));
		json_decref(l);
		if ((long)n >= c->max)
			return fail(e, SUP_E_FAILED, "capacity", "at capacity (%ld sandboxes)", c->max);
	}
	if (env_file(c, json_object_get(p, "env"), envp, sizeof(envp), e) < 0)
		return -1;
	snprintf(name, sizeof(name), NAME_PREFIX "%s", id);
	av_podman(&a, c, "run");
	av_add(&a, "-d");
	av_add(&a, "--name");
	av_add(&a, name);
	av_addf(&a, "--label=" LABEL "=%s", id);
	av_add(&a, "--runtime");
	av_add(&a, rt);
	av_add(&a, "--network");
	if (netns)
		av_addf(&a, "ns:%s", netns);
	else
		av_add(&a, "none");
	/* /etc/resolv.conf and /etc/hosts are the image's, not podman's bind
	 * mounts: sluice writes them through the agent (its DNS door). */
	av_add(&a, "--dns=none");
	av_add(&a, "--no-hosts");
	av_addf(&a, "--ulimit=nofile=%lu:%lu", c->nofile, c->nofile);
	av_addf(&a, "--ulimit=nproc=%lu:%lu", c->nproc, c->nproc);
	if (mem)
		av_addf(&a, "--memory=%lum", mem);
	if (cpus)
		av_addf(&a, "--cpus=%lu.%03lu", cpus / 1000, cpus % 1000);
	if (pids)
		av_addf(&a, "--pids-limit=%lu", pids);
	json_array_foreach (mounts, i, it) {
		/* The host path as it is (no "..", no link): podman's -v syntax
		 * takes no ',' or ':' in it. */
		char real[PATH_MAX];
		const char *sp = json_string_value(json_object_get(it, "source"));
		const char *why = NULL;
		if (!realpath(sp, real))
			why = strerror(errno);
		else if (strpbrk(real, ",:\n"))
			why = "holds ',' or ':'";
		if (why) {
			av_free(&a);
			unlink(envp);
			return fail(e, SUP_E_PARAMS, "mounts", "mounts[%zu]: %s: %s", i, sp, why);
		}
		av_addf(&a, "--volume=%s:%s:%s", real, json_string_value(json_object_get(it, "target")),
			json_is_true(json_object_get(it, "read_only")) ? "ro" : "rw");
	}
	av_addf(&a, "--env-file=%s", envp);
	av_addf(&a, "--workdir=%s", cwd ? cwd : "/");
	av_addf(&a, "--hostname=%s", host ? host : id);
	av_add(&a, ref);
	json_array_foreach (cmd, i, it)
		av_add(&a, json_string_value(it));
	int rc = run(&a, budget(dl, c->timeout_ms), 4096, &r, e);
	unlink(envp);
	if (rc < 0) {
		remove_container(c, name, 0, sup_now_ms() + c->timeout_ms);
		return -1;
	}
	if (!ok(&r)) {
		if (strcasestr(r.err, "already in use")) {
			sup_run_free(&r);
			av_free(&a);
			return fail(e, SUP_E_FAILED, "exists", "sandbox %s exists already", id);
		}
		if (strcasestr(r.err, "image not known") || strcasestr(r.err, "no such image")) {
			sup_run_free(&r);
			av_free(&a);
			remove_container(c, name, 0, sup_now_ms() + c->timeout_ms);
			return fail(e, SUP_E_NOTFOUND, "no_environment", "environment %s: not prepared",
				    ref);
		}
		run_fail(&r, &a, "podman run", e);
		/* A container created but not started keeps its name. */
		remove_container(c, name, 0, sup_now_ms() + c->timeout_ms);
		return -1;
	}
	sup_run_free(&r);
	av_free(&a);
	long pid = inspect_pid(c, name, sup_now_ms() + c->timeout_ms, NULL, 0, e);
	if (pid <= 0) {
		if (pid == 0)
			fail(e, SUP_E_FAILED, "exited", "sandbox %s ended as it started", id);
		remove_container(c, name, 0, sup_now_ms() + c->timeout_ms);
		return -1;
	}
	*res = json_pack("{s:s, s:I}", "handle", name, "pid", (json_int_t)pid);
	return 0;
}

static int
m_stop(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *h = handle(p, e);
	json_t *g = json_object_get(p, "grace_ms");
	struct av a;
	struct sup_run r;

	if (!h)
		return -1;
	if (g && (!json_is_integer(g) || json_integer_value(g) < 0 ||
		  json_integer_value(g) > 600000))
		return fail(e, SUP_E_PARAMS, "grace_ms", "grace_ms: 0 to 600000");
	int grace_s = g ? (int)((json_integer_value(g) + 999) / 1000) : 0;
	if (!engine(c, dl, e))
		return -1;
	av_podman(&a, c, "rm");
	av_add(&a, "-f");
	av_add(&a, "-i");
	av_add(&a, "-t");
	av_addf(&a, "%d", grace_s);
	av_add(&a, h);
	if (run(&a, budget(dl, c->timeout_ms + grace_s * 1000), 4096, &r, e) < 0)
		return -1;
	if (!ok(&r))
		return run_fail(&r, &a, "podman rm", e);
	sup_run_free(&r);
	av_free(&a);
	*res = json_object();
	return 0;
}

static int
m_adopt(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *id = str(p, "id"), *h = handle(p, e);
	char label[128] = "";

	if (!h)
		return -1;
	if (!id || !is_id(id) || strcmp(h + strlen(NAME_PREFIX), id))
		return fail(e, SUP_E_PARAMS, "id", "id: the id the handle was given for");
	if (!engine(c, dl, e))
		return -1;
	long pid = inspect_pid(c, h, dl, label, sizeof(label), e);
	if (pid < 0)
		return -1;
	if (strcmp(label, id))
		return fail(e, SUP_E_NOTFOUND, "gone", "%s: not sandbox %s", h, id);
	if (pid == 0)
		return fail(e, SUP_E_NOTFOUND, "gone", "sandbox %s is not running", id);
	*res = json_pack("{s:s, s:b, s:I}", "handle", h, "running", 1, "pid", (json_int_t)pid);
	return 0;
}

static int
m_exec(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *h = handle(p, e);
	json_t *argv = json_object_get(p, "argv"), *t = json_object_get(p, "timeout_ms"), *it;
	struct av a;
	struct sup_run r;
	size_t i;

	if (!h)
		return -1;
	if (!json_is_array(argv) || json_array_size(argv) == 0)
		return fail(e, SUP_E_PARAMS, "argv", "argv: a non-empty array of strings");
	json_array_foreach (argv, i, it)
		if (!json_is_string(it) || strlen(json_string_value(it)) != json_string_length(it))
			return fail(e, SUP_E_PARAMS, "argv", "argv[%zu]: a string", i);
	if (t && (!json_is_integer(t) || json_integer_value(t) <= 0 ||
		  json_integer_value(t) > 3600000))
		return fail(e, SUP_E_PARAMS, "timeout_ms", "timeout_ms: 1 to 3600000");
	int tmo = t ? (int)json_integer_value(t) : c->timeout_ms;
	if (!engine(c, dl, e))
		return -1;
	av_podman(&a, c, "exec");
	av_add(&a, h);
	json_array_foreach (argv, i, it)
		av_add(&a, json_string_value(it));
	if (run(&a, budget(dl, tmo), EXEC_CAP, &r, e) < 0)
		return -1;
	if (r.timed_out)
		return run_fail(&r, &a, "exec", e);
	if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 125)
		return run_fail(&r, &a, "podman exec", e);
	char *o = sup_b64_encode((unsigned char *)r.out, r.out_len);
	char *er = sup_b64_encode((unsigned char *)r.err, r.err_len > EXEC_CAP ? EXEC_CAP : r.err_len);
	*res = json_pack("{s:o, s:o, s:s, s:s}", "code",
			 WIFEXITED(r.status) ? json_integer(WEXITSTATUS(r.status)) : json_null(),
			 "signal",
			 WIFSIGNALED(r.status) ? json_integer(WTERMSIG(r.status)) : json_null(),
			 "stdout", o ? o : "", "stderr", er ? er : "");
	free(o);
	free(er);
	sup_run_free(&r);
	av_free(&a);
	return 0;
}

/* ---- files -------------------------------------------------------------- */

/* Opens path inside the running sandbox's root (/proc/PID/root,
 * RESOLVE_IN_ROOT: symbolic links cannot leave it). */
static int
open_in(const struct sup_cfg *c, json_t *p, long long dl, int flags, mode_t mode,
	struct sup_err *e)
{
	const char *h = handle(p, e), *path = str(p, "path");
	char proc[64];

	if (!h)
		return -1;
	if (!path || path[0] != '/')
		return fail(e, SUP_E_PARAMS, "path", "path: an absolute path");
	if (!engine(c, dl, e))
		return -1;
	long pid = inspect_pid(c, h, dl, NULL, 0, e);
	if (pid < 0)
		return -1;
	if (pid == 0)
		return fail(e, SUP_E_NOTFOUND, "gone", "%s is not running", h);
	snprintf(proc, sizeof(proc), "/proc/%ld/root", pid);
	int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return fail(e, SUP_E_NOTFOUND, "gone", "%s: %s", proc, strerror(errno));
	struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOCTTY),
			       .mode = flags & O_CREAT ? mode : 0,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, path + 1, &how, sizeof(how));
	int err = errno;
	close(root);
	if (fd < 0)
		return fail(e, err == ENOENT ? SUP_E_NOTFOUND : SUP_E_FAILED,
			    err == ENOENT ? "no_file" : "io", "%s: %s", path, strerror(err));
	return fd;
}

static int
m_file_read(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	json_t *m = json_object_get(p, "max");
	size_t max = FILE_CAP, n = 0;
	struct stat st;

	if (m && (!json_is_integer(m) || json_integer_value(m) < 0 ||
		  json_integer_value(m) > FILE_CAP))
		return fail(e, SUP_E_PARAMS, "max", "max: 0 to %u", FILE_CAP);
	if (m)
		max = (size_t)json_integer_value(m);
	int fd = open_in(c, p, dl, O_RDONLY | O_NONBLOCK, 0, e);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(e, SUP_E_FAILED, "not_file", "not a regular file");
	}
	unsigned char *buf = malloc(max + 1);
	while (buf && n < max) {
		ssize_t k = read(fd, buf + n, max - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	char *b = buf ? sup_b64_encode(buf, n) : NULL;
	free(buf);
	if (!b)
		return fail(e, SUP_E_FAILED, "nomem", "out of memory");
	*res = json_pack("{s:s, s:I}", "data", b, "size", (json_int_t)st.st_size);
	free(b);
	return 0;
}

static int
m_file_write(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	json_t *d = json_object_get(p, "data"), *m = json_object_get(p, "mode");
	unsigned char *buf;

	if (!json_is_string(d) || json_string_length(d) > FILE_CAP / 3 * 4 + 4)
		return fail(e, SUP_E_PARAMS, "data", "data: base64, at most %u bytes", FILE_CAP);
	if (m && (!json_is_integer(m) || json_integer_value(m) < 0 ||
		  json_integer_value(m) > 07777))
		return fail(e, SUP_E_PARAMS, "mode", "mode: 0 to 07777");
	buf = malloc(json_string_length(d) / 4 * 3 + 3);
	if (!buf)
		return fail(e, SUP_E_FAILED, "nomem", "out of memory");
	long n = sup_b64_decode(json_string_value(d), json_string_length(d), buf,
				json_string_length(d) / 4 * 3 + 3);
	if (n < 0) {
		free(buf);
		return fail(e, SUP_E_PARAMS, "data", "data: not base64");
	}
	int fd = open_in(c, p, dl, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW,
			 m ? (mode_t)json_integer_value(m) : 0644, e);
	if (fd < 0) {
		free(buf);
		return -1;
	}
	size_t off = 0;
	while (off < (size_t)n) {
		ssize_t k = write(fd, buf + off, (size_t)n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		off += (size_t)k;
	}
	free(buf);
	if (m)
		fchmod(fd, (mode_t)json_integer_value(m));
	if (close(fd) < 0 || off != (size_t)n)
		return fail(e, SUP_E_FAILED, "io", "write: short or failed");
	*res = json_pack("{s:I}", "size", (json_int_t)n);
	return 0;
}

static int
m_tree_copy(const struct sup_cfg *c, json_t *p, long long dl, json_t **res, struct sup_err *e)
{
	const char *h = handle(p, e), *dir = str(p, "direction");
	json_t *hp = json_object_get(p, "host_path"), *gp = json_object_get(p, "path");
	struct av a;
	struct sup_run r;

	if (!h)
		return -1;
	if (!dir || (strcmp(dir, "in") && strcmp(dir, "out")))
		return fail(e, SUP_E_PARAMS, "direction", "direction: in or out");
	if (!is_path(hp) || !is_path(gp))
		return fail(e, SUP_E_PARAMS, "path", "host_path and path: absolute paths");
	if (!engine(c, dl, e))
		return -1;
	av_podman(&a, c, "cp");
	if (!strcmp(dir, "in")) {
		av_add(&a, json_string_value(hp));
		av_addf(&a, "%s:%s", h, json_string_value(gp));
	} else {
		av_addf(&a, "%s:%s", h, json_string_value(gp));
		av_add(&a, json_string_value(hp));
	}
	if (run(&a, budget(dl, c->timeout_ms), 4096, &r, e) < 0)
		return -1;
	if (!ok(&r))
		return run_fail(&r, &a, "podman cp", e);
	sup_run_free(&r);
	av_free(&a);
	*res = json_object();
	return 0;
}

/* ---- the table ---------------------------------------------------------- */

static const struct {
	const char *name;
	sup_method_fn fn;
} methods[] = {
	{"capabilities", m_capabilities},
	{"capacity", m_capacity},
	{"environment.ensure", m_env_ensure},
	{"environment.release", m_env_release},
	{"sandbox.start", m_start},
	{"sandbox.exec", m_exec},
	{"sandbox.stop", m_stop},
	{"sandbox.adopt", m_adopt},
	{"sandbox.list", m_list},
	{"file.read", m_file_read},
	{"file.write", m_file_write},
	{"tree.copy", m_tree_copy},
};

sup_method_fn
sup_podman_method(const char *name)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(methods[i].name, name))
			return methods[i].fn;
	return NULL;
}
