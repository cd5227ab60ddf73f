package httpstatus

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter)
		want    int
	}{
		{"nothing written", func(w http.ResponseWriter) {}, 200},
		{"body only", func(w http.ResponseWriter) { w.Write([]byte("x")) }, 200},
		{"status", func(w http.ResponseWriter) { w.WriteHeader(401) }, 401},
		{"first status wins", func(w http.ResponseWriter) { w.WriteHeader(429); w.WriteHeader(500) }, 429},
		{"interim then final", func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(404) }, 404},
		{"flush before status", func(w http.ResponseWriter) { http.NewResponseController(w).Flush(); w.WriteHeader(500) }, 200},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		w := &Writer{ResponseWriter: rec}
		tt.handler(w)
		if got := w.Code(); got != tt.want {
			t.Errorf("%s: Code() = %d, want %d", tt.name, got, tt.want)
		}
	}
	rec := httptest.NewRecorder()
	w := &Writer{ResponseWriter: rec}
	w.Wrap().(http.Flusher).Flush()
	if !rec.Flushed || w.Code() != 200 {
		t.Error("Flush did not reach the underlying writer")
	}
}
