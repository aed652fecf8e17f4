package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/nodeagent/agent"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// SimNode is a simulated node on this machine: what its node agent sees as /dev/disk/by-id (Root) and the
// LVM devices file that scopes it to its own disks.
type SimNode struct {
	Name string
	// Root holds dev/disk/by-id links to the node's loop devices and a link to /sys.
	Root string
	// Runner runs lvm2 with the node's own devices file.
	Runner lvm.Runner
	// LVMDConfigPath is the node's lvmd.yaml.
	LVMDConfigPath string
}

// NewSimNode prepares the directory of a simulated node under dir. devicesFile names its LVM devices file
// (in /etc/lvm/devices); it must be unique on the machine.
func NewSimNode(dir, name, devicesFile string) (*SimNode, error) {
	n := &SimNode{
		Name:           name,
		Root:           filepath.Join(dir, "root"),
		Runner:         lvm.Runner{DevicesFile: devicesFile},
		LVMDConfigPath: filepath.Join(dir, "lvmd.yaml"),
	}
	if err := os.MkdirAll(filepath.Join(n.Root, "dev", "disk", "by-id"), 0o755); err != nil {
		return nil, fmt.Errorf("prepare node %s: %w", name, err)
	}
	sys := filepath.Join(n.Root, "sys")
	if _, err := os.Lstat(sys); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink("/sys", sys); err != nil {
			return nil, fmt.Errorf("prepare node %s: %w", name, err)
		}
	}
	return n, nil
}

// WithoutActivation has the node's lvm2 write logical volumes to the volume group's metadata and never
// activate them (lvm.conf global/activation = 0, in a system directory of the node's own, which also holds
// its devices file): a simulated node makes no device-mapper device on this machine, and works on a kernel
// without device-mapper. Thin pools need activation to be made, so they cannot be.
func (n *SimNode) WithoutActivation() error {
	dir := filepath.Join(filepath.Dir(n.Root), "lvm")
	if err := os.MkdirAll(filepath.Join(dir, "devices"), 0o700); err != nil {
		return fmt.Errorf("prepare node %s: %w", n.Name, err)
	}
	conf := "# lvms local: a simulated node's lvm2 never activates a logical volume.\nglobal {\n\tactivation = 0\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "lvm.conf"), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("prepare node %s: %w", n.Name, err)
	}
	n.Runner.Env = append(n.Runner.Env, "LVM_SYSTEM_DIR="+dir)
	return nil
}

// SystemDir is the node's LVM_SYSTEM_DIR ("" for the host's /etc/lvm).
func (n *SimNode) SystemDir() string {
	for _, e := range n.Runner.Env {
		if v, ok := strings.CutPrefix(e, "LVM_SYSTEM_DIR="); ok {
			return v
		}
	}
	return ""
}

// Link makes the loop device dev visible on the node as LinkName(disk). The link is relative, as udev
// makes them, so the agent indexes it as a path of the device.
func (n *SimNode) Link(disk, dev string) error {
	link := filepath.Join(n.Root, LinkName(disk))
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join("..", "..", filepath.Base(dev)), link); err != nil {
		return fmt.Errorf("link %s on node %s: %w", dev, n.Name, err)
	}
	return nil
}

// Unlink removes a disk's link (the disk disappears from the node).
func (n *SimNode) Unlink(disk string) error {
	if err := os.Remove(filepath.Join(n.Root, LinkName(disk))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unlink %s on node %s: %w", disk, n.Name, err)
	}
	return nil
}

// NewAgent returns the node's agent for namespace, talking to the API through c (and r for what it does
// not cache).
func (n *SimNode) NewAgent(c client.Client, r client.Reader, namespace string) (*agent.Agent, error) {
	return agent.New(c, agent.Options{
		Reader:         r,
		NodeName:       n.Name,
		Namespace:      namespace,
		Runner:         n.Runner,
		LVMDConfigPath: n.LVMDConfigPath,
		Root:           n.Root,
	})
}

// CleanupLVM removes every volume group and physical volume label in the node's scope, then its devices
// file. Without the devices file lvm2 would see every device on the machine, so it refuses to run then.
func (n *SimNode) CleanupLVM(ctx context.Context) error {
	if n.Runner.DevicesFile == "" {
		return fmt.Errorf("node %s: refusing to clean up LVM without a devices file", n.Name)
	}
	path := n.Runner.DevicesFilePath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	rep, err := n.Runner.FullReport(ctx)
	if err != nil {
		return fmt.Errorf("node %s: list volume groups: %w", n.Name, err)
	}
	for _, vg := range rep.VGs {
		if _, err := n.Runner.LVMCmd(ctx, "vgremove", "--force", "--yes", vg.Name); err != nil {
			errs = append(errs, fmt.Errorf("node %s: remove volume group %s: %w", n.Name, vg.Name, err))
		}
	}
	var pvs []string
	for _, pv := range rep.PVs {
		pvs = append(pvs, pv.Name)
	}
	if len(pvs) > 0 {
		if _, err := n.Runner.LVMCmd(ctx, "pvremove", append([]string{"--yes", "--force", "--force"}, pvs...)...); err != nil {
			errs = append(errs, fmt.Errorf("node %s: remove physical volume labels %s: %w", n.Name, strings.Join(pvs, " "), err))
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
