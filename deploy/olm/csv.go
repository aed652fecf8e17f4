// Package olm generates the OLM bundle of LVMS (bundle/ at the top of the repository) from deploy/: a
// ClusterServiceVersion whose install strategy is the OpenShift overlay's operator Deployment and RBAC, the
// CRDs it owns, the objects OLM can ship beside it, and the bundle annotations. `make generate` writes it;
// `make bundle` also builds the bundle image.
//
// The operator-framework API module is not reachable from this project's build, so the CSV's shape is
// written here: only the fields LVMS fills, with their OLM names.
package olm

import (
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CSV is an operators.coreos.com/v1alpha1 ClusterServiceVersion.
type CSV struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        CSVMeta `json:"metadata"`
	Spec            CSVSpec `json:"spec"`
}

// CSVMeta is the CSV's metadata (no creation timestamp: the file is reproducible).
type CSVMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// CSVSpec is the part of spec LVMS fills.
type CSVSpec struct {
	DisplayName               string                    `json:"displayName"`
	Description               string                    `json:"description"`
	Version                   string                    `json:"version"`
	MinKubeVersion            string                    `json:"minKubeVersion"`
	Maturity                  string                    `json:"maturity"`
	Provider                  Provider                  `json:"provider"`
	Maintainers               []Maintainer              `json:"maintainers"`
	Links                     []Link                    `json:"links"`
	Keywords                  []string                  `json:"keywords"`
	InstallModes              []InstallMode             `json:"installModes"`
	CustomResourceDefinitions CustomResourceDefinitions `json:"customresourcedefinitions"`
	Install                   Install                   `json:"install"`
	RelatedImages             []RelatedImage            `json:"relatedImages"`
}

type Provider struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

type Maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type Link struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

type InstallMode struct {
	Type      string `json:"type"`
	Supported bool   `json:"supported"`
}

type CustomResourceDefinitions struct {
	Owned []OwnedCRD `json:"owned"`
}

// OwnedCRD describes one CRD the operator owns (one entry per served version's kind).
type OwnedCRD struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
}

type Install struct {
	Strategy string       `json:"strategy"`
	Spec     StrategySpec `json:"spec"`
}

// StrategySpec is the deployment install strategy: Deployments and the rules OLM grants each ServiceAccount
// (cluster-wide, and in the install namespace).
type StrategySpec struct {
	Deployments        []StrategyDeployment `json:"deployments"`
	ClusterPermissions []Permission         `json:"clusterPermissions,omitempty"`
	Permissions        []Permission         `json:"permissions,omitempty"`
}

type StrategyDeployment struct {
	Name  string                `json:"name"`
	Label map[string]string     `json:"label,omitempty"`
	Spec  appsv1.DeploymentSpec `json:"spec"`
}

type Permission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

type RelatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}
