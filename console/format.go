package console

import "strconv"

// Count is n with the noun it counts, singular for one: "1 node", "3 nodes".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
