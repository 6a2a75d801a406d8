package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParseOverride checks the override grammar, text an operator writes
// into a Redis hash: ParseOverride never panics; its errors wrap
// ErrInvalidLimit; what it accepts is at least one valid limit, and JSON
// only when the whole value is JSON; and the limits it returns read back
// the same when written in either form.
func FuzzParseOverride(f *testing.F) {
	for _, seed := range []string{
		"period=30s threshold=5",
		"period=1 threshold=10; period=1m threshold=100",
		"period=500ms threshold=2\nperiod=1h threshold=7\n",
		"period=1s threshold=10 algorithm=token_bucket burst=20",
		"period=2s threshold=3 algorithm=leaky_bucket capacity=9",
		"period=3ms threshold=67108863 algorithm=sliding_window",
		"period=1.5µs threshold=1125899906842623 algorithm=gcra",
		"period=9223372036 threshold=1",
		"period=-1 threshold=1",
		"period=1 threshold=1 threshold=2",
		"period=1 threshold",
		`{"period": "30s", "threshold": 5}`,
		`[{"period": 1, "threshold": 10}, {"period": "1m", "threshold": 100, "algorithm": "gcra", "burst": 3}]`,
		`{"period": 1e3, "threshold": 1}`,
		`{"period": null, "threshold": 1}`,
		`[{"period": "1s", "threshold": 1}`,
		`[{"period": "1s", "threshold": 1}] x`,
		`[]`,
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		limits, err := ParseOverride(value)
		if err != nil {
			if !errors.Is(err, ErrInvalidLimit) || limits != nil {
				t.Fatalf("ParseOverride(%q) = %v, %v: want nil and an error wrapping ErrInvalidLimit", value, limits, err)
			}
			return
		}
		checkOverride(t, value, limits)
		if v := strings.TrimSpace(value); (strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[")) && !json.Valid([]byte(v)) {
			t.Fatalf("accepted %q, which is not JSON, as JSON: %v", value, limits)
		}
		for _, again := range []string{overrideText(limits), overrideJSON(t, limits)} {
			got, err := ParseOverride(again)
			if err != nil || !reflect.DeepEqual(got, limits) {
				t.Fatalf("%q gave %v; written again as %q it gives %v, %v", value, limits, again, got, err)
			}
		}
	})
}

// checkOverride fails unless limits, parsed from value, are at least one
// and each within the bounds the runtime decides.
func checkOverride(t *testing.T, value string, limits []Limit) {
	t.Helper()
	if len(limits) == 0 {
		t.Fatalf("accepted %q with no limits", value)
	}
	for _, l := range limits {
		if err := l.validate(); err != nil || l.Threshold <= 0 || l.Burst < 0 || l.Capacity < 0 || !l.Algorithm.Valid() {
			t.Fatalf("accepted %q with limit %+v: %v", value, l, err)
		}
	}
}

// overrideText writes limits in the text form of an override, one per line.
func overrideText(limits []Limit) string {
	var b strings.Builder
	for _, l := range limits {
		fmt.Fprintf(&b, "period=%s threshold=%d", l.Period, l.Threshold)
		if l.Algorithm != "" {
			fmt.Fprintf(&b, " algorithm=%s", l.Algorithm)
		}
		if l.Burst != 0 {
			fmt.Fprintf(&b, " burst=%d", l.Burst)
		}
		if l.Capacity != 0 {
			fmt.Fprintf(&b, " capacity=%d", l.Capacity)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// overrideJSON writes limits in the JSON form of an override.
func overrideJSON(t *testing.T, limits []Limit) string {
	t.Helper()
	type limit struct {
		Period    string    `json:"period"`
		Threshold int64     `json:"threshold"`
		Algorithm Algorithm `json:"algorithm,omitempty"`
		Burst     int64     `json:"burst,omitempty"`
		Capacity  int64     `json:"capacity,omitempty"`
	}
	var list []limit
	for _, l := range limits {
		list = append(list, limit{l.Period.String(), l.Threshold, l.Algorithm, l.Burst, l.Capacity})
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzRedisOverrides writes one field of an overrides hash in a real
// Redis, next to a valid one, and checks what RedisOverrides reads from
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
	ov := NewRedisOverrides(c, hash, 1<<62)
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
		want, wantErr := ParseOverride(value)
		err := ov.Refresh(ctx)
		got, ok := ov.Lookup(ctx, name)
		if lim, found := ov.Lookup(ctx, control); !found || len(lim) != 1 || lim[0].Threshold != 7 {
			t.Fatalf("field %q = %q hid the other field: %v, %v", name, value, lim, found)
		}
		if wantErr != nil {
			if !errors.Is(err, ErrInvalidLimit) || errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) || ok {
				t.Fatalf("field %q = %q: Refresh %v, Lookup %v %v", name, value, err, got, ok)
			}
			return
		}
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("field %q = %q: Refresh %v, Lookup %v %v, want %v", name, value, err, got, ok, want)
		}
	})
}

