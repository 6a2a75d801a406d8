package redislimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Overrides reads overrides from one Redis hash that maps a rule's
// name to its limits, and keeps them in memory: [Overrides.Lookup]
// never waits for Redis. It is a [ratelimit.KeyOverrides]: fields of the forms
// name|key=<key> and name|tier=<tier>, described below, set the limits of
// one key of a rule and of a tier of its keys. A goroutine reads the hash
// every refresh interval until [Overrides.Close]; while Redis cannot be
// read the last copy stays in use.
//
// A field names a rule, a key of a rule or a tier of its keys, and its
// value sets their limits, in the grammar of [ratelimit.ParseOverrides]:
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=30s threshold=5"
//
// sets the limits of a rule; deleting the field returns it to its
// generated limits. For example, after
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=1m threshold=100"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|tier=gold" "period=1m threshold=1000"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=acme" tier=gold
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=initech" "period=1m threshold=10"
//
// acme may make 1000 calls a minute, initech 10 and every other key 100;
// see [ratelimit.KeyOverrides] for the precedence.
//
// Mistakes are loud and safe: a field whose value does not parse, that
// names no valid tier, that puts a key in a tier the hash does not set, or
// (with [OverridesRules]) that names a rule the service does not have or
// sets limits its calls would ignore (see [ratelimit.Rule.ValidateOverride]:
// another algorithm, or for a rule whose lines have their own keys, a key
// or tier override without one limit per line), or whose qualifier after
// '|' is neither key= nor tier= (a typo such as |tire=gold or |Key=abc),
// keeps the last value of that field that could be used (none, if it never
// had one), so a typo never lifts a limit. Each such field is logged once
// per value at Warn ([OverridesLogger]), counted ([Overrides.Rejected]),
// and listed by [Overrides.Problems] until it is fixed or deleted.
type Overrides struct {
	client  redis.UniversalClient
	key     string
	refresh time.Duration
	logger  *slog.Logger
	rules   map[string]*ratelimit.Rule // the rules the hash may name; nil: any

	table    atomic.Pointer[ratelimit.StaticOverrides] // nil before the first read
	rejected atomic.Uint64
	stop     chan struct{}
	stopped  sync.Once
	first    chan struct{} // closed when the first read has ended

	// mu serializes the reads of the hash, and guards what they keep.
	mu       sync.Mutex
	err      error
	good     map[string]string       // the value in use of each field
	problems []*ratelimit.FieldError // the fields that cannot be used now
	logged   map[string]string       // field → the value whose problem was logged
}

// DefaultOverridesRefresh is the refresh interval [NewOverrides] uses
// when given zero.
const DefaultOverridesRefresh = 5 * time.Second

// overridesTimeout bounds one background read of the hash.
const overridesTimeout = 5 * time.Second

// OverridesOption configures [NewOverrides].
type OverridesOption func(*Overrides)

// OverridesLogger logs each field of the hash that cannot be used, once per
// value, at Warn to logger (by default slog.Default()).
func OverridesLogger(logger *slog.Logger) OverridesOption {
	return func(o *Overrides) {
		if logger != nil {
			o.logger = logger
		}
	}
}

// OverridesRules names the rules the hash may override, such as a
// package's generated rules: a field naming any other, or setting limits
// that the rule's calls would ignore, is reported like a malformed one.
// Without it any name is taken (a hash may serve several services), and
// the limits are checked on their own only.
func OverridesRules(rules ...*ratelimit.Rule) OverridesOption {
	return func(o *Overrides) {
		o.rules = make(map[string]*ratelimit.Rule, len(rules))
		for _, r := range rules {
			o.rules[r.Name] = r
		}
	}
}

// NewOverrides returns overrides read from the hash hashKey of client's
// Redis every refresh (or [DefaultOverridesRefresh] when refresh <= 0), by
// a goroutine that starts at once; until its first read completes no rule
// is overridden ([Overrides.Refresh] reads at once). Close stops it.
func NewOverrides(client redis.UniversalClient, hashKey string, refresh time.Duration, opts ...OverridesOption) *Overrides {
	if refresh <= 0 {
		refresh = DefaultOverridesRefresh
	}
	o := &Overrides{client: client, key: hashKey, refresh: refresh, logger: slog.Default(), stop: make(chan struct{}), first: make(chan struct{})}
	for _, opt := range opts {
		opt(o)
	}
	go o.poll()
	return o
}

