/* cli_util.h: the pure parts of the sluice client: parsing the API
 * address, strict base64 decoding, percent-encoding, sandbox ids and
 * ID:PATH arguments, the HTTP/1.1 response head and chunked body, and YAML
 * to JSON for `sluice pools apply`.
 *
 * No function here does I/O or keeps global state; each may be used from
 * any thread on its own objects. Functions that can explain a failure take
 * a trailing `char *err, size_t errsz` and write one line there.
 */
#ifndef SLUICE_CLI_UTIL_H
#define SLUICE_CLI_UTIL_H

#include <jansson.h>

#include "cli_util-t.h"

/* ---- the API address ----------------------------------------------- */

/* Parses "unix:PATH" or "http://HOST[:PORT][/]" (HOST a name, an IPv4
 * address or a bracketed IPv6 address; PORT 1..65535, 80 when absent).
 * Userinfo, a path other than "/", a query, a fragment and https are
 * refused. Returns 0, or -EINVAL with err set. */
int cli_url_parse(const char *s, struct cli_url *u, char *err, size_t errsz);

/* ---- base64 --------------------------------------------------------- */

/* Bytes needed to decode `n` base64 characters. */
#define CLI_B64_DECODED_MAX(n) (((n) / 4) * 3)

/* Decodes the standard alphabet (RFC 4648 §4), padded, strictly: a length
 * that is not a multiple of 4, a character outside the alphabet, '=' other
 * than at the end, or non-zero unused bits are refused. Writes at most
 * `cap` bytes to out and their count to *outlen. Returns 0, -EINVAL (bad
 * input) or -ENOSPC (cap too small). */
int cli_b64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
		   size_t *outlen);

/* ---- ids, paths, query strings ---------------------------------------- */

/* True if s[0..len) is a sandbox id: one or more of [A-Za-z0-9_-]. */
bool cli_id_valid(const char *s, size_t len);

/* Splits "ID:PATH" (a valid id, then ':', then a PATH starting with '/').
 * Returns true and sets *idlen (the id is arg[0..*idlen)) and *path
 * (pointing into arg), or false if arg is a local path. */
bool cli_remote_parse(const char *arg, size_t *idlen, const char **path);

/* Percent-encodes s for a query value: every byte but ALPHA, DIGIT, "-",
 * ".", "_", "~" and "/" becomes %XX. Returns a malloc'd string the caller
 * frees, or NULL when out of memory. */
char *cli_pct_encode(const char *s);

/* ---- the response head ------------------------------------------------ */

/* Prepares p for one response head of at most `max` bytes. */
void cli_head_parser_init(struct cli_head_parser *p, size_t max);

/* Parses the head at the start of buf[0..len), the bytes received so far
 * (the caller may append between calls, but not change bytes already
 * given). Returns CLI_AGAIN (more bytes needed), CLI_DONE (*r filled,
 * r->head_len bytes are the head) or CLI_ERROR (err says why).
 * Strict: "HTTP/1.0" or "HTTP/1.1", a three-digit status, CRLF line ends
 * only, no obs-fold, token field names, no control bytes in values, one
 * Content-Length of digits, Transfer-Encoding exactly "chunked" and never
 * both. */
enum cli_rc cli_head_parse(struct cli_head_parser *p, const char *buf, size_t len,
			   struct cli_resp *r, char *err, size_t errsz);

/* ---- the chunked body ------------------------------------------------- */

void cli_chunked_init(struct cli_chunked *c);

/* Feeds in[0..len) to the decoder. Consumes *used bytes (all of them unless
 * it returns early with a data span or at the end of the body) and points
 * data and dlen at payload bytes inside `in` (*dlen may be 0). Returns
 * CLI_AGAIN (call again with the rest, or with more input), CLI_DONE (the
 * body ended after *used bytes; the rest is not ours) or CLI_ERROR
 * (c->err says why; the stream is unusable). */
enum cli_rc cli_chunked_step(struct cli_chunked *c, const char *in, size_t len, size_t *used,
			     const char **data, size_t *dlen);

/* ---- YAML to JSON ---------------------------------------------------- */

/* Converts one YAML document to JSON: mappings to objects (keys must be
 * scalars and unique), sequences to arrays; a plain scalar null, Null,
 * NULL, ~ or empty is null, true/false (any of the three cases YAML 1.2
 * allows) a boolean, [-+]?[0-9]+ an integer, a decimal ([-+]?, digits with
 * a '.' and/or an exponent) a real, anything else a string; a quoted scalar
 * is always a string. Aliases, anchors, tags, multiple documents, nesting
 * deeper than CLI_MAX_YAML_DEPTH and integers beyond 64 bits are refused
 * with "FILE:LINE:COL: message" in err. When pos is not NULL, the position
 * of every value is appended to it under its JSON path (free it with
 * cli_yposv_fini()). Returns a new reference, or NULL on error. */
json_t *cli_yaml_to_json(const char *file, const char *buf, size_t len,
			 struct cli_yposv *pos, char *err, size_t errsz);

/* The body of PUT /v1/pools from a converted YAML document: a mapping with
 * a `pools:` list (other keys are ignored, and named in warn, "" when
 * none) or a list of pools. Returns {"pools": [...]} (a new reference), or
 * NULL with err set. If pos is not NULL, its paths are rewritten to be
 * relative to the body ("pools[0]..."). */
json_t *cli_pools_body(const char *file, json_t *doc, struct cli_yposv *pos,
		       char *warn, size_t warnsz, char *err, size_t errsz);

/* The position of the longest prefix of `path` (cut at '.' or '[') that
 * pos has, or NULL. */
const struct cli_ypos *cli_ypos_find(const struct cli_yposv *pos, const char *path,
				     size_t len);

void cli_yposv_fini(struct cli_yposv *pos);

/* Whether a line (line[0..n), no newline) of the Prometheus text format
 * belongs to a family whose name begins with prefix: a sample ("name{...}
 * v", "name v") or its "# HELP name ..." and "# TYPE name ..." lines; never
 * another comment, never for an empty prefix (cli_metrics.c). */
bool cli_metric_line_matches(const char *line, size_t n, const char *prefix);

#endif
