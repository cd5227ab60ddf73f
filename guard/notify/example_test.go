package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/guard/notify"
)

// A receiver of sluice's webhooks checks the signature over the raw body
// before it trusts anything in it.
func ExampleVerify() {
	secret := []byte("the shared secret")
	receive := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || notify.Verify(secret, r.Header, body, time.Now(), 0) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Println("verified:", string(body))
	}

	// What a Webhook sends, signed now.
	body := `{"event":"ban","jail":"login","key":"203.0.113.7"}`
	now := time.Now()
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	r.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	r.Header.Set(notify.HeaderSignature, notify.Sign(secret, now, []byte(body)))
	receive(httptest.NewRecorder(), r)

	// The same request replayed with another body.
	r = httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(`{"event":"lift"}`))
	r.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	r.Header.Set(notify.HeaderSignature, notify.Sign(secret, now, []byte(body)))
	w := httptest.NewRecorder()
	receive(w, r)
	fmt.Println(w.Code)
	// Output:
	// verified: {"event":"ban","jail":"login","key":"203.0.113.7"}
	// 401
}
