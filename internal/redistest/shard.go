package redistest

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// ShardEnv names the environment variable that runs one shard of a
// package's tests: with "k/n" (0 <= k < n), [Main] runs only the
// package's top-level tests of shard k of n, so that n processes, each
// with a server of its own, run them all at once (scripts/shard runs a
// test binary so). The shards are made from the test binary's own list
// of its tests, so every test falls in exactly one of them, a test added
// later included.
const ShardEnv = "REDISTEST_SHARD"

// selectShard, when [ShardEnv] is set, has the tests outside its shard
// skipped (by -test.skip). Each of alone, names of the package's tests
// that take longest, gets a shard of its own while there are shards
// enough (alone[i] is shard i), and the other tests share the shards
// left by a hash of their names; with fewer shards than alone has, all
// the tests share them. It parses the flags.
func selectShard(alone []string) error {
	spec := os.Getenv(ShardEnv)
	if spec == "" {
		return nil
	}
	var k, n int
	if _, err := fmt.Sscanf(spec, "%d/%d", &k, &n); err != nil || n < 1 || k < 0 || k >= n {
		return fmt.Errorf("%s=%q: want k/n, with 0 <= k < n", ShardEnv, spec)
	}
	flag.Parse()
	if flag.Lookup("test.skip").Value.String() != "" {
		return fmt.Errorf("%s and -skip cannot be used together", ShardEnv)
	}
	names, err := listTests()
	if err != nil {
		return err
	}
	for _, name := range alone {
		if !slices.Contains(names, name) {
			return fmt.Errorf("%s: %s, to run in a shard of its own, is not a test of the package", ShardEnv, name)
		}
	}
	var others []string
	for _, name := range names {
		if shardOf(name, alone, n) != k {
			others = append(others, regexp.QuoteMeta(name))
		}
	}
	if len(others) == 0 {
		return nil
	}
	return flag.Set("test.skip", "^("+strings.Join(others, "|")+")$")
}

// shardOf returns the shard, of n, of the test named name (see
// selectShard).
func shardOf(name string, alone []string, n int) int {
	i := slices.Index(alone, name)
	if len(alone) >= n {
		if i >= 0 {
			return i % n
		}
		return hashOf(name) % n
	}
	if i >= 0 {
		return i
	}
	return len(alone) + hashOf(name)%(n-len(alone))
}

func hashOf(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() & 0x7fffffff)
}

// listTests returns the names of the test binary's tests, benchmarks, fuzz
// tests and examples, as -test.list lists them.
func listTests() ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.list=.")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, ShardEnv+"=") })
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: listing the tests: %w\n%s", ShardEnv, err, out)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: the test binary lists no tests", ShardEnv)
	}
	return names, nil
}

// listing reports whether the test binary only lists its tests
// (-test.list), which needs no server. Call it after flag.Parse.
func listing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}
