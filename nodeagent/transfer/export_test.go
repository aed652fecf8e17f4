package transfer

import (
	"maps"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Runs lists the keys ("<logical volume>/<move ID>") of the moves c has started, sorted, for tests that
// call Reconcile themselves and must know whether it started one.
func (c *Controller) Runs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.runs))
}

// SourceOf is sourceOf, the watch's map from a target LogicalVolume to this node's source.
func (c *Controller) SourceOf(o client.Object) string { return c.sourceOf(o) }

// Options are the options c runs with, after NewController's defaults.
func (c *Controller) Options() ControllerOptions { return c.o }
