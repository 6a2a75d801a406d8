package redislimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

func TestRedisOptionsSetWhatIsUnset(t *testing.T) {
	o := ClientOptions(&redis.Options{Addr: "x", ReadTimeout: time.Second, MaxRetries: 2})
	assert.Equal(t, &redis.Options{
		Addr: "x", ReadTimeout: time.Second, MaxRetries: 2, DialerRetries: 1,
		DialTimeout: DefaultTimeout, WriteTimeout: DefaultTimeout, PoolTimeout: DefaultTimeout,
	}, o, "what the caller set is kept")

	c := ClusterOptions(&redis.ClusterOptions{Addrs: []string{"x"}, MaxRedirects: -1})
	assert.Equal(t, &redis.ClusterOptions{
		Addrs: []string{"x"}, MaxRedirects: -1, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: DefaultTimeout, ReadTimeout: DefaultTimeout,
		WriteTimeout: DefaultTimeout, PoolTimeout: DefaultTimeout,
	}, c)
	assert.Equal(t, 1, ClusterOptions(&redis.ClusterOptions{}).MaxRedirects)

	f := FailoverOptions(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"x"}, DialTimeout: time.Second, DialerRetries: 3})
	assert.Equal(t, &redis.FailoverOptions{
		MasterName: "m", SentinelAddrs: []string{"x"}, DialTimeout: time.Second, DialerRetries: 3,
		MaxRetries: -1, ReadTimeout: DefaultTimeout, WriteTimeout: DefaultTimeout, PoolTimeout: DefaultTimeout,
	}, f)
}
