package csivm

import (
	"testing"
	"time"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// TestVMSanity runs csi-sanity for a thick and a thin device class against real lvm2, mkfs and mount in
// the VM (skipping only what TopoLVM skips: snapshots and clones of thick classes).
func TestVMSanity(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		o := vmOptions()
		o.Timeout = 45 * time.Minute
		vm.Run(t, o)
		return
	}
	cfg := setupNode(t)
	d := csidriver.StartFake(t, csidriver.FakeOptions{Names: driver.New(false), Node: "vm", Runner: lvm.Runner{}, Config: cfg})
	controller, node := d.Serve(t, t.TempDir())
	csidriver.RunSanity(t, controller, node, d.Names, 256<<20)
}
