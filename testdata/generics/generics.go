// Package generics is a golden test of ratelimitgen: generic interfaces and
// a generic concrete type, with constraints that must be copied exactly.
package generics

import (
	"context"
	"fmt"
)

// Number is a constraint with a union.
type Number interface {
	~int | ~int64 | ~float64
}

// Repo is a generic repository.
type Repo[K comparable, V any] interface {
	// Get is limited per tenant.
	//ratelimit:period=1m threshold=3 key=tenant
	Get(ctx context.Context, tenant string, key K) (V, error)
	// Put is variadic in a type parameter.
	//ratelimit:period=1m threshold=2
	Put(ctx context.Context, key K, values ...V) (int, error)
	// Keys is not limited.
	Keys(ctx context.Context) ([]K, error)
}

// Summer has constraints with unions, tildes and methods.
type Summer[T Number, S interface {
	~[]T
	Len() int
}] interface {
	//ratelimit:period=1 threshold=5
	Sum(s S) (T, error)
}

// Labeler is keyed by a type parameter that implements fmt.Stringer.
type Labeler[L fmt.Stringer, M ~int | ~string] interface {
	//ratelimit:period=1 threshold=1 key=label
	Label(label L, m M) ([]M, error)
}

// Cache is a generic concrete type; its methods name the type parameters
// differently from its declaration.
type Cache[K comparable, V any] struct {
	m map[K]V
}

// NewCache returns an empty cache.
func NewCache[K comparable, V any]() *Cache[K, V] {
	return &Cache[K, V]{m: map[K]V{}}
}

// Load returns the value stored under k.
//
//ratelimit:period=1 threshold=2
func (c *Cache[Key, Val]) Load(k Key) (Val, bool, error) {
	v, ok := c.m[k]
	return v, ok, nil
}

// Store stores v under k; it is not limited.
func (c *Cache[K, V]) Store(k K, v V) {
	c.m[k] = v
}
