/* wsexec_msg.c: the exec stream's text messages and handshake tokens,
 * pure. See wsexec.h. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "wsexec.h"

static const struct {
	const char *name;
	int num;
} sigs[] = {
	{ "HUP", SIGHUP },   { "INT", SIGINT },     { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },   { "TERM", SIGTERM }, { "CONT", SIGCONT },
	{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP },   { "WINCH", SIGWINCH }, { "ALRM", SIGALRM },
	{ "PIPE", SIGPIPE }, { "ABRT", SIGABRT },   { "SEGV", SIGSEGV }, { "BUS", SIGBUS },
	{ "FPE", SIGFPE },   { "ILL", SIGILL },     { "TRAP", SIGTRAP }, { "XCPU", SIGXCPU },
	{ "XFSZ", SIGXFSZ }, { "SYS", SIGSYS },
};

int
gw_wsx_signal_num(const char *name)
{
	if (name == NULL)
		return 0;
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcmp(name, sigs[i].name) == 0)
			return sigs[i].num;
	return 0;
}

const char *
gw_wsx_signal_name(int sig)
{
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigs[i].num == sig)
			return sigs[i].name;
	return NULL;
}

bool
gw_wsx_has_token(const char *v, size_t len, const char *token)
{
	size_t tl = strlen(token), i = 0;

	if (v == NULL)
		return false;
	while (i < len) {
		size_t b, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		b = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - b == tl && strncasecmp(v + b, token, tl) == 0)
			return true;
	}
	return false;
}

static json_t *
parse_obj(const char *p, size_t len, char *err, size_t errsz)
{
	json_error_t je;
	json_t *j = json_loadb(p, len, JSON_REJECT_DUPLICATES, &je);

	if (j == NULL) {
		snprintf(err, errsz, "not JSON: %s", je.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		snprintf(err, errsz, "a message must be a JSON object");
		json_decref(j);
		return NULL;
	}
	return j;
}

static int
dim(const json_t *j, const char *name, bool required, unsigned *out, char *err, size_t errsz)
{
	const json_t *v = json_object_get(j, name);

	if (v == NULL && !required)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
		snprintf(err, errsz, "%s: must be an integer 1..65535", name);
		return -EINVAL;
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

int
gw_wsx_start_parse(const char *p, size_t len, struct gw_wsx_start *out, char *err, size_t errsz)
{
	const json_t *type, *tty, *det;
	json_t *j;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((j = parse_obj(p, len, err, errsz)) == NULL)
		return -EINVAL;
	type = json_object_get(j, "type");
	if (!json_is_string(type) || strcmp(json_string_value(type), "exec") != 0) {
		snprintf(err, errsz, "type: the first message must be {\"type\": \"exec\", ...}");
		json_decref(j);
		return -EINVAL;
	}
	if (json_object_get(j, "stdin") || json_object_get(j, "stream")) {
		snprintf(err, errsz, "%s: not here: stdin is sent as binary messages",
			 json_object_get(j, "stdin") ? "stdin" : "stream");
		json_decref(j);
		return -EINVAL;
	}
	tty = json_object_get(j, "tty");
	det = json_object_get(j, "detach");
	if ((tty && !json_is_boolean(tty)) || (det && !json_is_boolean(det))) {
		snprintf(err, errsz, "%s: must be true or false",
			 tty && !json_is_boolean(tty) ? "tty" : "detach");
		json_decref(j);
		return -EINVAL;
	}
	out->tty = json_is_true(tty);
	out->detach = json_is_true(det);
	if (out->tty && out->detach) {
		snprintf(err, errsz, "detach: a detached command has no terminal (tty)");
		json_decref(j);
		return -EINVAL;
	}
	if ((json_object_get(j, "rows") || json_object_get(j, "cols")) && !out->tty) {
		snprintf(err, errsz, "rows, cols: only with \"tty\": true");
		json_decref(j);
		return -EINVAL;
	}
	if (dim(j, "rows", false, &out->rows, err, errsz) < 0 ||
	    dim(j, "cols", false, &out->cols, err, errsz) < 0) {
		json_decref(j);
		return -EINVAL;
	}
	out->has_timeout = json_object_get(j, "timeout_seconds") != NULL &&
			   !json_is_null(json_object_get(j, "timeout_seconds"));
	/* The rest is the buffered exec's body: the same checks. */
	json_object_del(j, "type");
	json_object_del(j, "tty");
	json_object_del(j, "detach");
	json_object_del(j, "rows");
	json_object_del(j, "cols");
	rc = gw_exec_args_parse(j, &out->a, err, errsz);
	if (rc < 0) {
		json_decref(j);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	out->body = j;
	return 0;
}

void
gw_wsx_start_fini(struct gw_wsx_start *s)
{
	if (s->body)
		gw_exec_args_fini(&s->a);
	json_decref(s->body);
	memset(s, 0, sizeof(*s));
}

static bool
only(const json_t *j, const char *const *keys, size_t n, char *err, size_t errsz)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)(uintptr_t)j, k, v) {
		size_t i;

		(void)v;
		for (i = 0; i < n && strcmp(k, keys[i]) != 0; i++)
			;
		if (i == n) {
			snprintf(err, errsz, "%.64s: unknown field", k);
			return false;
		}
	}
	return true;
}

int
gw_wsx_ctl_parse(const char *p, size_t len, struct gw_wsx_ctl *out, char *err, size_t errsz)
{
	static const char *const k_resize[] = { "type", "rows", "cols" };
	static const char *const k_signal[] = { "type", "signal" };
	static const char *const k_eof[] = { "type" };
	const char *type;
	json_t *j;
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	if ((j = parse_obj(p, len, err, errsz)) == NULL)
		return -EINVAL;
	type = json_string_value(json_object_get(j, "type"));
	if (type == NULL) {
		snprintf(err, errsz, "type: required, \"resize\", \"signal\" or \"eof\"");
	} else if (strcmp(type, "resize") == 0) {
		out->kind = GW_WSX_RESIZE;
		if (only(j, k_resize, 3, err, errsz) &&
		    dim(j, "rows", true, &out->rows, err, errsz) == 0 &&
		    dim(j, "cols", true, &out->cols, err, errsz) == 0)
			rc = 0;
	} else if (strcmp(type, "signal") == 0) {
		const json_t *s = json_object_get(j, "signal");

		out->kind = GW_WSX_SIGNAL;
		if (!only(j, k_signal, 2, err, errsz)) {
			/* err set */
		} else if (json_is_integer(s) && json_integer_value(s) >= 1 &&
			   json_integer_value(s) <= 64) {
			out->signal = (int)json_integer_value(s);
			rc = 0;
		} else if (json_is_string(s) && (out->signal = gw_wsx_signal_num(json_string_value(s)))) {
			rc = 0;
		} else {
			snprintf(err, errsz, "signal: a name (\"INT\", \"SIGTERM\", ...) or a number 1..64");
		}
	} else if (strcmp(type, "eof") == 0) {
		out->kind = GW_WSX_EOF;
		if (only(j, k_eof, 1, err, errsz))
			rc = 0;
	} else {
		snprintf(err, errsz, "type: \"%.32s\" is not one of resize, signal, eof", type);
	}
	json_decref(j);
	return rc;
}
