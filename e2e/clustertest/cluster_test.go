package clustertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/lvms-dev/lvms/localcluster"
)

// eventually polls cond for up to a minute; the test fails with what cond last said.
func eventually(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// fakeKubelet serves HTTPS where the API server's node proxy lands, and records the addresses the egress
// proxy was asked for.
type fakeKubelet struct {
	srv    *httptest.Server
	dialed chan string
}

func newFakeKubelet(t *testing.T) *fakeKubelet {
	k := &fakeKubelet{dialed: make(chan string, 16)}
	k.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "kubelet n1 serves %s", r.URL.Path)
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) dial(ctx context.Context, addr string) (net.Conn, error) {
	select {
	case k.dialed <- addr:
	default:
	}
	if addr != "10.99.0.1:10250" {
		return nil, fmt.Errorf("no guest at %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", k.srv.Listener.Addr().String())
}

// ownerName is the name of obj's controller, or "" without one.
func ownerName(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return ref.Name
	}
	return ""
}

func TestStart(t *testing.T) {
	dir := t.TempDir()
	kubelet := newFakeKubelet(t)
	proxy, err := localcluster.NewEgressProxy(filepath.Join(dir, "egress.sock"), kubelet.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	c := StartT(t, localcluster.Options{
		Dir:                dir,
		ExtraSANs:          []string{"10.0.2.2", "host.lvms.test"},
		EgressProxySocket:  proxy.Socket(),
		SnapshotController: true,
	})
	admin, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("admin lists namespaces", func(t *testing.T) {
		nss, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ns := range nss.Items {
			names = append(names, ns.Name)
		}
		if !strings.Contains(strings.Join(names, ","), "kube-system") {
			t.Errorf("namespaces %v lack kube-system", names)
		}
	})

	t.Run("serving cert verifies for the extra SANs", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(c.CA)
		for _, name := range []string{"10.0.2.2", "host.lvms.test", "10.0.0.1", "kubernetes.default.svc"} {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port()), &tls.Config{ServerName: name, RootCAs: roots})
			if err != nil {
				t.Errorf("TLS as %s: %v", name, err)
				continue
			}
			conn.Close()
		}
		if conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port()), &tls.Config{ServerName: "10.0.2.3", RootCAs: roots}); err == nil {
			conn.Close()
			t.Error("TLS as 10.0.2.3 (not a SAN) succeeded")
		}
	})

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t1"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("controller-manager makes service accounts and the root CA configmap", func(t *testing.T) {
		eventually(t, "default ServiceAccount in t1", func(ctx context.Context) error {
			_, err := admin.CoreV1().ServiceAccounts("t1").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		eventually(t, "kube-root-ca.crt in t1", func(ctx context.Context) error {
			cm, err := admin.CoreV1().ConfigMaps("t1").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if err == nil && cm.Data["ca.crt"] != string(c.CA) {
				return errors.New("kube-root-ca.crt does not hold the cluster CA")
			}
			return err
		})
	})

	t.Run("controller-manager turns a Deployment into a ReplicaSet and a Pod", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		if _, err := admin.AppsV1().Deployments("t1").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a Pod of a ReplicaSet of Deployment web", func(ctx context.Context) error {
			rss, err := admin.AppsV1().ReplicaSets("t1").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(rss.Items) != 1 || ownerName(&rss.Items[0]) != "web" {
				return fmt.Errorf("%d ReplicaSets, want 1 owned by web", len(rss.Items))
			}
			pods, err := admin.CoreV1().Pods("t1").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(pods.Items) != 1 || ownerName(&pods.Items[0]) != rss.Items[0].Name {
				return fmt.Errorf("%d Pods, want 1 owned by %s", len(pods.Items), rss.Items[0].Name)
			}
			return nil
		})
	})

	// Before any Node exists: the scheduler has nothing to choose from.
	t.Run("scheduler marks a pod unschedulable", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "lonely"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if _, err := admin.CoreV1().Pods("t1").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PodScheduled=False", func(ctx context.Context) error {
			p, err := admin.CoreV1().Pods("t1").Get(ctx, "lonely", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
					cond.Reason == corev1.PodReasonUnschedulable && strings.Contains(cond.Message, "no nodes available") {
					return nil
				}
			}
			return fmt.Errorf("phase %s, conditions %+v", p.Status.Phase, p.Status.Conditions)
		})
	})

	t.Run("a node may create its own Node only", func(t *testing.T) {
		path, err := c.Kubeconfig("system:node:n1", "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		n1, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"n1", "n2"} {
			_, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			switch {
			case name == "n1" && err != nil:
				t.Errorf("node n1 creating Node n1: %v", err)
			case name == "n2" && !apierrors.IsForbidden(err):
				t.Errorf("node n1 creating Node n2: %v, want Forbidden", err)
			}
		}
	})

	t.Run("node proxy goes through the egress proxy", func(t *testing.T) {
		// The node lifecycle controller writes the new Node too: retry on its conflicts.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}}
			node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
			_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		body, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/n1/proxy/healthz").DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET nodes/n1/proxy/healthz: %v: %s", err, body)
		}
		if want := "kubelet n1 serves /healthz"; string(body) != want {
			t.Errorf("body %q, want %q", body, want)
		}
		if got := <-kubelet.dialed; got != "10.99.0.1:10250" {
			t.Errorf("egress proxy dialed %s, want the InternalIP 10.99.0.1:10250", got)
		}
	})

	t.Run("the snapshot controller handles VolumeSnapshots", func(t *testing.T) {
		dyn, err := dynamic.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
		snap := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
			"metadata": map[string]any{"name": "s1", "namespace": "default"},
			"spec":     map[string]any{"source": map[string]any{"persistentVolumeClaimName": "no-such-claim"}},
		}}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, snap, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the VolumeSnapshot CRDs are not served: %v", err)
		}
		// Only the controller writes status: an error naming the missing claim proves it runs.
		var msg string
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "s1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			msg, _, _ = unstructured.NestedString(got.Object, "status", "error", "message")
			return msg != "", nil
		})
		if err != nil || !strings.Contains(msg, "no-such-claim") {
			t.Fatalf("no status from the snapshot controller: %v (message %q)", err, msg)
		}
	})

	t.Run("Stop leaves no process behind", func(t *testing.T) {
		pids := c.PIDs()
		if len(pids) != 5 {
			t.Errorf("%d processes %v, want 5 (etcd, apiserver, controller-manager, scheduler, snapshot controller)", len(pids), pids)
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			for _, id := range []int{pid, -pid} { // the process, then its group
				if err := syscall.Kill(id, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("kill(%d, 0) after Stop: %v, want ESRCH", id, err)
				}
			}
		}
		if _, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("the API server still answers after Stop")
		}
	})
}
