// Package words holds the few helpers that put numbers into English the same way in every message of
// every front end: "1 node", "3 nodes".
package words

import "strconv"

// Count is n with the noun it counts, singular for one: "1 node", "3 nodes".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Noun(n, one, many)
}

// Noun is the noun for n things: one for 1, many otherwise.
func Noun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
