module github.com/ratelimitgen/ratelimitgen/examples/prometheus

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0
	github.com/ratelimitgen/ratelimitgen v0.0.0
	github.com/ratelimitgen/ratelimitgen/adapters/prometheus v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The example builds against the runtime and the adapter of this checkout.
replace (
	github.com/ratelimitgen/ratelimitgen => ../..
	github.com/ratelimitgen/ratelimitgen/adapters/prometheus => ../../adapters/prometheus
)
