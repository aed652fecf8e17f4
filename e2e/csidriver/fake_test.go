package csidriver_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

// StartFake is the VM lane's driver for both API groups: the legacy topolvm.cybozu.com group has no
// group snapshots, so its scheme lacks that kind and the fake must not ask for it (it panicked once).
func TestStartFake_BothGroups(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		t.Run(names.Driver(), func(t *testing.T) {
			sim := lvmsim.New()
			sim.AddVG("thick", uint64(csidriver.ThickSize))
			sim.AddVG("thin", uint64(csidriver.ThinVG))
			sim.AddThinPool("thin", "pool", uint64(csidriver.PoolSize))
			d := csidriver.StartFake(t, csidriver.FakeOptions{Names: names, Node: "vm", Runner: sim.Runner(), Config: csidriver.Config()})
			resp, err := d.Controller.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1",
				CapacityRange:             &csi.CapacityRange{RequiredBytes: 1 << 30},
				VolumeCapabilities:        []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
				Parameters:                map[string]string{names.DeviceClassParam(): "thick"},
				AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{names.TopologyKey(): "vm"}}}}})
			if err != nil {
				t.Fatalf("CreateVolume through the %s fake: %v", names.Driver(), err)
			}
			if _, ok := sim.LV("thick", resp.GetVolume().GetVolumeId()); !ok {
				t.Errorf("no LV %s in the simulated volume group", resp.GetVolume().GetVolumeId())
			}
		})
	}
}
