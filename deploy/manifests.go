package deploy

import _ "embed"

// AdmissionPolicy is the manifest of one ValidatingAdmissionPolicy LVMS needs, with its binding.
type AdmissionPolicy struct {
	// File is the manifest's path in the repository; Guards says what the policy keeps from happening.
	File, Guards string
	Manifest     []byte
}

// AdmissionPolicies are the policies as installed. The operator creates them when they are missing
// (operator/admission), so that an install that cannot carry them (an OLM bundle) is confined all the same.
var AdmissionPolicies = []AdmissionPolicy{
	{File: "deploy/nodeagent/admissionpolicy.yaml", Guards: "node agents are confined to their own node's objects", Manifest: nodeAgentPolicy},
	{File: "deploy/operator/admissionpolicy.yaml", Guards: "only those who may delete a claim may ask for its move", Manifest: moveRequestsPolicy},
}

var (
	//go:embed nodeagent/admissionpolicy.yaml
	nodeAgentPolicy []byte
	//go:embed operator/admissionpolicy.yaml
	moveRequestsPolicy []byte
)
