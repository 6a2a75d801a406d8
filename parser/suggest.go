package parser

import "strings"

// suggest returns the candidate that s most likely misspells, or "" when
// none is close. The comparison ignores case, and a candidate is close when
// its edit distance to s is at most a third of its length (at least 1), so
// "threshhold" suggests "threshold" but "rate" suggests nothing. Ties go to
// the earlier candidate.
func suggest(s string, candidates []string) string {
	s = strings.ToLower(s)
	best, bestDist := "", 0
	for _, c := range candidates {
		limit := max(1, len(c)/3)
		if abs(len(s)-len(c)) > limit {
			continue // also keeps long inputs cheap
		}
		d := editDistance(s, c)
		if d <= limit && (best == "" || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance returns the optimal string alignment distance between a and
// b: the number of single-byte insertions, deletions, substitutions and
// transpositions of adjacent bytes that turn a into b.
func editDistance(a, b string) int {
	// prev2, prev and cur are rows i-2, i-1 and i of the usual table.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
