package accesslog

import (
	"fmt"
	"time"
)

func b(s string) []byte { return []byte(s) }

// describe prints the fields of e that parsers fill.
func describe(e *Entry) string {
	return fmt.Sprintf("time=%s addr=%q fwd=%q user=%q method=%q uri=%q proto=%q host=%q ref=%q ua=%q status=%d",
		time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), e.Addr, e.Forwarded, e.User, e.Method, e.URI, e.Proto, e.Host, e.Referer, e.UserAgent, e.Status)
}
