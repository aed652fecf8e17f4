package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// testTenantIsolation: a tenant in another namespace points its own objects at a victim's volume — a claim
// whose spec.volumeName names the victim's PV, a VolumeSnapshot whose status names the victim's content —
// and tries to clone, restore or grow it. Each attempt is a warning on the tenant's claim and nothing on disk.
func (s *suite) testTenantIsolation(t *testing.T) {
	testenv.Require(t)
	s.t = t
	ctx := context.Background()
	sc := s.storageClass("thin", true)
	victim := s.pvc("victim", sc, "1Gi")
	s.selectNode(victim, s.nodeA)
	victimPV := s.provisioned(victim)
	s.bind(victim, victimPV)
	content := s.snapshotOf(victim, victimPV, "victim-snap")
	lvs := s.d.Node(s.nodeA).LVM

	victimNS := s.ns
	s.ns = env.Namespace(t) // the attacker's namespace from here on
	defer func() { s.ns = victimNS }()

	// A claim naming the victim's PV; the attacker may even get its status to say Bound.
	grab := s.pvc("grab", sc, "5Gi", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = victimPV.Name })
	t.Run("resize through a claim the PV is not bound to", func(t *testing.T) {
		s.t = t
		t.Logf("event: %s", s.waitWarning(grab, "Not growing", victimPV.Name, "not bound to this claim"))
		if lv, _ := lvs.LV("thin", victimPV.Spec.CSI.VolumeHandle); int64(lv.Size) != csidriver.GiB {
			t.Errorf("the victim's LV is %d bytes, want it left at 1GiB", lv.Size)
		}
	})
	t.Run("clone of an unbound claim naming another namespace's PV", func(t *testing.T) {
		s.t = t
		steal := s.pvc("steal", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: grab.Name}
		})
		s.selectNode(steal, s.nodeA)
		t.Logf("event: %s", s.waitWarning(steal, `"grab"`, "not bound yet"))
		s.noVolumeFor(steal)
	})
	t.Run("clone of a claim whose status says Bound but the PV's claimRef is the victim's", func(t *testing.T) {
		s.t = t
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(grab), grab); err != nil {
			t.Fatal(err)
		}
		grab.Status.Phase = corev1.ClaimBound
		if err := s.c.Status().Update(ctx, grab); err != nil {
			t.Fatal(err)
		}
		steal := s.pvc("steal-bound", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: grab.Name}
		})
		s.selectNode(steal, s.nodeA)
		t.Logf("event: %s", s.waitWarning(steal, "is not the claim of PersistentVolume", victimPV.Name))
		s.noVolumeFor(steal)
	})
	t.Run("clone through a dataSourceRef naming the victim's namespace", func(t *testing.T) {
		s.t = t
		// The attacker also holds a claim of the victim's name: a provisioner that ignored the namespace
		// would clone that one instead of saying no.
		own := s.pvc(victim.Name, sc, "1Gi")
		s.selectNode(own, s.nodeA)
		s.bind(own, s.provisioned(own))
		steal := s.pvc("steal-ref", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: victim.Name, Namespace: &victimNS}
		})
		if steal.Spec.DataSourceRef == nil || steal.Spec.DataSourceRef.Namespace == nil {
			t.Fatal("the API server dropped dataSourceRef.namespace: the test control plane needs CrossNamespaceVolumeDataSource=true")
		}
		s.selectNode(steal, s.nodeA)
		t.Logf("event: %s", s.waitWarning(steal, fmt.Sprintf("in namespace %q", victimNS), "only within the claim's namespace"))
		s.noVolumeFor(steal)
	})
	t.Run("clone of a claim bound to another driver's PV carrying the victim's handle", func(t *testing.T) {
		s.t = t
		foreign := s.pvc("foreign", sc, "1Gi")
		pv := s.pvOn("foreign-"+s.ns, victimPV.Spec.CSI.VolumeHandle, sc, s.nodeA,
			&corev1.ObjectReference{Namespace: s.ns, Name: foreign.Name, UID: foreign.UID}, corev1.PersistentVolumeReclaimRetain,
			func(pv *corev1.PersistentVolume) { pv.Spec.CSI.Driver = "foreign.example.com" })
		s.bind(foreign, pv)
		steal := s.pvc("steal-foreign", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: foreign.Name}
		})
		s.selectNode(steal, s.nodeA)
		t.Logf("event: %s", s.waitWarning(steal, `"foreign"`, "is not a "+s.names.Driver()+" volume"))
		s.noVolumeFor(steal)
	})
	t.Run("restore from a VolumeSnapshot naming the victim's content", func(t *testing.T) {
		s.t = t
		peek := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "peek"},
			Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content.Name}}}
		if err := s.c.Create(ctx, peek); err != nil {
			t.Fatal(err)
		}
		ready := true
		peek.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content.Name, ReadyToUse: &ready}
		if err := s.c.Status().Update(ctx, peek); err != nil {
			t.Fatal(err)
		}
		group := snapshotv1.GroupName
		restore := s.pvc("restore-peek", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: peek.Name}
		})
		s.selectNode(restore, s.nodeA)
		t.Logf("event: %s", s.waitWarning(restore, "is not the snapshot of VolumeSnapshotContent", content.Name))
		s.noVolumeFor(restore)
	})

	t.Run("restore from a content that is not ready", func(t *testing.T) {
		s.t = t
		s.ns = victimNS
		vs := &snapshotv1.VolumeSnapshot{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: "victim-snap"}, vs); err != nil {
			t.Fatal(err)
		}
		notReady := false
		base := content.DeepCopy()
		content.Status.ReadyToUse = &notReady
		if err := s.c.Status().Patch(ctx, content, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		group := snapshotv1.GroupName
		restore := s.pvc("restore-unready", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: vs.Name}
		})
		s.selectNode(restore, s.nodeA)
		t.Logf("event: %s", s.waitWarning(restore, "not ready to use"))
		s.noVolumeFor(restore)
	})
	t.Run("resize after the StorageClass stopped allowing expansion", func(t *testing.T) {
		// The API server refuses a bigger request when the class does not allow expansion; what reaches the
		// provisioner is a growth asked for while it did, still being retried when an admin turns it off.
		s.t = t
		s.ns = victimNS
		name := s.storageClass("thick", false)
		pvc := s.pvc("fixed", name, "1Gi")
		pv := s.provisioned(pvc)
		s.bind(pvc, pv)
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			t.Fatal(err)
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("100Gi")
		if err := s.c.Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		s.waitWarning(pvc, "Growing the volume to 100Gi failed")
		class := &storagev1.StorageClass{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
			t.Fatal(err)
		}
		no := false
		class.AllowVolumeExpansion = &no
		if err := s.c.Update(ctx, class); err != nil {
			t.Fatal(err)
		}
		t.Logf("event: %s", s.waitWarning(pvc, "does not allow volume expansion", "allowVolumeExpansion: true"))
	})
}

