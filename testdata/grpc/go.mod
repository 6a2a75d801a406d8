module github.com/ratelimitgen/ratelimitgen/testdata/grpc

go 1.26.0

// The test builds against the generator and runtime of this checkout.
replace github.com/ratelimitgen/ratelimitgen => ../..

require (
	github.com/ratelimitgen/ratelimitgen v0.0.0
	github.com/stretchr/testify v1.12.1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

require (
	github.com/ratelimitgen/ratelimitgen/adapters/grpc v0.0.0
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e
)

tool github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen

replace github.com/ratelimitgen/ratelimitgen/adapters/grpc => ../../adapters/grpc
