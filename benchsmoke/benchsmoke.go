// Package benchsmoke decides the size of a benchmark's workload: its full size for make bench, or its
// smallest under make test's smoke (LVMS_BENCH_SMOKE=1 with -bench . -benchtime 1x), which runs every
// benchmark once to prove it still completes. A smoke's figures mean nothing and are never recorded: make
// bench (bench/run) does not run it.
//
// A benchmark picks each of its sizes through Size or Sizes and each idle wait before a measurement through
// Idle, so that the smoke runs the same code on the least work that still exercises it.
//
// It imports only the standard library, so the benchmarks of every layer can use it.
package benchsmoke

import (
	"os"
	"slices"
	"time"
)

// Env is the variable that turns the smoke on: LVMS_BENCH_SMOKE=1 (make test sets it).
const Env = "LVMS_BENCH_SMOKE"

// On tells whether benchmarks run as make test's smoke.
func On() bool { return os.Getenv(Env) == "1" }

// Size is full, or smoke under the smoke: for example 5,000 claims, or 20.
func Size(full, smoke int) int {
	if On() {
		return smoke
	}
	return full
}

// Sizes are the sizes a benchmark runs as sub-benchmarks, or only the smallest of them under the smoke.
func Sizes(sizes ...int) []int {
	if On() && len(sizes) > 1 {
		return []int{slices.Min(sizes)}
	}
	return sizes
}

// Idle is how long a benchmark lets what it measures sit idle before measuring (caches settled, a
// page-out done), or nothing under the smoke, whose figures are not kept.
func Idle(d time.Duration) time.Duration {
	if On() {
		return 0
	}
	return d
}
