package csinode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	mountutil "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// HostExec is k8s.io/utils/exec over an lvm.Runner, so that the commands mount-utils runs for the node
// service (blkid, mkfs, fsck, xfs_growfs, resize2fs, blockdev, wipefs) get the runner's timeout and are
// killed with their whole process group. It supports what mount-utils uses: Run, Output and
// CombinedOutput; streaming (pipes, Start/Wait) and stdin are refused with an error.
type HostExec struct{ Runner lvm.Runner }

var _ utilexec.Interface = HostExec{}

// Command implements utilexec.Interface.
func (h HostExec) Command(cmd string, args ...string) utilexec.Cmd {
	return h.CommandContext(context.Background(), cmd, args...)
}

// CommandContext implements utilexec.Interface.
func (h HostExec) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return &hostCmd{ctx: ctx, r: h.Runner, name: cmd, args: args}
}

// LookPath implements utilexec.Interface.
func (HostExec) LookPath(file string) (string, error) { return exec.LookPath(file) }

type hostCmd struct {
	ctx            context.Context
	r              lvm.Runner
	name           string
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

var errStreaming = errors.New("streaming a command's input or output is not supported by the node's host command runner")

// run runs the command once; a non-zero exit is a utilexec.CodeExitError, which mount-utils inspects
// (blkid exits with 2 for a device without a file system).
func (c *hostCmd) run() (lvm.Result, error) {
	if c.stdin != nil {
		return lvm.Result{}, errStreaming
	}
	res, err := c.r.Execute(c.ctx, c.name, c.args...)
	if err != nil {
		return res, err
	}
	if c.stdout != nil {
		_, _ = c.stdout.Write(res.Stdout)
	}
	if c.stderr != nil {
		_, _ = c.stderr.Write(res.Stderr)
	}
	if res.ExitCode != 0 {
		line := strings.Join(append([]string{c.name}, c.args...), " ")
		return res, utilexec.CodeExitError{Err: fmt.Errorf("%s: exit status %d", line, res.ExitCode), Code: res.ExitCode}
	}
	return res, nil
}

func (c *hostCmd) Run() error { _, err := c.run(); return err }

func (c *hostCmd) Output() ([]byte, error) {
	res, err := c.run()
	return res.Stdout, err
}

// CombinedOutput returns stdout, then stderr (the runner captures them apart).
func (c *hostCmd) CombinedOutput() ([]byte, error) {
	res, err := c.run()
	return bytes.Join([][]byte{res.Stdout, res.Stderr}, nil), err
}

func (c *hostCmd) SetDir(string)                      {}
func (c *hostCmd) SetStdin(in io.Reader)              { c.stdin = in }
func (c *hostCmd) SetStdout(out io.Writer)            { c.stdout = out }
func (c *hostCmd) SetStderr(out io.Writer)            { c.stderr = out }
func (c *hostCmd) SetEnv([]string)                    {}
func (c *hostCmd) Start() error                       { return errStreaming }
func (c *hostCmd) Wait() error                        { return errStreaming }
func (c *hostCmd) Stop()                              {}
func (c *hostCmd) StdoutPipe() (io.ReadCloser, error) { return nil, errStreaming }
func (c *hostCmd) StderrPipe() (io.ReadCloser, error) { return nil, errStreaming }

// HostMounter is mount-utils' Linux mounter for reading mounts, with mount and umount run through an
// lvm.Runner (timeout, process-group kill). It never uses systemd-run scopes: the agent's mounts live in
// the host's mount namespace through the bidirectional kubelet mounts, as TopoLVM's do.
type HostMounter struct {
	// Interface answers the read-only questions (List, IsLikelyNotMountPoint, GetMountRefs, ...).
	mountutil.Interface
	Runner lvm.Runner
}

// NewHostMounter returns a HostMounter. The zero mount-utils Mounter runs no command to detect systemd or
// umount's behaviour.
func NewHostMounter(r lvm.Runner) HostMounter {
	return HostMounter{Interface: &mountutil.Mounter{}, Runner: r}
}

// Mount implements mountutil.Interface.
func (m HostMounter) Mount(source, target, fstype string, options []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, nil, nil)
}

// MountSensitive implements mountutil.Interface.
func (m HostMounter) MountSensitive(source, target, fstype string, options, sensitive []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, sensitive, nil)
}

// MountSensitiveWithoutSystemd implements mountutil.Interface.
func (m HostMounter) MountSensitiveWithoutSystemd(source, target, fstype string, options, sensitive []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, sensitive, nil)
}

// MountSensitiveWithoutSystemdWithMountFlags implements mountutil.Interface. mount(8) applies "bind,ro"
// itself (util-linux 2.27 and later remount the bind mount read-only).
func (m HostMounter) MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype string, options, sensitive, flags []string) error {
	args, logged := mountutil.MakeMountArgsSensitiveWithMountFlags(source, target, fstype, options, sensitive, flags)
	res, err := m.Runner.Execute(context.Background(), "mount", args...)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("mount %s: exit status %d: %s", logged, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Unmount implements mountutil.Interface.
func (m HostMounter) Unmount(target string) error {
	if _, err := m.Runner.Run(context.Background(), "umount", target); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// CanSafelySkipMountPointCheck implements mountutil.Interface: no, callers check first (Unmount reports
// a target that is not mounted as an error).
func (HostMounter) CanSafelySkipMountPointCheck() bool { return false }
