package provider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Regression: statusError truncates the message to 512 bytes BEFORE
// redacting the key, so a key echoed across the cut survives as a prefix.
// spec: D9 B4
func TestKeyRedactedBeforeTruncation(t *testing.T) {
	key := "sk-ant-api03-" + strings.Repeat("Z", 90) + "SECRETTAIL"
	msg := strings.Repeat("x", 420) + "invalid x-api-key " + key
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"` + msg + `"}}`))
	}))
	defer srv.Close()
	ep := newEndpoint(ProviderConfig{Name: "anthropic", APIKey: NewSecret(key)}, srv.URL)
	_, err := ep.open(t.Context(), []byte("{}"), http.Header{})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "sk-ant-api03-ZZZZ") {
		t.Errorf("error text carries a key prefix: ...%s", err.Error()[len(err.Error())-60:])
	}
}
