package collect_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// hostExec answers the node agent's read-only commands like a node with /dev/sda (EFI partition) and
// /dev/sdb (the PV of vg1 with a thin pool).
type hostExec struct{}

func (hostExec) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	switch cmd.Argv[0] {
	case "lsblk":
		return lvm.Result{Stdout: bundletest.View("x").Lsblk}, nil
	case "lvm":
		return lvm.Result{Stdout: []byte(bundletest.FullReport(bundletest.VG, bundletest.Pool, "40.00", "10.00"))}, nil
	case "wipefs", "blkid":
		return lvm.Result{}, nil
	}
	return lvm.Result{ExitCode: 127, Stderr: []byte(cmd.Argv[0] + ": not found")}, nil
}

// hostIP is an address of this machine the API server may proxy to (pods/proxy refuses loopback).
func hostIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	t.Fatal("this machine has no global unicast IPv4 address for the API server to proxy to; the agent diagnostics test needs one")
	return ""
}

// startAgent runs a real diagnostics endpoint for node on ip, authorizing with the API server, and creates
// its node agent pod (Running, Ready, with the diagnostics port) in namespace. It returns the pod.
func startAgent(t testing.TB, ctx context.Context, cs kubernetes.Interface, ip, namespace, node string) *corev1.Pod {
	t.Helper()
	lvmdPath := filepath.Join(t.TempDir(), "lvmd.yaml")
	if err := os.WriteFile(lvmdPath, []byte(bundletest.LVMD), 0o600); err != nil {
		t.Fatal(err)
	}
	sel, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"disk", "part"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := &desired.Node{VolumeGroups: []desired.VolumeGroup{{Name: bundletest.VG, Selector: sel}}}
	srv, err := diagnostics.New(diagnostics.Options{Node: node, Version: "v-test", Runner: lvm.Runner{Exec: hostExec{}}, Root: t.TempDir(),
		LVMDConfigPath: lvmdPath, Desired: func(context.Context) (*desired.Node, error) { return want, nil },
		Authorizer: &diagnostics.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Access: cs.AuthorizationV1().SubjectAccessReviews(),
			Namespace: namespace, Node: node}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	port := ln.Addr().(*net.TCPAddr).Port
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lvms-node-agent-" + node, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "lvms", "app.kubernetes.io/component": "node-agent"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "node-agent", Image: "lvms:test", Args: []string{"nodeagent"},
			Env:   []corev1.EnvVar{{Name: "DB_PASSWORD", Value: plantedEnv}, {Name: "NODE_NAME", Value: node}},
			Ports: []corev1.ContainerPort{{Name: diagnostics.PortName, ContainerPort: int32(port)}}}}},
	}
	zero := int64(0)
	_ = cs.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	created, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "node-agent", Ready: true, Image: "lvms:test", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	if _, err := cs.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created
}

// Planted credentials: none may appear anywhere in a bundle.
const (
	plantedSecret     = "planted-secret-value-9f3a"
	plantedEnv        = "planted-env-password-77c1"
	plantedKubeToken  = "planted-kubeconfig-token-41d2"
	plantedClientKey  = "cGxhbnRlZC1jbGllbnQta2V5LWRhdGE="
	plantedBearer     = "planted-bearer-token-5be0"
	plantedLogToken   = "planted-log-token-0c9d"
	plantedJWTPayload = "eyJzdWIiOiJwbGFudGVkLWp3dCJ9"
)

var plantedJWT = "eyJhbGciOiJSUzI1NiJ9." + plantedJWTPayload + ".c2lnbmF0dXJlLXBsYW50ZWQ"

func planted() []string {
	return []string{plantedSecret, plantedEnv, plantedKubeToken, plantedClientKey, plantedBearer, plantedLogToken, plantedJWTPayload}
}

// fakeLogs serves container logs with credentials in them, as a careless program prints them.
type fakeLogs struct{ fail map[string]bool }

func (f fakeLogs) Logs(_ context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	if f.fail[pod] {
		return nil, fmt.Errorf("kubelet on the pod's node is unreachable")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "2026-11-22T10:00:00Z I1122 starting %s/%s container %s previous=%v\n", ns, pod, opts.Container, opts.Previous)
	fmt.Fprintf(&b, "2026-11-22T10:00:01Z I1122 flags: --token=%s --kubeconfig=/etc/kubeconfig\n", plantedLogToken)
	fmt.Fprintf(&b, "2026-11-22T10:00:02Z I1122 GET /apis Authorization: Bearer %s\n", plantedJWT)
	return io.NopCloser(strings.NewReader(b.String())), nil
}

// tarContents returns every file of a .tar.gz, concatenated, and the file names.
func tarContents(t *testing.T, path string) ([]byte, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var all bytes.Buffer
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		all.WriteString(h.Name + "\n")
		if _, err := io.Copy(&all, tr); err != nil {
			t.Fatal(err)
		}
	}
	return all.Bytes(), names
}

// collectTo runs a collection into a new tar.gz and returns its path and summary.
func collectTo(t *testing.T, ctx context.Context, opts collect.Options) (string, *collect.Summary) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := collect.WriteTarGz(ctx, opts, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, sum
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
