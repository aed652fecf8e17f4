package csidriver

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL
	"google.golang.org/grpc"

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
		// csi-test's Connect misses a connection that is ready before it first looks (it then waits a minute
		// for a state change that never comes); a dialer that takes a moment avoids that race.
		c.Address, c.ControllerAddress = "passthrough:///"+node, "passthrough:///"+controller
		c.DialOptions = append(c.DialOptions, grpc.WithContextDialer(slowUnix(node)))
		c.ControllerDialOptions = append(c.ControllerDialOptions, grpc.WithContextDialer(slowUnix(controller)))
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
	reporter.Succinct = false
	RunSpecs(t, "CSI sanity", suite, reporter)
	fmt.Println() // Ginkgo's summary has no newline: keep go test's "--- PASS" line on a line of its own

}

// slowUnix dials a unix socket after a short pause.
func slowUnix(path string) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}
