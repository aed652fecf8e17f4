package console

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned (wrapped in a *NotFoundError) when a view names a node or device the snapshot
// does not hold.
var ErrNotFound = errors.New("not found")

// NotFoundError says which object was not found.
type NotFoundError struct {
	// Kind is "node", "device" or "device class".
	Kind string
	// Name of the missing object.
	Name string
	// Within names the containing object, if any (the node of a device).
	Within string
}

func (e *NotFoundError) Error() string {
	if e.Within != "" {
		return fmt.Sprintf("%s %q not found on %s", e.Kind, e.Name, e.Within)
	}
	return fmt.Sprintf("%s %q not found", e.Kind, e.Name)
}

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// AccessError is returned by sources when the caller may not read what the console needs (for example
// LVMNodes). It carries a message a person can act on.
type AccessError struct {
	// User the request acted as, when known.
	User string
	// Resource the caller may not list, for example "lvmnodes.lvm.topolvm.io".
	Resource string
	// Unauthorized is true when the credentials were rejected (HTTP 401), false when the caller is known but
	// lacks permission (HTTP 403).
	Unauthorized bool
	// Err is the API server's error.
	Err error
}

func (e *AccessError) Error() string {
	if e.Unauthorized {
		return "the API server rejected the credentials: log in again or pass a valid bearer token"
	}
	who := "you"
	if e.User != "" {
		who = fmt.Sprintf("user %q", e.User)
	}
	return fmt.Sprintf("forbidden: %s may not list %s in any namespace; ask a cluster administrator to bind the "+
		"lvms-console-viewer ClusterRole (read access to the LVMS, storage and core objects the console shows)",
		who, e.Resource)
}

func (e *AccessError) Unwrap() error { return e.Err }
