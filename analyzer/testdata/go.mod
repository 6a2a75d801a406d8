module example.com/vet

go 1.26.0

replace github.com/ratelimitgen/ratelimitgen => ../..

require github.com/ratelimitgen/ratelimitgen v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
