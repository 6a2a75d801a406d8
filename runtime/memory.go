package ratelimit

// DefaultMaxKeys is how many keys a memory limiter keeps unless
// [WithMaxKeys] says otherwise.
const DefaultMaxKeys = 1 << 20
