package csidriver

import (
	"fmt"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// SanitySkips are the csi-sanity specs TopoLVM itself skips, for the same reason: the snapshot and clone
// capabilities are advertised for the whole driver, but thick device classes answer Unimplemented.
var SanitySkips = []string{
	`Thick LVM.*CreateVolume.*source snapshot`,
	`Thick LVM.*CreateVolume.*source volume`,
	`Thick LVM.*CreateSnapshot`,
	`Thick LVM.*DeleteSnapshot`,
}

// RunSanity registers the thick and thin suites and runs them.
func RunSanity(t *testing.T, controller, node string, names driver.Names, size int64) {
	var contexts []*sanity.TestContext
	config := func(deviceClass string) *sanity.TestConfig {
		c := sanity.NewTestConfig()
		c.Address, c.ControllerAddress = node, controller
		c.TargetPath, c.StagingPath = t.TempDir()+"/mount", t.TempDir()+"/staging"
		c.TestVolumeSize = size
		c.TestVolumeExpandSize = 2 * size
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
	fmt.Println() // Ginkgo's summary has no newline: keep go test's "--- PASS" line on a line of its own

}