// poll reads the hash at once and then every refresh interval until Close.
func (o *Overrides) poll() {
	tick := time.NewTicker(o.refresh)
	defer tick.Stop()
	for read := 0; ; read++ {
		ctx, cancel := context.WithTimeout(context.Background(), overridesTimeout)
		_ = o.Refresh(ctx)
		cancel()
		if read == 0 {
			close(o.first)
		}
		select {
		case <-o.stop:
			return
		case <-tick.C:
		}
	}
}

// Close stops reading the hash; the last copy stays in use.
func (o *Overrides) Close() error {
	o.stopped.Do(func() { close(o.stop) })
	return nil
}

// Lookup returns the limits the hash sets for name, from memory. See
// [ratelimit.Overrides].
func (o *Overrides) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	if set := o.table.Load(); set != nil {
		return set.Lookup(ctx, name)
	}
	return nil, false
}

// LookupKey returns the limits the hash sets for key of name, its own or
// its tier's, else the rule's, from memory. See [ratelimit.KeyOverrides].
func (o *Overrides) LookupKey(ctx context.Context, name, key string) ([]ratelimit.Limit, bool) {
	if set := o.table.Load(); set != nil {
		return set.LookupKey(ctx, name, key)
	}
	return nil, false
}

// Tier returns the tier whose limits the hash gives key of the rule named
// name, or "" when it gives the key its own or none. See
// [ratelimit.StaticOverrides.Tier].
func (o *Overrides) Tier(name, key string) string {
	if set := o.table.Load(); set != nil {
		return set.Tier(name, key)
	}
	return ""
}

// Refresh reads the hash now and, if it could be read, makes what it sets
// the overrides in use: each field's value, or for a field that cannot be
// used its last value that could. It returns the error of the read, or
// the fields that cannot be used (each a [*ratelimit.FieldError]), the
// same error [Overrides.Err] returns afterwards.
func (o *Overrides) Refresh(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	fields, err := o.client.HGetAll(ctx, o.key).Result()
	if err != nil {
		o.err = backendError("overrides "+o.key, err)
		return o.err // keep serving the last copy; try again after another interval
	}
	set, used, problems := o.resolve(fields)
	o.table.Store(set)
	o.good, o.problems = used, problems
	o.report(fields, problems)
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Errorf("%s %w", o.key, p) // the hash, then the field
	}
	o.err = errors.Join(errs...)
	return o.err
}

// resolve returns the overrides fields set, keeping for each field that
// cannot be used its last good value (or dropping it), the fields' values
// in use, and the fields that cannot be used, in order.
func (o *Overrides) resolve(fields map[string]string) (*ratelimit.StaticOverrides, map[string]string, []*ratelimit.FieldError) {
	used := maps.Clone(fields)
	var problems []*ratelimit.FieldError
	for field, value := range fields {
		if err := o.applies(field, value); err != nil {
			problems = append(problems, &ratelimit.FieldError{Field: field, Err: err})
			if good, ok := o.good[field]; ok && o.applies(field, good) == nil {
				used[field] = good
			} else {
				delete(used, field)
			}
		}
	}
	reported := map[string]bool{}
	for {
		set, err := ratelimit.ParseOverrides(used)
		bad := fieldErrors(err)
		if len(bad) == 0 {
			slices.SortFunc(problems, func(a, b *ratelimit.FieldError) int { return strings.Compare(a.Field, b.Field) })
			return set, used, problems
		}
		for _, fe := range bad {
			if !reported[fe.Field] && used[fe.Field] == fields[fe.Field] {
				problems = append(problems, fe)
				reported[fe.Field] = true
			}
			// Fall back to the field's last good value; failing that, drop it.
			if good, ok := o.good[fe.Field]; ok && used[fe.Field] != good {
				used[fe.Field] = good
			} else {
				delete(used, fe.Field)
			}
		}
	}
}

