// Package live reads the console's snapshots from a running cluster through informers, acting with the
// caller's credentials: a Source per rest.Config, and a Pool that keeps one Source per bearer token so a
// web request never sees more than its caller may read. A caller who may not list LVMNodes gets a
// *console.AccessError; a cluster without the LVMS CRDs yields a snapshot that says so.
package live
