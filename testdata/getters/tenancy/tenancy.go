// Package tenancy is a helper of the getters golden test: only directives
// call it, so the file that declares them imports it blank.
package tenancy

import "context"

type tenantKey struct{}

// With returns ctx carrying the caller's tenant.
func With(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Of returns the tenant of ctx, or "".
func Of(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Weight returns what reserving n units costs a tenant: double for
// "bulk".
func Weight(tenant string, n int) int64 {
	if tenant == "bulk" {
		return 2 * int64(n)
	}
	return int64(n)
}
