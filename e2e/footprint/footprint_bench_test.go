package footprint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/deploy/olm"
	"github.com/lvms-dev/lvms/e2e/footprint"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/sandbox"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // envtest's CRD installer logs through controller-runtime
	os.Exit(testenv.Main(m, &env))
}

// The work every side gets: 16 disks in 2 volume groups, and a burst of 100 claims (so 100 logical volumes),
// 50 in each, a minute after start.
const (
	disksPerVG   = 8
	diskSize     = 8 << 30 // sparse: with activation off only metadata is written; 64 GiB a volume group, 50 GiB of claims
	claimSize    = "1Gi"
	sampleEvery  = 5 * time.Second
	pollEvery    = 10 * time.Second
	burstAfter   = time.Minute
	windowNormal = 6 * time.Minute // start-up, the burst, five page-out cycles of the agent
)

// BenchmarkNodeFootprint runs LVMS as deployed on a node, and (with TOPOLVM_BIN, the binaries `make
// bench-peer` builds) TopoLVM with its CSI sidecars beside it in the same run, on the same API server and
// the same work, and reports each node's memory and CPU:
//
//   - mode=managed: a node as the operator manages it. LVMS: the node agent (the DaemonSet the operator
//     wrote, its arguments and environment); the operator runs too, off the node. TopoLVM (chart defaults,
//     legacy names so the two drivers do not meet): the node pod (topolvm-node --embed-lvmd,
//     csi-node-driver-registrar, livenessprobe) on the node, the controller pod off it.
//   - mode=microshift: one node runs everything, from one image per product: LVMS's operator with the
//     microshift overlay's arguments and environment and its agent with ExternalConfiguration (the
//     host's lvmd.yaml); TopoLVM's controller and node pods.
//
// Memory is each process's PSS (its share of every page: summed over a node it counts a shared page once)
// and each pod's cgroup working set (what kubelet and metrics-server report), read every 5 s from the
// start (start-up and the burst included); the medians and maxima are over the whole window. CPU is each
// pod's cgroup CPU time, processes are counted by the kernel's process accounting. Every metrics and health
// endpoint is polled every 10 s (LVMS's metrics with a token, as Prometheus scrapes them).
//
// What is simulated: no kubelet (the benchmark registers each CSI node service as kubelet would, on the
// Node and its CSINode; nothing is staged or mounted); lvm2 writes logical volumes to the volume groups'
// metadata only (activation off: this host's kernel has no device-mapper), for both sides alike; each
// side's lvm2 sees only its own disks (a devices file of its own); no kube-controller-manager (claims are
// provisioned, not bound); lvm2 runs as a host process, not through nsenter into PID 1's namespaces as
// both products' pods run it (this sandbox refuses nsenter to PID 1), so neither side's count of processes
// includes the nsenter before each lvm command.
func BenchmarkNodeFootprint(b *testing.B) {
	b.Run("mode=managed", func(b *testing.B) { benchFootprint(b, false) })
	b.Run("mode=microshift", func(b *testing.B) { benchFootprint(b, true) })
}

// claims is how many claims each side gets: 100, or 4 under make test's smoke (benchsmoke), which also
// waits nowhere: it proves the benchmark completes, its figures are not kept.
var claims = benchsmoke.Size(100, 4)

func benchFootprint(b *testing.B, microshift bool) {
	testenv.Require(b)
	loopdev.RequireRoot(b)
	ctx := context.Background()
	window := windowNormal
	if s := os.Getenv("FOOTPRINT_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("FOOTPRINT_WINDOW=%q: %v (a duration such as 6m)", s, err)
		}
		window = d
	}
	window = benchsmoke.Idle(window)
	peer := os.Getenv("TOPOLVM_BIN")
	if err := localcluster.InstallSnapshotCRDs(env.Config); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		w := newWorld(b, microshift)
		w.lvms(b)
		if peer != "" {
			w.topolvm(b, peer)
		}
		w.run(b, ctx, window)
	}
}

// world is one run: both sides' processes, their pods' cgroups, their nodes and claims.
type world struct {
	microshift bool
	dir, ns    string
	c          client.Client
	cs         *kubernetes.Clientset
	mu         sync.Mutex // procs grows while the sampler reads it: the agent starts after the operator
	procs      []*footprint.Process
	groups     map[string]*footprint.Cgroup // by pod
	// per side: the node, its storage classes, its CSI node socket, its driver
	sides map[string]*side
	token string
}

type side struct {
	name, node, driver, socket string
	classes                    []string
	// ready says the side's node service can be registered and claims provisioned.
	ready func(ctx context.Context) error
}

