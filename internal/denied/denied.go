// Package denied keeps the most-denied keys of a limiter: a bounded
// Space-Saving summary per minute over the last few minutes, for the
// memory limiter's ratelimit.OpTopDenied, and the pending counts a
// process has yet to merge into a shared store (the Redis limiter's).
package denied

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Minutes is how many minutes of denials are kept and listed.
const Minutes = 5

// Slots is how many keys a minute's summary keeps: a key denied more than
// a 1/Slots-th of a minute's denials is always listed.
const Slots = 256

// Entry is one counted (name, key): Count exceeds its true count by at
// most Error. Hashed says Key is a digest of the caller's key.
type Entry struct {
	Name, Key    string
	Hashed       bool
	Count, Error int64
}

// id names an entry.
func (e *Entry) id() [2]string { return [2]string{e.Name, e.Key} }

// Summary is a Space-Saving summary per minute, in a ring of Minutes.
// Its zero value is ready; it is safe for concurrent use. The key it
// counted last is counted without its lock (a hot key under abuse: every
// goroutine denies the same one) in a cell that every read folds in
// first, so that no count is lost or late.
type Summary struct {
	mu      sync.Mutex
	minutes [Minutes]minute
	hot     atomic.Pointer[hotCell]
	last    uint64 // the hash of the (name, key) counted last under the lock
}

// hotCell counts the denials of one (name, key) in one minute without the
// summary's lock, in a stripe per processor (P) so that the cores do not
// take turns at one count; a stripe below 0 was folded into the summary,
// and counts no more.
type hotCell struct {
	name, key string
	hashed    bool
	at        int64 // minutes since the Unix epoch
	counts    [hotStripes]stripe
}

// hotStripes is how many stripes a hot cell counts in: the processors
// beyond share them.
const hotStripes = 16

// stripe is one count of a hot cell, alone on its cache line.
type stripe struct {
	_     [64]byte
	count atomic.Int64
}

// lastSeed hashes the key a summary counted last.
var lastSeed = maphash.MakeSeed()

// folded is a hot cell's count once folded: far below any count it held.
const folded = math.MinInt64 / 2

// minute is the summary of one minute.
type minute struct {
	start int64 // minutes since the Unix epoch
	slots []Entry
	index map[[2]string]int // slot of each (name, key)
}

// Add counts n denials of (name, key) at now, with error err (what the
// counts may exceed the truth by where they come from).
func (s *Summary) Add(name, key string, hashed bool, n, err int64, now time.Time) {
	at := now.Unix() / 60
	if c := s.hot.Load(); err == 0 && c != nil && c.at == at && c.name == name && c.key == key && c.hashed == hashed {
		if c.counts[procID()%hotStripes].count.Add(n) > 0 {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	s.addLocked(name, key, hashed, n, err, at)
	h := maphash.String(lastSeed, name) ^ maphash.String(lastSeed, key)*31
	if err == 0 && s.last == h {
		// Twice in a row: a hot key, counted in a cell from now on (a
		// hash that collides only picks another key for the cell).
		s.hot.Store(&hotCell{name: strings.Clone(name), key: strings.Clone(key), hashed: hashed, at: at})
		return
	}
	s.last = h
}

// foldLocked moves the hot cell's count into the summary; s.mu is held.
func (s *Summary) foldLocked() {
	c := s.hot.Swap(nil)
	if c == nil {
		return
	}
	var v int64
	for i := range c.counts {
		v += max(c.counts[i].count.Swap(folded), 0)
	}
	if v > 0 {
		s.addLocked(c.name, c.key, c.hashed, v, 0, c.at)
	}
}

// addLocked counts n denials of (name, key) in minute at, with error
// err; s.mu is held. A minute older than the one the ring holds in its
// place is dropped: it is no longer listed.
func (s *Summary) addLocked(name, key string, hashed bool, n, err, at int64) {
	m := &s.minutes[at%Minutes]
	if m.index == nil {
		m.index = map[[2]string]int{}
	}
	if m.start > at {
		return
	}
	if m.start != at {
		clear(m.index)
		*m = minute{start: at, slots: m.slots[:0], index: m.index}
	}
	if i, ok := m.index[[2]string{name, key}]; ok {
		m.slots[i].Count += n
		m.slots[i].Error += err
		return
	}
	key = strings.Clone(key)
	if len(m.slots) < Slots {
		m.index[[2]string{name, key}] = len(m.slots)
		m.slots = append(m.slots, Entry{Name: name, Key: key, Hashed: hashed, Count: n, Error: err})
		return
	}
	// Space-Saving: the new key takes the place of the least counted one,
	// inheriting its count as its error.
	least := 0
	for i := range m.slots {
		if m.slots[i].Count < m.slots[least].Count {
			least = i
		}
	}
	c := m.slots[least].Count
	delete(m.index, m.slots[least].id())
	m.index[[2]string{name, key}] = least
	m.slots[least] = Entry{Name: name, Key: key, Hashed: hashed, Count: c + n, Error: c + err}
}

// Top returns the n most-denied entries of the last Minutes at now, most
// first.
func (s *Summary) Top(n int, now time.Time) []Entry {
	at := now.Unix() / 60
	var all []Entry
	s.mu.Lock()
	s.foldLocked()
	for _, m := range s.minutes {
		if m.start > at-Minutes && m.start <= at {
			all = append(all, m.slots...)
		}
	}
	s.mu.Unlock()
	return Merge(all, n)
}

// Merge sums the entries of the same (name, key) and returns the n most
// counted, most first.
func Merge(entries []Entry, n int) []Entry {
	sum := map[[2]string]Entry{}
	for _, e := range entries {
		t, ok := sum[e.id()]
		if !ok {
			sum[e.id()] = e
			continue
		}
		t.Count += e.Count
		t.Error += e.Error
		sum[e.id()] = t
	}
	out := make([]Entry, 0, len(sum))
	for _, e := range sum {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name), strings.Compare(a.Key, b.Key))
	})
	return out[:min(n, len(out))]
}

// Pending holds the denials a process counted and has yet to merge into
// a shared store, at most Slots keys (the others are counted by
// Space-Saving, as in a Summary). It is safe for concurrent use.
type Pending struct {
	mu  sync.Mutex
	sum Summary
}

// Add counts a denial of (name, key) at now.
func (p *Pending) Add(name, key string, hashed bool, now time.Time) {
	p.sum.Add(name, key, hashed, 1, 0, now)
}

// Drain returns the pending entries of each minute, by minute (since the
// Unix epoch), and forgets them.
func (p *Pending) Drain() map[int64][]Entry {
	s := &p.sum
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	out := map[int64][]Entry{}
	for i := range s.minutes {
		m := &s.minutes[i]
		if len(m.slots) > 0 {
			out[m.start] = slices.Clone(m.slots)
		}
		m.slots = m.slots[:0]
		clear(m.index)
	}
	return out
}

// procID returns the id of the processor (P) that runs the goroutine now;
// it may run on another by the time it uses it.
func procID() int {
	id := procPin()
	procUnpin()
	return id
}

// procPin and procUnpin pin the goroutine to its P, as sync.Pool does to
// find its per-P pool; the runtime keeps them reachable for the packages
// that call them so (go.dev/issue/67401) and promises not to change their
// signatures.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
