package main

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot/reconciler"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// groupSnapshotStateDir holds the state files of group snapshots in progress: under /run/lvms, which the
// node agent's pod shares with the host, so that a restarted agent resumes what it left suspended.
const groupSnapshotStateDir = "/run/lvms/groupsnapshots"

// groupSnapshotsServed reports whether the API server serves LogicalVolumeGroupSnapshot (its CRD is
// installed); without it, group snapshots are off and everything else works as before.
func groupSnapshotsServed(mgr manager.Manager, names driver.Names) bool {
	if names.Legacy() {
		return false
	}
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: topolvmv1.GroupName, Kind: "LogicalVolumeGroupSnapshot"}, "v1")
	return err == nil
}

// setupGroupSnapshots adds the node agent's LogicalVolumeGroupSnapshot reconciler, which takes groups with
// the in-process lvmd's runner (outside lvmd's own lock) and then notifies lvmd's capacity watchers.
func setupGroupSnapshots(mgr manager.Manager, runner lvm.Runner, nodeName string, names driver.Names, config lvmdapi.ConfigFunc, notify func()) error {
	if !groupSnapshotsServed(mgr, names) {
		ctrl.Log.Info("LogicalVolumeGroupSnapshot is not served: group snapshots are off until the agent restarts with its CRD")
		return nil
	}
	eng, err := groupsnapshot.New(groupsnapshot.Options{Runner: runner, StateDir: groupSnapshotStateDir})
	if err != nil {
		return err
	}
	r := reconciler.New(mgr.GetClient(), reconciler.Options{NodeName: nodeName, Engine: eng, Taken: notify, Reader: mgr.GetAPIReader(),
		VolumeGroup: func(dc string) (string, bool, error) { return volumeGroupOf(config, dc) }})
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the group snapshot reconciler: %w", err)
	}
	return nil
}

// volumeGroupOf finds a device class ("" is the default one) in lvmd.yaml.
func volumeGroupOf(config lvmdapi.ConfigFunc, dc string) (string, bool, error) {
	cfg, err := config()
	if err != nil {
		return "", false, err
	}
	if cfg == nil {
		return "", false, fmt.Errorf("lvmd.yaml is not loaded yet")
	}
	for _, d := range cfg.DeviceClasses {
		if d.Name == dc || (dc == "" && d.Default) {
			return d.VolumeGroup, d.Type == lvmd.TypeThin, nil
		}
	}
	return "", false, fmt.Errorf("no such device class in this node's lvmd.yaml")
}

// groupControllers returns the CSI GroupController service when LogicalVolumeGroupSnapshot is served, and
// it again for the provisioner when the VolumeGroupSnapshot API (groupsnapshot.storage.k8s.io/v1) is served
// too and snapshots are on (nil otherwise: clusters without them keep working).
func groupControllers(mgr manager.Manager, names driver.Names, c *csicontroller.Controller, snapshots bool) (csi.GroupControllerServer, provisioner.GroupCSI) {
	if !groupSnapshotsServed(mgr, names) {
		ctrl.Log.Info("LogicalVolumeGroupSnapshot is not served: the CSI GroupController is off until the operator restarts with its CRD")
		return nil, nil
	}
	g := csicontroller.NewGroupController(c)
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: groupsnapshotv1.GroupName, Kind: "VolumeGroupSnapshotContent"}, "v1")
	if err != nil || !snapshots {
		ctrl.Log.Info("VolumeGroupSnapshot v1 CRDs are not installed: the group snapshotter is off until the operator restarts with them")
		return g, nil
	}
	return g, g
}
