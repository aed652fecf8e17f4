package nodevm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The seed's name changes with everything that goes into it: an image's bytes, containerd's version.
func TestSeedKey_ChangesWithTheImagesAndContainerd(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "lvms.tar")
	write := func(s string) {
		if err := os.WriteFile(img, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("image one")
	a, err := seedKey("/cache/node/k8s-v1.36.3_containerd-v2.2.9", []string{img})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := seedKey("/cache/node/k8s-v1.36.3_containerd-v2.2.9", []string{img}); again != a {
		t.Errorf("the same inputs give %s and %s", a, again)
	}
	if other, _ := seedKey("/cache/node/k8s-v1.36.3_containerd-v2.3.0", []string{img}); other == a {
		t.Errorf("another containerd gives the same seed %s", a)
	}
	write("image two")
	if other, _ := seedKey("/cache/node/k8s-v1.36.3_containerd-v2.2.9", []string{img}); other == a {
		t.Errorf("another image gives the same seed %s", a)
	}
	if _, err := seedKey("/cache/node/x", []string{filepath.Join(dir, "missing.tar")}); err == nil {
		t.Error("a missing archive gives a seed")
	}
}

// The first node writes the seed when the cache has none, every node unpacks it once the cache has it,
// and what a node wrote is kept once, the newest seeds only.
func TestSeed_WrittenOnceKeptAndFound(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("LVMS_CACHE", cache)
	if env := seedEnv("k1", true); env[envSeedOut] != "1" || env[envSeed] != "" {
		t.Errorf("first node, empty cache: %v, want it to write the seed", env)
	}
	if env := seedEnv("k1", false); len(env) != 0 {
		t.Errorf("second node, empty cache: %v, want it to import", env)
	}
	shared := t.TempDir()
	if err := publishSeed(shared, "k1"); err != nil {
		t.Fatalf("nothing written: %v", err)
	}
	if err := os.WriteFile(filepath.Join(shared, seedFile), []byte("seed one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := publishSeed(shared, "k1"); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(cache, "nodeseed", "k1.tar")
	if b, err := os.ReadFile(kept); err != nil || string(b) != "seed one" {
		t.Fatalf("kept seed = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(shared, seedFile)); !os.IsNotExist(err) {
		t.Errorf("the node's seed is still in the shared directory: %v", err)
	}
	for _, first := range []bool{true, false} {
		if env := seedEnv("k1", first); env[envSeed] != GuestPath(kept) || env[envSeedOut] != "" {
			t.Errorf("cache has the seed, first node %v: %v, want %s unpacked", first, env, GuestPath(kept))
		}
	}
	// Another run's node wrote the same seed meanwhile: the one kept stays.
	if err := os.WriteFile(filepath.Join(shared, seedFile), []byte("seed again"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := publishSeed(shared, "k1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "seed one" {
		t.Errorf("kept seed replaced by %q", b)
	}

	// Newer seeds push the oldest out.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(kept, old, old); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"k2", "k3", "k4"} {
		if err := os.WriteFile(filepath.Join(shared, seedFile), []byte(key), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := publishSeed(shared, key); err != nil {
			t.Fatal(err)
		}
		at := old.Add(time.Duration(i+1) * time.Minute)
		os.Chtimes(filepath.Join(cache, "nodeseed", key+".tar"), at, at)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "nodeseed", "*.tar"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if !slices.Equal(left, []string{"k2.tar", "k3.tar", "k4.tar"}) {
		t.Errorf("seeds kept: %v, want the newest %d", left, seedsKept)
	}
}

func TestMissingImages(t *testing.T) {
	listed := LVMSImage + "\n" + PauseImage + "\nsha256:abc\n"
	if got := missingImages(listed, []string{LVMSImage, PauseImage, BusyboxImage}); !slices.Equal(got, []string{BusyboxImage}) {
		t.Errorf("missing = %v, want busybox", got)
	}
	if got := missingImages("", []string{LVMSImage}); !slices.Equal(got, []string{LVMSImage}) {
		t.Errorf("nothing listed: missing = %v", got)
	}
}
