// This file is containerd's seed: the state a node's containerd has once it has imported the node images,
// kept under $LVMS_CACHE so that the next node VM starts from it instead of importing them again. Under
// software emulation the product image's import (unpacking and hashing about 200 MB) took over two minutes
// of a node's start; unpacking the seed, a tar of what that import wrote, takes seconds. The seed is keyed
// by everything that goes into it (containerd's version and configuration, the image archives' bytes), so a
// new image or containerd makes a new one; a node that finds no seed imports, and the first node of a run
// without one writes it.

package nodevm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/buildcache"
)

// What the host tells a node VM about the seed.
const (
	envSeed    = "LVMS_NODE_SEED"     // the seed to unpack before containerd starts (guest path)
	envSeedOut = "LVMS_NODE_SEED_OUT" // "1": write the seed into the shared directory after the imports
)

// seedFile is the name a node writes its seed under in the VMs' shared directory.
const seedFile = "containerd-seed.tar"

// seedsKept is how many seeds the cache keeps (the newest): each image build makes a new one.
const seedsKept = 3

// seedTarFlags keep what containerd's overlayfs snapshots hold: owners by number, modes, the whiteouts'
// device nodes and the opaque directories' trusted.overlay xattrs.
var seedTarFlags = []string{"--xattrs", "--xattrs-include=*", "--numeric-owner"}

// seedCache is the seeds' directory, $LVMS_CACHE/nodeseed.
func seedCache() (string, error) {
	d, err := buildcache.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "nodeseed"), nil
}

// seedKey names the seed of containerd from binDir importing images: its version (binDir's name), its
// configuration and the archives' bytes.
func seedKey(binDir string, images []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", filepath.Base(binDir), containerdConfig)
	for _, p := range images {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		fmt.Fprintf(h, "\n%s\n", filepath.Base(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// publishSeed moves the seed a node wrote into shared (if it wrote one) into the cache as key, unless
// another run put it there first, and keeps only the newest seedsKept seeds.
func publishSeed(shared, key string) error {
	src := filepath.Join(shared, seedFile)
	if _, err := os.Stat(src); err != nil {
		return nil // the node found a seed, or could not write one (its log says why)
	}
	defer os.Remove(src)
	dir, err := seedCache()
	if err != nil {
		return err
	}
	unlock, err := buildcache.Lock(context.Background(), dir, io.Discard)
	if err != nil {
		return err
	}
	defer unlock()
	dst := filepath.Join(dir, key+".tar")
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	tmp, err := buildcache.TempDir(dir, key)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyFile(src, filepath.Join(tmp, seedFile)); err != nil {
		return fmt.Errorf("keep containerd's seed: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, seedFile), dst); err != nil {
		return fmt.Errorf("keep containerd's seed: %w", err)
	}
	return pruneSeeds(dir, seedsKept)
}

// pruneSeeds removes all but the newest keep seeds in dir.
func pruneSeeds(dir string, keep int) error {
	seeds, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	mtime := map[string]time.Time{}
	for _, s := range seeds {
		if fi, err := os.Stat(s); err == nil {
			mtime[s] = fi.ModTime()
		}
	}
	slices.SortFunc(seeds, func(a, b string) int { return mtime[b].Compare(mtime[a]) })
	for _, s := range seeds[min(keep, len(seeds)):] {
		if err := os.Remove(s); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// seedEnv is what VMs tells the nodes about the seed for key: the first node unpacks it when the cache
// has it, and writes it otherwise; the other nodes unpack it or import.
func seedEnv(key string, first bool) map[string]string {
	if key == "" {
		return nil
	}
	dir, err := seedCache()
	if err != nil {
		return nil
	}
	path := filepath.Join(dir, key+".tar")
	if _, err := os.Stat(path); err == nil {
		return map[string]string{envSeed: GuestPath(path)}
	}
	if first {
		return map[string]string{envSeedOut: "1"}
	}
	return nil
}

// missingImages are the refs of want that `ctr images ls -q` did not list.
func missingImages(listed string, want []string) []string {
	have := map[string]bool{}
	for _, l := range strings.Fields(listed) {
		have[l] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}
