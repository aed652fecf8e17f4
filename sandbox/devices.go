package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// A simulated node's lvm2 never activates a logical volume (WithoutActivation), so a volume has no device
// for a move to hold, copy and verify. The sandbox stands in for activation where a move needs it: every
// logical volume of a node gets a sparse file of its size, attached as a loop device, and
// DeviceDir/<vg>/<lv> links to that device as /dev/<vg>/<lv> would to its device-mapper device. The node's
// agent opens a move's volumes there (--move-device-dir), so a move runs every phase for real: the hold
// (a block device that nothing mounts), the copy with its checksums, the swap's re-verification, the
// confirm. What it copies is what the files hold (zeros unless someone writes the device).

// DeviceDir is where a simulated node's logical volumes have their device links.
func (n *SimNode) DeviceDir() string { return filepath.Join(filepath.Dir(n.Root), "dev") }

// volumeDevices are one simulated node's stand-ins for activated logical volumes.
type volumeDevices struct {
	// backing holds the sparse files, backing/<vg>/<lv>: under the state's disks/, whose loop devices the
	// next start detaches if this run was killed.
	backing string
	// links is the node's DeviceDir.
	links string
	// loops is each backing file's loop device.
	loops map[string]string
}

func newVolumeDevices(backing, links string) *volumeDevices {
	return &volumeDevices{backing: backing, links: links, loops: map[string]string{}}
}

// sync makes the devices match report (the node's lvm2 state): a new volume gets an empty sparse file, its
// loop device and its link; a grown one's file and device grow; a removed one's go. Devices of volumes
// that stay keep their bytes.
func (d *volumeDevices) sync(ctx context.Context, report *lvm.Report) error {
	want := map[string]int64{}
	for _, lv := range report.LVs {
		if lv.IsThinPool() || slices.Contains(lv.Role, "private") {
			continue
		}
		want[filepath.Join(lv.VGName, lv.Name)] = int64(lv.Size)
	}
	var errs []error
	for name, size := range want {
		errs = append(errs, d.ensure(ctx, name, size))
	}
	for file := range d.loops {
		name, _ := filepath.Rel(d.backing, file)
		if _, ok := want[name]; !ok {
			errs = append(errs, d.remove(ctx, name))
		}
	}
	return errors.Join(errs...)
}

// ensure gives the volume name (<vg>/<lv>) a device of at least size bytes.
func (d *volumeDevices) ensure(ctx context.Context, name string, size int64) error {
	file, link := filepath.Join(d.backing, name), filepath.Join(d.links, name)
	dev, attached := d.loops[file]
	if attached {
		fi, err := os.Stat(file)
		if err != nil || fi.Size() >= size {
			return err
		}
		if err := os.Truncate(file, size); err != nil {
			return err
		}
		return losetup(ctx, "--set-capacity", dev)
	}
	for _, dir := range []string{filepath.Dir(file), filepath.Dir(link)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Truncate(size), f.Close()); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		return errors.Join(fmt.Errorf("attach %s as a loop device (losetup): %w: %s", file, err, strings.TrimSpace(string(out))), os.Remove(file))
	}
	dev = strings.TrimSpace(string(out))
	d.loops[file] = dev
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(dev, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// remove takes the volume name's link, loop device and file away.
func (d *volumeDevices) remove(ctx context.Context, name string) error {
	file := filepath.Join(d.backing, name)
	err := errors.Join(ignoreMissing(os.Remove(filepath.Join(d.links, name))), DetachDisk(ctx, file))
	if err == nil {
		delete(d.loops, file)
	}
	return err
}

// detachAll removes every device, at the sandbox's stop.
func (d *volumeDevices) detachAll(ctx context.Context) error {
	var errs []error
	for file := range d.loops {
		name, _ := filepath.Rel(d.backing, file)
		errs = append(errs, d.remove(ctx, name))
	}
	return errors.Join(append(errs, os.RemoveAll(d.links), os.RemoveAll(d.backing))...)
}

func losetup(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "losetup", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("losetup %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// syncDevices keeps every simulated node's volume devices in step with its volume groups until ctx ends,
// looking every interval (a move waits for its target's device at most that much longer), then removes
// them all.
func (s *sandbox) syncDevices(ctx context.Context, interval time.Duration, log logr.Logger) error {
	devices := map[string]*volumeDevices{}
	for _, sim := range s.nodes {
		devices[sim.Name] = newVolumeDevices(filepath.Join(s.opts.StateDir, "disks", "volumes", sim.Name), sim.DeviceDir())
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := map[string]string{}
	for {
		for _, sim := range s.nodes {
			err := func() error {
				report, err := sim.Runner.FullReport(ctx)
				if err != nil {
					return fmt.Errorf("read the volume groups: %w", err)
				}
				return devices[sim.Name].sync(ctx, report)
			}()
			// Logged when it starts or changes, not every interval.
			if msg := fmt.Sprint(err); err != nil && ctx.Err() == nil && failing[sim.Name] != msg {
				log.Error(err, "The simulated node's volume devices are not up to date", "node", sim.Name)
				failing[sim.Name] = msg
			} else if err == nil {
				delete(failing, sim.Name)
			}
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			var errs []error
			for _, d := range devices {
				errs = append(errs, d.detachAll(stop))
			}
			return errors.Join(errs...)
		case <-t.C:
		}
	}
}
