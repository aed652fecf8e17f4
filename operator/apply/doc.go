// Package apply writes objects with server-side apply: typed API objects of LVMS's own kinds are turned into
// apply configurations that carry only the fields the caller set, so several field managers (the operator's
// per-set managers, the node agent) can share one object without overwriting each other.
package apply
