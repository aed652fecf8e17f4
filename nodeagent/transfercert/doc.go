// Package transfercert gets a node agent its transfer certificate (nodeagent/blockcopy) from the
// operator: the key is made on the node and stays in the agent's memory, the request is a Kubernetes
// CertificateSigningRequest for the signer lvm.topolvm.io/transfer made with the agent's pod-bound
// token, and the operator (operator/transferca) signs it only for the node that token is bound to.
package transfercert
