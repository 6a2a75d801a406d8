package httplimit

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Denials counts the calls a limiter denies, per rule and key, over the
// last few minutes, for the admin view's list of the most-denied keys
// ([WithDenials]). It is a [ratelimit.Hook]: pass it to the limiter with
// ratelimit.WithHook (alone or beside others). Its memory is
// bounded whatever the number of keys, and it keeps no key as it came:
// each is held redacted, as the logs show it (sha256: and a prefix of its
// digest). Make one with [NewDenials].
//
// Counts are those of a Space-Saving summary per minute: a key denied
// more than a 1/64th of a minute's denials (of its shard) is always
// listed, and a listed count exceeds the key's true count by at most its
// error, which the view shows.
type Denials struct {
	seed   maphash.Seed
	now    func() time.Time
	shards [denialShards]denialShard
}

const (
	// denialShards splits the summaries so that denials of different keys
	// rarely wait for each other.
	denialShards = 16
	// denialSlots is how many keys a shard's summary of a minute keeps.
	denialSlots = 64
	// denialMinutes is how many minutes of denials a Denials keeps.
	denialMinutes = 5
)

// denialShard holds a Space-Saving summary per minute, in a ring.
type denialShard struct {
	mu      sync.Mutex
	minutes [denialMinutes]denialMinute
}

// denialMinute is the summary of one minute's denials of a shard.
type denialMinute struct {
	start int64 // the minute, in minutes since the Unix epoch
	slots []deniedKey
}

// deniedKey is one counted (rule, key) of a summary.
type deniedKey struct {
	name, key    string // key redacted
	count, error int64  // error: how much count may exceed the true count
}

// NewDenials returns a Denials that counts the last five minutes.
func NewDenials() *Denials { return &Denials{seed: maphash.MakeSeed(), now: time.Now} }

// Decided counts a denial. See [ratelimit.Hook].
func (d *Denials) Decided(_ context.Context, req *ratelimit.Request, dec ratelimit.Decision) {
	if !dec.Allowed {
		key := req.Key
		if i := dec.LimitIndex; req.Keys != nil && i >= 0 && i < len(req.Keys) {
			key = req.Keys[i] // the key of the limit that denied the call
		}
		d.count(req.Name, req.RedactedKey(key, dec.LimitIndex))
	}
}

// Failed does nothing. See [ratelimit.Hook].
func (d *Denials) Failed(context.Context, *ratelimit.Request, error) {}

// count counts one denial of name and key (redacted) now.
func (d *Denials) count(name, key string) {
	s := &d.shards[maphash.String(d.seed, name+"\x00"+key)%denialShards]
	minute := d.now().Unix() / 60
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &s.minutes[minute%denialMinutes]
	if m.start != minute {
		*m = denialMinute{start: minute, slots: m.slots[:0]}
	}
	for i := range m.slots {
		if m.slots[i].name == name && m.slots[i].key == key {
			m.slots[i].count++
			return
		}
	}
	if len(m.slots) < denialSlots {
		m.slots = append(m.slots, deniedKey{name: name, key: key, count: 1})
		return
	}
	// Space-Saving: the new key takes the place of the least counted one,
	// inheriting its count as its error.
	least := 0
	for i := range m.slots {
		if m.slots[i].count < m.slots[least].count {
			least = i
		}
	}
	c := m.slots[least].count
	m.slots[least] = deniedKey{name: name, key: key, count: c + 1, error: c}
}

// top returns the n most-denied (rule, key)s of the last five minutes,
// most first.
func (d *Denials) top(n int) []deniedKey {
	minute := d.now().Unix() / 60
	sum := map[[2]string]deniedKey{}
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		for _, m := range s.minutes {
			if m.start <= minute-denialMinutes {
				continue
			}
			for _, k := range m.slots {
				id := [2]string{k.name, k.key}
				t := sum[id]
				t.name, t.key = k.name, k.key
				t.count += k.count
				t.error += k.error
				sum[id] = t
			}
		}
		s.mu.Unlock()
	}
	out := make([]deniedKey, 0, len(sum))
	for _, k := range sum {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b deniedKey) int {
		return cmp.Or(cmp.Compare(b.count, a.count), strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
	})
	return out[:min(n, len(out))]
}

// WithDenials lists in the admin view (.../denied) the most-denied keys
// of the last five minutes that d, the limiter's hook too, has counted.
func WithDenials(d *Denials) AdminOption { return func(a *admin) { a.denials = d } }
