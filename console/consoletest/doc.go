// Package consoletest holds the prepared cluster states the console's tests and benchmarks read: a small
// state with every kind of difference the console explains (Prepared), a large synthetic one (Large), and
// Apply, which writes a state into a real API server the way the operator and the node agents would (spec
// first, then status).
package consoletest
