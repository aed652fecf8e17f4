package blockdev_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// TestDiscover_RemembersLVMMembersOnly runs discovery on real loop devices as the agent does on every
// resync: a physical volume nothing wrote to since its last probe is not probed again; one written to is
// (here: its label wiped and an ext4 file system made on it); a device that is not an LVM member is probed
// on every pass, so no decision to write to a device rests on a remembered probe.
func TestDiscover_RemembersLVMMembersOnly(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	pv, empty := loopdev.Attach(t, dir, 64<<20, false), loopdev.Attach(t, dir, 64<<20, false)
	calls := &lvm.CountingExecutor{}
	r := loopdev.Runner(t, loopdev.Prefix(t), "sigcache", calls)
	ctx := context.Background()
	if err := r.PVCreate(ctx, pv); err != nil {
		t.Fatal(err)
	}
	disc := &blockdev.Discoverer{Runner: r}
	// probes runs one discovery and returns the signatures found and the devices wipefs was asked about.
	probes := func() (map[string][]string, []string) {
		t.Helper()
		calls.Reset()
		inv, err := disc.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sigs := map[string][]string{}
		for _, name := range []string{pv, empty} {
			d, ok := inv.Get(name)
			if !ok {
				t.Fatalf("%s not discovered", name)
			}
			sigs[name] = d.Signatures
		}
		var asked []string
		for _, d := range []string{pv, empty} {
			if slices.ContainsFunc(calls.Args("wipefs"), func(args []string) bool { return slices.Contains(args, d) }) {
				asked = append(asked, d)
			}
		}
		return sigs, asked
	}
	first, asked := probes()
	if !slices.Equal(asked, []string{pv, empty}) || !slices.Equal(first[pv], []string{blockdev.SigLVM2}) || len(first[empty]) != 0 {
		t.Fatalf("first pass: wipefs asked about %v, signatures %v", asked, first)
	}
	// Nothing written: the physical volume keeps its probe, the empty device is probed again, alone.
	second, asked := probes()
	if !maps.EqualFunc(first, second, slices.Equal) {
		t.Fatalf("second pass found %v, first %v", second, first)
	}
	if !slices.Equal(asked, []string{empty}) {
		t.Errorf("second pass: wipefs asked about %v, want the empty device %s only", asked, empty)
	}
	// Written to: the label goes, a file system comes; the next pass must see it.
	loopdev.Run(t, "wipefs", "--all", "--quiet", pv)
	loopdev.Run(t, "mkfs.ext4", "-q", "-F", pv)
	third, asked := probes()
	if !slices.Equal(third[pv], []string{"ext4"}) || !slices.Contains(asked, pv) {
		t.Fatalf("after mkfs.ext4 on the former physical volume: wipefs asked about %v, signatures %v, want [ext4]", asked, third[pv])
	}
	// A file system is not remembered: probed on every pass.
	if _, asked = probes(); !slices.Equal(asked, []string{pv, empty}) {
		t.Errorf("fourth pass: wipefs asked about %v, want both devices (neither an LVM member)", asked)
	}
}
