package redislimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxClockSkew is how far the server's clock may read from this process's
// before HealthCheck calls it insane: decisions use the server's clock
// whatever this process's reads, but a server a minute off is misconfigured.
const maxClockSkew = time.Minute

// HealthCheck reports whether the limiter can decide calls now: Redis
// (each master of a cluster) answers, takes the decide scripts, and reads
// a clock within a minute of this process's. An error wraps
// [ratelimit.ErrBackend]; the limiter works on either way, its error
// policy deciding the calls Redis cannot. Call it at start-up, to say so.
func (l *redisBackend) HealthCheck(ctx context.Context) error {
	var err error
	if l.cluster != nil {
		err = l.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := checkNode(ctx, node); err != nil {
				return fmt.Errorf("%s: %w", node.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = checkNode(ctx, l.client)
	}
	if err != nil {
		return backendError("health check", err)
	}
	return nil
}

// checkNode checks one node for HealthCheck.
func checkNode(ctx context.Context, c redis.Cmdable) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("unreachable: %w", err)
	}
	for _, s := range []*redis.Script{decideScript, batchScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("loading a script: %w", err)
		}
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("reading the clock: %w", err)
	}
	if skew := time.Since(now); skew > maxClockSkew || skew < -maxClockSkew {
		return errors.New("the server's clock reads " + now.UTC().Format(time.RFC3339) + ", " + skew.Round(time.Second).String() + " from this process's")
	}
	return nil
}
