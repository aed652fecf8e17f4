// This file lays out the host side of one Run or RunMany: the directory shared with the guests over 9p
// (test binary, scripts, coordination files) and the disk image files.

package localvm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// runDir is the host side of one Run or RunMany: the 9p share (test binary, scripts, shared directory) and
// the private disk files.
type runDir struct {
	root        string // t.TempDir(): removed by the testing package
	share       string // root/share, GuestWorkDir in the guests
	guestBinary string
}

// newRunDir lays out root and puts the test binary into the share (hard link, or copy across file systems).
func newRunDir(root, exe string) (*runDir, error) {
	r := &runDir{root: root, share: filepath.Join(root, "share")}
	for _, d := range []string{filepath.Join(r.share, "bin"), filepath.Join(r.share, "shared"), filepath.Join(root, "disks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create the VM run directory: %w", err)
		}
	}
	bin := filepath.Join(r.share, "bin", filepath.Base(exe))
	if err := os.Link(exe, bin); err != nil {
		if err := copyFile(exe, bin, 0o755); err != nil {
			return nil, fmt.Errorf("put the test binary into the VM share: %w", err)
		}
	}
	r.guestBinary = GuestWorkDir + "/bin/" + filepath.Base(exe)
	return r, nil
}

// writeScript writes a VM's script and returns its guest path.
func (r *runDir) writeScript(name, script string) (string, error) {
	dir := filepath.Join(r.share, "vm-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the directory of VM %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write the script of VM %s: %w", name, err)
	}
	return GuestWorkDir + "/vm-" + name + "/run.sh", nil
}

// recordExit tells the VMs still running that name has exited, for WaitSignal.
func (r *runDir) recordExit(name string, code int) {
	os.WriteFile(filepath.Join(r.share, "shared", exitedPrefix+name), []byte(fmt.Sprintf("%d\n", code)), 0o644)
}

// sharedPaths returns the (absolute) disk paths used by more than one VM.
func sharedPaths(opts []Options) map[string]bool {
	count := map[string]int{}
	for _, o := range opts {
		inVM := map[string]bool{}
		for _, d := range o.Disks {
			if d.Path == "" {
				continue
			}
			abs, err := filepath.Abs(d.Path)
			if err == nil && !inVM[abs] {
				inVM[abs] = true
				count[abs]++
			}
		}
	}
	shared := map[string]bool{}
	for p, n := range count {
		if n > 1 {
			shared[p] = true
		}
	}
	return shared
}

// disks creates the disk files of one VM and returns how to attach them.
func (r *runDir) disks(o Options, shared map[string]bool) ([]MachineDisk, error) {
	var out []MachineDisk
	for i, d := range o.Disks {
		size := d.Size
		if size <= 0 {
			size = DefaultDiskSize
		}
		md := MachineDisk{Path: d.Path, Serial: d.Serial}
		if md.Path == "" {
			md.Path = filepath.Join(r.root, "disks", fmt.Sprintf("%s-%d.img", o.Name, i))
			if md.Serial == "" {
				md.Serial = fmt.Sprintf("lvms-disk%d", i)
			}
		} else {
			abs, err := filepath.Abs(md.Path)
			if err != nil {
				return nil, fmt.Errorf("disk %d: %w", i, err)
			}
			md.Path = abs
			md.Shared = shared[abs]
			if md.Serial == "" {
				sum := sha256.Sum256([]byte(abs))
				md.Serial = "lvms-" + hex.EncodeToString(sum[:])[:12]
			}
		}
		if err := createSparse(md.Path, size); err != nil {
			return nil, fmt.Errorf("disk %d: %w", i, err)
		}
		out = append(out, md)
	}
	seen := map[string]bool{}
	for _, d := range out {
		if seen[d.Serial] {
			return nil, fmt.Errorf("two disks with serial %q", d.Serial)
		}
		seen[d.Serial] = true
	}
	return out, nil
}

// serials lists the disks' serials.
func serials(disks []MachineDisk) []string {
	var s []string
	for _, d := range disks {
		s = append(s, d.Serial)
	}
	return s
}

// createSparse creates a sparse file of size bytes at path unless it exists.
func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create disk image %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("size disk image %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create disk image %s: %w", path, err)
	}
	return nil
}
