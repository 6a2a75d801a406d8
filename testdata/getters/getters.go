// Package getters is a golden test of ratelimitgen: keys and costs
// written as Go code reads: protobuf getters, chained and nil-safe as
// protobuf getters are; len of a slice, a map, a string or an array; and
// functions of a package that only directives use, imported blank.
package getters

import (
	"context"

	_ "github.com/ratelimitgen/ratelimitgen/testdata/getters/tenancy" // called by the directives only
)

// Request is a message as protoc-gen-go writes it: its getters return the
// zero value for a nil message, and it has the ProtoMessage marker method.
type Request struct {
	Order     *Order
	Skus      []string
	Warehouse string
}

func (*Request) ProtoMessage() {}

// GetOrder returns x.Order, or nil.
func (x *Request) GetOrder() *Order {
	if x != nil {
		return x.Order
	}
	return nil
}

// GetSkus returns x.Skus, or nil.
func (x *Request) GetSkus() []string {
	if x != nil {
		return x.Skus
	}
	return nil
}

// GetWarehouse returns x.Warehouse, or "".
func (x *Request) GetWarehouse() string {
	if x != nil {
		return x.Warehouse
	}
	return ""
}

// Order is a message nested in Request.
type Order struct {
	Tenant   string
	Priority int32
}

func (*Order) ProtoMessage() {}

// GetTenant returns x.Tenant, or "".
func (x *Order) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

// GetPriority returns x.Priority, or 0.
func (x *Order) GetPriority() int32 {
	if x != nil {
		return x.Priority
	}
	return 0
}

// Plain is not a protobuf message: its getter is not known to be nil-safe,
// so a nil *Plain is checked for first.
type Plain struct{ Name string }

// GetName returns p.Name.
func (p *Plain) GetName() string { return p.Name }

// API is limited by values its requests carry.
type API interface {
	// A getter, as Go code calls it.
	//ratelimit:period=1m threshold=2 key=req.GetWarehouse()
	ByWarehouse(ctx context.Context, req *Request) error
	// Chained getters: a nil request or order has the tenant "".
	//ratelimit:period=1m threshold=2 key=req.GetOrder().GetTenant() emptykey=deny
	ByTenant(ctx context.Context, req *Request) error
	// A field of a nil request cannot be read: ratelimit.ErrNilKey.
	//ratelimit:period=1m threshold=10 cost=len(req.Skus)
	Reserve(ctx context.Context, req *Request) error
	// Through getters, a nil request costs 0 and has the key "0".
	//ratelimit:period=1m threshold=10 key=req.GetOrder().GetPriority() cost=len(req.GetSkus())
	ReserveByPriority(ctx context.Context, req *Request) error
	// The length of a map, a string and an array.
	//ratelimit:period=1m threshold=10 cost=len(labels)
	Label(ctx context.Context, labels map[string]string) error
	//ratelimit:period=1m threshold=10 cost=len(note)
	Note(ctx context.Context, note string) error
	//ratelimit:period=1m threshold=1 key=len(slots)
	Book(ctx context.Context, slots [3]string) error
	// A function of a package the file imports blank, and one called with
	// getters and len.
	//ratelimit:period=1m threshold=2 key=tenancy.Of(ctx)
	ByCaller(ctx context.Context) error
	//ratelimit:period=1m threshold=10 cost="tenancy.Weight(req.GetOrder().GetTenant(), len(req.GetSkus()))"
	Weighted(ctx context.Context, req *Request) error
	// Not a protobuf message: a nil *Plain is ratelimit.ErrNilKey.
	//ratelimit:period=1m threshold=2 key=p.GetName()
	ByPlain(ctx context.Context, p *Plain) error
}
