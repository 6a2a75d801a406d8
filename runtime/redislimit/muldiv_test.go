package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// TestLuaMulDivIsExact runs the script's muldiv, and the fast path its
// callers take for products below 2^53, on the real server against
// math/bits, over the whole domain the limits' validation allows.
func TestLuaMulDivIsExact(t *testing.T) {
	start := strings.Index(decideSource, "local function muldiv(a, b, d)")
	end := strings.Index(decideSource[start:], "\nend\n")
	require.True(t, start >= 0 && end > 0, "muldiv not found in lua/muldiv.lua.tmpl")
	script := redis.NewScript("local fmod = math.fmod\n" + decideSource[start:start+end+5] + `
local out = {}
for i = 1, #ARGV, 3 do
  local a, b, d = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local q, r
  if a * b < 9007199254740992 then r = fmod(a * b, d); q = (a * b - r) / d else q, r = muldiv(a, b, d) end
  out[#out + 1] = string.format("%d %d", q, r)
end
return out
`)
	rng := rand.New(rand.NewPCG(5, 5))
	random := func(bits int) int64 {
		n := rng.IntN(bits + 1)
		if n == 0 {
			return rng.Int64N(2)
		}
		return 1<<(n-1) + rng.Int64N(1<<(n-1)) // exactly n bits
	}
	edges := []int64{1, 2, 3, 1<<26 - 1, 1 << 26, 1<<26 + 1, 1<<49 - 1, 1<<50 - 1, 1<<52 - 1, 86_400_000_000, 1e9, 1e9 + 7}
	c := rdb(t)
	for batch := range 20 {
		var args []any
		var want []string
		for len(want) < 200 {
			a, b, d := random(52), random(52), random(50)
			if batch == 0 {
				a, b, d = edges[rng.IntN(len(edges))], edges[rng.IntN(len(edges))], edges[rng.IntN(len(edges)-3)]
			}
			if d == 0 || d >= 1<<50 {
				continue
			}
			q, r, ok := muldiv.Exact(a, b, d)
			if !ok || q >= 1<<52 {
				continue
			}
			args = append(args, a, b, d)
			want = append(want, fmt.Sprintf("%d %d", q, r))
		}
		got, err := script.Run(context.Background(), c, nil, args...).StringSlice()
		require.NoError(t, err)
		for i := range want {
			require.Equal(t, want[i], got[i], "%d×%d/%d", args[3*i], args[3*i+1], args[3*i+2])
		}
	}
}
