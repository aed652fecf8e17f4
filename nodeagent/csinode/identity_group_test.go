package csinode_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/lvms-dev/lvms/nodeagent/csinode"
)

// TestIdentity_GroupController: the group controller service is advertised only where it is served.
func TestIdentity_GroupController(t *testing.T) {
	has := func(i *csinode.Identity) bool {
		resp, err := i.GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.GetCapabilities() {
			if c.GetService().GetType() == csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE {
				return true
			}
		}
		return false
	}
	if has(csinode.NewIdentity("topolvm.io", "test", nil)) {
		t.Errorf("a plain identity advertises the group controller service")
	}
	if !has(csinode.NewIdentity("topolvm.io", "test", nil).WithGroupController()) {
		t.Errorf("WithGroupController does not advertise the group controller service")
	}
}
