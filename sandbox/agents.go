package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lvms-dev/lvms/localcluster"
)

// startAgents runs `lvms nodeagent` for every node, as a process of its own with the flags of
// deploy/nodeagent's DaemonSet where they apply to a process on the host: so each node's volume groups,
// lvmd, LogicalVolume reconciler, capacity annotations and volume moves run as installed. What differs is
// what a simulated node is (each agent acts as the node agent's ServiceAccount bound to its node, as its
// projected token would make it, under deploy/nodeagent's RBAC and admission policy): lvm2 scoped to the node's own devices file and system directory (no
// activation: logical volumes exist in the volume group's metadata only), its own /dev/disk/by-id view,
// no kubelet to register the CSI socket with, and no nsenter.
func (s *sandbox) startAgents(ctx context.Context) error {
	// Stopped after the agents (stops run last first): no move uses a device when it goes.
	syncCtx, stopSync := context.WithCancel(context.WithoutCancel(ctx))
	synced := make(chan error, 1)
	go func() { synced <- s.syncDevices(syncCtx, 2*time.Second, s.log.WithName("devices")) }()
	s.stops = append(s.stops, func() {
		stopSync()
		if err := <-synced; err != nil {
			s.say("  the volumes' stand-in devices: %v", err)
		}
	})
	for _, sim := range s.nodes {
		dir := s.nodeDir(sim.Name)
		ports, err := localcluster.FreePorts(1)
		if err != nil {
			return err
		}
		progress := filepath.Join(dir, "transfer")
		if err := os.MkdirAll(progress, 0o700); err != nil {
			return err
		}
		kubeconfig, err := s.agentKubeconfig(sim.Name)
		if err != nil {
			return err
		}
		args := []string{"nodeagent",
			"--kubeconfig=" + kubeconfig,
			"--node-name=" + sim.Name,
			"--namespace=" + s.opts.Namespace,
			"--lvmd-config=" + sim.LVMDConfigPath,
			"--host-nsenter=false",
			"--lvm-devices-file=" + sim.Runner.DevicesFile,
			"--lvm-system-dir=" + sim.SystemDir(),
			"--device-root=" + sim.Root,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--diagnostics-bind-address=0",
			"--csi-socket=" + filepath.Join(dir, "csi.sock"),
			"--shared-csi-socket=",
			"--kubelet-registration-dir=",
			"--transfer-listen-host=127.0.0.1",
			"--transfer-progress-dir=" + progress,
			"--move-device-dir=" + sim.DeviceDir(),
		}
		p, err := localcluster.StartProcess(dir, "nodeagent", s.opts.Binary, args)
		if err != nil {
			return err
		}
		s.stops = append(s.stops, func() {
			if err := p.Stop(); err != nil {
				s.say("  %v", err)
			}
		})
		if err := waitReady(ctx, p, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/readyz"); err != nil {
			return fmt.Errorf("the node agent of %s: %w", sim.Name, err)
		}
		if err := RegisterDriver(ctx, s.c, sim.Name, filepath.Join(dir, "csi.sock")); err != nil {
			return err
		}
	}
	nodes := filepath.Join(s.opts.StateDir, "nodes")
	s.say("  node agents: lvms nodeagent per node (logs in %s/<node>/nodeagent.log), each with its own LVM devices file; LVs are never activated: a loop device on a sparse file stands in for each, for moves (%s/<node>/dev)", nodes, nodes)
	return nil
}
