package ratelimit

// RetryAfterOf is retryAfterOf, for the tests of package ratelimit_test.
var RetryAfterOf = retryAfterOf
