package linekeys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// feed counts the calls that reach it.
type feed struct {
	mu    sync.Mutex
	calls map[string]int
}

func newFeed() *feed { return &feed{calls: map[string]int{}} }

func (f *feed) called(method string) {
	f.mu.Lock()
	f.calls[method]++
	f.mu.Unlock()
}

func (f *feed) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *feed) Post(context.Context, string, string) error { f.called("Post"); return nil }
func (f *feed) Create(context.Context, *Req) error         { f.called("Create"); return nil }
func (f *feed) Search(context.Context, string, string) ([]string, error) {
	f.called("Search")
	return []string{"hit"}, nil
}
func (f *feed) Put(Item) error                       { f.called("Put"); return nil }
func (f *feed) Like(context.Context, string) error   { f.called("Like"); return nil }
func (f *feed) Follow(context.Context, string) error { f.called("Follow"); return nil }
func (f *feed) Stats(context.Context) (int, error)   { f.called("Stats"); return 1, nil }

var ctx = context.Background()

// limitedBy asserts that err is a denial by the line keyed by keyExpr
// ("" for the line that counts every call), for the key value key.
func limitedBy(t *testing.T, err error, keyExpr, key string) {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, keyExpr, le.KeyExpr)
	require.Equal(t, key, le.Key)
	require.Positive(t, le.RetryAfter)
}

// TestREADMEExample: the example of docs/keys-and-costs.md (once the README's)
//
//	//ratelimit:period=1 threshold=10 key=user
//	//ratelimit:period=1h threshold=1000
//
// admits 10 calls a second for each user and 1,000 an hour in all,
// across many users, and a call one line denies charges no other (issue
// 21's acceptance), on a clock the test moves, on both backends.
func TestREADMEExample(t *testing.T) {
	onClock(t, testREADMEExample)
}

// onClock runs f on each backend, with a limiter on a clock that f moves.
func onClock(t *testing.T, f func(t *testing.T, clock *clocktest.Manual, limiter ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) {
		clock := clocktest.NewManual()
		f(t, clock, ratelimit.NewMemory(ratelimit.WithClock(clock)))
	})
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		clock := clocktest.NewManual()
		f(t, clock, redislimit.New(client, ratelimit.WithClock(clock)))
	})
}

func testREADMEExample(t *testing.T, clock *clocktest.Manual, limiter ratelimit.Limiter) {
	f := newFeed()
	s := NewFeedWithRateLimit(f, limiter)
	user := func(i int) string { return fmt.Sprintf("user%03d", i) }
	// post makes users from to to-1 call 10 times each, all admitted,
	// and all but the last user twice more, denied by the user's line:
	// denied calls charge the line of every call nothing, or the last
	// users would be denied.
	post := func(t *testing.T, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			for range 10 {
				require.NoError(t, s.Post(ctx, user(i), "hi"))
			}
			for j := 0; j < 2 && i < to-1; j++ {
				limitedBy(t, s.Post(ctx, user(i), "hi"), "user", user(i))
			}
		}
	}

	post(t, 0, 50) // 500 calls in the first second
	clock.Advance(time.Second)
	post(t, 50, 100) // 1,000 in the hour
	require.Equal(t, 1000, f.count("Post"))
	// Both lines deny the last user's next call: the error names the one
	// with the longer wait.
	err := s.Post(ctx, user(99), "hi")
	limitedBy(t, err, "", "")
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	require.Greater(t, le.RetryAfter, 59*time.Minute)

	clock.Advance(time.Second)
	limitedBy(t, s.Post(ctx, user(100), "hi"), "", "")
	err = s.Post(ctx, user(0), "hi")
	limitedBy(t, err, "", "")
	require.NotContains(t, err.Error(), user(0), "the text names the line, never a key")

	// An hour after the first second, its 500 calls have left the window
	// of the line of every call: 500 more, from new users, and no more.
	clock.Advance(time.Hour - 2*time.Second + time.Millisecond)
	post(t, 100, 150)
	limitedBy(t, s.Post(ctx, user(150), "hi"), "", "")
	require.Equal(t, 1500, f.count("Post"))
}

// TestREADMEExampleConcurrently: 200 users calling at once, 12 times each,
// in one second: exactly 1,000 calls are admitted, at most 10 of each
// user, and every denial names its line.
func TestREADMEExampleConcurrently(t *testing.T) {
	onClock(t, testREADMEExampleConcurrently)
}

