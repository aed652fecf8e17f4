package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator/names"
)

// BenchmarkNodeagentProcess builds lvms and runs `lvms nodeagent` as its own process on 16 loop devices in
// 2 volume groups (its own LVM devices file) against the envtest API server; once the LVMNode shows both
// volume groups built it waits 100 s (past the last pass of convergence and a page-out after it) and
// reports the process's resident memory (the binary includes the CSI node service and lvmd, which run too). "idle" runs
// it as deployed: the kernel's device events, so nothing to do until something changes; "resync=2s" looks
// at the node every 2 s, as an agent that cannot receive the kernel's events would every 5 minutes, so its
// code stays resident. Under make test's smoke (benchsmoke) both run on 2 loop devices and measure at once:
//
//	go test ./nodeagent/agent -run '^$' -bench BenchmarkNodeagentProcess -benchtime 1x
func BenchmarkNodeagentProcess(b *testing.B) {
	testenv.Require(b)
	loopdev.RequireRoot(b)
	bin := testenv.BuildLVMS(b)
	b.Run("idle", func(b *testing.B) { benchAgentProcess(b, bin, "agent-heap.pprof", "--device-events") })
	b.Run("resync=2s", func(b *testing.B) { benchAgentProcess(b, bin, "", "--resync", "2s", "--device-events=false") })
}

// benchAgentProcess runs the agent bin with extra flags and reports its memory; heapProfile names the heap
// profile saved for make bench, if any.
func benchAgentProcess(b *testing.B, bin, heapProfile string, extra ...string) {
	testenv.Require(b)
	loopdev.RequireRoot(b)
	ctx := context.Background()
	dir := b.TempDir()
	kubeconfig := env.Kubeconfig(b)
	loops := loopdev.Dir(b)
	var disks []string
	count := benchsmoke.Size(16, 2)
	half := count / 2
	for range count {
		disks = append(disks, loopdev.Attach(b, loops, 256<<20, false))
	}
	prefix := loopdev.Prefix(b)
	runner := loopdev.Runner(b, prefix, "process", nil)
	ns := env.Namespace(b)
	nodeName := "process-" + ns
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}) })
	vgA, vgB := prefix+"-a", prefix+"-b"
	if err := env.Client.Create(ctx, &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodeName}, Spec: lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{
			{Name: vgA, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, disks[:half]...))}}},
			{Name: vgB, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, disks[half:]...))}}},
		},
		DeviceClasses: []lvmv2.DeviceClass{
			{Name: "thin", Strategy: lvmv2.StrategyThin, VolumeGroup: vgA, Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: "thick", Strategy: lvmv2.StrategyThick, VolumeGroup: vgB, Default: true},
		},
	}}); err != nil {
		b.Fatal(err)
	}
	pprofAddr := testenv.FreeLocalAddr(b)
	for range b.N {
		cmd := exec.Command(bin, "nodeagent", "--kubeconfig", kubeconfig, "--node-name", nodeName, "--namespace", ns,
			"--lvmd-config", filepath.Join(dir, "lvmd.yaml"), "--host-nsenter", "false", "--lvm-devices-file", runner.DevicesFile,
			"--csi-socket", filepath.Join(dir, "csi.sock"), "--shared-csi-socket", filepath.Join(dir, "shared.sock"), "--kubelet-registration-dir", filepath.Join(dir, "registry"),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--pprof-bind-address", pprofAddr)
		cmd.Args = append(cmd.Args, extra...)
		logFile, err := os.Create(filepath.Join(dir, "nodeagent.log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.Env = append(os.Environ(), "GOGC="+names.AgentGOGC) // as the DaemonSet runs it
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logFile.Close() }
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var ln lvmv2.LVMNode
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &ln); err == nil &&
				len(ln.Status.VolumeGroups) == 2 && ln.Status.VolumeGroups[0].Size != nil && ln.Status.VolumeGroups[1].Size != nil &&
				len(ln.Status.VolumeGroups[0].Devices.Included) == half && len(ln.Status.VolumeGroups[1].Devices.Included) == count-half {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump into the log
				time.Sleep(time.Second)
				stop()
				out, _ := os.ReadFile(logFile.Name())
				b.Fatalf("the agent did not build both volume groups in time; log:\n%s", out)
			}
			time.Sleep(250 * time.Millisecond)
		}
		// Past the last pass of convergence (a pass still setting up looks again 30 s later) and a page-out
		// after it (every minute from 30 s after start): the agent as it sits between changes.
		time.Sleep(benchsmoke.Idle(100 * time.Second))
		kib, err := testenv.RSSKiB(cmd.Process.Pid)
		anon, _ := testenv.AnonKiB(cmd.Process.Pid)
		// After the measurement: serving a profile runs code (and a GC) the idle agent does not.
		if heapProfile != "" {
			if err := testenv.SaveHeapProfile("http://"+pprofAddr, heapProfile); err != nil {
				b.Logf("heap profile: %v", err)
			}
		}
		stop()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(kib)/1024, "RSS-MiB")
		b.ReportMetric(float64(anon)/1024, "anon-MiB")
		b.ReportMetric(float64(kib-anon)/1024, "file-MiB")
	}
}
