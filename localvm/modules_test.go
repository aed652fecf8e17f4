package localvm

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func loadFixtureIndex(t *testing.T) *moduleIndex {
	t.Helper()
	dep, err := os.Open("testdata/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	defer dep.Close()
	builtin, err := os.Open("testdata/modules.builtin")
	if err != nil {
		t.Fatal(err)
	}
	defer builtin.Close()
	ix, err := parseModuleIndex(dep, builtin)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/md/dm-thin-pool.ko":               "dm_thin_pool",
		"kernel/drivers/md/dm-thin-pool.ko.xz":            "dm_thin_pool",
		"kernel/drivers/char/hw_random/virtio-rng.ko.zst": "virtio_rng",
		"dm-mod":       "dm_mod",
		"9pnet_virtio": "9pnet_virtio",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadOrderDependenciesFirst(t *testing.T) {
	ix := loadFixtureIndex(t)
	got, err := ix.loadOrder([]string{"dm-thin-pool"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/drivers/md/dm-mod.ko",
		"kernel/drivers/md/dm-bufio.ko",
		"kernel/lib/libcrc32c.ko",
		"kernel/drivers/md/persistent-data/dm-persistent-data.ko",
		"kernel/drivers/md/dm-bio-prison.ko",
		"kernel/drivers/md/dm-thin-pool.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loadOrder(dm-thin-pool) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadOrderBootModules checks the real boot list against the recorded modules.dep: every module once,
// after all of its dependencies, crc32c_generic (the soft dependency modules.dep does not list) before the
// modules that need libcrc32c.
func TestLoadOrderBootModules(t *testing.T) {
	ix := loadFixtureIndex(t)
	order, err := ix.loadOrder(bootModules())
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range order {
		n := moduleName(p)
		if _, dup := pos[n]; dup {
			t.Errorf("%s loaded twice", n)
		}
		pos[n] = i
	}
	for _, w := range bootModules() {
		if _, ok := pos[moduleName(w)]; !ok {
			t.Errorf("boot module %s missing from the load order", w)
		}
	}
	for n, i := range pos {
		for _, d := range ix.deps[n] {
			if j, ok := pos[d]; !ok || j > i {
				t.Errorf("%s (position %d) needs %s (position %d, present %v)", n, i, d, j, ok)
			}
		}
	}
	for _, n := range []string{"libcrc32c", "dm_thin_pool", "xfs"} {
		if pos["crc32c_generic"] > pos[n] {
			t.Errorf("crc32c_generic (position %d) must load before %s (position %d)", pos["crc32c_generic"], n, pos[n])
		}
	}
	if got := len(order); got != 30 {
		t.Errorf("%d modules to load, want the 30 of the recorded closure", got)
	}
}

func TestLoadOrderBuiltinAndMissing(t *testing.T) {
	ix := loadFixtureIndex(t)
	got, err := ix.loadOrder([]string{"iosf_mbi", "loop"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kernel/drivers/block/loop.ko"}; !slices.Equal(got, want) {
		t.Errorf("built-in iosf_mbi and loop: got %v, want %v", got, want)
	}
	if _, err := ix.loadOrder([]string{"no_such_module"}); err == nil || !strings.Contains(err.Error(), "no_such_module") {
		t.Errorf("a missing module: got error %v, want one naming no_such_module", err)
	}
}

func TestLoadOrderMissingDependencyAndCycle(t *testing.T) {
	ix, err := parseModuleIndex(strings.NewReader("a.ko: b.ko\nb.ko: c.ko\nc.ko: a.ko\nd.ko: gone.ko\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.loadOrder([]string{"a"}); err == nil || !strings.Contains(err.Error(), "cycle: a -> b -> c -> a") {
		t.Errorf("cycle: got error %v", err)
	}
	if _, err := ix.loadOrder([]string{"d"}); err == nil || !strings.Contains(err.Error(), "gone (needed by d)") {
		t.Errorf("missing dependency: got error %v", err)
	}
}

func TestParseModuleIndexRejectsGarbage(t *testing.T) {
	if _, err := parseModuleIndex(strings.NewReader("kernel/a.ko: b.ko\nnot a dep line\n"), nil); err == nil ||
		!strings.Contains(err.Error(), "line 2") {
		t.Errorf("got error %v, want one naming line 2", err)
	}
}
