package httplimit

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

var pageScreenshot = flag.String("page-screenshot", "", "write the screenshot of the on-call page of TestOnCallPageInABrowser to this PNG file (docs/oncall-page.png)")

// chromium returns the path of a headless-capable Chromium, skipping t
// when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: install Debian's chromium (apt-get install -y chromium), as .ci/run does, to run the on-call page's browser test")
	return ""
}

// headless runs chromium headless on url with args, and returns its
// standard output.
func headless(t *testing.T, bin, u string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, u)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "chromium: %s", errOut.String())
	return out.String()
}

// TestOnCallPageInABrowser: the admin view's root page loads in a real
// browser (headless Chromium), listing the rules with their lines, the
// breakers, the overrides' problems and the most-denied keys; a lookup of
// a blocked key says why it is denied, naming the line, its key and when
// to retry.
func TestOnCallPageInABrowser(t *testing.T) {
	bin := chromium(t)
	ctx := context.Background()
	var ov ratelimit.StaticOverrides
	ov.SetKey("svc.API.Search", "banned-key", ratelimit.Limit{Algorithm: ratelimit.Block})
	l := ratelimit.NewMemory(ratelimit.WithOverrides(&ov))
	search := &ratelimit.Rule{
		Name:     "svc.API.Search",
		Limits:   []ratelimit.Limit{{Period: time.Minute, Threshold: 5}, {Period: time.Second, Threshold: 1000}, {Calendar: "month", Threshold: 50000}},
		KeyExprs: []string{"apiKey", "", "tenant"},
		Shared:   []string{"", "svc#global", "svc#tenant-quota"},
	}
	export := &ratelimit.Rule{Name: "svc.API.Export", Limits: []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Period: time.Minute, Threshold: 60, Burst: 10}}}
	for range 9 {
		_ = search.Check(ctx, l, 1, "mallory", "", "acme")
	}
	_ = search.Check(ctx, l, 1, "ada", "", "acme")
	srv := httptest.NewServer(AdminHandler(l, []*ratelimit.Rule{search, export}))
	defer srv.Close()

	root := headless(t, bin, srv.URL+"/admin/ratelimit/", "--dump-dom")
	for _, want := range []string{"Rate limits", "svc.API.Search", "svc.API.Export", "shared svc#global", "Open circuit breakers", "Override problems", "Most-denied keys", ratelimit.RedactKey("mallory", false)} {
		require.Contains(t, root, want, "the page lists %q", want)
	}

	q := url.Values{"name": {search.Name}, "key": {"mallory"}}
	lookup := headless(t, bin, srv.URL+"/admin/ratelimit/?"+q.Encode(), "--dump-dom")
	require.Contains(t, lookup, `id="verdict"`)
	require.Contains(t, lookup, "Denied by the line 5/1m0s (sliding_log), for key mallory (apiKey), limit from directive: retry after", "the lookup says why:\n%s", lookup)
	require.Contains(t, lookup, `class="denier"`, "the denying line is marked")

	q.Set("key", "banned-key")
	banned := headless(t, bin, srv.URL+"/admin/ratelimit/?"+q.Encode(), "--dump-dom")
	require.Contains(t, banned, "Blocked by an override (key)")

	shot := filepath.Join(t.TempDir(), "page.png")
	if *pageScreenshot != "" {
		shot = *pageScreenshot
	}
	q["key"] = []string{"mallory", "acme"}
	headless(t, bin, srv.URL+"/admin/ratelimit/?"+q.Encode(), "--screenshot="+shot, "--window-size=1280,1100")
	png, err := os.ReadFile(shot)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(png), "\x89PNG"), "a PNG screenshot")
}
