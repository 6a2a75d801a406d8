package redislimit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// FuzzRedisOverrides writes one field of an overrides hash in a real
// Redis, next to a valid one, and checks what Overrides reads from
// it: the field's limits when ParseOverride accepts its value; else no
// limits for it and an error that names it and wraps ErrInvalidLimit,
// while the other field still applies.
func FuzzRedisOverrides(f *testing.F) {
	f.Add("svc.Store.Get", "period=30s threshold=5")
	f.Add("svc.Store.Get", `[{"period": 1, "threshold": 10}]`)
	f.Add("", "period=1m")
	f.Add("a\x00b{c}:d", "period=1 threshold=1 algorithm=xyz")
	f.Add("control", "period=1 threshold=1")
	ctx := context.Background()
	c := rdb(f)
	const hash, control = "fuzz:overrides", "fuzz.control"
	ov := NewOverrides(c, hash, 1<<62)
	f.Fuzz(func(t *testing.T, name, value string) {
		if name == control {
			return
		}
		if err := c.Del(ctx, hash).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, hash, name, value, control, "period=1m threshold=7").Err(); err != nil {
			t.Fatal(err)
		}
		// The value alone, as a rule's field.
		parsed, wantErr := ratelimit.ParseOverrides(map[string]string{"value": value})
		var want []ratelimit.Limit
		if wantErr == nil {
			want, _ = parsed.Lookup(ctx, "value")
		}
		err := ov.Refresh(ctx)
		got, ok := ov.Lookup(ctx, name)
		if lim, found := ov.Lookup(ctx, control); !found || len(lim) != 1 || lim[0].Threshold != 7 {
			t.Fatalf("field %q = %q hid the other field: %v, %v", name, value, lim, found)
		}
		if wantErr != nil {
			if !errors.Is(err, ratelimit.ErrInvalidLimit) || errors.Is(err, ratelimit.ErrBackend) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) || ok {
				t.Fatalf("field %q = %q: Refresh %v, Lookup %v %v", name, value, err, got, ok)
			}
			return
		}
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("field %q = %q: Refresh %v, Lookup %v %v, want %v", name, value, err, got, ok, want)
		}
	})
}

// FuzzParseDecision feeds parseDecision the replies a server could send in
// place of the decide script's: any integers, arrays of any length, and
// values that are not integers (text, nil). It returns a *replyError for
// anything the script never sends, which does not count as Redis being
// down, and otherwise reads every bit: a packed integer packs back to
// itself, and an array's integers come back as the decision's fields.
func FuzzParseDecision(f *testing.F) {
	f.Add(uint8(0), int64(5<<(20+6)|123<<6|20), int64(0), int64(0), int64(0), int64(0), int64(0), "")
	f.Add(uint8(0), int64(-1), int64(0), int64(0), int64(0), int64(0), int64(0), "")
	f.Add(uint8(0), int64(63), int64(0), int64(0), int64(0), int64(0), int64(0), "")
	f.Add(uint8(1), int64(4), int64(999_000), int64(250), int64(0), int64(0), int64(0), "")
	f.Add(uint8(2), int64(0), int64(0), int64(1_000_000), int64(2_000_000), int64(1), int64(0), "")
	f.Add(uint8(2), int64(1), int64(-3), int64(-1), int64(1<<62), int64(-7), int64(9), "")
	f.Add(uint8(3), int64(1), int64(2), int64(3), int64(0), int64(0), int64(0), "ERR nope")
	f.Add(uint8(4), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), "1")
	f.Fuzz(func(t *testing.T, shape uint8, a, b, c, d, e, g int64, text string) {
		n := [6]int64{a, b, c, d, e, g}
		var reply any
		switch shape % 6 {
		case 0:
			reply = a
		case 1:
			reply = []any{a, b, c}
		case 2:
			reply = []any{a, b, c, d, e, g}
		case 3: // an integer replaced by text
			v := []any{a, b, c, d, e, g}[:3+3*int(shape/6%2)]
			v[int(uint64(b)%uint64(len(v)))] = text
			reply = v
		case 4:
			reply = text
		default: // any other length
			v := make([]any, int(uint64(a)%9))
			for i := range v {
				v[i] = n[i%6]
			}
			reply = v
		}
		dec, err := parseDecision(reply)
		var re *replyError
		if err != nil {
			if !errors.As(err, &re) || redisUnavailable(err) || dec != (ratelimit.Decision{}) {
				t.Fatalf("reply %#v: %+v, %v", reply, dec, err)
			}
			return
		}
		switch v := reply.(type) {
		case int64:
			if !dec.Allowed || dec.Remaining < 0 {
				t.Fatalf("reply %d: %+v", v, dec)
			}
			// Within what the script sends (a reset of at most
			// limitfacts.MaxValue µs), every bit reads back.
			if s := v & 63; v>>6&(1<<s-1) <= limitfacts.MaxValue {
				packed := (dec.Remaining<<s|dec.ResetAfter.Microseconds())<<6 | s
				if dec.ResetAfter < 0 || dec.ResetAfter%us != 0 || packed != v {
					t.Fatalf("reply %d: %+v packs back to %d", v, dec, packed)
				}
			}
		case []any:
			var want ratelimit.Decision
			if len(v) == 3 {
				want = ratelimit.Decision{Allowed: true, Remaining: a, ResetAfter: durUS(b), Delay: durUS(c)}
			} else {
				want = ratelimit.Decision{Allowed: a == 1, Remaining: b, RetryAfter: durUS(c), ResetAfter: durUS(d), LimitIndex: int(e), Delay: durUS(g)}
			}
			if dec != want {
				t.Fatalf("reply %v: %+v, want %+v", v, dec, want)
			}
		default:
			t.Fatalf("reply %#v of type %T decided: %+v", reply, reply, dec)
		}
	})
}

// durUS returns n microseconds.
func durUS(n int64) time.Duration { return time.Duration(n) * us }
