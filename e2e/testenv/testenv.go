// Package testenv starts a real kube-apiserver and etcd (built from Go modules by e2e/tools, cached) with
// the LVMS CRDs installed, for integration tests. There is no kubelet and no kube-controller-manager: tests
// that need them play their part explicitly.
package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/reaper"
	"github.com/lvms-dev/lvms/testtier"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	env    *envtest.Environment
	dirs   []string // see Dirs
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CRDDirs are the directories holding the CRDs the tests install.
func CRDDirs() []string {
	root := RepoRoot()
	return []string{filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "crds", "legacy")}
}

// assets returns the directory with kube-apiserver and etcd: KUBEBUILDER_ASSETS when set (make test sets
// it), otherwise the output of e2e/tools/build.sh, which builds them once into the cache.
func assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "e2e", "tools", "build.sh")).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("build control plane with e2e/tools/build.sh: %w: %s", err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
}

// Require skips the test under -short (make check's fast tier, which starts no control plane). Every test
// that uses the control plane, Main's or one of Start, calls it first; without -short it does nothing.
func Require(t testing.TB) {
	t.Helper()
	testtier.Needs(t, "a control plane (kube-apiserver and etcd)")
}

// short tells whether the test binary runs with -short (false outside a parsed test binary).
func short() bool { return flag.Lookup("test.short") != nil && flag.Parsed() && testing.Short() }

// errShort is Start's answer under -short: a test that reaches it lacks its Require.
var errShort = errors.New("no control plane under -short (make check's fast tier): call testenv.Require(t) before the test starts one")

// Start starts etcd and kube-apiserver and installs the CRDs. Under -short it starts nothing and fails (the
// test should have called Require).
func Start() (*Env, error) {
	if short() {
		return nil, errShort
	}
	dir, err := assets()
	if err != nil {
		return nil, err
	}
	scheme := api.NewScheme()
	te := &envtest.Environment{BinaryAssetsDirectory: dir, Scheme: scheme}
	// Alpha gates the provisioner must defend against: a claim naming a data source in another namespace.
	te.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "CrossNamespaceVolumeDataSource=true")
	cfg, dirs, err := startWatched(te, CRDDirs()) // nothing outlives the test binary, even killed
	if err != nil {
		return nil, fmt.Errorf("start control plane from %s: %w", dir, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	e := &Env{Config: cfg, Scheme: scheme, env: te, dirs: dirs}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, errors.Join(fmt.Errorf("client: %w", err), e.Stop())
	}
	return e, nil
}

// Stop stops the control plane and removes its directories.
func (e *Env) Stop() error { return errors.Join(e.env.Stop(), removeWatched(e.dirs)) }

// Main runs a package's tests against one control plane: use it from TestMain. Under -short (make check) it
// starts none and leaves *env nil: the package's tests that need it skip through Require, the others run (a
// test that uses *env without Require panics there on the nil Env).
func Main(m *testing.M, env **Env) int {
	flag.Parse() // testing.Short needs the flags; m.Run would parse them otherwise
	if testing.Short() {
		return m.Run()
	}
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	return code
}

// Namespace creates a fresh namespace for one test and deletes it afterwards.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// Assets returns the directory holding kube-apiserver and etcd (KUBEBUILDER_ASSETS, or built by
// e2e/tools/build.sh), for tests that start a second control plane of their own (for example one
// without the LVMS CRDs). It starts the test binary's watchdog (reaper) first, so the processes such a
// test starts are killed should the binary die.
func Assets() (string, error) {
	if err := reaper.Start(); err != nil {
		return "", err
	}
	return assets()
}

// Kubeconfig writes a kubeconfig with the control plane's admin credentials into the test's temporary
// directory, for commands that take --kubeconfig, and returns its path.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	return WriteKubeconfig(t, e.Config)
}

// WriteKubeconfig writes cfg as a kubeconfig into the test's temporary directory and returns its path.
func WriteKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"envtest": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"envtest": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"envtest": {Cluster: "envtest", AuthInfo: "envtest"}},
		CurrentContext: "envtest",
	}, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
