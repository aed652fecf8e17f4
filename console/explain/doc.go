// Package explain holds the plain-language explanations the console shows: one per device exclusion reason
// code (api/lvm/v2alpha1 ReasonCode), one per failed condition type, and one per difference the console
// points out between desired and actual state. Each says what is going on, what to do next (what to change
// in the spec, what to run on the node), and carries a warning when the advice destroys data.
//
// Codes this package does not know (from a newer node agent) still get an explanation built from the
// agent's own sentence, so nothing is ever dropped from the views.
package explain
