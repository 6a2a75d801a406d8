package httplimit

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/denied"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Denials counts the calls a limiter denies, per rule and key, over the
// last few minutes, for the admin view's list of the most-denied keys
// ([WithDenials]). It is a [ratelimit.Hook]: pass it to the limiter with
// ratelimit.WithHook (alone or beside others). Its memory is
// bounded whatever the number of keys; it keeps each key as the limiter
// keeps it (bounded, or a digest), so that the admin view's lookup can
// ask about a key it lists, and shows it only redacted, as the logs do
// (sha256: and a prefix of its digest). Make one with [NewDenials].
//
// Counts are those of a Space-Saving summary per minute (the memory
// limiter's, package internal/denied) in each of 16 shards: a key denied
// more than a 1/256th of a minute's denials of its shard is always
// listed, and a listed count exceeds the key's true count by at most its
// error, which the view shows.
type Denials struct {
	seed   maphash.Seed
	now    func() time.Time
	shards [denialShards]denied.Summary
}

// denialShards splits the summaries so that denials of different keys
// rarely wait for each other.
const denialShards = 16

// NewDenials returns a Denials that counts the last five minutes.
func NewDenials() *Denials { return &Denials{seed: maphash.MakeSeed(), now: time.Now} }

// Decided counts a denial. See [ratelimit.Hook].
func (d *Denials) Decided(_ context.Context, req *ratelimit.Request, dec ratelimit.Decision) {
	if !dec.Allowed {
		key := req.Key
		if i := dec.LimitIndex; req.Keys != nil && i >= 0 && i < len(req.Keys) {
			key = req.Keys[i] // the key of the limit that denied the call
		}
		d.count(req.Name, key, req.KeyHashed(dec.LimitIndex))
	}
}

// Failed does nothing. See [ratelimit.Hook].
func (d *Denials) Failed(context.Context, *ratelimit.Request, error) {}

// count counts one denial of name and key (as the limiter keeps it;
// hashed: a digest) now.
func (d *Denials) count(name, key string, hashed bool) {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(name)
	h.WriteByte(0)
	h.WriteString(key)
	d.shards[h.Sum64()%denialShards].Add(name, key, hashed, 1, 0, d.now())
}

// top returns the n most-denied (rule, key)s of the last five minutes,
// most first.
func (d *Denials) top(n int) []denied.Entry {
	now := d.now()
	var all []denied.Entry
	for i := range d.shards {
		all = append(all, d.shards[i].Top(denied.Slots, now)...)
	}
	return denied.Merge(all, n)
}

// WithDenials lists in the admin view (.../denied) the most-denied keys
// of the last five minutes that d, the limiter's hook too, has counted.
func WithDenials(d *Denials) AdminOption { return func(a *admin) { a.denials = d } }
