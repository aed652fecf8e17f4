// Package admission keeps the ValidatingAdmissionPolicies LVMS relies on in place: lvms-node-agent-own-node
// (deploy/nodeagent/admissionpolicy.yaml), without which a node agent's RBAC reaches every node's objects (it
// could tell another node's agent to send it a tenant's volume, relabel nodes, take other nodes' shared volume
// group Leases), and lvms-move-requests (deploy/operator/admissionpolicy.yaml), without which anyone who may
// patch a claim may have the operator delete and create it again. An install that cannot carry them (an OLM
// bundle) gets them from the operator, which creates or restores each one that is missing or changed. When it
// may not, or the cluster cannot run them, the Guard says why: the operator then refuses volume moves and new
// shared volumes, says so in its LVMNodeSets' and LVMClusters' conditions, and sets the metric
// lvms_admission_policy_missing for the LVMSAdmissionPolicyMissing alert.
package admission

import (
	"bytes"
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// Policy is one ValidatingAdmissionPolicy and its binding (of the same name).
type Policy struct {
	Name string
	// Manifest is the file in the repository that holds both, for the messages.
	Manifest string
	// Guards says what the policy keeps from happening, for the messages.
	Guards  string
	Policy  *admv1.ValidatingAdmissionPolicy
	Binding *admv1.ValidatingAdmissionPolicyBinding
}

// Parse reads the manifest raw of one policy and its binding (file names it for the messages; guards says what
// the policy keeps from happening).
func Parse(file, guards string, raw []byte) (Policy, error) {
	p, err := parse(raw)
	if err != nil {
		return Policy{}, fmt.Errorf("%s: %w", file, err)
	}
	p.Manifest, p.Guards = file, guards
	return p, nil
}

// parse reads a manifest of one policy and its binding.
func parse(raw []byte) (Policy, error) {
	var p Policy
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return Policy{}, err
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			p.Policy = &admv1.ValidatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict(doc, p.Policy); err != nil {
				return Policy{}, err
			}
		case "ValidatingAdmissionPolicyBinding":
			p.Binding = &admv1.ValidatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict(doc, p.Binding); err != nil {
				return Policy{}, err
			}
		default:
			return Policy{}, fmt.Errorf("unexpected kind %q", meta.Kind)
		}
	}
	if p.Policy == nil || p.Binding == nil || p.Binding.Name != p.Policy.Name || p.Binding.Spec.PolicyName != p.Policy.Name {
		return Policy{}, fmt.Errorf("want a ValidatingAdmissionPolicy and its binding of the same name")
	}
	p.Name = p.Policy.Name
	return p, nil
}

// samePolicy reports whether got enforces what want says: the fields LVMS sets, compared after the API
// server's defaults (rule scope, match policy, selectors) are set aside.
func samePolicy(want, got *admv1.ValidatingAdmissionPolicy) bool {
	norm := func(s admv1.ValidatingAdmissionPolicySpec) admv1.ValidatingAdmissionPolicySpec {
		s = *s.DeepCopy()
		if s.MatchConstraints != nil {
			s.MatchConstraints.MatchPolicy, s.MatchConstraints.NamespaceSelector, s.MatchConstraints.ObjectSelector = nil, nil, nil
			for i := range s.MatchConstraints.ResourceRules {
				s.MatchConstraints.ResourceRules[i].Scope = nil
			}
		}
		return s
	}
	return equality.Semantic.DeepEqual(norm(want.Spec), norm(got.Spec))
}

// sameBinding reports whether got binds what want binds, as want says, on every object (a binding whose match
// resources narrow what it applies to is not the same).
func sameBinding(want, got *admv1.ValidatingAdmissionPolicyBinding) bool {
	m := got.Spec.MatchResources
	narrowed := m != nil && (len(m.ResourceRules) > 0 || len(m.ExcludeResourceRules) > 0 || !emptySelectors(m))
	return got.Spec.PolicyName == want.Spec.PolicyName && equality.Semantic.DeepEqual(got.Spec.ValidationActions, want.Spec.ValidationActions) &&
		got.Spec.ParamRef == nil && !narrowed
}

// emptySelectors reports whether a binding's match resources narrow nothing (the defaults the API server sets).
func emptySelectors(m *admv1.MatchResources) bool {
	return (m.NamespaceSelector == nil || len(m.NamespaceSelector.MatchLabels) == 0 && len(m.NamespaceSelector.MatchExpressions) == 0) &&
		(m.ObjectSelector == nil || len(m.ObjectSelector.MatchLabels) == 0 && len(m.ObjectSelector.MatchExpressions) == 0)
}
