// Package context is a helper of the collisions golden test: a package
// whose name collides with the standard library's context.
package context

// Context is not a context.Context.
type Context struct {
	Tenant string
}
