package console_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// A volume's claim shows its move as the claim's annotations say (move.ParseStatus), with what the status
// lets the user do next.
func TestVolumes_MoveStatus(t *testing.T) {
	tests := []struct {
		name                          string
		annotations                   map[string]string
		want                          *console.MoveView
		canRequest, canConfirm, abort bool
	}{
		{name: "no move"},
		{name: "requested, not yet answered", annotations: map[string]string{move.AnnotationToNode: "worker-b"},
			want: &console.MoveView{Requested: "worker-b", Health: console.HealthInfo}, canRequest: true, abort: true},
		{name: "copying", annotations: map[string]string{move.AnnotationToNode: "worker-b",
			move.AnnotationStatus: `{"id":"m1","phase":"Copying","targetNode":"worker-b","sourcePV":"pvc-0a1","targetPV":"lvms-move-m1","progress":"3/10"}`},
			want: &console.MoveView{ID: "m1", Phase: "Copying", TargetNode: "worker-b", SourcePV: "pvc-0a1", TargetPV: "lvms-move-m1", Progress: "3/10",
				Requested: "worker-b", Health: console.HealthInfo}, abort: true},
		{name: "awaiting confirmation", annotations: map[string]string{
			move.AnnotationStatus: `{"id":"m1","phase":"AwaitingConfirmation","targetNode":"worker-b","sourcePV":"pvc-0a1","targetPV":"lvms-move-m1"}`},
			want: &console.MoveView{ID: "m1", Phase: "AwaitingConfirmation", TargetNode: "worker-b", SourcePV: "pvc-0a1", TargetPV: "lvms-move-m1",
				Health: console.HealthWarning}, canConfirm: true},
		{name: "refused", annotations: map[string]string{move.AnnotationToNode: "worker-b",
			move.AnnotationStatus: `{"phase":"Refused","targetNode":"worker-b","message":"a pod uses the claim"}`},
			want: &console.MoveView{Phase: "Refused", TargetNode: "worker-b", Message: "a pod uses the claim", Requested: "worker-b",
				Health: console.HealthWarning}, canRequest: true, abort: true},
		{name: "unreadable", annotations: map[string]string{move.AnnotationStatus: `{`},
			want: &console.MoveView{Error: "claim lvms/data-db-0: annotation " + move.AnnotationStatus + " is not a move status: unexpected end of JSON input",
				Health: console.HealthError}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := consoletest.Prepared("lvms")
			for _, o := range objs {
				if c, ok := o.(*corev1.PersistentVolumeClaim); ok {
					c.Annotations = tc.annotations
				}
			}
			var got *console.VolumeView
			vols := console.Volumes(console.FromObjects(objs, consoletest.At))
			for i := range vols {
				if vols[i].Name == "pvc-0a1" {
					got = &vols[i]
				}
			}
			if got == nil || got.ClaimNamespace != "lvms" || got.ClaimName != "data-db-0" {
				t.Fatalf("volume pvc-0a1 = %+v, want claim lvms/data-db-0", got)
			}
			if tc.want == nil {
				if got.Move != nil {
					t.Errorf("move = %+v, want none", got.Move)
				}
				return
			}
			tc.want.CanRequest, tc.want.CanConfirm, tc.want.CanAbort = tc.canRequest, tc.canConfirm, tc.abort
			if got.Move == nil || *got.Move != *tc.want {
				t.Errorf("move = %+v\nwant   %+v", got.Move, tc.want)
			}
		})
	}
}

// Every node with a device class is a target for that class's volumes.
func TestMoveTargets(t *testing.T) {
	targets := console.MoveTargets(console.FromObjects(consoletest.Prepared("lvms"), consoletest.At))
	if got := targets["fast"]; len(got) < 2 || got[0] != consoletest.NodeA {
		t.Errorf("targets of fast = %v, want the set's nodes by name", got)
	}
}
