package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/nodeagent/transfercert"
)

// transferOptions are the node agent's flags for volume moves (nodeagent/transfer).
type transferOptions struct {
	listenHost  string
	port        int
	progressDir string
}

func (o *transferOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.listenHost, "transfer-listen-host", os.Getenv("POD_IP"),
		`address the receiver of a volume move listens on, reachable from the other nodes' agents (default $POD_IP; "" turns moves off on this node)`)
	f.IntVar(&o.port, "transfer-port", 0, "port the receiver of a volume move listens on (0: any free port; the address is published on the target LogicalVolume either way)")
	f.StringVar(&o.progressDir, "transfer-progress-dir", "/run/lvms/transfer", "directory on the node's disk for the receivers' high-water marks, so that a restarted agent resumes a copy")
}

// logicalVolumesServed reports whether the API server serves the LogicalVolume kind of names.
func logicalVolumesServed(mgr manager.Manager, names driver.Names) bool {
	gv := names.GroupVersion()
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "LogicalVolume"}, gv.Version)
	return err == nil
}

// setupTransfer adds the controller that runs this node's side of volume moves: it receives into and
// sends from this node's LogicalVolumes as the operator's annotations say, with the node's transfer
// certificate, asked from the operator's signer on the first move.
func setupTransfer(mgr manager.Manager, cfg *rest.Config, o nodeagentOptions) error {
	log := ctrl.Log.WithName("transfer")
	if o.transfer.listenHost == "" {
		log.Info("Volume moves are off on this node: --transfer-listen-host is empty (POD_IP is not set), so there is no address for other nodes to send to")
		return nil
	}
	names := o.csi.names()
	if !logicalVolumesServed(mgr, names) {
		log.Info("LogicalVolume is not served: volume moves are off until the agent restarts with its CRD", "group", names.GroupVersion().String())
		return nil
	}
	if err := os.MkdirAll(o.transfer.progressDir, 0o700); err != nil {
		log.Error(err, "Volume moves are off on this node: the progress directory cannot be created", "dir", o.transfer.progressDir)
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for the transfer certificate: %w", err)
	}
	lvmdConfig := o.lvmdConfig
	runner, err := nodeagentRunner(o)
	if err != nil {
		return err
	}
	c := transfer.NewController(transfer.ControllerOptions{
		NodeName: o.nodeName, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Identity: &transfercert.Requester{Client: cs, Node: o.nodeName, Clock: clock.RealClock{}},
		VolumeGroup: func(dc string) (string, bool, error) {
			return volumeGroupOf(func() (*lvmd.Config, error) { return lvmd.Load(lvmdConfig) }, dc)
		},
		ListenHost: o.transfer.listenHost, ListenPort: o.transfer.port, ProgressDir: o.transfer.progressDir, DeviceDir: o.csi.moveDeviceDir,
		Pools: transfer.LVMPools{Reader: mgr.GetAPIReader(), NodeName: o.nodeName, LVM: runner,
			ThinPoolOf: transfer.LVMDThinPools(func() (*lvmd.Config, error) { return lvmd.Load(lvmdConfig) })},
		Logger: log,
	})
	if err := c.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the volume move controller: %w", err)
	}
	log.Info("Volume moves are on", "listenHost", o.transfer.listenHost, "port", o.transfer.port, "progressDir", o.transfer.progressDir)
	return nil
}
