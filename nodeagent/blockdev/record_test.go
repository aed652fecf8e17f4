package blockdev

import (
	"context"
	"os"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// TestRecordHostLoops records a discovery pass and an LVM report on a real host for the host-loops fixture.
// It only runs from testdata/record-host-loops.sh, which sets up the devices.
func TestRecordHostLoops(t *testing.T) {
	out := os.Getenv("LVMS_RECORD_HOST_LOOPS")
	if out == "" {
		t.Skip("records fixtures only when run by testdata/record-host-loops.sh (LVMS_RECORD_HOST_LOOPS unset)")
	}
	rec := lvm.NewRecorder(lvm.OSExecutor{}, "recorded on a Debian 12 host without udev or device-mapper by testdata/record-host-loops.sh")
	r := lvm.Runner{Exec: rec, DevicesFile: os.Getenv("LVMS_RECORD_DEVICES_FILE")}
	ctx := context.Background()
	if _, err := (&Discoverer{Runner: r}).Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.FullReport(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Session().Save(out); err != nil {
		t.Fatal(err)
	}
}
