package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Overrides replaces the limits of rules at run time; see [WithOverrides].
// Implementations are safe for concurrent use and answer from memory: they
// are asked once per call.
type Overrides interface {
	// Lookup returns the limits that replace those of the rule named name,
	// and whether there are any.
	Lookup(ctx context.Context, name string) ([]Limit, bool)
}

// OverridesFunc adapts a function to [Overrides].
type OverridesFunc func(ctx context.Context, name string) ([]Limit, bool)

// Lookup calls f.
func (f OverridesFunc) Lookup(ctx context.Context, name string) ([]Limit, bool) {
	return f(ctx, name)
}

// effectiveLimits returns the limits a call of rule r is decided against:
// the override's when src has a usable one, else the rule's own.
func effectiveLimits(ctx context.Context, src Overrides, r *Rule) []Limit {
	ov, ok := src.Lookup(ctx, r.Name)
	if !ok || len(ov) == 0 {
		return r.Limits
	}
	fill := false
	for i, l := range ov {
		if l.validate() != nil {
			return r.Limits
		}
		if i < len(r.Limits) {
			if l.Algorithm == "" && r.Limits[i].Algorithm != "" {
				fill = true // the rule's algorithm, which it may spell out
			} else if l.algorithm() != r.Limits[i].algorithm() {
				return r.Limits
			}
		}
	}
	if fill {
		ov = append([]Limit(nil), ov...)
		for i := range ov {
			if i < len(r.Limits) && ov[i].Algorithm == "" {
				ov[i].Algorithm = r.Limits[i].Algorithm
			}
		}
		for _, l := range ov {
			if l.validate() != nil {
				return r.Limits
			}
		}
	}
	return ov
}

// RedisOverrides reads overrides from one Redis hash that maps a rule's
// name to its limits, and keeps them in memory: [RedisOverrides.Lookup]
// never waits for Redis. The hash is read again in the background when a
// Lookup finds the copy older than the refresh interval, by one goroutine
// at a time; while Redis cannot be read the last copy stays in use.
//
// A field's value is either directive-like text, one limit per line or
// ';'-separated, with the names of the //ratelimit: directive:
//
//	period=30s threshold=5
//	period=1 threshold=10; period=1m threshold=100
//	period=1s threshold=10 algorithm=token_bucket burst=20
//
// (period in whole seconds or as a Go duration; algorithm, burst and
// capacity optional), or JSON, one object or an array of them:
//
//	{"period": "30s", "threshold": 5}
//	[{"period": 1, "threshold": 10}, {"period": "1m", "threshold": 100}]
//
// An operator sets one with redis-cli:
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=30s threshold=5"
//
// and deletes the field to return to the generated limits. A value that
// does not parse is skipped (the rule keeps its own limits) and reported
// by [RedisOverrides.Err].
type RedisOverrides struct {
	client  redis.UniversalClient
	key     string
	refresh time.Duration

	table   atomic.Pointer[overrideTable]
	loading atomic.Bool
	reads   atomic.Uint64 // numbers the reads of the hash

	mu  sync.Mutex
	err error
}

type overrideTable struct {
	limits map[string][]Limit
	at     time.Time // when it was read, or last tried
	read   uint64    // the number of the read that made it
}

// DefaultOverridesRefresh is the refresh interval [NewRedisOverrides] uses
// when given zero.
const DefaultOverridesRefresh = 5 * time.Second

// overridesTimeout bounds one background read of the hash.
const overridesTimeout = 5 * time.Second

// NewRedisOverrides returns overrides read from the hash hashKey of client's
// Redis every refresh (or [DefaultOverridesRefresh] when refresh <= 0). It
// starts reading the hash in the background at once; until the first read
// completes no rule is overridden. Call [RedisOverrides.Refresh] to wait for
// it.
func NewRedisOverrides(client redis.UniversalClient, hashKey string, refresh time.Duration) *RedisOverrides {
	if refresh <= 0 {
		refresh = DefaultOverridesRefresh
	}
	o := &RedisOverrides{client: client, key: hashKey, refresh: refresh}
	o.reload()
	return o
}

// Lookup returns the limits the hash sets for name, from memory. See
// [Overrides].
func (o *RedisOverrides) Lookup(_ context.Context, name string) ([]Limit, bool) {
	t := o.table.Load()
	if t == nil || time.Since(t.at) >= o.refresh {
		o.reload()
	}
	if t == nil {
		return nil, false
	}
	l, ok := t.limits[name]
	return l, ok
}

// reload reads the hash in the background unless a read is under way.
func (o *RedisOverrides) reload() {
	if !o.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer o.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), overridesTimeout)
		defer cancel()
		_ = o.Refresh(ctx)
	}()
}

