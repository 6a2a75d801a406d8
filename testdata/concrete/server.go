// Package concrete is a golden test of ratelimitgen: directives on methods
// of named non-interface types, and on such a type's declaration.
package concrete

import (
	"context"
	"fmt"
	"strings"
)

// Request is what Search is keyed by.
type Request struct {
	*Session
	Query string
}

// Session is embedded in Request by pointer.
type Session struct {
	User *User
}

// User is reached through two pointers.
type User struct {
	ID   uint32
	Name string
}

// Tenant is a key with a String method and a pointer receiver.
type Tenant struct{ Name string }

// String returns the tenant's name.
func (t *Tenant) String() string { return t.Name }

// Server has fields and methods named like what the decorator would add.
type Server struct {
	limiter string
	calls   int
}

// Search is limited per user; its key goes through an embedded pointer.
//
//ratelimit:period=10 threshold=2 key=req.User.ID
func (s *Server) Search(ctx context.Context, req *Request) ([]string, error) {
	s.calls++
	return []string{strings.ToUpper(req.Query)}, nil
}

// SearchTwice calls Search on its own receiver, which bypasses the limit.
func (s *Server) SearchTwice(ctx context.Context, req *Request) ([]string, error) {
	a, err := s.Search(ctx, req)
	if err != nil {
		return nil, err
	}
	b, err := s.Search(ctx, req)
	return append(a, b...), err
}

// Version has a value receiver and is keyed by a Stringer.
//
//ratelimit:period=1m threshold=1 key=tenant name=concrete.version
func (s Server) Version(tenant *Tenant) (string, error) {
	return fmt.Sprintf("v1 for %s", tenant), nil
}

// Calls is not limited and stays promoted.
func (s *Server) Calls() int { return s.calls }

// RateLimiter is named like the decorator's fallback field name.
func (s *Server) RateLimiter() string { return s.limiter }

// Counter is limited as a whole: every method without a directive of its
// own shares the type's directive, each under its own name.
//
//ratelimit:period=1 threshold=3
type Counter int

// Incr adds one.
func (c *Counter) Incr() (int, error) {
	*c++
	return int(*c), nil
}

// Get returns the count; it has its own, stricter limit.
//
//ratelimit:period=1 threshold=1
func (c Counter) Get() (int, error) { return int(c), nil }
