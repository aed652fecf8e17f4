// Package diagnostics is the node agent's diagnostics endpoint: an HTTPS handler that serves the agent's
// own view of its node in one JSON document (View) — `lsblk --json` and `lvm fullreport` output exactly as
// the tools print them, lvmd.yaml with its validation, and the verdict of the filter pipeline for every
// candidate device of every desired volume group — so support bundles carry per-node state without
// `oc debug` shelling into the node.
//
// LVM is read with --readonly (no locks taken, metadata never written), discovery reuses
// nodeagent/blockdev, and verdicts come from nodeagent/filter over the desired state the agent uses:
// the view shows exactly what the agent decided, never a re-implementation.
//
// # Authentication
//
// Every request carries a bearer token, in the Authorization header (direct connections) or in
// X-LVMS-Diagnostics-Token (through the API server's pods/proxy, which removes Authorization after
// authenticating the caller). The agent checks the token with a TokenReview — first for the audience
// Audience (short-lived tokens minted for diagnostics, useless against the API server), then for the API
// server's own audiences — and asks a SubjectAccessReview whether that user may "get" the subresource
// "diagnostics" of the LVMNode named after the node (group lvm.topolvm.io, resource lvmnodes, in the
// agent's namespace). Cluster administrators may; others need an RBAC rule for lvmnodes/diagnostics.
// Decisions are cached for CacheTTL per token hash; tokens are never logged or stored.
//
// The endpoint serves TLS with a self-signed certificate made at start. The API server's pod proxy does not
// verify pod certificates, and neither do direct clients, so TLS protects against passive capture, not an
// active man in the middle on the pod network: that is why bundle clients send minted, audience-bound,
// short-lived tokens when they can (see Client).
package diagnostics
