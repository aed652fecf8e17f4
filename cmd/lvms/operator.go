package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// operatorOptions are the flags of lvms operator.
type operatorOptions struct {
	kubeconfig         string
	namespace          string
	metricsAddr        string
	metricsCertDir     string
	probeAddr          string
	pprofAddr          string
	pageOut            time.Duration
	consoleAddr        string
	consoleCertDir     string
	leaderElect        bool
	leaderElectionID   string
	agentImage         string
	agentPriority      string
	lvmdConfigDir      string
	agentReportTimeout time.Duration
	apiQPS             float32
	apiBurst           int
	logLevel           int
	csi                csiControllerOptions
}

func newOperatorCommand() *cobra.Command {
	o := operatorOptions{}
	cmd := &cobra.Command{
		Use: "operator",
		Example: `  lvms operator --namespace openshift-storage --leader-elect
  lvms operator --kubeconfig ~/.kube/config --namespace openshift-storage --node-agent-image quay.io/lvms/lvms:latest`,
		Annotations: map[string]string{ownLogger: "true"},
		Short:       "Run the operator (controllers, provisioner, cluster resources)",
		Long: `lvms operator runs the controllers of one namespace: LVMNodeSets (v2alpha1) become per-node LVMNodes,
LVMClusters (v1alpha1) become LVMVolumeGroups and node statuses, and both get StorageClasses,
VolumeSnapshotClasses, the CSIDriver and the node agent DaemonSet. Status on every object says where the
nodes differ from what was asked for.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOperator(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", names.DefaultNamespace), "namespace the operator manages (default $POD_NAMESPACE, else "+names.DefaultNamespace+")")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus metrics endpoint, HTTPS with token authentication ("0" disables it)`)
	f.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", metricsCertDirUsage)
	f.StringVar(&o.consoleAddr, "console-bind-address", "0", `address of the web console, its JSON API and the OpenShift console plugin, HTTPS with the caller's token required ("0" disables it)`)
	f.StringVar(&o.consoleCertDir, "console-cert-dir", "", "directory with tls.crt and tls.key for the console, re-read when they change (default, or while it holds none: a self-signed certificate)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address of the /healthz and /readyz endpoints ("0" disables them)`)
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", `address of Go's /debug/pprof profiles, unauthenticated: bind it to 127.0.0.1 ("0" disables it)`)
	addPageOutFlag(f, &o.pageOut)
	f.BoolVar(&o.leaderElect, "leader-elect", false, "use a Lease so only one replica reconciles at a time")
	f.StringVar(&o.leaderElectionID, "leader-election-id", "lvms-operator.lvm.topolvm.io", "name of the leader election Lease")
	f.StringVar(&o.agentImage, "node-agent-image", os.Getenv("LVMS_IMAGE"), "image of the node agent DaemonSet (default $LVMS_IMAGE, else the operator's own: the image of its Pod $POD_NAME)")
	f.StringVar(&o.agentPriority, "node-agent-priority-class", "system-node-critical", "priority class of the node agent pods (OpenShift: openshift-user-critical)")
	f.StringVar(&o.lvmdConfigDir, "lvmd-config-dir", "/etc/topolvm", "host directory of lvmd.yaml (MicroShift: /var/lib/microshift/lvms)")
	f.DurationVar(&o.agentReportTimeout, "agent-report-timeout", nodeset.DefaultAgentReportTimeout, "how long a node may wait for its agent's first report before it counts as not ready")
	f.Float32Var(&o.apiQPS, "kube-api-qps", 200, "requests per second to the API server the operator allows itself (the API server's priority and fairness bounds them too); a set over 5,000 nodes needs 5,000 LVMNode writes")
	f.IntVar(&o.apiBurst, "kube-api-burst", 400, "requests above --kube-api-qps allowed in a burst")
	f.IntVarP(&o.logLevel, "v", "v", 0, "log verbosity (0 info, 1 debug, 2 trace)")
	o.csi.addFlags(f)
	return cmd
}

func runOperator(cmd *cobra.Command, o operatorOptions) error {
	logger := operatorLogger(cmd.ErrOrStderr(), o.logLevel)
	ctrl.SetLogger(logger)
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	// client-go's default (5 QPS) would take minutes to write the LVMNodes of a large set.
	cfg.QPS, cfg.Burst = o.apiQPS, o.apiBurst
	if err := chooseGroup(cmd.Context(), cfg, cmd.Flags(), &o.csi.csiDriverOptions, logger); err != nil {
		return err
	}
	if o.agentImage == "" {
		if o.agentImage, err = ownImage(cmd.Context(), cfg, o.namespace, os.Getenv("POD_NAME")); err != nil {
			return err
		}
		logger.Info("The node agent runs the operator's own image", "image", o.agentImage)
	}
	opts := o.operatorOptions()
	mo := operator.ManagerOptions(opts)
	mo.Logger = logger
	if mo.Scheme, err = csiScheme(mo.Scheme, o.csi.csiDriverOptions); err != nil {
		return err
	}
	mo.Metrics = metricsOptions(o.metricsAddr, o.metricsCertDir)
	mo.HealthProbeBindAddress = o.probeAddr
	mo.PprofBindAddress = o.pprofAddr
	mo.LeaderElection = o.leaderElect
	mo.LeaderElectionID = o.leaderElectionID
	mo.LeaderElectionNamespace = o.namespace
	mo.LeaderElectionReleaseOnCancel = true
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return fmt.Errorf("create the operator's manager: %w", err)
	}
	ctx := log.IntoContext(cmd.Context(), logger)
	guard, err := setupAdmission(mgr)
	if err != nil {
		return err
	}
	opts.Admission = guard
	if err := operator.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := addPageOut(mgr, o.pageOut); err != nil {
		return err
	}
	if err := setupCSIController(mgr, o.namespace, o.csi, guard.Unsafe); err != nil {
		return err
	}
	if err := setupMoves(mgr, cfg, o.namespace, o.csi.names(), guard.Unsafe); err != nil {
		return err
	}
	if err := addInClusterConsole(mgr, cfg, o, logger); err != nil {
		return err
	}
	if err := addProbes(mgr, o.probeAddr); err != nil {
		return err
	}
	logger.Info("Starting the operator", "namespace", o.namespace, "leaderElection", o.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// operatorOptions are the controllers' options from the flags. The driver names come from the CSI
// options, so one --legacy (or $USE_LEGACY) selects the group of the CSI controller, the provisioner and
// every object the operator generates.
func (o operatorOptions) operatorOptions() operator.Options {
	opts := operator.Options{
		Namespace:          o.namespace,
		AgentReportTimeout: o.agentReportTimeout,
		Names:              o.csi.names(),
	}
	opts.Agent.Image = o.agentImage
	opts.Agent.PriorityClassName = o.agentPriority
	opts.Agent.LVMDConfigDir = o.lvmdConfigDir
	return opts
}

// restConfig loads kubeconfig when given, else the usual places (in-cluster, $KUBECONFIG, ~/.kube/config).
func restConfig(kubeconfig string) (*rest.Config, error) {
	_, cfg, err := loadKubeconfig(kubeconfig, "")
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 { // controller-runtime's client defaults, as the manager had them from ctrl.GetConfig
		cfg.QPS, cfg.Burst = 20, 30
	}
	return cfg, nil
}

// operatorLogger logs text lines through slog at the given verbosity.
func operatorLogger(w io.Writer, verbosity int) logr.Logger {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.Level(-verbosity)})
	return logr.FromSlogHandler(h)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
