package live

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// An LVMS install that serves only one of its APIs (an older LVMS: v1alpha1 only) is still installed.
func TestServedSet_EitherAPIMeansInstalled(t *testing.T) {
	for _, tc := range []struct {
		served servedSet
		want   bool
	}{
		{servedSet{groupCore: true}, false},
		{servedSet{groupLVMv1: true}, true},
		{servedSet{groupLVMv2: true}, true},
		{servedSet{groupLVMv1: true, groupLVMv2: true}, true},
	} {
		if got := tc.served.lvms(); got != tc.want {
			t.Errorf("lvms() with %v = %v, want %v", tc.served, got, tc.want)
		}
	}
}

func TestNewPool_IdleTTL(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, DefaultIdleTTL}, {-time.Second, DefaultIdleTTL}, {5 * time.Minute, 5 * time.Minute},
	} {
		if got := NewPool(context.Background(), &rest.Config{}, Options{}, tc.in).idleTTL; got != tc.want {
			t.Errorf("NewPool with idle TTL %s keeps sources %s, want %s", tc.in, got, tc.want)
		}
	}
}
