package sharedvm

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/shared/lockd"
)

// envScale is how many volumes the scale walk creates and removes (default defaultScale: the number
// KubeSAN's users ran out of metadata at).
const (
	envScale     = "LVMS_SHARED_SCALE"
	defaultScale = 300
	scaleLVSize  = 4 << 20 // one extent
)

// space is what a shared volume group has left: its metadata area and the lock LV's size.
type space struct {
	mdaSize, mdaFree, vgFree, lockLV uint64
}

func readSpace(t *testing.T, ctx context.Context, g guest) space {
	t.Helper()
	cfg := lockd.LVMConfig(g.l.HostID)
	out, err := g.r.LVMCmd(ctx, "vgs", append(cfg, "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_mda_size,vg_mda_free,vg_free", sharedVG)...)
	must(t, err)
	lock, err := g.r.LVMCmd(ctx, "lvs", append(cfg, "-a", "--noheadings", "--units", "b", "--nosuffix", "-o", "lv_size", sharedVG+"/lvmlock")...)
	must(t, err)
	f := append(strings.Fields(string(out)), strings.Fields(string(lock))...)
	if len(f) != 4 {
		t.Fatalf("vgs and lvs: %q %q", out, lock)
	}
	var n [4]uint64
	for i, s := range f {
		if n[i], err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("vgs and lvs: %q: %v", s, err)
		}
	}
	return space{n[0], n[1], n[2], n[3]}
}

// scaleWalk creates count volumes on the shared volume group as the shared driver does (linear, inactive),
// then removes them all at once, and reports the metadata and lock-space cost per volume and where they run out. The
// volume group must not run out of either on the way, and gets all of it back after the removals.
func scaleWalk(t *testing.T, ctx context.Context, g guest) {
	count := defaultScale
	if v, err := strconv.Atoi(os.Getenv(envScale)); err == nil && v > 0 {
		count = v
	}
	before := readSpace(t, ctx, g)
	start := time.Now()
	for i := range count {
		if err := g.l.CreateLV(ctx, sharedVG, fmt.Sprintf("scale-%04d", i), scaleLVSize); err != nil {
			after := readSpace(t, ctx, g)
			t.Fatalf("volume %d of %d: %v (metadata area %d of %d bytes free, lock LV %d bytes, %d bytes free in the volume group)",
				i+1, count, err, after.mdaFree, after.mdaSize, after.lockLV, after.vgFree)
		}
	}
	created := time.Since(start)
	full := readSpace(t, ctx, g)
	// Removed with one lvremove: the space given back is lvm2's accounting, the same however many
	// commands remove them, and the driver's own removal of a volume is proven in TestVMSharedAgents; one
	// command instead of count saves about 6 minutes of the VM's CPU under emulation.
	start = time.Now()
	all := make([]string, count)
	for i := range all {
		all[i] = fmt.Sprintf("%s/scale-%04d", sharedVG, i)
	}
	_, err := g.r.LVMCmd(ctx, "lvremove", append(lockd.LVMConfig(g.l.HostID), append([]string{"-y"}, all...)...)...)
	must(t, err)
	removed := time.Since(start)
	after := readSpace(t, ctx, g)

	perVolume := float64(int64(before.mdaFree)-int64(full.mdaFree)) / float64(count)
	// What lvm2 reports free is what the next metadata copy may still grow into.
	fit := count + int(float64(full.mdaFree)/max(perVolume, 1))
	t.Logf("%d volumes created in %s (%s each) and removed in %s; metadata area %d bytes, free %d before, %d with them, %d after: %.0f bytes per volume, so it holds about %d volumes; lock LV %d MiB before, %d MiB with them, %d MiB after removal",
		count, created.Round(time.Second), (created / time.Duration(count)).Round(time.Millisecond), removed.Round(time.Second),
		full.mdaSize, before.mdaFree, full.mdaFree, after.mdaFree, perVolume, fit, before.lockLV>>20, full.lockLV>>20, after.lockLV>>20)
	// The metadata gets back all but the lock LV's new segment (a few hundred bytes); the volume group all
	// but what the lock LV grew by (it never shrinks).
	if int64(before.mdaFree)-int64(after.mdaFree) > 4096 || after.vgFree+(after.lockLV-before.lockLV) < before.vgFree {
		t.Errorf("after removing every volume: metadata %d bytes free (was %d), volume group %d bytes free (was %d): space not given back",
			after.mdaFree, before.mdaFree, after.vgFree, before.vgFree)
	}
	if fit < 2000 {
		t.Errorf("the metadata area holds about %d volumes at %.0f bytes each; want at least 2,000 (sanlock's host IDs, KubeSAN ran out near 300)", fit, perVolume)
	}
}
