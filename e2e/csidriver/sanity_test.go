package csidriver_test

import (
	"testing"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// TestSanity runs csi-sanity against the controller and node services for a thick and a thin device
// class, on a real API server with one simulated node (lvmsim for lvm2, fakes for mount and mkfs).
func TestSanity(t *testing.T) {
	testenv.Require(t)
	d := csidriver.Start(t, env.Config, csidriver.Options{Names: driver.New(false), Nodes: []string{"sanity-node"}})
	controller, node := d.Serve(t, t.TempDir())
	csidriver.RunSanity(t, controller, node, d.Names, csidriver.GiB)
}
