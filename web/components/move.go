package components

import (
	"net/url"
	"slices"

	"github.com/a-h/templ"

	"github.com/lvms-dev/lvms/console"
)

// MoveURL is the move page of a claim.
func MoveURL(ns, claim string) templ.SafeURL {
	return templ.SafeURL("/claims/" + url.PathEscape(ns) + "/" + url.PathEscape(claim) + "/move")
}

// MoveActionURL is where a move form posts: request, confirm or abort.
func MoveActionURL(ns, claim, action string) templ.SafeURL {
	return MoveURL(ns, claim) + templ.SafeURL("/"+url.PathEscape(action))
}

// MoveView is the move page of one claim.
type MoveView struct {
	// Volume is the claim's volume, with its move status.
	Volume console.VolumeView
	// Enabled is true when the console may act for the caller (the forms are shown); otherwise the page shows
	// the lvms command lines to run.
	Enabled bool
	CSRF    string
	// Targets are the other nodes with the volume's device class.
	Targets []string
}

// MoveTargetsFor are the nodes of a device class other than the volume's own.
func MoveTargetsFor(targets map[string][]string, v console.VolumeView) []string {
	return slices.DeleteFunc(slices.Clone(targets[v.DeviceClass]), func(n string) bool { return n == v.Node })
}

// MoveCommand is the `lvms move` command line that requests the move of a claim to node.
func MoveCommand(v console.VolumeView, node string) string {
	return "lvms move pvc " + v.ClaimName + " -n " + v.ClaimNamespace + " --to-node " + node
}

// MovePhaseText is a move's phase in a word or two.
func MovePhaseText(m *console.MoveView) string {
	switch {
	case m.Error != "":
		return "unreadable status"
	case m.Phase != "":
		return m.Phase
	}
	return "requested"
}

// MoveConfirmCommand and MoveAbortCommand are the `lvms move` command lines that confirm or abort a claim's
// move.
func MoveConfirmCommand(v console.VolumeView, id string) string {
	return "lvms move confirm " + v.ClaimName + " -n " + v.ClaimNamespace + " --id " + id
}

func MoveAbortCommand(v console.VolumeView) string {
	return "lvms move abort " + v.ClaimName + " -n " + v.ClaimNamespace
}
