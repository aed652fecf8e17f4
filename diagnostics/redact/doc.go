// Package redact removes credentials from everything a support bundle holds: bearer tokens and JWTs,
// kubeconfig credentials (tokens, client keys, passwords, auth-provider secrets), private keys, passwords
// and secrets in environment variables and key=value text, and credentials in URLs. API objects are
// redacted structurally first (a Secret's data is dropped, sensitive environment values removed), then
// every file passes through the text rules. Every removal is counted per file and rule in a Report, which
// the bundle carries as redactions.json; the removed values themselves are never recorded.
package redact
