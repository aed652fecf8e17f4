// Package tui is the terminal admin console (`lvms tui`): the same views as the web console over the same
// read model — nodes, a node's volume groups and devices with what differs, a device's reasons with their
// explanations and every filter's verdict, device classes, volumes and events — as a list pane and a detail
// pane, with k9s-style keys (? help, / filter, : jump, j/k, enter/esc, r, q). A live source refreshes the
// screen on every informer event; it redraws for any terminal size. On a live cluster, M opens the guided
// migration of an LVMCluster to LVMNodeSets (migrate/wizard): plan, preflight, apply with live progress
// per node, verify and roll back, each step saying why it is closed and which permissions the user lacks.
package tui
