package move

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// okInput is a move the preflight lets start: a bound claim of LVMS, its volume on node a, node b with
// exactly the free space the volume needs, inside the class's allowedTopologies.
func okInput() preflightInput {
	names := driver.New(false)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		ClaimRef:               &corev1.ObjectReference{Namespace: "app", Name: "data", UID: "claim-uid"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: "vol-1"}}}}
	lv := &topolvmv1.LogicalVolume{Spec: topolvmv1.LogicalVolumeSpec{Name: "pv-1", NodeName: "a", DeviceClass: "ssd", Size: resource.MustParse("1Gi")}}
	target := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"zone": "z1", "rack": "r1"},
		Annotations: map[string]string{names.CapacityAnnotation("ssd"): "1073741824"}}}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms-ssd"}, AllowedTopologies: []corev1.TopologySelectorTerm{{
		MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"z1"}}, {Key: "rack", Values: []string{"r1", "r2"}}}}}}
	return preflightInput{Names: names, Claim: claim, PV: pv, Source: lv, TargetName: "b", Target: target, Class: class}
}

// Each field the preflight reads, changed alone from a move it allows: the refusal names what is wrong,
// and what is harmless (a soft taint, exactly enough space, a class without topologies) is allowed.
func TestPreflight_EachFieldAlone(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(in *preflightInput)
		refuse string // "": allowed
	}{
		{"as is: exactly the space needed", func(*preflightInput) {}, ""},
		{"claim pending although it names a volume", func(in *preflightInput) { in.Claim.Status.Phase = corev1.ClaimPending }, "is not Bound"},
		{"claim bound without a volume name", func(in *preflightInput) { in.Claim.Spec.VolumeName = "" }, "is not Bound"},
		{"another driver's volume", func(in *preflightInput) { in.PV.Spec.CSI.Driver = "ebs.csi.aws.com" }, "is not an LVMS volume (driver ebs.csi.aws.com)"},
		{"not a CSI volume", func(in *preflightInput) { in.PV.Spec.CSI = nil }, "not a CSI volume"},
		{"claimRef with another UID", func(in *preflightInput) { in.PV.Spec.ClaimRef.UID = "other" }, "is not bound to claim app/data"},
		{"claimRef in another namespace", func(in *preflightInput) { in.PV.Spec.ClaimRef.Namespace = "other" }, "is not bound to claim app/data"},
		{"claimRef naming another claim", func(in *preflightInput) { in.PV.Spec.ClaimRef.Name = "other" }, "is not bound to claim app/data"},
		{"no claimRef", func(in *preflightInput) { in.PV.Spec.ClaimRef = nil }, "is not bound to claim app/data"},
		{"negative capacity", func(in *preflightInput) { in.Target.Annotations[in.Names.CapacityAnnotation("ssd")] = "-1" }, `reports capacity "-1" for device class "ssd", not a number of bytes`},
		{"capacity not a number", func(in *preflightInput) { in.Target.Annotations[in.Names.CapacityAnnotation("ssd")] = "lots" }, `reports capacity "lots"`},
		{"no free space", func(in *preflightInput) { in.Target.Annotations[in.Names.CapacityAnnotation("ssd")] = "0" }, `has 0 free in device class "ssd", the volume needs 1Gi`},
		{"one byte short", func(in *preflightInput) { in.Target.Annotations[in.Names.CapacityAnnotation("ssd")] = "1073741823" }, "the volume needs 1Gi"},
		{"soft taint", func(in *preflightInput) {
			in.Target.Spec.Taints = []corev1.Taint{{Key: "busy", Effect: corev1.TaintEffectPreferNoSchedule}}
		}, ""},
		{"NoExecute taint", func(in *preflightInput) {
			in.Target.Spec.Taints = []corev1.Taint{{Key: "gone", Effect: corev1.TaintEffectNoExecute}}
		}, "has the taint gone:NoExecute"},
		{"class without allowedTopologies", func(in *preflightInput) { in.Class.AllowedTopologies = nil }, ""},
		{"no class", func(in *preflightInput) { in.Class = nil }, ""},
		{"a topology label with another value", func(in *preflightInput) { in.Target.Labels["rack"] = "r9" }, "outside the allowedTopologies of StorageClass lvms-ssd"},
		{"a topology label missing", func(in *preflightInput) { delete(in.Target.Labels, "zone") }, "outside the allowedTopologies"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := okInput()
			tc.change(&in)
			err := preflight(in)
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
				t.Errorf("preflight = %v, want a refusal saying %q", err, tc.refuse)
			}
		})
	}
}

// A pod's controller is named, an owner that is not its controller is not.
func TestUsersMessage_NamesTheControllerOnly(t *testing.T) {
	t.Parallel()
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", OwnerReferences: []metav1.OwnerReference{
		{Kind: "ConfigMap", Name: "not-a-controller", Controller: ptr.To(false)},
		{Kind: "Lease", Name: "no-controller-field"},
		{Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}}}
	msg := usersMessage("app/data", []corev1.Pod{pod})
	if !strings.Contains(msg, "in use by Pod db-0 (of StatefulSet db):") || strings.Contains(msg, "not-a-controller") || strings.Contains(msg, "no-controller-field") {
		t.Errorf("usersMessage = %q", msg)
	}
}