// fuzzProxies are the trusted proxies of FuzzClientIP.
var fuzzProxies = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.1/32"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// FuzzClientIP checks ClientIP on a request whose peer address and
// X-Forwarded-For fields come from outside: it fails only for a peer
// address that is not an IP (with or without a port); the key is a
// canonical IP without zone and never IPv4-mapped; it is the peer or one
// of the entries; an untrusted peer is its own key; and entries a client
// writes to the left of an untrusted key never change it.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.9:1234", "", "", "6.6.6.6")
	f.Add("10.0.0.1:80", "198.51.100.7, 10.1.2.3", "10.9.9.9", "6.6.6.6")
	f.Add("127.0.0.1:80", "10.0.0.2,10.0.0.3", "", "6.6.6.6, 7.7.7.7")
	f.Add("[2001:db8::1]:443", "2001:db8::2, [::ffff:198.51.100.7]", "garbage", "1.1.1.1")
	f.Add("10.0.0.1", "::ffff:10.0.0.5, fe80::1%eth0", "not-an-ip", "")
	f.Add("[fe80::1%25eth0]:80", "", "", "x")
	f.Add("unix:@", "1.2.3.4", "", "")
	key := ClientIP(fuzzProxies...)
	f.Fuzz(func(t *testing.T, remote, xff1, xff2, junk string) {
		r := forwardedRequest(remote, xff1, xff2)
		got, err := key(r)
		peer, perr := parseIP(remote)
		if (err != nil) != (perr != nil) {
			t.Fatalf("peer %q (%v): key %q, %v", remote, perr, got, err)
		}
		if err != nil {
			if got != "" || !strings.HasPrefix(err.Error(), "ratelimit: remote address ") {
				t.Fatalf("peer %q: key %q, error %v", remote, got, err)
			}
			return
		}
		ip, err := netip.ParseAddr(got)
		if err != nil || ip.String() != got || ip.Is4In6() || ip.Zone() != "" {
			t.Fatalf("peer %q, X-Forwarded-For %q %q: key %q is not a canonical address (%v)", remote, xff1, xff2, got, err)
		}
		if !trustedProxy(peer) && ip != peer {
			t.Fatalf("untrusted peer %q gave key %q", remote, got)
		}
		if ip != peer && !slices.Contains(forwardedEntries(xff1, xff2), ip) {
			t.Fatalf("peer %q, X-Forwarded-For %q %q: key %q is no entry", remote, xff1, xff2, got)
		}
		if trustedProxy(ip) {
			return
		}
		for _, forged := range []*http.Request{
			forwardedRequest(remote, junk+","+xff1, xff2),
			forwardedRequest(remote, junk, xff1, xff2),
		} {
			if again, err := key(forged); err != nil || again != got {
				t.Fatalf("peer %q, X-Forwarded-For %q %q gave %q; with %q on the left it gives %q, %v",
					remote, xff1, xff2, got, junk, again, err)
			}
		}
	})
}

// forwardedRequest returns a request from remote with the non-empty
// fields xff as its X-Forwarded-For lines, in order.
func forwardedRequest(remote string, xff ...string) *http.Request {
	r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
	for _, v := range xff {
		if v != "" {
			r.Header["X-Forwarded-For"] = append(r.Header["X-Forwarded-For"], v)
		}
	}
	return r
}

// forwardedEntries returns the addresses among the entries of the fields.
func forwardedEntries(fields ...string) []netip.Addr {
	var addrs []netip.Addr
	for _, f := range fields {
		for _, e := range strings.Split(f, ",") {
			if a, err := parseIP(strings.TrimSpace(e)); err == nil {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}

func trustedProxy(a netip.Addr) bool {
	return slices.ContainsFunc(fuzzProxies, func(p netip.Prefix) bool { return p.Contains(a) })
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
			if !errors.As(err, &re) || redisUnavailable(err) || dec != (Decision{}) {
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
			// maxLimitValue µs), every bit reads back.
			if s := v & 63; v>>6&(1<<s-1) <= maxLimitValue {
				packed := (dec.Remaining<<s|dec.ResetAfter.Microseconds())<<6 | s
				if dec.ResetAfter < 0 || dec.ResetAfter%us != 0 || packed != v {
					t.Fatalf("reply %d: %+v packs back to %d", v, dec, packed)
				}
			}
		case []any:
			var want Decision
			if len(v) == 3 {
				want = Decision{Allowed: true, Remaining: a, ResetAfter: durUS(b), Delay: durUS(c)}
			} else {
				want = Decision{Allowed: a == 1, Remaining: b, RetryAfter: durUS(c), ResetAfter: durUS(d), Limit: int(e), Delay: durUS(g)}
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
