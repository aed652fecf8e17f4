package main

import (
	"context"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/nodeagent/agent"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/sandbox"
)

// serveSandboxAgents gives the sandbox what a cluster has and it lacks: a diagnostics endpoint per node
// (the sandbox's agents run in process, without pods). Each endpoint uses the node's own LVM devices file
// and /dev/disk view, so it runs real lsblk and lvm2 on the node's loop devices; an agent pod per node
// points at it, and a service account may read them. It returns that service account as namespace/name.
func serveSandboxAgents(t *testing.T, ctx context.Context, cfg *rest.Config, c client.Client, stateDir, ns string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ip := globalIP(t)
	for _, spec := range sandbox.Topology() {
		sim, err := sandbox.Node(stateDir, spec.Name)
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(c, agent.Options{NodeName: spec.Name, Namespace: ns, Runner: sim.Runner, LVMDConfigPath: sim.LVMDConfigPath, Root: sim.Root})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := diagnostics.New(diagnostics.Options{Node: spec.Name, Version: version, Runner: sim.Runner, Root: sim.Root,
			LVMDConfigPath: sim.LVMDConfigPath, Desired: a.Desired,
			Authorizer: &diagnostics.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Access: cs.AuthorizationV1().SubjectAccessReviews(),
				Namespace: ns, Node: spec.Name}})
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
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lvms-node-agent-" + spec.Name, Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "lvms", "app.kubernetes.io/component": "node-agent"}},
			Spec: corev1.PodSpec{NodeName: spec.Name, Containers: []corev1.Container{{Name: "node-agent", Image: "lvms:sandbox",
				Ports: []corev1.ContainerPort{{Name: diagnostics.PortName, ContainerPort: int32(ln.Addr().(*net.TCPAddr).Port)}}}}}}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"lvm.topolvm.io"}, Resources: []string{"lvmnodes/diagnostics"}, Verbs: []string{"get"}}}
	if _, err := consoletest.UserToken(ctx, cfg, c, ns, "gatherer", rules); err != nil {
		t.Fatal(err)
	}
	return ns + "/gatherer"
}

// globalIP is an address of this machine the API server may proxy to (pods/proxy refuses loopback).
func globalIP(t *testing.T) string {
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
	t.Fatal("this machine has no global unicast IPv4 address for the API server to proxy to")
	return ""
}

// hasVerdict reports whether a device of node was excluded with code, in the bundle's agent views.
func hasVerdict(views map[string][]diagnostics.VolumeGroupVerdicts, node, code string) bool {
	for _, g := range views[node] {
		for _, d := range g.Devices {
			for _, r := range d.Reasons {
				if r.Code == code && strings.HasPrefix(d.KName, "/dev/loop") {
					return true
				}
			}
		}
	}
	return false
}
