package localvm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/testtimes"
	"github.com/lvms-dev/lvms/testtier"
)

// TestVMMachine boots VMs through the machine layer: the guest command's exit code and files it writes to
// the work share come back to the host, and a VM that outlives its timeout is killed and reported as such.
func TestVMMachine(t *testing.T) {
	if InGuest() {
		t.Fatal("TestVMMachine runs scripts in the guest, not itself")
	}
	Require(t)
	if reason := Unavailable(); reason != "" {
		testtier.Unavailable(t, reason)
	}
	cacheDir, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	img, err := Prepare(t.Context(), cacheDir, &testLog{t: t})
	if err != nil {
		t.Fatal(err)
	}
	boot := func(t *testing.T, ctx context.Context, script string) (*Machine, string) {
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "run.sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		m, err := StartMachine(ctx, MachineConfig{
			Name: "m", Image: img, MemoryMiB: 512, CPUs: 1, WorkDir: work, Command: GuestWorkDir + "/run.sh",
			Console: &testLog{t: t, prefix: "[m] "},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Kill(); m.Wait() })
		return m, work
	}

	t.Run("exit code, work share with a comma in its path", func(t *testing.T) {
		m, work := boot(t, t.Context(), `echo "$LVMS_IN_VM $DM_DISABLE_UDEV $(hostname) $(cat /sys/class/net/lo/flags)" > /lvms-vm/out; exit 7`)
		exit, err := m.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if exit.Code != 7 {
			t.Errorf("exit code %d, want 7", exit.Code)
		}
		out, err := os.ReadFile(filepath.Join(work, "out"))
		if err != nil {
			t.Fatalf("the guest's file in the work share: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != "1 1 m 0x9" {
			t.Errorf("guest wrote %q, want \"1 1 m 0x9\" (LVMS_IN_VM, DM_DISABLE_UDEV, host name, loopback up)", got)
		}
		if exit.CPU <= 0 || exit.CPU > 4*exit.Total {
			t.Errorf("qemu's host CPU time %s over %s: want more than nothing, and no more than a few threads' worth", exit.CPU, exit.Total)
		}
		t.Logf("guest command started %s after qemu; %s", exit.Boot.Round(100*time.Millisecond), testtimes.VMCPUNote(exit.CPU))
	})

	t.Run("timeout kills the VM", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		m, _ := boot(t, ctx, "sleep 3600")
		_, err := m.Wait()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if m.cmd.ProcessState == nil {
			t.Fatal("qemu has not been reaped after Wait")
		}
		t.Log(err)
	})
}
