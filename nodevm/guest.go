package nodevm

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
	"time"

	"github.com/lvms-dev/lvms/localvm"
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
	// envLinkIP is the node's address on eth1, the link to the other node (unset: no link), and
	// envLinkRoutes the pod subnets it routes there: <subnet>=<via>, comma-separated.
	envLinkIP     = "LVMS_NODE_LINK_IP"
	envLinkRoutes = "LVMS_NODE_LINK_ROUTES"
)

// serviceIP is the `kubernetes` Service's ClusterIP (the first address of localcluster's service range).
const serviceIP = "10.0.0.1"

// Serve is a node VM's program: it makes the guest a Kubernetes node (cgroup v2, a CNI bridge, containerd
// with the host's images, kubelet), serves the tunnel, the `kubernetes` Service and the host's requests
// (Nodes.Run), and keeps all of it running until the host signals "stop" or ctx ends. Logs go to the
// shared directory (LogDir), where the host reads them when something fails; logf gets progress.
func Serve(ctx context.Context, logf func(format string, args ...any)) error {
	name, api, pods := os.Getenv(envNodeName), os.Getenv(envAPI), os.Getenv(envPodCIDR)
	bin, cfg := os.Getenv(envBinDir), os.Getenv(envConfig)
	if name == "" || api == "" || pods == "" || bin == "" || cfg == "" {
		return fmt.Errorf("not a node VM: %s, %s, %s, %s and %s must be set (nodevm.Nodes.VMs sets them)", envNodeName, envAPI, envPodCIDR, envBinDir, envConfig)
	}
	logs := LogDir(localvm.SharedDir(), name)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	sh := func(args ...string) error {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	steps := [][]string{
		// cgroup v2 with the controllers kubelet asks for; shared mounts so that volumes a pod mounts with
		// Bidirectional propagation (the CSI node plugin) reach the kubelet and the other pods.
		{"mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup"},
		{"sh", "-c", "echo '+cpu +cpuset +memory +pids +io' > /sys/fs/cgroup/cgroup.subtree_control"},
		{"mount", "--make-rshared", "/"},
		// containerd's overlayfs snapshots cannot have their upper layers on the guest's overlay root.
		{"mkdir", "-p", "/var/lib/containerd", "/var/lib/kubelet"},
		{"mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/var/lib/containerd"},
		{"mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/var/lib/kubelet"},
		{"mount", "--make-rshared", "/var/lib/kubelet"},
		// The pod network: a bridge on this node's /24; pods reach the API server through the relay below.
		{"modprobe", "-a", "bridge", "veth", "br_netfilter"},
		{"modprobe", "btrfs"}, // the agent mounts btrfs volumes; the kernel would not load it on demand here
		{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
		// The `kubernetes` Service without kube-proxy: the only Service the product's pods dial is the API
		// server's, so the guest owns its ClusterIP and relays it to the host. (Pods route to it through
		// the bridge; host-network pods find it on lo.)
		{"ip", "addr", "add", serviceIP + "/32", "dev", "lo"},
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			return err
		}
	}
	if link := os.Getenv(envLinkIP); link != "" {
		link := [][]string{{"ip", "link", "set", "eth1", "up"}, {"ip", "addr", "add", link, "dev", "eth1"}}
		for _, r := range strings.Split(os.Getenv(envLinkRoutes), ",") {
			if subnet, via, ok := strings.Cut(r, "="); ok {
				link = append(link, []string{"ip", "route", "add", subnet, "via", via, "dev", "eth1"})
			}
		}
		for _, s := range link {
			if err := sh(s...); err != nil {
				return fmt.Errorf("the link to the other node: %w", err)
			}
		}
	}
	if err := os.MkdirAll("/etc/cni/net.d", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile("/etc/cni/net.d/10-lvms.conflist", []byte(cniConfig(pods)), 0o644); err != nil {
		return err
	}
	svc, err := net.Listen("tcp", serviceIP+":443")
	if err != nil {
		return err
	}
	defer svc.Close()
	go relay(svc, api)
	tun, err := net.Listen("tcp", fmt.Sprintf(":%d", tunnelPort))
	if err != nil {
		return err
	}
	defer tun.Close()
	go serveTunnel(tun)

	path := bin + ":" + os.Getenv("PATH")
	containerdConf := filepath.Join(logs, "containerd.toml")
	if err := os.WriteFile(containerdConf, []byte(containerdConfig), 0o644); err != nil {
		return err
	}
	if seed := os.Getenv(envSeed); seed != "" {
		began := time.Now()
		if err := sh(append([]string{"tar", "-xf", seed, "-C", "/var/lib/containerd"}, seedTarFlags...)...); err != nil {
			logf("containerd's seed %s does not unpack, importing the images instead: %v", seed, err)
			if err := sh("sh", "-c", "rm -rf /var/lib/containerd/* /var/lib/containerd/.[!.]*"); err != nil {
				return err
			}
		} else {
			logf("containerd's state unpacked from its seed %s in %s", filepath.Base(seed), time.Since(began).Round(time.Second))
		}
	}
	startContainerd := func() (*exec.Cmd, error) {
		c, err := startLogged(logs, "containerd", path, filepath.Join(bin, "containerd"), "--config", containerdConf)
		if err != nil {
			return nil, err
		}
		// Dialled, not looked for: a containerd started again finds its predecessor's socket file.
		if err := waitFor(ctx, "containerd's socket", func() bool {
			conn, err := net.Dial("unix", "/run/containerd/containerd.sock")
			if err == nil {
				conn.Close()
			}
			return err == nil
		}); err != nil {
			stop(c)
			return nil, err
		}
		return c, nil
	}
	containerd, err := startContainerd()
	if err != nil {
		return err
	}
	defer func() { stop(containerd) }()
	ctr := filepath.Join(bin, "ctr")
	listed, err := exec.CommandContext(ctx, ctr, "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("list containerd's images: %w", err)
	}
	if missing := missingImages(string(listed), []string{LVMSImage, PauseImage, BusyboxImage}); len(missing) > 0 {
		if os.Getenv(envSeed) != "" {
			logf("the seed lacks %s: importing", strings.Join(missing, ", "))
		}
		for _, img := range strings.Split(os.Getenv(envImages), ",") {
			if img == "" {
				continue
			}
			began := time.Now()
			if err := sh(ctr, "-n", "k8s.io", "images", "import", img); err != nil {
				return fmt.Errorf("import %s into containerd: %w", img, err)
			}
			logf("imported %s in %s", filepath.Base(img), time.Since(began).Round(time.Second))
		}
		if os.Getenv(envSeedOut) == "1" {
			// containerd stopped, so that its databases are whole in the tar; written under a temporary
			// name and renamed, so the host never keeps half a seed.
			stop(containerd)
			if err := os.Rename(filepath.Join(logs, "containerd.log"), filepath.Join(logs, "containerd-import.log")); err != nil {
				return err
			}
			began := time.Now()
			tmp := filepath.Join(localvm.SharedDir(), "."+seedFile)
			if err := sh(append([]string{"tar", "-cf", tmp, "-C", "/var/lib/containerd"}, append(seedTarFlags, ".")...)...); err != nil {
				logf("no seed for the next node: %v", err)
			} else if err := os.Rename(tmp, filepath.Join(localvm.SharedDir(), seedFile)); err != nil {
				logf("no seed for the next node: %v", err)
			} else {
				logf("wrote containerd's seed for the next node in %s", time.Since(began).Round(time.Second))
			}
			if containerd, err = startContainerd(); err != nil {
				return err
			}
		}
	}

	kubeletConf := filepath.Join(logs, "kubelet.yaml")
	if err := os.WriteFile(kubeletConf, []byte(kubeletConfig(filepath.Join(cfg, "ca.crt"), pods)), 0o644); err != nil {
		return err
	}
	kubeletArgv := []string{filepath.Join(bin, "kubelet"), "--config", kubeletConf,
		"--kubeconfig", filepath.Join(cfg, "kubelet-"+name+".kubeconfig"),
		"--hostname-override", name, "--node-ip", os.Getenv(envNodeIP), "--v", "2"}
	var mu sync.Mutex // the kubelet's process, replaced by a restart
	kubelet, err := startLogged(logs, "kubelet", path, kubeletArgv...)
	if err != nil {
		return err
	}
	defer func() { mu.Lock(); stop(kubelet); mu.Unlock() }()

	// The host's requests (see Nodes.Run); the kubelet is only touched from here once it runs.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	restarts := 0
	go serveGuestRequests(rctx, localvm.SharedDir(), name, func(argv []string) (string, error) {
		switch {
		case argv[0] == RestartKubelet:
			mu.Lock()
			defer mu.Unlock()
			stop(kubelet)
			restarts++
			var err error
			if kubelet, err = startLogged(logs, fmt.Sprintf("kubelet-%d", restarts), path, kubeletArgv...); err != nil {
				return "", err
			}
			return fmt.Sprintf("kubelet restarted (pid %d)", kubelet.Process.Pid), nil
		case argv[0] == KillProcesses && len(argv) == 2:
			return killByCmdline(argv[1])
		}
		return "", fmt.Errorf("unknown built-in %q", argv)
	})
	if err := localvm.SignalStep(upSignal(name)); err != nil {
		return err
	}
	logf("node %s is up: containerd and kubelet run", name)
	err = localvm.WaitStep(ctx, stopSignal)
	logf("node %s: %s", name, cpuReport("/proc", 12))
	return err
}

// LogDir is where node name's logs (containerd, kubelet) are, under the VMs' shared directory shared.
func LogDir(shared, name string) string { return filepath.Join(shared, "node-"+name) }

// The signals between the host and the nodes.
const stopSignal = "stop"

func upSignal(node string) string { return "up-" + node }

func startLogged(logs, name, path string, argv ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "PATH="+path)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
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

// waitFor polls ok until it holds, for at most five minutes.
func waitFor(ctx context.Context, what string, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
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
