package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lvms-dev/lvms/localcluster"
)

// agentImage is the image the operator puts in its node agent DaemonSet: the sandbox's nodes run no pods,
// so it is never pulled.
const agentImage = "lvms:sandbox"

// startOperator runs `lvms operator` as a process of its own, with the flags deploy/operator/deployment.yaml
// gives it, so that everything the installed operator runs runs here too: the LVMNodeSet and LVMCluster
// controllers, the provisioner, resizer and snapshotter, group snapshots, the capacity publisher, volume
// moves and their certificate signer, the admission policies' guard and the console, as its ServiceAccount
// with the RBAC of deploy/operator. It returns once the
// operator reports ready.
func (s *sandbox) startOperator(ctx context.Context) error {
	ports, err := localcluster.FreePorts(3)
	if err != nil {
		return err
	}
	probe, metrics, console := ports[0], ports[1], ports[2]
	kubeconfig, err := s.operatorKubeconfig()
	if err != nil {
		return err
	}
	args := []string{"operator",
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + s.opts.Namespace,
		"--leader-elect",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		"--console-bind-address=127.0.0.1:" + strconv.Itoa(console),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--csi-socket=" + filepath.Join(s.opts.StateDir, "csi-controller.sock"),
		"--node-agent-image=" + agentImage,
	}
	p, err := localcluster.StartProcess(s.opts.StateDir, "operator", s.opts.Binary, args)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() {
		if err := p.Stop(); err != nil {
			s.say("  %v", err)
		}
	})
	if err := waitReady(ctx, p, "http://127.0.0.1:"+strconv.Itoa(probe)+"/readyz"); err != nil {
		return fmt.Errorf("the operator: %w", err)
	}
	s.say("  operator: lvms operator (pid %d, log %s), namespace %s", p.PID(), filepath.Join(s.opts.StateDir, "operator.log"), s.opts.Namespace)
	return nil
}

// waitReady polls url until it answers 200, the process exits (the error carries the end of its log), or
// two minutes pass.
func waitReady(ctx context.Context, p *localcluster.Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := p.Exited(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		last = fmt.Errorf("%s: %s", url, resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != nil && ctx.Err() != nil {
		return fmt.Errorf("not ready after 2 minutes: %w", last)
	}
	return err
}
