package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Overrides reads overrides from one Redis hash that maps a rule's
// name to its limits, and keeps them in memory: [Overrides.Lookup]
// never waits for Redis. It is a [ratelimit.KeyOverrides]: fields of the forms
// name|key=<key> and name|tier=<tier>, described below, set the limits of
// one key of a rule and of a tier of its keys. The hash is read again in
// the background when a Lookup finds the copy older than the refresh
// interval, by one goroutine at a time; while Redis cannot be read the
// last copy stays in use.
//
// A field names a rule, a key of a rule or a tier of its keys, and its
// value sets their limits, in the grammar of [ratelimit.ParseOverrides]:
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=30s threshold=5"
//
// sets the limits of a rule; deleting the field returns it to its
// generated limits. // For example, after
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=1m threshold=100"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|tier=gold" "period=1m threshold=1000"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=acme" tier=gold
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=initech" "period=1m threshold=10"
//
// acme may make 1000 calls a minute, initech 10 and every other key 100;
// see [ratelimit.KeyOverrides] for the precedence. A value that does not parse, a
// field that names no valid tier and a key put in a tier that the hash
// does not set are skipped (the rule, the tier or the key keeps the
// limits it would have without them) and reported by [Overrides.Err].
type Overrides struct {
	client  redis.UniversalClient
	key     string
	refresh time.Duration

	table   atomic.Pointer[overrideTable]
	loading atomic.Bool
	reads   atomic.Uint64 // numbers the reads of the hash

	mu  sync.Mutex
	err error
}

// overrideTable is one read of the hash.
type overrideTable struct {
	set  *ratelimit.StaticOverrides // what the hash sets; nil before the first read
	at   time.Time                  // when it was read, or last tried
	read uint64                     // the number of the read that made it
}

// DefaultOverridesRefresh is the refresh interval [NewOverrides] uses
// when given zero.
const DefaultOverridesRefresh = 5 * time.Second

// overridesTimeout bounds one background read of the hash.
const overridesTimeout = 5 * time.Second

// NewOverrides returns overrides read from the hash hashKey of client's
// Redis every refresh (or [DefaultOverridesRefresh] when refresh <= 0). It
// starts reading the hash in the background at once; until the first read
// completes no rule is overridden. Call [Overrides.Refresh] to wait for
// it.
func NewOverrides(client redis.UniversalClient, hashKey string, refresh time.Duration) *Overrides {
	if refresh <= 0 {
		refresh = DefaultOverridesRefresh
	}
	o := &Overrides{client: client, key: hashKey, refresh: refresh}
	o.reload()
	return o
}

// Lookup returns the limits the hash sets for name, from memory. See
// [ratelimit.Overrides].
func (o *Overrides) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	t := o.loaded()
	if t == nil || t.set == nil {
		return nil, false
	}
	return t.set.Lookup(ctx, name)
}

// LookupKey returns the limits the hash sets for key of name, its own or
// its tier's, else the rule's, from memory. See [ratelimit.KeyOverrides].
func (o *Overrides) LookupKey(ctx context.Context, name, key string) ([]ratelimit.Limit, bool) {
	t := o.loaded()
	if t == nil || t.set == nil {
		return nil, false
	}
	return t.set.LookupKey(ctx, name, key)
}

// loaded returns the table in use (nil before the first read), starting a
// read in the background when it is older than the refresh interval.
func (o *Overrides) loaded() *overrideTable {
	t := o.table.Load()
	if t == nil || time.Since(t.at) >= o.refresh {
		o.reload()
	}
	return t
}

// reload reads the hash in the background unless a read is under way.
func (o *Overrides) reload() {
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
// [Overrides.Err] returns afterwards.
func (o *Overrides) Refresh(ctx context.Context) error {
	read := o.reads.Add(1)
	fields, err := o.client.HGetAll(ctx, o.key).Result()
	if err != nil {
		err = &ratelimit.BackendError{Name: "overrides " + o.key, Err: err}
		// Keep serving the last copy; try again after another interval.
		t := &overrideTable{at: time.Now(), read: read}
		if old := o.table.Load(); old != nil {
			t.set = old.set
		}
		o.store(t, err)
		return err
	}
	set, err := ratelimit.ParseOverrides(fields)
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s %w", o.key, e) // the hash, then the field
		}
		err = errors.Join(errs...)
	}
	o.store(&overrideTable{set: set, at: time.Now(), read: read}, err)
	return err
}

// store makes t the table in use unless a later read made the one in use:
// two reads can overlap (Refresh and a background one) and finish in any
// order.
func (o *Overrides) store(t *overrideTable, err error) {
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
func (o *Overrides) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

var _ ratelimit.KeyOverrides = (*Overrides)(nil)
