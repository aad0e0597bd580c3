/* cli_util-t.h: the types of the sluice client's pure parts (cli_util.h):
 * the API address, the response head, the chunked decoder and the YAML
 * position table. */
#ifndef SLUICE_CLI_UTIL_T_H
#define SLUICE_CLI_UTIL_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_MAX_HEAD (64u * 1024)               /* a response head */
#define CLI_MAX_JSON (64u * 1024 * 1024)        /* a JSON body, an NDJSON line */
#define CLI_MAX_CHUNK_LINE 4096                 /* a chunk-size line, extensions included */
#define CLI_MAX_TRAILERS (64u * 1024)           /* all trailer lines together */
#define CLI_MAX_YAML_DEPTH 32                   /* nested collections */
#define CLI_MAX_YAML_NODES 1000000

enum cli_rc {
	CLI_AGAIN = 0,          /* more bytes needed (or: call again) */
	CLI_DONE,
	CLI_ERROR,
};

enum cli_url_kind {
	CLI_URL_TCP = 0,
	CLI_URL_UNIX,
};

/* Where the API is: "http://HOST[:PORT][/]" or "unix:PATH". */
struct cli_url {
	enum cli_url_kind kind;
	char host[256];         /* TCP: the host, brackets removed */
	char port[6];           /* TCP: decimal, "80" when absent */
	char hosthdr[272];      /* the Host header value */
	char path[108];         /* UNIX: the socket path (sizeof sun_path) */
};

enum cli_framing {
	CLI_BODY_NONE = 0,      /* 1xx, 204, 304 */
	CLI_BODY_LENGTH,        /* Content-Length */
	CLI_BODY_CHUNKED,       /* Transfer-Encoding: chunked */
	CLI_BODY_CLOSE,         /* until the connection closes */
};

/* A parsed response head; strings are copies (truncated), so the buffer
 * the head came from may be reused. */
struct cli_resp {
	int status;
	int minor;                      /* HTTP/1.minor */
	char reason[128];               /* reason phrase */
	enum cli_framing framing;
	uint64_t length;                /* CLI_BODY_LENGTH */
	char content_type[128];         /* the media type, lower case, no parameters */
	char sluice_reason[64];         /* the Sluice-Reason header, or "" */
	size_t head_len;                /* bytes of the head, final CRLF included */
};

/* The response head parser: keeps where the scan for the end of the head
 * stopped, so each call costs the new bytes only. */
struct cli_head_parser {
	size_t scanned;
	size_t max;
};

enum cli_chunk_state {
	CLI_CH_SIZE = 0,        /* hex digits of a chunk size */
	CLI_CH_EXT,             /* ";ext..." up to CR */
	CLI_CH_SIZE_LF,         /* LF after the size line */
	CLI_CH_DATA,
	CLI_CH_DATA_CR,         /* CRLF after the data */
	CLI_CH_DATA_LF,
	CLI_CH_TRAILER,         /* a trailer line or the final empty line */
	CLI_CH_TRAILER_LF,
	CLI_CH_FINAL_LF,
	CLI_CH_DONE,
	CLI_CH_ERROR,
};

/* The chunked body decoder (RFC 9112 §7.1). Zero it (or call
 * cli_chunked_init()) before a body. */
struct cli_chunked {
	enum cli_chunk_state state;
	uint64_t left;                  /* size being read, then data left */
	unsigned digits;                /* hex digits seen */
	size_t line;                    /* bytes of the current size line */
	size_t trailer_bytes;
	size_t tline;                   /* bytes of the current trailer line */
	bool tcolon;                    /* a ':' seen on the current trailer line */
	const char *err;                /* CLI_CH_ERROR: why (static) */
};

/* One position of the YAML source, by the JSON path its value gets
 * ("pools[0].warm_max"); used to point API error details back into the
 * file. */
struct cli_ypos {
	char *path;
	uint32_t line;
	uint32_t col;
};

struct cli_yposv {
	struct cli_ypos *v;
	size_t n;
	size_t cap;
};

#endif
