package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// What the host tells a node VM, through its environment.
const (
	envNodeName = "LVMS_NODE_NAME"   // the Node's name
	envAPI      = "LVMS_NODE_API"    // host:port where the guest reaches the API server
	envPodCIDR  = "LVMS_NODE_PODS"   // this node's pod subnet (a /24)
	envBinDir   = "LVMS_NODE_BIN"    // kubelet, containerd, shim, ctr (host path; the guest sees the host's /)
	envConfig   = "LVMS_NODE_CONFIG" // the host-written kubeconfig and CA, as a guest path
	envImages   = "LVMS_NODE_IMAGES" // image archives to import, comma-separated guest paths
	envNodeIP   = "LVMS_NODE_IP"     // the guest's address, the Node's InternalIP
)

// serviceIP is the `kubernetes` Service's ClusterIP (the first address of localcluster's service range).
const serviceIP = "10.0.0.1"

// serveNode is a node VM's part of a test: it makes the guest a Kubernetes node (cgroup v2, a CNI bridge,
// containerd with the test's images, kubelet), serves the tunnel and the `kubernetes` Service, and keeps
// all of it running until the host signals "stop". Logs go to the shared directory, where the host reads
// them when a test fails.
func serveNode(t *testing.T) {
	name, api, pods := os.Getenv(envNodeName), os.Getenv(envAPI), os.Getenv(envPodCIDR)
	bin, cfg := os.Getenv(envBinDir), os.Getenv(envConfig)
	logs := filepath.Join(vm.SharedDir(), "node-"+name)
	must(t, os.MkdirAll(logs, 0o755))
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}

	// cgroup v2 with the controllers kubelet asks for; shared mounts so that volumes a pod mounts with
	// Bidirectional propagation (the CSI node plugin) reach the kubelet and the other pods.
	sh("mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup")
	must(t, os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu +cpuset +memory +pids +io"), 0o644))
	sh("mount", "--make-rshared", "/")
	// containerd's overlayfs snapshots cannot have their upper layers on the guest's overlay root.
	for _, d := range []string{"/var/lib/containerd", "/var/lib/kubelet"} {
		must(t, os.MkdirAll(d, 0o755))
		sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d)
	}
	sh("mount", "--make-rshared", "/var/lib/kubelet")

	// The pod network: a bridge on this node's /24; pods reach the API server through the relay below.
	sh("modprobe", "-a", "bridge", "veth", "br_netfilter")
	sh("modprobe", "btrfs") // the agent mounts btrfs volumes; the kernel would not load it on demand here
	must(t, os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644))
	must(t, os.MkdirAll("/etc/cni/net.d", 0o755))
	must(t, os.WriteFile("/etc/cni/net.d/10-lvms.conflist", []byte(cniConfig(pods)), 0o644))

	// The `kubernetes` Service without kube-proxy: the only Service the product's pods dial is the API
	// server's, so the guest owns its ClusterIP and relays it to the host. (Pods route to it through the
	// bridge; host-network pods find it on lo.)
	sh("ip", "addr", "add", serviceIP+"/32", "dev", "lo")
	svc, err := net.Listen("tcp", serviceIP+":443")
	must(t, err)
	defer svc.Close()
	go relay(svc, api)
	tun, err := net.Listen("tcp", fmt.Sprintf(":%d", tunnelPort))
	must(t, err)
	defer tun.Close()
	go serveTunnel(tun)

	path := bin + ":" + os.Getenv("PATH")
	containerd := start(t, logs, "containerd", path, filepath.Join(bin, "containerd"), "--config", writeFile(t, logs, "containerd.toml", containerdConfig))
	defer stop(containerd)
	waitFor(t, "containerd's socket", func() bool { _, err := os.Stat("/run/containerd/containerd.sock"); return err == nil })
	for _, img := range strings.Split(os.Getenv(envImages), ",") {
		if img == "" {
			continue
		}
		began := time.Now()
		cmd := exec.Command(filepath.Join(bin, "ctr"), "-n", "k8s.io", "images", "import", img)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("import %s into containerd: %v: %s", img, err, out)
		}
		t.Logf("imported %s in %s", filepath.Base(img), time.Since(began).Round(time.Second))
	}

	kubeletArgv := []string{filepath.Join(bin, "kubelet"),
		"--config", writeFile(t, logs, "kubelet.yaml", kubeletConfig(filepath.Join(cfg, "ca.crt"), pods)),
		"--kubeconfig", filepath.Join(cfg, "kubelet-"+name+".kubeconfig"),
		"--hostname-override", name, "--node-ip", os.Getenv(envNodeIP), "--v", "2"}
	var mu sync.Mutex // the kubelet's process, replaced by a restart
	kubelet := start(t, logs, "kubelet", path, kubeletArgv...)
	defer func() { mu.Lock(); stop(kubelet); mu.Unlock() }()

	// The host's requests (see GuestRun); the kubelet is only touched from here once it runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restarts := 0
	go serveGuestRequests(ctx, vm.SharedDir(), name, func(argv []string) (string, error) {
		switch {
		case argv[0] == restartKubelet:
			mu.Lock()
			defer mu.Unlock()
			stop(kubelet)
			restarts++
			var err error
			if kubelet, err = startLogged(logs, fmt.Sprintf("kubelet-%d", restarts), path, kubeletArgv...); err != nil {
				return "", err
			}
			return fmt.Sprintf("kubelet restarted (pid %d)", kubelet.Process.Pid), nil
		case argv[0] == killProcesses && len(argv) == 2:
			return killByCmdline(argv[1])
		}
		return "", fmt.Errorf("unknown built-in %q", argv)
	})
	vm.Signal(t, "up-"+name)
	vm.WaitSignal(t, "stop")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// start runs a daemon with its output in logs/<name>.log.
func start(t *testing.T, logs, name, path string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd, err := startLogged(logs, name, path, argv...)
	must(t, err)
	return cmd
}

func startLogged(logs, name, path string, argv ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "PATH="+path)
	return cmd, cmd.Start()
}

// stop ends a daemon: SIGTERM, then SIGKILL after 20 seconds.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// containerdConfig: the CRI plugin with overlayfs, our pause image as the sandbox, Debian's CNI plugins.
const containerdConfig = `version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '` + PauseImage + `'
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '/etc/cni/net.d'
`

func cniConfig(podCIDR string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "lvms-node",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
`, podCIDR)
}

// kubeletConfig: client certificates checked against the cluster CA, authorization by the API server,
// cgroupfs on cgroup v2, and no eviction or image garbage collection (the guest's disks are tmpfs).
func kubeletConfig(caFile, podCIDR string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
clusterDomain: cluster.local
resolvConf: ""
readOnlyPort: 0
podCIDR: %q
maxPods: 32
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, caFile, podCIDR)
}
