// Package diff says what changed between two support bundles of the same cluster: API objects added,
// removed or changed (field by field, without the bookkeeping fields that change on every write), node
// states, device states as the node statuses report them, the node agents' own device verdicts, and the
// analyzers' findings that appeared or went away.
package diff
