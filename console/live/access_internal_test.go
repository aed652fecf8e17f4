package live

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/console"
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

// An older install serves topolvm.io/v1 without LogicalVolumeGroupSnapshots: the console reads everything
// else and shows no group snapshots, neither an error nor a hidden kind. Forbidden group snapshots are
// hidden like any other kind.
func TestCheckAccess_GroupSnapshotsNotServed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantHidden bool
	}{
		{"no kind match", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "topolvm.io", Kind: "LogicalVolumeGroupSnapshot"}, SearchedVersions: []string{"v1"}}, false},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Group: "topolvm.io", Resource: "logicalvolumegroupsnapshots"}, ""), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "topolvm.io", Resource: "logicalvolumegroupsnapshots"}, "", errors.New("no")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if u, ok := list.(*unstructured.UnstructuredList); ok && u.GetKind() == "LogicalVolumeGroupSnapshotList" {
						return tc.err
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			served := servedSet{groupCore: true, groupLVMv2: true, groupLVMv1: true, groupTopoLVM: true, groupStorage: true}
			kinds, hidden, err := checkAccess(context.Background(), c, served, "alice")
			if err != nil {
				t.Fatalf("checkAccess: %v", err)
			}
			if slices.ContainsFunc(kinds, func(k kind) bool { return k.resource == "logicalvolumegroupsnapshots.topolvm.io" }) {
				t.Error("group snapshots are read although the server cannot list them")
			}
			if !slices.ContainsFunc(kinds, func(k kind) bool { return k.resource == "logicalvolumes.topolvm.io" }) {
				t.Error("LogicalVolumes are not read")
			}
			isHidden := slices.ContainsFunc(hidden, func(h console.HiddenKind) bool { return h.Resource == "logicalvolumegroupsnapshots.topolvm.io" })
			if isHidden != tc.wantHidden {
				t.Errorf("group snapshots hidden = %v, want %v (hidden %+v)", isHidden, tc.wantHidden, hidden)
			}
		})
	}
}
