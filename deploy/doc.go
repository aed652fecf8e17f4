// Package deploy holds the kustomize bases and overlays that install LVMS (operator/, overlays/kubernetes,
// overlays/openshift, overlays/microshift; the CRDs in crds/ are applied on their own) and the test that
// renders every overlay and has a real API server accept the result.
package deploy
