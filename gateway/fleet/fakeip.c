/* fakeip.c: one sandbox's synthetic addresses (fakeip.h).
 *
 * Entries live in an array indexed by address offset (size slots, only
 * max_names of them in use), found by name through an open-addressing
 * hash table of max_names * 2 slots (rounded to a power of two), and
 * ordered on an LRU list by when they were last answered or used. A new
 * name takes the next free offset after the last one given (round the
 * range); at max_names, the least recently used entry whose hold has
 * passed is let go first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fakeip.h"

#define NONE UINT32_MAX

struct entry {
	char *name;             /* NULL: free */
	uint64_t last_ms;
	uint32_t prev, next;    /* LRU list: head is the oldest */
};

struct gw_fakeip {
	uint32_t base, size, max, used;
	uint64_t hold_ms;
	uint32_t cursor;        /* where the search for a free address starts */
	uint32_t head, tail;
	struct entry *e;        /* size entries */
	uint32_t *slot;         /* hash: offset or NONE */
	uint32_t nslots;        /* a power of two */
};

static uint32_t
hash(const char *s)
{
	uint32_t h = 2166136261u;       /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

struct gw_fakeip *
gw_fakeip_new(uint32_t base, uint32_t size, uint32_t max_names, uint64_t hold_ms)
{
	struct gw_fakeip *f;

	if (size == 0 || max_names == 0 || (uint64_t)base + size > 1ull << 32 ||
	    max_names > (1u << 24)) {
		errno = EINVAL;
		return NULL;
	}
	if (max_names > size)
		max_names = size;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->base = base;
	f->size = size;
	f->max = max_names;
	f->hold_ms = hold_ms;
	f->head = f->tail = NONE;
	for (f->nslots = 16; f->nslots < 2 * max_names; f->nslots *= 2)
		;
	f->e = calloc(size, sizeof(*f->e));
	f->slot = malloc(f->nslots * sizeof(*f->slot));
	if (!f->e || !f->slot) {
		gw_fakeip_free(f);
		errno = ENOMEM;
		return NULL;
	}
	memset(f->slot, 0xff, f->nslots * sizeof(*f->slot));
	return f;
}

void
gw_fakeip_free(struct gw_fakeip *f)
{
	if (!f)
		return;
	for (uint32_t i = 0; f->e && i < f->size; i++)
		free(f->e[i].name);
	free(f->e);
	free(f->slot);
	free(f);
}

/* ---- the LRU list ---- */

static void
unlink_lru(struct gw_fakeip *f, uint32_t i)
{
	struct entry *e = &f->e[i];

	if (e->prev != NONE)
		f->e[e->prev].next = e->next;
	else
		f->head = e->next;
	if (e->next != NONE)
		f->e[e->next].prev = e->prev;
	else
		f->tail = e->prev;
}

static void
touch(struct gw_fakeip *f, uint32_t i, uint64_t now)
{
	struct entry *e = &f->e[i];

	unlink_lru(f, i);
	e->last_ms = now;
	e->prev = f->tail;
	e->next = NONE;
	if (f->tail != NONE)
		f->e[f->tail].next = i;
	else
		f->head = i;
	f->tail = i;
}

/* ---- the hash ---- */

/* The slot holding name, or the empty one where it would go. */
static uint32_t
find_slot(const struct gw_fakeip *f, const char *name)
{
	uint32_t s = hash(name) & (f->nslots - 1);

	while (f->slot[s] != NONE && strcmp(f->e[f->slot[s]].name, name) != 0)
		s = (s + 1) & (f->nslots - 1);
	return s;
}

/* Takes entry i's name out of the hash (linear probing: the run after it
 * is put back). */
static void
unhash(struct gw_fakeip *f, uint32_t i)
{
	uint32_t s = find_slot(f, f->e[i].name), k;

	f->slot[s] = NONE;
	for (k = (s + 1) & (f->nslots - 1); f->slot[k] != NONE; k = (k + 1) & (f->nslots - 1)) {
		uint32_t idx = f->slot[k];

		f->slot[k] = NONE;
		f->slot[find_slot(f, f->e[idx].name)] = idx;
	}
}

static bool
name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= GW_FAKEIP_NAME_MAX;
}

int
gw_fakeip_get(struct gw_fakeip *f, const char *name, uint64_t now_ms, uint32_t *addr)
{
	uint32_t s, i;
	char *copy;

	if (!name_ok(name))
		return -EINVAL;
	s = find_slot(f, name);
	if (f->slot[s] != NONE) {
		i = f->slot[s];
		touch(f, i, now_ms);
		*addr = f->base + i;
		return 0;
	}
	if (f->used == f->max) {
		/* Room: the oldest entry goes, if its hold has passed (the list
		 * is in order of last use: if the head is held, every entry
		 * is). */
		i = f->head;
		if (i == NONE || now_ms < f->e[i].last_ms || now_ms - f->e[i].last_ms < f->hold_ms)
			return -ENOSPC;
		unhash(f, i);
		unlink_lru(f, i);
		free(f->e[i].name);
		f->e[i].name = NULL;
		f->used--;
	}
	/* The next free address after the last one given, round the range:
	 * a freed address comes back as late as possible. */
	for (i = f->cursor; f->e[i].name; i = i + 1 == f->size ? 0 : i + 1)
		;
	f->cursor = i + 1 == f->size ? 0 : i + 1;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	f->e[i].name = copy;
	f->e[i].last_ms = now_ms;
	f->e[i].prev = f->tail;
	f->e[i].next = NONE;
	if (f->tail != NONE)
		f->e[f->tail].next = i;
	else
		f->head = i;
	f->tail = i;
	f->used++;
	s = find_slot(f, name);
	f->slot[s] = i;
	*addr = f->base + i;
	return 0;
}

bool
gw_fakeip_name(struct gw_fakeip *f, uint32_t addr, uint64_t now_ms,
	       char out[GW_FAKEIP_NAME_MAX + 1])
{
	uint32_t i;

	if (addr < f->base || addr - f->base >= f->size)
		return false;
	i = addr - f->base;
	if (!f->e[i].name)
		return false;
	memcpy(out, f->e[i].name, strlen(f->e[i].name) + 1);
	touch(f, i, now_ms);
	return true;
}

size_t
gw_fakeip_count(const struct gw_fakeip *f)
{
	return f->used;
}
