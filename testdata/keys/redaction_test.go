package keys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// TestKeyhashShowsTheRawKeysRedactedForm is issue 29's finding that, for
// a keyhash=true rule, logs and /denied showed the hash of the digest, so
// the recipe for finding a key's redacted form (the first 12 hex digits
// of its SHA-256) gave another value. Now the logs, the deny counts and
// the LimitError all show what the recipe prints.
func TestKeyhashShowsTheRawKeysRedactedForm(t *testing.T) {
	raw := "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	sum := sha256.Sum256([]byte(raw))
	want := "sha256:" + hex.EncodeToString(sum[:])[:12] // printf %s "$key" | sha256sum | cut -c1-12
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var logs bytes.Buffer
			denials := httplimit.NewDenials()
			hook := ratelimit.WithHook(ratelimit.NewSlogHook(slog.New(slog.NewTextHandler(&logs, nil))), denials)
			var limiter ratelimit.Limiter = ratelimit.NewMemory(hook)
			if backend == "redis" {
				srv.Flush(t)
				client := srv.Client()
				t.Cleanup(func() { client.Close() })
				limiter = redislimit.New(client, hook)
			}
			d := NewAPIWithRateLimit(&api{}, limiter)
			require.NoError(t, d.BySecret(t.Context(), raw))
			err := d.BySecret(t.Context(), raw)
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			require.True(t, strings.HasPrefix("sha256:"+le.Key, want), "LimitError.Key %q is the raw key's digest", le.Key)
			require.NotContains(t, logs.String(), raw)
			require.Contains(t, logs.String(), "key="+want, "the log line shows the raw key's redacted form")

			rec := httptest.NewRecorder()
			httplimit.AdminHandler(limiter, RateLimitRules(), httplimit.WithDenials(denials)).
				ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/denied", nil))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			var view struct {
				Denied []struct{ Name, Key string }
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &view))
			require.Len(t, view.Denied, 1)
			require.Equal(t, want, view.Denied[0].Key, "/denied shows the raw key's redacted form")
		})
	}
}
