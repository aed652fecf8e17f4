package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/localvm"
)

// FindAssets returns the directory holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS when set; else
// what e2e/tools/build.sh prints (it builds them from Go modules once and caches them) when the repository
// is at repoRoot; else the newest complete directory in the cache ($LVMS_CACHE or ~/.cache/lvms, under
// controlplane/).
func FindAssets(ctx context.Context, repoRoot string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if complete(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s does not hold kube-apiserver and etcd; unset it or run e2e/tools/build.sh", dir)
	}
	script := filepath.Join(repoRoot, "e2e", "tools", "build.sh")
	if repoRoot != "" {
		if _, err := os.Stat(script); err == nil {
			cmd := exec.CommandContext(ctx, script)
			cmd.Stderr = os.Stderr // the first build takes minutes and says so
			out, err := cmd.Output()
			if err != nil {
				return "", fmt.Errorf("build the control plane with %s: %w", script, err)
			}
			return strings.TrimSpace(string(out)), nil
		}
	}
	cache := os.Getenv("LVMS_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "lvms")
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "controlplane", "*"))
	slices.Sort(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if complete(dirs[i]) {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver and etcd found: run the sandbox from the repository (make run builds them with e2e/tools/build.sh), or set KUBEBUILDER_ASSETS")
}

// FindBinaries returns the directories of the control plane's programs: etcd and kube-apiserver
// (FindAssets), and kube-controller-manager, kube-scheduler, kubectl and the snapshot controller, which
// e2e/tools/build-node.sh builds once into the cache; with nodes, also kubelet, containerd, its shim and
// ctr for real nodes (the simulated sandbox needs none of them).
func FindBinaries(ctx context.Context, repoRoot string, nodes bool) (localcluster.Binaries, error) {
	cp, err := FindAssets(ctx, repoRoot)
	if err != nil {
		return localcluster.Binaries{}, err
	}
	script := filepath.Join(repoRoot, "e2e", "tools", "build-node.sh")
	if _, err := os.Stat(script); err != nil {
		return localcluster.Binaries{}, fmt.Errorf("no %s: run the sandbox from the repository or pass --repo", script)
	}
	what, arg := "kube-controller-manager, kube-scheduler and the snapshot controller", "control-plane"
	if nodes {
		what, arg = "kube-controller-manager, kube-scheduler, the snapshot controller, kubelet and containerd", "all"
	}
	cmd := exec.CommandContext(ctx, script, arg)
	cmd.Stderr = os.Stderr // the first build takes minutes and says so
	out, err := cmd.Output()
	if err != nil {
		return localcluster.Binaries{}, fmt.Errorf("build %s with %s: %w", what, script, err)
	}
	return localcluster.Binaries{ControlPlane: cp, Node: strings.TrimSpace(string(out))}, nil
}

func complete(dir string) bool {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, bin)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// killLeftovers ends the programs a crashed sandbox left behind (Processes). It returns the PIDs it
// signalled.
func killLeftovers(stateDir string) ([]int, error) {
	procs, err := Processes(stateDir)
	if err != nil {
		return nil, err
	}
	var killed []int
	for _, p := range procs {
		if err := syscall.Kill(p.PID, syscall.SIGTERM); err == nil {
			killed = append(killed, p.PID)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range killed {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return killed, nil
}

// Process is a running program of a sandbox.
type Process struct {
	PID  int
	Args []string
}

// Processes lists the programs of the sandbox whose state is in stateDir, this process aside: the control
// plane components and lvms operator, nodeagent and console, each of which is given a path in stateDir.
// Short-lived commands they run, and lvms local itself, are not among them.
func Processes(stateDir string) ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 || !strings.Contains(string(raw), filepath.Clean(stateDir)+"/") {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if isSandboxProgram(args) {
			out = append(out, Process{PID: pid, Args: args})
		}
	}
	return out, nil
}

func isSandboxProgram(args []string) bool {
	switch filepath.Base(args[0]) {
	case "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "snapshot-controller", localvm.QemuBinary:
		return true
	case "lvms":
		return len(args) > 1 && slices.Contains([]string{"operator", "nodeagent", "console"}, args[1])
	}
	return false
}

// lockState takes an exclusive lock on stateDir so that two sandboxes never share (and clean up) one
// state directory. The lock goes with the process.
func lockState(stateDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", stateDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another lvms local is running with state directory %s; stop it (Ctrl-C) or pass another --state-dir", stateDir)
		}
		return nil, fmt.Errorf("lock %s: %w", stateDir, err)
	}
	return f, nil
}
