/* conf_yaml.c: YAML text to a tree of cy_nodes with positions, through
 * libyaml's event parser (not its document loader, so that aliases, depth
 * and duplicate keys are ours to refuse), plus the arena and the
 * diagnostics list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <yaml.h>

#include "conf-int.h"
#include "conf.h"

/* ---- arena ---- */

struct conf_chunk {
	struct conf_chunk *next;
	size_t size;
	size_t used;
	max_align_t data[];
};

struct conf_arena {
	struct conf_chunk *head;
};

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p) {
		fputs("sluice: out of memory loading the configuration\n", stderr);
		abort();
	}
	return p;
}

struct conf_arena *
conf_arena_new(void)
{
	return xcalloc(1, sizeof(struct conf_arena));
}

void
conf_arena_free(struct conf_arena *a)
{
	struct conf_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		explicit_bzero(c->data, c->used);  /* secrets live here */
		free(c);
	}
	free(a);
}

void *
conf_arena_alloc(struct conf_arena *a, size_t size)
{
	struct conf_chunk *c = a->head;
	size_t al = _Alignof(max_align_t);
	void *p;

	size = (size + al - 1) & ~(al - 1);
	if (size == 0)
		size = al;
	if (!c || c->size - c->used < size) {
		size_t csize = size > 16384 ? size : 16384;

		c = xcalloc(1, sizeof(*c) + csize);
		c->size = csize;
		/* Secrets live here: kept out of swap where the process may
		 * lock memory (root may; others go on without). */
		(void)mlock(c, sizeof(*c) + csize);
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += size;
	return p;
}

char *
conf_arena_strndup(struct conf_arena *a, const char *s, size_t n)
{
	char *p = conf_arena_alloc(a, n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* ---- diagnostics ---- */

void
conf_diag_init(struct conf_diag *d)
{
	memset(d, 0, sizeof(*d));
}

void
conf_diag_fini(struct conf_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->lines[i]);
	free(d->lines);
	memset(d, 0, sizeof(*d));
}

void
conf_diag_add(struct conf_diag *d, const char *file, uint32_t line,
	      uint32_t col, const char *fmt, ...)
{
	char msg[1024], *out;
	va_list ap;
	int n;

	if (d->n >= CONF_DIAG_MAX) {
		d->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		n = asprintf(&out, "%s:%u:%u: %s", file, line, col, msg);
	else
		n = asprintf(&out, "%s: %s", file, msg);
	if (n < 0) {
		fputs("sluice: out of memory loading the configuration\n", stderr);
		abort();
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		char **l = realloc(d->lines, cap * sizeof(*l));

		if (!l) {
			fputs("sluice: out of memory loading the configuration\n", stderr);
			abort();
		}
		d->lines = l;
		d->cap = cap;
	}
	d->lines[d->n++] = out;
}

/* Position of a line "FILE:L:C: ..." as a sortable key; lines without a
 * position sort first. The file name is the same for every line. */
static void
diag_pos(const char *s, unsigned long *l, unsigned long *c)
{
	const char *p = strstr(s, ": ");
	const char *q;

	*l = *c = 0;
	/* Walk back from the first ": " over ":C" and ":L". */
	if (!p)
		return;
	q = p;
	while (q > s && q[-1] >= '0' && q[-1] <= '9')
		q--;
	if (q == p || q == s || q[-1] != ':')
		return;
	*c = strtoul(q, NULL, 10);
	q--;
	p = q;
	while (q > s && q[-1] >= '0' && q[-1] <= '9')
		q--;
	if (q == p || q == s || q[-1] != ':') {
		*c = 0;
		return;
	}
	*l = strtoul(q, NULL, 10);
}

static int
diag_cmp(const void *a, const void *b)
{
	unsigned long la, ca, lb, cb;

	diag_pos(*(char *const *)a, &la, &ca);
	diag_pos(*(char *const *)b, &lb, &cb);
	if (la != lb)
		return la < lb ? -1 : 1;
	if (ca != cb)
		return ca < cb ? -1 : 1;
	return 0;
}

void
conf_diag_sort(struct conf_diag *d)
{
	/* qsort is not stable; errors at one position keep their order
	 * through an insertion sort, and configs have few errors. */
	for (size_t i = 1; i < d->n; i++) {
		char *x = d->lines[i];
		size_t j = i;

		while (j > 0 && diag_cmp(&d->lines[j - 1], &x) > 0) {
			d->lines[j] = d->lines[j - 1];
			j--;
		}
		d->lines[j] = x;
	}
}

/* ---- YAML ---- */

struct cy_build {
	struct conf_arena *a;
	const char *file;
	struct conf_diag *d;
	yaml_parser_t parser;
	size_t nodes;
	size_t soft_errors;     /* reported; the tree is still usable */
	bool failed;            /* the tree is not usable */
};

/* A growable list of node pointers used while a collection is open. */
struct cy_list {
	struct cy_node **v;
	size_t n;
	size_t cap;
};

static void
list_push(struct cy_list *l, struct cy_node *x)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct cy_node **v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			fputs("sluice: out of memory loading the configuration\n", stderr);
			abort();
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = x;
}

static void
parse_error(struct cy_build *b)
{
	const yaml_parser_t *p = &b->parser;
	const yaml_mark_t *m = &p->problem_mark;

	if (p->error == YAML_MEMORY_ERROR) {
		conf_diag_add(b->d, b->file, 0, 0, "out of memory parsing YAML");
	} else if (p->context) {
		conf_diag_add(b->d, b->file, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
			      "YAML syntax error: %s %s (line %zu)", p->problem,
			      p->context, p->context_mark.line + 1);
	} else {
		conf_diag_add(b->d, b->file, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
			      "YAML syntax error: %s", p->problem ? p->problem : "unknown");
	}
	b->failed = true;
}

static struct cy_node *
node_new(struct cy_build *b, enum cy_kind kind, const yaml_mark_t *m)
{
	struct cy_node *n = conf_arena_alloc(b->a, sizeof(*n));

	n->kind = kind;
	n->line = (uint32_t)m->line + 1;
	n->col = (uint32_t)m->column + 1;
	return n;
}

static struct cy_node *parse_node(struct cy_build *b, yaml_event_t *ev, unsigned depth);

/* Reads the items of the collection opened by `start` up to its end event. */
static struct cy_node *
parse_collection(struct cy_build *b, yaml_event_t *start, unsigned depth)
{
	bool is_map = start->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	struct cy_node *n = node_new(b, is_map ? CY_MAP : CY_SEQ, &start->start_mark);
	struct cy_list items = { 0 };

	if (depth > CONF_MAX_DEPTH) {
		conf_diag_add(b->d, b->file, n->line, n->col,
			      "nesting deeper than %d levels", CONF_MAX_DEPTH);
		b->failed = true;
		return NULL;
	}
	bool skip_value = false;

	for (;;) {
		yaml_event_t ev;
		struct cy_node *child;
		bool is_key = is_map && items.n % 2 == 0 && !skip_value;

		if (!yaml_parser_parse(&b->parser, &ev)) {
			parse_error(b);
			break;
		}
		if (ev.type == end) {
			yaml_event_delete(&ev);
			break;
		}
		child = parse_node(b, &ev, depth + 1);
		yaml_event_delete(&ev);
		if (!child)
			break;
		if (skip_value) {
			/* The value of a duplicate key: reported, then dropped, so
			 * the rest of the document is still checked. */
			skip_value = false;
			continue;
		}
		if (is_key && child->kind != CY_SCALAR) {
			conf_diag_add(b->d, b->file, child->line, child->col,
				      "mapping keys must be plain strings");
			b->failed = true;
			break;
		}
		if (is_key) {
			for (size_t i = 0; i < items.n; i += 2) {
				struct cy_node *k = items.v[i];

				if (k->len == child->len && memcmp(k->str, child->str, k->len) == 0) {
					conf_diag_add(b->d, b->file, child->line, child->col,
						      "duplicate key '%s' (first at %u:%u)",
						      child->str, k->line, k->col);
					b->soft_errors++;
					skip_value = true;
					break;
				}
			}
			if (skip_value)
				continue;
		}
		list_push(&items, child);
	}
	n->n = is_map ? items.n / 2 : items.n;
	n->items = conf_arena_alloc(b->a, (items.n ? items.n : 1) * sizeof(*n->items));
	if (items.n)
		memcpy(n->items, items.v, items.n * sizeof(*n->items));
	free(items.v);
	return b->failed ? NULL : n;
}

static struct cy_node *
parse_node(struct cy_build *b, yaml_event_t *ev, unsigned depth)
{
	struct cy_node *n;

	if (++b->nodes > CONF_MAX_NODES) {
		conf_diag_add(b->d, b->file, (uint32_t)ev->start_mark.line + 1,
			      (uint32_t)ev->start_mark.column + 1,
			      "more than %d YAML nodes", CONF_MAX_NODES);
		b->failed = true;
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n = node_new(b, CY_SCALAR, &ev->start_mark);
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->len = ev->data.scalar.length;
		n->str = conf_arena_strndup(b->a, (const char *)ev->data.scalar.value, n->len);
		if (memchr(n->str, '\0', n->len)) {
			conf_diag_add(b->d, b->file, n->line, n->col,
				      "a NUL byte inside a string");
			b->soft_errors++;
		}
		return n;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		return parse_collection(b, ev, depth);
	case YAML_ALIAS_EVENT:
		conf_diag_add(b->d, b->file, (uint32_t)ev->start_mark.line + 1,
			      (uint32_t)ev->start_mark.column + 1,
			      "YAML aliases (*name) are not supported: write the value out");
		b->failed = true;
		return NULL;
	default:
		conf_diag_add(b->d, b->file, (uint32_t)ev->start_mark.line + 1,
			      (uint32_t)ev->start_mark.column + 1, "unexpected YAML event");
		b->failed = true;
		return NULL;
	}
}

/* Tabs in indentation are a classic YAML trap; libyaml's own message for
 * them ("found character that cannot start any token") names no fix. */
static bool
check_tabs(struct cy_build *b, const char *buf, size_t len)
{
	bool found = false;
	uint32_t line = 1;
	size_t i = 0;

	while (i < len) {
		size_t start = i;

		while (i < len && (buf[i] == ' ' || buf[i] == '\t')) {
			if (buf[i] == '\t') {
				conf_diag_add(b->d, b->file, line, (uint32_t)(i - start + 1),
					      "tab character in indentation: YAML indents with spaces");
				found = true;
				break;
			}
			i++;
		}
		while (i < len && buf[i] != '\n')
			i++;
		i++;
		line++;
	}
	return !found;
}

struct cy_node *
cy_parse(struct conf_arena *a, const char *file, const char *buf, size_t len,
	 struct conf_diag *d, bool *ok)
{
	struct cy_build b = { .a = a, .file = file, .d = d };
	struct cy_node *root = NULL;
	bool done = false;

	*ok = false;
	if (len > CONF_MAX_FILE_BYTES) {
		conf_diag_add(d, file, 0, 0, "larger than %u bytes", CONF_MAX_FILE_BYTES);
		return NULL;
	}
	if (!check_tabs(&b, buf, len))
		return NULL;
	if (!yaml_parser_initialize(&b.parser)) {
		conf_diag_add(d, file, 0, 0, "out of memory parsing YAML");
		return NULL;
	}
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)buf, len);
	while (!done && !b.failed) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&b.parser, &ev)) {
			parse_error(&b);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (root) {
				conf_diag_add(d, file, (uint32_t)ev.start_mark.line + 1,
					      (uint32_t)ev.start_mark.column + 1,
					      "a second YAML document: the configuration is one document");
				b.failed = true;
			}
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			root = parse_node(&b, &ev, 0);
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&b.parser);
	*ok = !b.failed && b.soft_errors == 0;
	return b.failed ? NULL : root;
}