func testREADMEExampleConcurrently(t *testing.T, _ *clocktest.Manual, limiter ratelimit.Limiter) {
	f := newFeed()
	s := NewFeedWithRateLimit(f, limiter)
	var (
		wg       sync.WaitGroup
		admitted [200]atomic.Int64
		byLine   sync.Map // key expression → *atomic.Int64
	)
	for i := range admitted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 12 {
				err := s.Post(ctx, fmt.Sprintf("user%03d", i), "hi")
				var le *ratelimit.LimitError
				switch {
				case err == nil:
					admitted[i].Add(1)
				case errors.As(err, &le):
					n, _ := byLine.LoadOrStore(le.KeyExpr, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				default:
					t.Errorf("user%03d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for i := range admitted {
		require.LessOrEqual(t, admitted[i].Load(), int64(10), "user%03d", i)
		total += admitted[i].Load()
	}
	require.Equal(t, int64(1000), total)
	require.Equal(t, 1000, f.count("Post"))
	denied := int64(0)
	byLine.Range(func(k, v any) bool {
		require.Contains(t, []string{"user", ""}, k)
		denied += v.(*atomic.Int64).Load()
		return true
	})
	require.Equal(t, int64(200*12-1000), denied)
}

// TestCreate: a line per user, per organisation and for every call; a
// nil request or organisation, or an empty user, fails the call uncharged.
func TestCreate(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		f := newFeed()
		s := NewFeedWithRateLimit(f, limiter)
		require.ErrorIs(t, s.Create(ctx, nil), ratelimit.ErrNilKey)
		require.ErrorIs(t, s.Create(ctx, &Req{User: "ann"}), ratelimit.ErrNilKey)
		require.ErrorIs(t, s.Create(ctx, &Req{Org: &Org{ID: "acme"}}), ratelimit.ErrEmptyKey)
		for range 5 {
			require.NoError(t, s.Create(ctx, &Req{User: "ann", Org: &Org{ID: "acme"}}))
		}
		limitedBy(t, s.Create(ctx, &Req{User: "ann", Org: &Org{ID: "acme"}}), "req.User", "ann")
		// 45 more for acme, from other users: then acme's line denies.
		for i := range 45 {
			require.NoError(t, s.Create(ctx, &Req{User: fmt.Sprint("u", i/5), Org: &Org{ID: "acme"}}))
		}
		limitedBy(t, s.Create(ctx, &Req{User: "bob", Org: &Org{ID: "acme"}}), "req.Org.ID", "acme")
		require.NoError(t, s.Create(ctx, &Req{User: "bob", Org: &Org{ID: "initech"}}),
			"bob's denied call charged him nothing, and initech has its own limit")
		require.Equal(t, 51, f.count("Create"))
	})
}

// TestSearch: the secret is limited under its digest on both its lines,
// and the caller's line is keyed by a function whose error fails the
// call.
func TestSearch(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		f := newFeed()
		s := NewFeedWithRateLimit(f, limiter)
		_, err := s.Search(ctx, "sk_live", "q")
		require.ErrorIs(t, err, errNoCaller)
		_, err = s.Search(ctx, "", "q")
		require.ErrorIs(t, err, ratelimit.ErrEmptyKey)
		caller := context.WithValue(ctx, callerKey{}, "ann")
		for range 2 {
			hits, err := s.Search(caller, "sk_live", "q")
			require.NoError(t, err)
			require.Equal(t, []string{"hit"}, hits)
		}
		hits, err := s.Search(caller, "sk_live", "q")
		require.Nil(t, hits)
		limitedBy(t, err, "apiKey", ratelimit.KeyDigest("sk_live"))
		require.NotContains(t, err.Error(), "sk_live")
		require.Equal(t, 2, f.count("Search"))
	})
}

// TestPutAndFollowAndStats: an integer key on two lines with the call's
// cost; and the rules whose lines share a key, or have none, as before.
func TestPutAndFollowAndStats(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		f := newFeed()
		s := NewFeedWithRateLimit(f, limiter)
		for range 3 {
			require.NoError(t, s.Put(Item{Owner: 7}))
		}
		limitedBy(t, s.Put(Item{Owner: 7}), "item.Owner", "7")
		for range 10 {
			require.NoError(t, s.Follow(ctx, "ann"))
		}
		err := s.Follow(ctx, "ann")
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "", le.KeyExpr, "every line shares the key")
		require.Equal(t, "ann", le.Key)
		n, err := s.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

// TestRulesNameEachLinesKey: RateLimitRules gives each rule with a key
// per line its key expressions, and none to a rule whose lines share one.
func TestRulesNameEachLinesKey(t *testing.T) {
	byName := map[string]*ratelimit.Rule{}
	for _, r := range RateLimitRules() {
		byName[r.Name[len("github.com/ratelimitgen/ratelimitgen/testdata/linekeys.Feed."):]] = r
	}
	require.Equal(t, []string{"user", ""}, byName["Post"].KeyExprs)
	require.Equal(t, []string{"req.User", "req.Org.ID", ""}, byName["Create"].KeyExprs)
	require.Nil(t, byName["Follow"].KeyExprs)
	require.Nil(t, byName["Stats"].KeyExprs)
}

// BenchmarkDecorator compares, on the memory limiter, a method whose two
// lines have a key each (Post: a key per line) with one whose two lines share
// the key (Follow: Check), for admitted calls: the clock moves an hour
// between calls.
func BenchmarkDecorator(b *testing.B) {
	users := make([]string, 4096)
	for i := range users {
		users[i] = fmt.Sprint("user", i)
	}
	for name, call := range map[string]func(s *FeedWithRateLimit, user string) error{
		"Post/key-per-line": func(s *FeedWithRateLimit, user string) error { return s.Post(ctx, user, "hi") },
		"Follow/one-key":    func(s *FeedWithRateLimit, user string) error { return s.Follow(ctx, user) },
	} {
		b.Run(name, func(b *testing.B) {
			clock := clocktest.NewManual()
			s := NewFeedWithRateLimit(newFeed(), ratelimit.NewMemory(ratelimit.WithClock(clock)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clock.Advance(time.Hour)
				if err := call(s, users[i%len(users)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

type admin struct{}

func (admin) Ban(context.Context, string, string) error   { return nil }
func (admin) Unban(context.Context, string, string) error { return nil }

// TestTypeLines: the lines of a type's doc comment limit each method,
// each line under its own key.
func TestTypeLines(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := NewAdminWithRateLimit(admin{}, limiter)
		for range 2 {
			require.NoError(t, a.Ban(ctx, "ann", "x"))
		}
		limitedBy(t, a.Ban(ctx, "ann", "x"), "caller", "ann")
		require.NoError(t, a.Ban(ctx, "bob", "x"))
		limitedBy(t, a.Ban(ctx, "cy", "x"), "", "")
		require.NoError(t, a.Unban(ctx, "ann", "x"), "each method has its own limits")
	})
}