func newWorld(b *testing.B, microshift bool) *world {
	// Not b.TempDir: its name carries the benchmark's, and the peer's registration socket under it passed
	// the 107 bytes a Unix socket's path may have (csi-node-driver-registrar: "bind: invalid argument").
	dir, err := os.MkdirTemp("", "fp-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	w := &world{microshift: microshift, dir: dir, ns: env.Namespace(b), c: env.Client, groups: map[string]*footprint.Cgroup{},
		sides: map[string]*side{}}
	// The modes share the control plane: the CSIDriver and StorageClasses one mode's operator made must go
	// once it has stopped (cleanups run last first), or the next mode's operator refuses the driver.
	optest.PruneOwnedOnCleanup(b, w.c, w.ns)
	if w.cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		b.Fatal(err)
	}
	w.token = metricsToken(b, w.c, w.cs, w.ns)
	return w
}

// metricsToken is a ServiceAccount token allowed to read /metrics, as Prometheus's is.
func metricsToken(b *testing.B, c client.Client, cs *kubernetes.Clientset, ns string) string {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "footprint-metrics-" + ns},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}}}
	for _, o := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = c.Delete(ctx, binding); _ = c.Delete(ctx, role) })
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("a token for the metrics scrapes: %v", err)
	}
	return tr.Status.Token
}

// node makes a simulated node: 16 loop devices linked under its own /dev/disk/by-id, an lvm2 of its own
// (devices file, system directory, activation off), a Node object. It returns the node, its disks' links
// and its loop devices.
func (w *world) node(b *testing.B, name string) (*sandbox.SimNode, []string, []string) {
	dir := filepath.Join(w.dir, name)
	sim, err := sandbox.NewSimNode(dir, name, loopdev.Prefix(b)+"-"+name+".devices")
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.WithoutActivation(); err != nil {
		b.Fatal(err)
	}
	loops := loopdev.Dir(b)
	var links, devs []string
	for i := range 2 * disksPerVG {
		dev := loopdev.Attach(b, loops, diskSize, false)
		devs = append(devs, dev)
		disk := fmt.Sprintf("%s-%02d", name, i)
		if err := sim.Link(disk, dev); err != nil {
			b.Fatal(err)
		}
		links = append(links, sandbox.LinkName(disk))
	}
	b.Cleanup(func() {
		if err := sim.CleanupLVM(context.Background()); err != nil {
			b.Log(err)
		}
	})
	if err := w.c.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name, "footprint.lvms.io/node": name},
		// What kubelet and the node lifecycle controller annotate every Node with (TopoLVM's node service
		// panics on a Node without annotations).
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true", "node.alpha.kubernetes.io/ttl": "0"}}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	return sim, links, devs
}

// vgs creates the node's two volume groups (for the sides that are given them: TopoLVM, and LVMS with
// ExternalConfiguration) and returns their names.
func vgs(b *testing.B, sim *sandbox.SimNode, devs []string) [2]string {
	ctx := context.Background()
	names := [2]string{sim.Name + "-a", sim.Name + "-b"}
	for i, vg := range names {
		if _, err := sim.Runner.LVMCmd(ctx, "vgcreate", append([]string{vg}, devs[i*disksPerVG:(i+1)*disksPerVG]...)...); err != nil {
			b.Fatalf("vgcreate %s: %v", vg, err)
		}
	}
	return names
}

// lvmdConfig is the lvmd.yaml of two thick device classes, as a host (MicroShift) or TopoLVM's chart
// writes it.
func lvmdConfig(vg [2]string, extra string) string {
	return fmt.Sprintf("%sdevice-classes:\n  - name: thick-a\n    volume-group: %s\n    default: true\n    spare-gb: 0\n"+
		"  - name: thick-b\n    volume-group: %s\n    spare-gb: 0\n", extra, vg[0], vg[1])
}

// add registers p, to be started by run (or, started, to be sampled).
func (w *world) add(b *testing.B, p *footprint.Process) {
	w.group(b, p.Pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs = append(w.procs, p)
}

// running is every process registered so far.
func (w *world) running() []*footprint.Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.procs)
}

// group is pod's cgroup, made on first use.
func (w *world) group(b *testing.B, pod string) *footprint.Cgroup {
	if _, ok := w.groups[pod]; !ok {
		g, err := footprint.NewCgroup("lvms-footprint-" + w.ns + "-" + pod) // one level: Remove leaves nothing
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := g.Remove(); err != nil {
				b.Log(err)
			}
		})
		w.groups[pod] = g
	}
	return w.groups[pod]
}

