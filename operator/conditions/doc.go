// Package conditions sets KEP-1623 conditions the way every LVMS status setter needs them: observedGeneration
// filled in, lastTransitionTime moved only when the status flips, and the list kept in a fixed order so the
// status reads the same on every reconcile.
package conditions
