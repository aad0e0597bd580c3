/* tlshello.h: a strict, pure reader of the first TLS record a client sends
 * (RFC 8446 4.1.2, RFC 5246 7.4.1.2), for its server name (RFC 6066 3)
 * and, on the way, its ALPN offer (RFC 7301).
 *
 * No I/O, no allocation, no logging, no state: the caller keeps the bytes
 * the client sent (at most GW_TLSHELLO_BUF_MAX are ever needed) and calls
 * gw_tlshello_parse() again on the whole, grown buffer each time more
 * arrive. A call reads only in[0..len), never past it, and walks at most
 * the first record: O(len), about 16 KiB at worst.
 *
 * The result does not depend on how the bytes arrived: checks run in wire
 * order and each looks only at bytes already read and at declared lengths,
 * so a prefix of an input gives NEED_MORE or the input's own result, and
 * OK comes only once the first record is whole. A caller
 * may therefore skip calls until it holds out->need bytes (it then only
 * learns of an error later).
 *
 * Refused, each with its result (see tlshello-t.h for the log names):
 *   NOT_TLS           first byte not 0x16 (handshake), or a record version
 *                     major other than 3: SSLv2-compatible hellos (first
 *                     byte 0x80 or above) land here too;
 *   TOO_BIG           record length over GW_TLSHELLO_RECORD_MAX or the
 *                     caller's max_record;
 *   NOT_CLIENT_HELLO  the first handshake message is not a ClientHello (1);
 *   FRAGMENTED        the ClientHello is longer than the rest of its record
 *                     (it continues in a later record): legal TLS, but we
 *                     refuse to reassemble rather than guess;
 *   MALFORMED         an empty record; bytes after the ClientHello inside
 *                     its record; a hello version major other than 3; a
 *                     session id over 32 bytes; cipher suites of odd or
 *                     zero length; no compression method; an extensions
 *                     block that overruns the hello or leaves bytes after
 *                     it; an extension overrunning the block; a second
 *                     server_name or ALPN extension; a server name list or
 *                     ALPN list whose lengths disagree, or that is empty;
 *                     more than one host_name;
 *   BAD_SNI           a host_name that is empty, not of type host_name (0),
 *                     over 253 bytes, with a byte outside [A-Za-z0-9.-], an
 *                     empty label, a label over 63 bytes or starting or
 *                     ending with '-', or an IP literal or numeric-looking
 *                     name ("10.0.0.1", "0x7f000001", "a.1");
 *   NO_SNI            a well-formed ClientHello without server_name.
 * One trailing dot is stripped ("example.com." is example.com). Bytes in
 * the input after the first record are not looked at (out->record_len
 * says where it ends).
 */
#ifndef SLUICE_GW_TLSHELLO_H
#define SLUICE_GW_TLSHELLO_H

#include "reason-t.h"
#include "tlshello-t.h"

/* Reads the ClientHello at in[0..len) (in may be NULL when len is 0).
 * max_record caps the record length field (0 or anything over
 * GW_TLSHELLO_RECORD_MAX means GW_TLSHELLO_RECORD_MAX), so that a caller
 * with a smaller buffer hears TOO_BIG rather than waiting for bytes it
 * cannot hold. Fills *out (see tlshello-t.h) and returns the result. */
enum gw_tlshello_result gw_tlshello_parse(const uint8_t *in, size_t len, size_t max_record,
                                          struct gw_tlshello *out);

/* "need-more", "ok", "no-sni", ...; "?" out of range. */
const char *gw_tlshello_result_name(enum gw_tlshello_result r);

/* The reason a refusal of a hello that came out as r gives (tls-not-tls,
 * tls-no-sni, tls-malformed, ...); GW_R_INTERNAL for OK and NEED_MORE. */
enum gw_reason gw_tlshello_reason(enum gw_tlshello_result r);

#endif