// snapshotOf plays the snapshot-controller: a VolumeSnapshot of pvc, its dynamic content, and waits until the
// snapshot is taken and marks the VolumeSnapshot ready.
func (s *suite) snapshotOf(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string) *snapshotv1.VolumeSnapshotContent {
	s.t.Helper()
	ctx := context.Background()
	vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc.Name}}}
	if err := s.c.Create(ctx, vs); err != nil {
		s.t.Fatal(err)
	}
	content := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-" + name},
		Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: s.names.Driver(), DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &pv.Spec.CSI.VolumeHandle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.ns, Name: vs.Name, UID: vs.UID}}}
	if err := s.c.Create(ctx, content); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.c.Delete(context.Background(), content) })
	s.eventually("snapshot taken", func() error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(content), content); err != nil {
			return err
		}
		if content.Status == nil || content.Status.SnapshotHandle == nil || !*content.Status.ReadyToUse {
			return fmt.Errorf("content status %+v", content.Status)
		}
		return nil
	})
	ready := true
	vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content.Name, ReadyToUse: &ready}
	if err := s.c.Status().Update(ctx, vs); err != nil {
		s.t.Fatal(err)
	}
	return content
}

// noVolumeFor checks that nothing was provisioned for a refused claim.
func (s *suite) noVolumeFor(pvc *corev1.PersistentVolumeClaim) {
	s.t.Helper()
	if err := s.c.Get(context.Background(), types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		s.t.Errorf("a PV was created for the refused claim %s: %v", pvc.Name, err)
	}
	lvs := &topolvmv1.LogicalVolumeList{}
	if err := s.c.List(context.Background(), lvs); err != nil {
		s.t.Fatal(err)
	}
	for _, lv := range lvs.Items {
		if lv.Spec.Name == "pvc-"+string(pvc.UID) {
			s.t.Errorf("LogicalVolume %s was created for the refused claim %s", lv.Name, pvc.Name)
		}
	}
}
