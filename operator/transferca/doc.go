// Package transferca is the operator's certificate authority for volume moves between node agents
// (nodeagent/blockcopy): it creates the CA, reads it back, and signs a node agent's certificate request
// only for the node that the request's author is bound to.
//
// Trust model: the node agent makes its private key on its node (it never leaves the node) and asks for a
// certificate with a Kubernetes CertificateSigningRequest for the signer SignerName. The API server
// records who made the request: the agent's ServiceAccount and, from its pod-bound token, the node its
// pod runs on (authentication.kubernetes.io/node-name). Sign trusts only that record, never the request's
// text: the certificate names the node the token is bound to, the request must ask for exactly that node,
// and a request from anyone but the agent's ServiceAccount is refused. A certificate is short-lived
// (CertTTL), a client and server certificate at once (ECDSA P-256), and names one node as a URI SAN
// (blockcopy.NodeURI), which each side of a transfer checks against the node it expects.
package transferca