// Refresh reads the hash now and, if it could be read, makes its limits
// the ones Lookup returns. It returns the error of the read or of the
// values that did not parse (which are skipped), the same error
// [RedisOverrides.Err] returns afterwards.
func (o *RedisOverrides) Refresh(ctx context.Context) error {
	read := o.reads.Add(1)
	fields, err := o.client.HGetAll(ctx, o.key).Result()
	if err != nil {
		err = &BackendError{Name: "overrides " + o.key, Err: err}
		// Keep serving the last copy; try again after another interval.
		t := &overrideTable{at: time.Now(), read: read}
		if old := o.table.Load(); old != nil {
			t.limits = old.limits
		}
		o.store(t, err)
		return err
	}
	limits := make(map[string][]Limit, len(fields))
	var errs []error
	for name, value := range fields {
		l, err := ParseOverride(value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", o.key, name, err))
			continue
		}
		limits[name] = l
	}
	err = errors.Join(errs...)
	o.store(&overrideTable{limits: limits, at: time.Now(), read: read}, err)
	return err
}

// store makes t the table in use unless a later read made the one in use:
// two reads can overlap (Refresh and a background one) and finish in any
// order.
func (o *RedisOverrides) store(t *overrideTable, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old := o.table.Load(); old != nil && old.read > t.read {
		return
	}
	o.table.Store(t)
	o.err = err
}

// Err returns the error of the last read of the hash: nil when it was read
// and every value parsed.
func (o *RedisOverrides) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// ParseOverride parses the value of one field of a [RedisOverrides] hash:
// directive-like text or JSON, as described there. Every limit it returns
// is valid; every error wraps [ErrInvalidLimit].
func ParseOverride(value string) ([]Limit, error) {
	value = strings.TrimSpace(value)
	var limits []Limit
	var err error
	if strings.HasPrefix(value, "{") || strings.HasPrefix(value, "[") {
		limits, err = parseOverrideJSON(value)
	} else {
		limits, err = parseOverrideText(value)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: no limits", ErrInvalidLimit)
	}
	for i, l := range limits {
		if err := l.validate(); err != nil {
			return nil, fmt.Errorf("limit %d: %w", i+1, err)
		}
	}
	return limits, nil
}

func parseOverrideText(value string) ([]Limit, error) {
	var limits []Limit
	for _, line := range strings.FieldsFunc(value, func(r rune) bool { return r == ';' || r == '\n' }) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var l Limit
		seen := map[string]bool{}
		for _, f := range fields {
			name, v, ok := strings.Cut(f, "=")
			if !ok || v == "" {
				return nil, fmt.Errorf("%q: want name=value", f)
			}
			if seen[name] {
				return nil, fmt.Errorf("%s appears twice in one limit", name)
			}
			seen[name] = true
			var err error
			switch name {
			case "period":
				l.Period, err = parsePeriod(v)
			case "threshold":
				l.Threshold, err = strconv.ParseInt(v, 10, 64)
			case "algorithm":
				l.Algorithm = Algorithm(v)
			case "burst":
				l.Burst, err = strconv.ParseInt(v, 10, 64)
			case "capacity":
				l.Capacity, err = strconv.ParseInt(v, 10, 64)
			default:
				return nil, fmt.Errorf("unknown name %q (want period, threshold, algorithm, burst or capacity)", name)
			}
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", name, v, err)
			}
		}
		if !seen["period"] || !seen["threshold"] {
			return nil, fmt.Errorf("%q: period and threshold are required", strings.TrimSpace(line))
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// parsePeriod reads whole seconds ("30") or a Go duration ("500ms").
func parsePeriod(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > int64(1<<63-1)/int64(time.Second) || n < 0 {
			return 0, errors.New("out of range")
		}
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// jsonLimit is the JSON form of one overriding limit.
type jsonLimit struct {
	Period    json.RawMessage `json:"period"`
	Threshold int64           `json:"threshold"`
	Algorithm Algorithm       `json:"algorithm"`
	Burst     int64           `json:"burst"`
	Capacity  int64           `json:"capacity"`
}

func parseOverrideJSON(value string) ([]Limit, error) {
	var list []jsonLimit
	if strings.HasPrefix(value, "{") {
		value = "[" + value + "]"
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	limits := make([]Limit, len(list))
	for i, j := range list {
		var p time.Duration
		var s string
		var n int64
		switch {
		case json.Unmarshal(j.Period, &s) == nil:
			d, err := parsePeriod(s)
			if err != nil {
				return nil, fmt.Errorf("limit %d: period %q: %w", i+1, s, err)
			}
			p = d
		case json.Unmarshal(j.Period, &n) == nil:
			d, err := parsePeriod(strconv.FormatInt(n, 10))
			if err != nil {
				return nil, fmt.Errorf("limit %d: period %d: %w", i+1, n, err)
			}
			p = d
		default:
			return nil, fmt.Errorf("limit %d: period: want whole seconds or a duration string", i+1)
		}
		limits[i] = Limit{Period: p, Threshold: j.Threshold, Algorithm: j.Algorithm, Burst: j.Burst, Capacity: j.Capacity}
	}
	return limits, nil
}
