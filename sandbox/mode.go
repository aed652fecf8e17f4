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
	"and logical volumes exist in their volume group's metadata only (never activated, so nothing can be mounted or copied)"

func modePath(stateDir string) string { return filepath.Join(stateDir, "mode") }

// writeMode records which sandbox runs in stateDir, for lvms local --print-status.
func writeMode(stateDir, mode string) error {
	return os.WriteFile(modePath(stateDir), []byte(mode+"\n"), 0o644)
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
	_, err = fmt.Fprintf(w, "Sandbox: %s\n\n", strings.TrimSpace(string(b)))
	return err
}
