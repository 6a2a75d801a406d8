package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Notes is the service behind the HTTP handlers. Its limits are declared
// here and enforced by NotesWithRateLimit, generated into ratelimit_gen.go.
// Each limit has a short name=, which is what clients see in the
// RateLimit headers (the default is the full package path and method).
type Notes interface {
	// Search finds a user's notes containing query. Each user may search
	// five times every ten seconds.
	//
	//ratelimit:period=10 threshold=5 key=user name=notes.search
	Search(ctx context.Context, user, query string) ([]string, error)

	// Post stores a note. Two limits must both admit a post: two per second
	// for each user, and a hundred per minute for each user.
	//
	//ratelimit:period=1 threshold=2 key=user name=notes.post
	//ratelimit:period=1m threshold=100 key=user
	Post(ctx context.Context, user, text string) error

	// Export renders all notes of a user. It is expensive: its calls, all
	// users together (a line without key= counts every call of this
	// method), run once per second, and a request waits up to two seconds
	// for its turn rather than failing at once.
	//
	//ratelimit:period=1 threshold=1 wait=2s name=notes.export
	Export(ctx context.Context, user string) (string, error)

	// Count is not limited.
	Count(ctx context.Context, user string) (int, error)
}

// errEmpty is returned for a note without text.
var errEmpty = errors.New("empty note")

// memoryNotes keeps notes in a map.
type memoryNotes struct {
	mu    sync.Mutex
	notes map[string][]string
}

func newMemoryNotes() *memoryNotes {
	return &memoryNotes{notes: map[string][]string{}}
}

func (m *memoryNotes) Search(_ context.Context, user, query string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	found := []string{}
	for _, n := range m.notes[user] {
		if strings.Contains(n, query) {
			found = append(found, n)
		}
	}
	return found, nil
}

func (m *memoryNotes) Post(_ context.Context, user, text string) error {
	if text == "" {
		return errEmpty
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes[user] = append(m.notes[user], text)
	return nil
}

func (m *memoryNotes) Export(_ context.Context, user string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%d notes of %s:\n%s\n", len(m.notes[user]), user, strings.Join(m.notes[user], "\n")), nil
}

func (m *memoryNotes) Count(_ context.Context, user string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.notes[user]), nil
}
