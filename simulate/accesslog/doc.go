// Package accesslog reads web server access logs as the requests they
// record, for sluice simulate to replay: nginx's and Apache's combined
// and common formats, the JSON access logs of Caddy, Envoy and Traefik,
// and any JSON lines with a field mapping; plain or gzip, several files
// merged in time order.
//
// # Formats
//
// [Combined] parses "%h %l %u %t \"%r\" %>s %b" and, when present,
// "\"%{Referer}i\" \"%{User-Agent}i\"" and a third quoted field, the
// X-Forwarded-For of nginx's default "main" format. A leading
// "host:port " (Apache's vhost_combined) gives the host. It is a
// byte-level parser that allocates nothing: an [Entry] points into the
// line it was parsed from.
//
// [JSON] parses one JSON object a line through a [Mapping] of dotted
// field paths; [Caddy], [Envoy] and [Traefik] are the mappings of those
// proxies' JSON access logs. [Detect] tells the format from a first line.
//
// # Bad input
//
// A line that cannot be parsed, or that is longer than the reader's cap
// (64 KiB by default), is counted as malformed with its line number and
// the reason, never fatal (see [Malformed]); a truncated gzip stream ends
// its file with an error that says so. Nothing here panics on any input:
// the parsers are fuzzed (FuzzCombined, FuzzJSON).
package accesslog
