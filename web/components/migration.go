package components

import (
	"net/url"
	"strings"

	"github.com/a-h/templ"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/wizard"
)

// MigrationURL is the wizard of an LVMCluster.
func MigrationURL(ns, cluster string) templ.SafeURL {
	return templ.SafeURL("/migration/" + url.PathEscape(ns) + "/" + url.PathEscape(cluster))
}

// MigrationActionURL is where a step's form posts.
func MigrationActionURL(ns, cluster, action string) templ.SafeURL {
	return MigrationURL(ns, cluster) + templ.SafeURL("/"+url.PathEscape(action))
}

// Join lists names with commas.
func Join(s []string) string { return strings.Join(s, ", ") }

// Bool is "true" or "false", for data attributes.
func Bool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// RunState is a run's state in a word: running, passed or failed (stopped runs say why in Err).
func RunState(r *wizard.Run) string {
	switch {
	case r.Running():
		return "running"
	case r.Passed():
		return "passed"
	}
	return "failed"
}

// RunClass colours a run's panel.
func RunClass(r *wizard.Run) string {
	switch RunState(r) {
	case "passed":
		return HealthClass(console.HealthOK)
	case "failed":
		return HealthClass(console.HealthError)
	}
	return HealthClass(console.HealthInfo)
}

// NodeMigrationState is a node's part in the hand-over: handed-over, in-progress (the running step is
// about it) or pending.
func NodeMigrationState(v MigrationView, n wizard.NodeState) string {
	if v.Run != nil && v.Run.Running() && (v.Run.Action == handover.ActionApply || v.Run.Action == handover.ActionRollback) {
		if latest, ok := v.Run.Latest(); ok && latest.Node == n.Name {
			return "in-progress"
		}
	}
	if n.HandedOver {
		return "handed-over"
	}
	return "pending"
}

// NodeMigrationHealth colours a node's hand-over state.
func NodeMigrationHealth(state string) console.Health {
	switch state {
	case "handed-over":
		return console.HealthOK
	case "in-progress":
		return console.HealthInfo
	}
	return console.HealthUnknown
}
