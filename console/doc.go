// Package console is the read model behind the web console and the terminal UI: it turns a snapshot of
// the cluster's LVMS objects (desired state in spec, actual state in status) into views that show what
// differs between the two, with a plain explanation and a next step for every exclusion reason and failed
// condition, and capacity figures per node and device class.
//
// The console never computes storage state itself: it reads what the operator and the node agents wrote.
// A Snapshot comes from a Source: a live cluster (package console/live) or a static set of objects
// (FromObjects, used by tests and by support bundles). Nothing here renders HTML or terminal output.
package console