func ports(b *testing.B, n int) []string {
	p, err := localcluster.FreePorts(n)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]string, n)
	for i, v := range p {
		out[i] = "127.0.0.1:" + strconv.Itoa(v)
	}
	return out
}

// container is the first container of the kind/name object among objs.
func container(b *testing.B, objs []*unstructured.Unstructured, kind, name string) corev1.Container {
	for _, o := range objs {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			b.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0]
	}
	b.Fatalf("no %s %s in the rendered manifests", kind, name)
	return corev1.Container{}
}

// deployed is a container's arguments with the substitutions a process on this host needs: every bind
// address on a free loopback port (the ones that are off stay off), directories the pod mounts from the
// host replaced by the test's; and its environment, its field references resolved as the pod's would be.
func deployed(b *testing.B, c corev1.Container, dirs map[string]string, fields map[string]string) (args, environ []string) {
	for _, a := range c.Args {
		flag, value, ok := strings.Cut(a, "=")
		switch {
		case ok && strings.HasSuffix(flag, "-bind-address") && value != "0":
			a = flag + "=" + ports(b, 1)[0]
		case ok && dirs[flag] != "":
			a = flag + "=" + dirs[flag]
		}
		args = append(args, a)
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			var ok bool
			if v, ok = fields[e.ValueFrom.FieldRef.FieldPath]; !ok {
				b.Fatalf("container %s: no value for the field %s of %s", c.Name, e.ValueFrom.FieldRef.FieldPath, e.Name)
			}
		}
		environ = append(environ, e.Name+"="+v)
	}
	return args, environ
}

func flagValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// lvms sets up LVMS's side: the operator from the overlay's Deployment, the node and (MicroShift) its
// volume groups and lvmd.yaml, then the agent from the DaemonSet the operator writes.
func (w *world) lvms(b *testing.B) {
	ctx := context.Background()
	overlay := "kubernetes"
	if w.microshift {
		overlay = "microshift"
	}
	objs, err := olm.Render(filepath.Join(testenv.RepoRoot(), "deploy", "overlays", overlay))
	if err != nil {
		b.Fatal(err)
	}
	bin := testenv.BuildLVMS(b)
	operatorBin, agentBin := bin, bin
	if !w.microshift { // the operator's pod is elsewhere: its own copy of the image
		operatorBin = filepath.Join(w.dir, "lvms-operator-image")
		if err := footprint.Copy(bin, operatorBin); err != nil {
			b.Fatal(err)
		}
		agentBin = filepath.Join(w.dir, "lvms-agent-image")
		if err := footprint.Copy(bin, agentBin); err != nil {
			b.Fatal(err)
		}
	}
	name := "lvms-" + w.ns
	sim, links, devs := w.node(b, name)
	lvmdDir := filepath.Join(w.dir, name, "lvmd")
	if err := os.MkdirAll(lvmdDir, 0o755); err != nil {
		b.Fatal(err)
	}
	if w.microshift {
		vg := vgs(b, sim, devs)
		if err := os.WriteFile(filepath.Join(lvmdDir, "lvmd.yaml"), []byte(lvmdConfig(vg, "")), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	empty := func(n string) string {
		d := filepath.Join(w.dir, n)
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	kubeconfig := env.Kubeconfig(b)
	opC := container(b, objs, "Deployment", "lvms-operator")
	opArgs, opEnv := deployed(b, opC, map[string]string{"--metrics-cert-dir": empty("operator-metrics-cert"),
		"--console-cert-dir": empty("operator-console-cert"), "--lvmd-config-dir": lvmdDir},
		map[string]string{"metadata.namespace": w.ns, "metadata.name": "lvms-operator-0"})
	opArgs = append(opArgs, "--kubeconfig="+kubeconfig, "--namespace="+w.ns, "--node-agent-image=lvms:bench",
		"--csi-socket="+filepath.Join(w.dir, "lvms-csi-controller.sock"))
	operator := &footprint.Process{Side: "lvms", Pod: "lvms-operator", Name: "operator", OnNode: w.microshift, Bin: operatorBin,
		Args: opArgs, Env: opEnv, Endpoints: endpoints(opArgs, w.token)}
	w.add(b, operator)

	s := &side{name: "lvms", node: name, driver: "topolvm.io", socket: filepath.Join(w.dir, name, "csi.sock")}
	w.sides["lvms"] = s
	if w.microshift {
		var cluster lvmv1.LVMCluster
		for _, o := range objs {
			if o.GetKind() == "LVMCluster" {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cluster); err != nil {
					b.Fatal(err)
				}
			}
		}
		cluster.Namespace = w.ns
		if err := w.c.Create(ctx, &cluster); err != nil {
			b.Fatal(err)
		}
		// With ExternalConfiguration the host owns the classes: MicroShift ships its StorageClass.
		for _, dc := range []string{"thick-a", "thick-b"} {
			s.classes = append(s.classes, w.storageClass(b, "lvms-"+dc+"-"+w.ns, s.driver, "topolvm.io/device-class", dc))
		}
	} else {
		var vgSpec []lvmv2.VolumeGroup
		var dcs []lvmv2.DeviceClass
		for i, dc := range []string{"thick-a", "thick-b"} {
			vg := name + "-" + dc[len(dc)-1:]
			vgSpec = append(vgSpec, lvmv2.VolumeGroup{Name: vg, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
				MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: links[i*disksPerVG : (i+1)*disksPerVG]}}}}}})
			dcs = append(dcs, lvmv2.DeviceClass{Name: dc, Strategy: lvmv2.StrategyThick, VolumeGroup: vg, Default: i == 0})
		}
		set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "footprint"}, Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "footprint.lvms.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}},
			Template: lvmv2.LVMNodeSpec{VolumeGroups: vgSpec, DeviceClasses: dcs}}}
		if err := w.c.Create(ctx, set); err != nil {
			b.Fatal(err)
		}
		s.classes = []string{"lvms-thick-a", "lvms-thick-b"}
	}
	// The agent starts once the operator has written its DaemonSet: w.run starts the operator first. Its
	// cgroup is made now, so that the groups do not change while the sampler reads them.
	agentGroup := w.group(b, "lvms-node-agent")
	s.ready = func(ctx context.Context) error {
		var ds appsv1.DaemonSet
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			return w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "lvms-node-agent"}, &ds) == nil, nil
		}); err != nil {
			return fmt.Errorf("the operator wrote no node agent DaemonSet in 2 minutes:\n%s", operator.LogTail(30))
		}
		c := ds.Spec.Template.Spec.Containers[0]
		args, environ := deployed(b, c, map[string]string{"--metrics-cert-dir": empty("agent-metrics-cert"),
			"--kubelet-registration-dir": empty("agent-registration")},
			map[string]string{"spec.nodeName": name, "metadata.namespace": w.ns, "status.podIP": "127.0.0.1"})
		args = append(args, "--kubeconfig="+kubeconfig, "--diagnostics-bind-address="+ports(b, 1)[0],
			"--lvmd-config="+filepath.Join(lvmdDir, "lvmd.yaml"), "--csi-socket="+s.socket, "--shared-csi-socket=",
			"--lvm-devices-file="+sim.Runner.DevicesFile, "--lvm-system-dir="+sim.SystemDir(), "--device-root="+sim.Root,
			"--host-nsenter=false", "--transfer-progress-dir="+empty("agent-transfer"))
		agent := &footprint.Process{Side: "lvms", Pod: "lvms-node-agent", Name: "node-agent", OnNode: true, Bin: agentBin,
			Args: args, Env: environ, Endpoints: endpoints(args, w.token)}
		if err := agent.Start(w.dir, agentGroup); err != nil {
			return err
		}
		b.Cleanup(agent.Stop)
		w.add(b, agent)
		report(b, w.dir, agent)
		return nil
	}
}

// storageClass creates a StorageClass of driver for device class dc (named by the parameter param), as
// TopoLVM's chart and MicroShift write them, and returns its name.
func (w *world) storageClass(b *testing.B, name, driver, param, dc string) string {
	ctx := context.Background()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driver,
		Parameters:        map[string]string{param: dc, "csi.storage.k8s.io/fstype": "xfs"},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), AllowVolumeExpansion: ptr.To(true)}
	if err := w.c.Create(ctx, sc); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.c.Delete(ctx, sc) })
	return sc.Name
}

// endpoints are the metrics and health endpoints an LVMS process serves with args.
func endpoints(args []string, token string) []footprint.Endpoint {
	var out []footprint.Endpoint
	if a := flagValue(args, "--metrics-bind-address"); a != "" && a != "0" {
		out = append(out, footprint.Endpoint{URL: "https://" + a + "/metrics", Token: token})
	}
	if a := flagValue(args, "--health-probe-bind-address"); a != "" && a != "0" {
		out = append(out, footprint.Endpoint{URL: "http://" + a + "/healthz"}, footprint.Endpoint{URL: "http://" + a + "/readyz"})
	}
	return out
}

