// Package api gathers the API groups LVMS serves and uses into one scheme.
package api

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	lvmv1alpha1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2alpha1 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// AddToScheme adds the Kubernetes built-in types and all LVMS API groups to s.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		lvmv1alpha1.AddToScheme,
		lvmv2alpha1.AddToScheme,
		topolvmv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a scheme with every type LVMS uses.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}
