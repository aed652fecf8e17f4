// Package bundle is the support bundle format: where each file lives (an `oc adm inspect`-style layout, so
// omc and must-gather tooling read it), the must-gather `version` file and the manifest of what was
// collected, a writer that bounds the size (tar.gz for `lvms bundle`, a directory for the must-gather
// `gather` entrypoint), a reader that refuses anything that could escape its directory (absolute paths,
// `..`, links, devices) or exhaust memory (oversized entries), and Bundle: the decoded content — API
// objects, the node agents' views, the redaction report — with a read-only console.Source over it, so the
// web console and the TUI open a bundle as they open a cluster.
package bundle