// applies returns why field, set to value, cannot apply to the rules of
// [OverridesRules]: it names no such rule, or sets limits the rule's calls
// would ignore (see [ratelimit.Rule.ValidateOverride]); nil when it
// applies, when there are no such rules, and when value does not parse
// (which ParseOverrides reports).
func (o *Overrides) applies(field, value string) error {
	if o.rules == nil {
		return nil
	}
	name, rest, qualified := strings.Cut(field, "|")
	r := o.rules[name]
	if r == nil {
		return fmt.Errorf("%w: no rule is named %q", ratelimit.ErrInvalidLimit, name)
	}
	if _, isMember := strings.CutPrefix(strings.TrimSpace(value), "tier="); isMember && strings.HasPrefix(rest, "key=") {
		return nil
	}
	// The value alone, as a rule's: its own errors are the field's, told
	// where the fields are parsed.
	parsed, err := ratelimit.ParseOverrides(map[string]string{"value": value})
	if err != nil {
		return nil
	}
	limits, _ := parsed.Lookup(context.Background(), "value")
	return r.ValidateOverride(limits, qualified)
}

// fieldErrors returns the *FieldErrors that err joins.
func fieldErrors(err error) []*ratelimit.FieldError {
	var out []*ratelimit.FieldError
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			var fe *ratelimit.FieldError
			if errors.As(e, &fe) {
				out = append(out, fe)
			}
		}
	}
	return out
}

// report logs and counts each problem not logged before for its field's
// value, and forgets the fields that are fixed.
func (o *Overrides) report(fields map[string]string, problems []*ratelimit.FieldError) {
	logged := make(map[string]string, len(problems))
	for _, p := range problems {
		value := fields[p.Field]
		logged[p.Field] = value
		if prev, ok := o.logged[p.Field]; ok && prev == value {
			continue
		}
		o.rejected.Add(1)
		kept := "none: the field is ignored"
		if good, ok := o.good[p.Field]; ok && good != value {
			kept = "its previous value"
		}
		o.logger.LogAttrs(context.Background(), slog.LevelWarn, "ratelimit: override field cannot be used",
			slog.String("hash", o.key), slog.String("field", redactField(p.Field)), slog.String("value", value),
			slog.String("error", redactError(p)), slog.String("in_force", kept))
	}
	o.logged = logged
}

// redactField returns field as logs show it: the key of a name|key=<key>
// field redacted (see callkey.Redact).
func redactField(field string) string {
	if name, key, ok := strings.Cut(field, "|key="); ok {
		return name + "|key=" + callkey.Redact(key)
	}
	name, rest, ok := strings.Cut(field, "|")
	if !ok || strings.HasPrefix(rest, "tier=") {
		return field
	}
	// A mistyped qualifier (|Key=abc, |key:abc) may be followed by a key.
	if i := strings.IndexAny(rest, "=:"); i >= 0 {
		return name + "|" + rest[:i+1] + callkey.Redact(rest[i+1:])
	}
	return name + "|" + callkey.Redact(rest)
}

// redactError returns the reason of p as logs show it: without the key of
// its field, which a reason may quote.
func redactError(p *ratelimit.FieldError) string {
	msg := p.Err.Error()
	if _, key, ok := strings.Cut(p.Field, "|key="); ok {
		for _, k := range []string{key, callkey.Named(key), strconv.Quote(callkey.Named(key))} {
			msg = strings.ReplaceAll(msg, k, callkey.Redact(key))
		}
	}
	return msg
}

// Err returns the error of the last read of the hash: nil when it was read
// and every field could be used.
func (o *Overrides) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Problems returns the fields of the hash that cannot be used now, by
// field; each keeps its last good value, if it had one.
func (o *Overrides) Problems() []*ratelimit.FieldError {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.problems)
}

// Rejected returns how many times a field of the hash could not be used,
// counting each field once per value: a counter for metrics.
func (o *Overrides) Rejected() uint64 { return o.rejected.Load() }

var _ ratelimit.KeyOverrides = (*Overrides)(nil)