// topolvm sets up TopoLVM's side from the binaries in bin, with the chart's arguments (charts/topolvm,
// defaults, legacy names): the controller pod (topolvm-controller, csi-provisioner, csi-resizer,
// csi-snapshotter, livenessprobe) and the node pod (topolvm-node --embed-lvmd, csi-node-driver-registrar,
// livenessprobe). A sidecar whose binary is not in bin is left out and said so.
func (w *world) topolvm(b *testing.B, bin string) {
	ctx := context.Background()
	name := "topolvm-" + w.ns
	sim, _, devs := w.node(b, name)
	vg := vgs(b, sim, devs)
	// lvm2 of its own for lvmd too: the node's devices file, activation off. Run directly, as LVMS's agent
	// runs it here (see BenchmarkNodeFootprint).
	conf := fmt.Sprintf("global {\n\tactivation = 0\n}\ndevices {\n\tuse_devicesfile = 1\n\tdevicesfile = %q\n}\n", sim.Runner.DevicesFile)
	if err := os.WriteFile(filepath.Join(sim.SystemDir(), "lvm.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(w.dir, name)
	// kubelet's plugin registration directory, which the registrar listens in (a hostPath that exists).
	if err := os.MkdirAll(filepath.Join(dir, "registry"), 0o755); err != nil {
		b.Fatal(err)
	}
	lvmd := filepath.Join(dir, "lvmd.yaml")
	if err := os.WriteFile(lvmd, []byte(lvmdConfig(vg, "socket-name: "+filepath.Join(dir, "lvmd.sock")+"\nlvm-command-prefix: [/sbin/lvm]\n")), 0o644); err != nil {
		b.Fatal(err)
	}
	const driver = "topolvm.cybozu.com"
	if err := w.c.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), StorageCapacity: ptr.To(true)}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.c.Delete(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver}}) })
	s := &side{name: "topolvm", node: name, driver: driver, socket: filepath.Join(dir, "csi-topolvm.sock")}
	for _, dc := range []string{"thick-a", "thick-b"} {
		s.classes = append(s.classes, w.storageClass(b, "topolvm-"+dc+"-"+w.ns, driver, "topolvm.cybozu.com/device-class", dc))
	}
	w.sides["topolvm"] = s
	exe := func(pod, program string) string {
		p := filepath.Join(bin, program)
		if program == "topolvm-node" || program == "topolvm-controller" {
			p = filepath.Join(bin, "hypertopolvm") // one binary, run under each name
		}
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		if w.microshift {
			return p // one image on the one node
		}
		copied := filepath.Join(w.dir, "image-"+pod, filepath.Base(p)) // hypertopolvm goes by its file's name
		if _, err := os.Stat(copied); err != nil {
			if err := os.MkdirAll(filepath.Dir(copied), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := footprint.Copy(p, copied); err != nil {
				b.Fatal(err)
			}
		}
		return copied
	}
	kubeconfig := env.Kubeconfig(b)
	common := []string{"USE_LEGACY=true", "KUBECONFIG=" + kubeconfig, "NODE_NAME=" + name, "POD_NAMESPACE=" + w.ns, "NAMESPACE=" + w.ns}
	ctlSock := filepath.Join(w.dir, "topolvm-csi-controller.sock")
	type prog struct {
		pod, name, program string
		onNode             bool
		args               func(p []string) []string // given free ports
		ports              int
		endpoints          func(p []string) []string
	}
	progs := []prog{
		{"topolvm-node", "topolvm-node", "topolvm-node", true, func(p []string) []string {
			return []string{"--csi-socket=" + s.socket, "--embed-lvmd", "--config=" + lvmd, "--metrics-bind-address=" + p[0]}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/metrics"} }},
		{"topolvm-node", "csi-registrar", "csi-node-driver-registrar", true, func(p []string) []string {
			return []string{"--csi-address=" + s.socket, "--kubelet-registration-path=" + s.socket, "--http-endpoint=" + p[0],
				"--plugin-registration-path=" + filepath.Join(dir, "registry")}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/healthz"} }},
		{"topolvm-node", "liveness-probe", "livenessprobe", true, func(p []string) []string {
			return []string{"--csi-address=" + s.socket, "--http-endpoint=" + p[0]}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/healthz"} }},
		{"topolvm-controller", "topolvm-controller", "topolvm-controller", w.microshift, func(p []string) []string {
			return []string{"--csi-socket=" + ctlSock, "--enable-webhooks=false", "--leader-election-namespace=" + w.ns,
				"--metrics-bind-address=" + p[0], "--health-probe-bind-address=" + p[1]}
		}, 2, func(p []string) []string {
			return []string{"http://" + p[0] + "/metrics", "http://" + p[1] + "/healthz", "http://" + p[1] + "/readyz"}
		}},
		{"topolvm-controller", "csi-provisioner", "csi-provisioner", w.microshift, func(p []string) []string {
			// No pod owns the CSIStorageCapacity objects here (the chart's level 2 is its Deployment).
			return []string{"--csi-address=" + ctlSock, "--feature-gates=Topology=true", "--leader-election", "--leader-election-namespace=" + w.ns,
				"--http-endpoint=" + p[0], "--enable-capacity", "--capacity-ownerref-level=-1", "--kubeconfig=" + kubeconfig}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/metrics"} }},
		{"topolvm-controller", "csi-resizer", "csi-resizer", w.microshift, func(p []string) []string {
			return []string{"--csi-address=" + ctlSock, "--leader-election", "--leader-election-namespace=" + w.ns, "--http-endpoint=" + p[0], "--kubeconfig=" + kubeconfig}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/metrics"} }},
		{"topolvm-controller", "csi-snapshotter", "csi-snapshotter", w.microshift, func(p []string) []string {
			return []string{"--csi-address=" + ctlSock, "--leader-election", "--leader-election-namespace=" + w.ns, "--http-endpoint=" + p[0], "--kubeconfig=" + kubeconfig}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/metrics"} }},
		{"topolvm-controller", "liveness-probe", "livenessprobe", w.microshift, func(p []string) []string {
			return []string{"--csi-address=" + ctlSock, "--http-endpoint=" + p[0]}
		}, 1, func(p []string) []string { return []string{"http://" + p[0] + "/healthz"} }},
	}
	for _, pr := range progs {
		path := exe(pr.pod, pr.program)
		if path == "" {
			b.Logf("TopoLVM: no %s in %s: the %s container is left out of the run", pr.program, bin, pr.pod+"/"+pr.name)
			continue
		}
		p := ports(b, pr.ports)
		args := pr.args(p)
		if pr.program == "topolvm-node" || pr.program == "topolvm-controller" {
			args = append([]string{pr.program}, args...) // hypertopolvm's subcommand
		}
		environ := slices.Clone(common)
		if pr.name == "topolvm-node" {
			environ = append(environ, "LVM_SYSTEM_DIR="+sim.SystemDir())
		}
		proc := &footprint.Process{Side: "topolvm", Pod: pr.pod, Name: pr.name, OnNode: pr.onNode, Bin: path, Args: args, Env: environ}
		for _, u := range pr.endpoints(p) {
			proc.Endpoints = append(proc.Endpoints, footprint.Endpoint{URL: u})
		}
		w.add(b, proc)
	}
	s.ready = func(context.Context) error { return nil }
}

// run starts both sides at once, registers their node services, creates the claims a minute in, and
// samples until window has passed since the start; then it reports.
func (w *world) run(b *testing.B, ctx context.Context, window time.Duration) {
	var bins []string
	initial := w.running()
	for _, p := range initial {
		bins = append(bins, p.Bin)
	}
	slices.Sort(bins)
	if err := footprint.Evict(slices.Compact(bins)...); err != nil {
		b.Fatal(err)
	}
	acct, err := footprint.StartAccounting(filepath.Join(w.dir, "pacct"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := acct.Stop(); err != nil {
			b.Error(err)
		}
	}()
	for _, p := range initial {
		report(b, w.dir, p)
	}
	start := time.Now()
	for _, p := range initial {
		if err := p.Start(w.dir, w.groups[p.Pod]); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Stop)
	}
	s := newSampler(w)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.loop(sampleCtx) })
	defer func() { stopSampling(); wg.Wait() }()

	for _, name := range sortedKeys(w.sides) {
		sd := w.sides[name]
		if err := sd.ready(ctx); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		if err := sandbox.RegisterDriver(ctx, w.c, sd.node, sd.socket); err != nil {
			b.Fatalf("%s: %v\n%s", name, err, w.logs(name))
		}
	}
	var all []footprint.Endpoint
	for _, p := range w.running() {
		all = append(all, p.Endpoints...)
	}
	var poller footprint.Poller
	wg.Go(func() { poller.Poll(sampleCtx, pollEvery, all) })

	time.Sleep(time.Until(start.Add(benchsmoke.Idle(burstAfter))))
	burst := time.Now()
	for _, name := range sortedKeys(w.sides) {
		w.claims(b, w.sides[name])
	}
	for _, name := range sortedKeys(w.sides) {
		sd := w.sides[name]
		testenv.WaitFor(b, 5*time.Second, 20*time.Minute, func() (bool, string) {
			n := w.provisioned(ctx, sd)
			return n == claims, fmt.Sprintf("%s: %d of %d claims provisioned", name, n, claims)
		}, w.refused)
		b.Logf("%s: %d claims provisioned %.1f s after they were created", name, claims, time.Since(burst).Seconds())
	}
	// At least two minutes after the burst settled, so the idle state after it is in the window too.
	time.Sleep(max(time.Until(start.Add(window)), benchsmoke.Idle(2*time.Minute)))
	stopSampling()
	wg.Wait()
	elapsed := time.Since(start)
	poller.Once(ctx, all) // a short run (the smoke) may have polled before everything listened
	for _, p := range w.running() {
		if n := p.Restarts(); n > 0 {
			b.Logf("%s exited and was started again %d times (as kubelet restarts a container); its log ends:\n%s", p.Label(), n, p.LogTail(10))
		}
	}
	if missed := poller.Unanswered(all); len(missed) > 0 {
		b.Fatalf("endpoints that never answered:\n  %s", strings.Join(missed, "\n  "))
	}
	records, err := acct.Records()
	if err != nil {
		b.Fatal(err)
	}
	s.report(b, records, elapsed)
}

// The loopback ports and kubeconfig files a run picks; report names them instead.
var (
	loopbackPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
	kubeconfigs  = regexp.MustCompile(`[^ =]*/kubeconfig\b`)
)

// report tells make bench how p runs (bench.ReportProcess): its environment and command line, the run's
// temporary directory and ports named, not given.
func report(b *testing.B, dir string, p *footprint.Process) {
	line := strings.Join(append(append(slices.Clone(p.Env), filepath.Base(p.Bin)), p.Args...), " ")
	line = strings.ReplaceAll(line, dir, "<dir>")
	line = kubeconfigs.ReplaceAllString(line, "<kubeconfig>")
	bench.ReportProcess(b, p.Side+" "+p.Label()+": "+loopbackPort.ReplaceAllString(line, "127.0.0.1:<port>"))
}

func (w *world) logs(sideName string) string {
	var out strings.Builder
	for _, p := range w.running() {
		if p.Side == sideName {
			fmt.Fprintf(&out, "---- %s ----\n%s\n", p.Label(), p.LogTail(15))
		}
	}
	return out.String()
}

// claims creates the side's claims at once, half in each class, each with its node selected as the
// scheduler would.
func (w *world) claims(b *testing.B, sd *side) {
	ctx := context.Background()
	for i := range claims {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("%s-%03d", sd.name, i),
			// As the scheduler and kube-controller-manager's PV controller (not run here) annotate it: the
			// CSI external-provisioner acts only on claims that name its driver.
			Annotations: map[string]string{"volume.kubernetes.io/selected-node": sd.node, "volume.kubernetes.io/storage-provisioner": sd.driver,
				"volume.beta.kubernetes.io/storage-provisioner": sd.driver}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(sd.classes[i%len(sd.classes)]),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(claimSize)}}}}
		if err := w.c.Create(ctx, pvc); err != nil {
			b.Fatal(err)
		}
	}
}

// refused is the first of the claims' ProvisioningFailed events that no retry heals, from either
// provisioner (LVMS's or the CSI external-provisioner, whose messages carry the driver's gRPC code): the
// work does not fit or is invalid, so the run can never complete.
func (w *world) refused() string {
	var events corev1.EventList
	if err := w.c.List(context.Background(), &events, client.InNamespace(w.ns)); err != nil {
		return ""
	}
	for _, e := range events.Items {
		if e.Reason != "ProvisioningFailed" || testenv.Retried(e.Message) {
			continue
		}
		if strings.Contains(e.Message, "ResourceExhausted") || strings.Contains(e.Message, "InvalidArgument") ||
			strings.Contains(e.Message, "not enough space") {
			return fmt.Sprintf("claim %s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
	return ""
}

// provisioned counts the side's claims that have their PV.
func (w *world) provisioned(ctx context.Context, sd *side) int {
	var pvs corev1.PersistentVolumeList
	if err := w.c.List(ctx, &pvs); err != nil {
		return 0
	}
	n := 0
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == sd.driver && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == w.ns {
			n++
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sampler reads every process's memory and every pod's working set every 5 s.
type sampler struct {
	w    *world
	mu   sync.Mutex
	pss  map[*footprint.Process][]float64 // MiB
	rss  map[*footprint.Process][]float64
	ws   map[string][]float64 // by pod, MiB
	node map[string][]float64 // by side: the sum of PSS of its processes on the node
	cpu0 map[string]float64   // by pod, at the start
}

func newSampler(w *world) *sampler {
	s := &sampler{w: w, pss: map[*footprint.Process][]float64{}, rss: map[*footprint.Process][]float64{}, ws: map[string][]float64{},
		node: map[string][]float64{}, cpu0: map[string]float64{}}
	for pod, g := range w.groups {
		s.cpu0[pod], _ = g.CPU()
	}
	return s
}

func (s *sampler) loop(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	sums := map[string]float64{}
	complete := map[string]bool{"lvms": true, "topolvm": true}
	for _, p := range s.w.running() {
		if !p.Running() {
			complete[p.Side] = false
			continue
		}
		m, err := footprint.ReadMemory(p.PID())
		if err != nil {
			complete[p.Side] = false
			continue
		}
		s.pss[p] = append(s.pss[p], float64(m.PSS)/1024)
		s.rss[p] = append(s.rss[p], float64(m.RSS)/1024)
		if p.OnNode {
			sums[p.Side] += float64(m.PSS) / 1024
		}
	}
	for side, total := range sums {
		if complete[side] { // a node total counts only when every process of the side is up
			s.node[side] = append(s.node[side], total)
		}
	}
	for pod, g := range s.w.groups {
		if v, err := g.WorkingSet(); err == nil {
			s.ws[pod] = append(s.ws[pod], float64(v)/1024)
		}
	}
}

// report logs every process's and pod's figures and reports each side's node figures (and, with both
// sides, the ratios) as benchmark metrics.
func (s *sampler) report(b *testing.B, records []footprint.Exited, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	procs := s.w.running()
	var roots []int
	for _, p := range procs {
		roots = append(roots, p.PIDs()...)
	}
	counts := footprint.Descendants(records, roots)
	spawned := func(p *footprint.Process) (n int) {
		for _, pid := range p.PIDs() {
			n += counts[pid]
		}
		return n
	}
	hours := elapsed.Hours()
	type nodeFig struct{ median, max, ws, cpu, procs float64 }
	figs := map[string]*nodeFig{}
	pods := map[string]bool{}
	for _, p := range procs {
		pss, rss := footprint.Summarize(s.pss[p]), footprint.Summarize(s.rss[p])
		b.Logf("%-8s %-34s PSS median %6.1f max %6.1f MiB, RSS median %6.1f max %6.1f MiB, %4d processes started%s",
			p.Side, p.Label(), pss.Median, pss.Max, rss.Median, rss.Max, spawned(p), map[bool]string{true: "", false: " (off the node)"}[p.OnNode])
		f := figs[p.Side]
		if f == nil {
			n := footprint.Summarize(s.node[p.Side])
			f = &nodeFig{median: n.Median, max: n.Max}
			figs[p.Side] = f
		}
		if !p.OnNode {
			continue
		}
		f.procs += float64(spawned(p)) / hours
		if !pods[p.Pod] {
			pods[p.Pod] = true
			ws := footprint.Summarize(s.ws[p.Pod])
			cpu, _ := s.w.groups[p.Pod].CPU()
			f.ws += ws.Max
			f.cpu += (cpu - s.cpu0[p.Pod]) / hours
			b.Logf("%-8s pod %-30s working set median %6.1f max %6.1f MiB, CPU %.1f s", p.Side, p.Pod, ws.Median, ws.Max, cpu-s.cpu0[p.Pod])
		}
	}
	for _, side := range sortedKeys(figs) {
		f := figs[side]
		b.Logf("%s: the node's PSS median %.1f MiB, max %.1f MiB; working set (pods' maxima summed) %.1f MiB; CPU %.1f s/h; %.0f processes/h",
			side, f.median, f.max, f.ws, f.cpu, f.procs)
		b.ReportMetric(f.median, side+"-node-PSS-MiB-median")
		b.ReportMetric(f.max, side+"-node-PSS-MiB-max")
		b.ReportMetric(f.ws, side+"-node-WS-MiB-max")
		b.ReportMetric(f.cpu, side+"-node-CPU-s/h")
		b.ReportMetric(f.procs, side+"-node-procs/h")
	}
	if l, t := figs["lvms"], figs["topolvm"]; l != nil && t != nil && t.median > 0 && t.max > 0 {
		b.ReportMetric(l.median/t.median, "ratio-PSS-median")
		b.ReportMetric(l.max/t.max, "ratio-PSS-max")
		if t.ws > 0 {
			b.ReportMetric(l.ws/t.ws, "ratio-WS-max")
		}
		if t.cpu > 0 {
			b.ReportMetric(l.cpu/t.cpu, "ratio-CPU")
		}
	}
}
