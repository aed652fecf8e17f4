package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ModeSimulated describes the sandbox that runs today: what in it is real and what is not, so that
// nobody takes a Pending pod or an inactive volume for a fault.
const ModeSimulated = "simulated nodes: real control plane, operator, node agents and lvm2 on loop devices; " +
	"no kubelet, so pods are scheduled but never run (the node agent DaemonSet makes none: the agents run as processes), " +
	"and logical volumes exist in their volume group's metadata only (never activated, so nothing is mounted; " +
	"a loop device stands in for each so that volumes can move between nodes 1 and 2)"

// ModeReal describes the sandbox with real nodes.
const ModeReal = "real nodes: real control plane; two node VMs (Debian's kernel under qemu, software emulation) " +
	"running kubelet, containerd and runc, each with three virtio disks; LVMS installed from deploy/ with the image make image builds"

func modePath(stateDir string) string { return filepath.Join(stateDir, "mode") }

// writeMode records which sandbox runs in stateDir and the namespace of its LVMS objects, for lvms local
// --print-status.
func writeMode(stateDir, mode, namespace string) error {
	return os.WriteFile(modePath(stateDir), []byte(mode+"\n"+namespace+"\n"), 0o644)
}

// RunningNamespace is the namespace of the LVMS objects of the sandbox running in stateDir ("" when none
// runs or it did not say).
func RunningNamespace(stateDir string) string {
	b, err := os.ReadFile(modePath(stateDir))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 {
		return ""
	}
	return strings.TrimSpace(lines[1])
}

// PrintMode prints which sandbox runs in stateDir.
func PrintMode(stateDir string, w io.Writer) error {
	b, err := os.ReadFile(modePath(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no sandbox is running in %s: start one with `lvms local` (or make run)", stateDir)
	}
	if err != nil {
		return err
	}
	mode, _, _ := strings.Cut(string(b), "\n")
	_, err = fmt.Fprintf(w, "Sandbox: %s\n\n", strings.TrimSpace(mode))
	return err
}
