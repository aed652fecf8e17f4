package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// serverHost answers the agent's host commands from the server fixture (blockdev/testdata/server): lsblk,
// wipefs, lvm fullreport and dmsetup targets. Any other command (one that would change the disks) fails
// and is recorded, so tests can assert that nothing was changed.
type serverHost struct {
	mu         sync.Mutex
	lsblk      []byte
	wipefs     []byte
	fullreport []byte
	ran        []string
	unexpected []string
}

func newServerHost(t *testing.T) *serverHost {
	t.Helper()
	dir := filepath.Join(blockdevtest.Dir(), "server")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	return &serverHost{lsblk: read("lsblk.json"), wipefs: read("wipefs.json"), fullreport: read("fullreport.json")}
}

func (s *serverHost) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	line := strings.Join(cmd.Argv, " ")
	s.mu.Lock()
	s.ran = append(s.ran, line)
	s.mu.Unlock()
	switch {
	case cmd.Argv[0] == "lsblk" || cmd.Argv[0] == "wipefs" && slices.Contains(cmd.Argv, "--no-act"):
		r := &blockdevtest.ServerRunner{Lsblk: s.lsblk, Wipefs: s.wipefs}
		out, err := r.Run(ctx, cmd.Argv[0], cmd.Argv[1:]...)
		return lvm.Result{Stdout: out}, err
	case strings.HasPrefix(line, "lvm fullreport"):
		return lvm.Result{Stdout: s.fullreport}, nil
	case line == "dmsetup targets":
		return lvm.Result{Stdout: []byte("thin-pool v1.23.0\nthin v1.23.0\nstriped v1.6.0\nlinear v1.4.0\n")}, nil
	}
	s.mu.Lock()
	s.unexpected = append(s.unexpected, line)
	s.mu.Unlock()
	return lvm.Result{ExitCode: 1, Stderr: []byte("not allowed in this test: " + line)}, nil
}

func (s *serverHost) changes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unexpected)
}

func (s *serverHost) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.ran {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// newTestAgent returns an agent for a fresh node in a fresh namespace, on the server fixture.
func newTestAgent(t *testing.T, host lvm.Executor, labels map[string]string) (*Agent, string) {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	nodeName := "worker-" + ns
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: labels}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	a, err := New(env.Client, Options{NodeName: nodeName, Namespace: ns, Runner: lvm.Runner{Exec: host},
		LVMDConfigPath: filepath.Join(t.TempDir(), "lvmd.yaml"), Root: filepath.Join(blockdevtest.Dir(), "server", "root")})
	if err != nil {
		t.Fatal(err)
	}
	return a, ns
}

func reconcileOnce(t *testing.T, a *Agent) {
	t.Helper()
	if _, err := a.Reconcile(context.Background(), reqFor(a)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
