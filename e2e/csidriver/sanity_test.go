package csidriver_test

import (
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
)

// SanitySkips are the csi-sanity specs TopoLVM itself skips, for the same reason: the snapshot and clone
// capabilities are advertised for the whole driver, but thick device classes answer Unimplemented.
var SanitySkips = []string{
	`Thick LVM.*CreateVolume.*source snapshot`,
	`Thick LVM.*CreateVolume.*source volume`,
	`Thick LVM.*CreateSnapshot`,
	`Thick LVM.*DeleteSnapshot`,
}

// TestSanity runs csi-sanity against the controller and node services for a thick and a thin device
// class, on a real API server with one simulated node (lvmsim for lvm2, fakes for mount and mkfs).
func TestSanity(t *testing.T) {
	d := csidriver.Start(t, env.Config, csidriver.Options{Names: driver.New(false), Nodes: []string{"sanity-node"}})
	controller, node := d.Serve(t, t.TempDir())
	RunSanity(t, controller, node, d.Names)
}

// RunSanity registers the thick and thin suites and runs them.
func RunSanity(t *testing.T, controller, node string, names driver.Names) {
	var contexts []*sanity.TestContext
	config := func(deviceClass string) *sanity.TestConfig {
		c := sanity.NewTestConfig()
		c.Address, c.ControllerAddress = node, controller
		c.TargetPath, c.StagingPath = t.TempDir()+"/mount", t.TempDir()+"/staging"
		c.TestVolumeSize = int64(csidriver.GiB)
		c.IDGen = &sanity.DefaultIDGenerator{}
		c.TestVolumeParameters = map[string]string{names.DeviceClassParam(): deviceClass}
		c.IdempotentCount = 2
		return &c
	}
	thick, thin := config("thick"), config("thin")
	Describe("Thick LVM", func() { contexts = append(contexts, sanity.GinkgoTest(thick)) })
	Describe("Thin LVM", func() { contexts = append(contexts, sanity.GinkgoTest(thin)) })
	AfterSuite(func() {
		for _, c := range contexts {
			c.Finalize()
		}
	})
	RegisterFailHandler(Fail)
	suite, reporter := GinkgoConfiguration()
	suite.SkipStrings = append(suite.SkipStrings, SanitySkips...)
	reporter.Succinct = true
	RunSpecs(t, "CSI sanity", suite, reporter)
}
