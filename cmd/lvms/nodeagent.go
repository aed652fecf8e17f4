package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/nodeagent/agent"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// nodeagentOptions are the flags of lvms nodeagent.
type nodeagentOptions struct {
	kubeconfig          string
	nodeName            string
	namespace           string
	lvmdConfig          string
	hostNsenter         string
	devicesFile         string
	lvmSystemDir        string
	deviceRoot          string
	configurationPolicy string
	resync              time.Duration
	deviceEvents        bool
	eventResync         time.Duration
	sanlockIOTimeout    int
	metricsAddr         string
	metricsCertDir      string
	probeAddr           string
	pprofAddr           string
	pageOut             time.Duration
	logLevel            int
	diagnosticsAddr     string
	csi                 csiNodeOptions
	transfer            transferOptions
}

func newNodeagentCommand() *cobra.Command {
	o := nodeagentOptions{}
	cmd := &cobra.Command{
		Use: "nodeagent",
		Example: `  lvms nodeagent --node-name worker-1 --namespace openshift-storage
  lvms nodeagent --node-name worker-1 --lvm-devices-file lvms-worker-1.devices --host-nsenter false`,
		Annotations: map[string]string{ownLogger: "true"},
		Short:       "Run the node agent (volume groups, lvmd, CSI node service)",
		Long: `lvms nodeagent manages the LVM storage of one node: it discovers the node's block devices, picks the
ones the LVMNode (v2alpha1) or the LVMVolumeGroups (v1alpha1) select, explains every device it does not use,
creates and grows volume groups and thin pools, writes lvmd.yaml (or checks the host's with
ExternalConfiguration), and reports it all in LVMNode.status and LVMVolumeGroupNodeStatus.

In a pod (hostPID, privileged) it runs LVM commands in the host's namespaces through nsenter; as a process
on the host it runs them directly. --lvm-devices-file scopes it to its own LVM devices file, which is how
several agents (simulated nodes) share one machine.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNodeagent(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	f.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "openshift-storage"), "namespace of the LVMS objects (default $POD_NAMESPACE, else openshift-storage)")
	f.StringVar(&o.lvmdConfig, "lvmd-config", lvmd.DefaultPath, "lvmd.yaml the agent writes, or reads with ExternalConfiguration")
	f.StringVar(&o.hostNsenter, "host-nsenter", "auto", `run host commands through "nsenter -t 1" (true, false, or auto: when PID 1 is in another mount namespace, i.e. in a pod)`)
	f.StringVar(&o.devicesFile, "lvm-devices-file", "", "the agent's own LVM devices file (a name in /etc/lvm/devices); empty uses the host's lvm.conf")
	f.StringVar(&o.lvmSystemDir, "lvm-system-dir", "", "LVM_SYSTEM_DIR for lvm2 (default: the host's /etc/lvm)")
	f.StringVar(&o.deviceRoot, "device-root", "/", "directory whose dev/disk and sys the agent reads block devices from (a simulated node of lvms local has its own)")
	f.StringVar(&o.configurationPolicy, "configuration-policy", "", `"ExternalConfiguration" reads the host's lvmd.yaml instead of managing volume groups`)
	f.DurationVar(&o.resync, "resync", agent.DefaultResync, "slow periodic reconcile")
	f.BoolVar(&o.deviceEvents, "device-events", true, "listen to the kernel's block device events: a device added, removed or changed is looked at at once, and an idle node is resynced every --event-resync instead of --resync (false: every --resync)")
	f.DurationVar(&o.eventResync, "event-resync", agent.DefaultEventResync, "slow periodic reconcile while the kernel's device events are received (it catches what they do not announce: LVM metadata written by another host, thin pool usage)")
	f.IntVar(&o.sanlockIOTimeout, "sanlock-io-timeout", 0,
		"sanlock's I/O timeout in seconds for the lock managers the agent runs (0: sanlock's 10 s; a dead node's shared volumes are free for other nodes 8 times this plus 60 s after it stopped renewing)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "0", `address of the Prometheus metrics endpoint, HTTPS with token authentication ("0" disables it)`)
	f.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", metricsCertDirUsage)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address of the /healthz and /readyz endpoints ("0" disables them)`)
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", `address of Go's /debug/pprof profiles, unauthenticated: bind it to 127.0.0.1 ("0" disables it)`)
	addPageOutFlag(f, &o.pageOut)
	f.IntVarP(&o.logLevel, "v", "v", 0, "log verbosity (0 info, 1 debug, 2 trace)")
	f.StringVar(&o.diagnosticsAddr, "diagnostics-bind-address", fmt.Sprintf(":%d", diagnostics.DefaultPort),
		`address of the authenticated diagnostics endpoint that support bundles read ("0" disables it)`)
	o.csi.addFlags(f)
	o.transfer.addFlags(f)
	return cmd
}

// useNsenter decides whether host commands go through nsenter.
func useNsenter(flag string) (bool, error) {
	switch strings.ToLower(flag) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto", "":
		self, err1 := os.Readlink("/proc/self/ns/mnt")
		host, err2 := os.Readlink("/proc/1/ns/mnt")
		if err1 != nil || err2 != nil {
			return false, nil // without hostPID the host is not reachable anyway
		}
		return self != host, nil
	}
	return false, fmt.Errorf("--host-nsenter=%q: want true, false or auto", flag)
}

func nodeagentRunner(o nodeagentOptions) (lvm.Runner, error) {
	ns, err := useNsenter(o.hostNsenter)
	if err != nil {
		return lvm.Runner{}, err
	}
	r := lvm.Runner{DevicesFile: o.devicesFile}
	if ns {
		r.Prefix = lvm.NSEnterPrefix()
	}
	if o.lvmSystemDir != "" {
		r.Env = append(r.Env, "LVM_SYSTEM_DIR="+o.lvmSystemDir)
	}
	return r, nil
}

func runNodeagent(cmd *cobra.Command, o nodeagentOptions) error {
	logger := operatorLogger(cmd.ErrOrStderr(), o.logLevel)
	ctrl.SetLogger(logger)
	if o.nodeName == "" {
		return fmt.Errorf("the node name is empty: pass --node-name or set NODE_NAME")
	}
	switch o.configurationPolicy {
	case "", string(lvmv1.ConfigurationPolicyExternal):
	default:
		return fmt.Errorf("--configuration-policy=%q: the only policy is %s", o.configurationPolicy, lvmv1.ConfigurationPolicyExternal)
	}
	runner, err := nodeagentRunner(o)
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	if err := chooseGroup(cmd.Context(), cfg, cmd.Flags(), &o.csi.csiDriverOptions, logger); err != nil {
		return err
	}
	scheme, err := csiScheme(api.NewScheme(), o.csi.csiDriverOptions)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Only this node: a cache of every Node would grow with the cluster.
				&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", o.nodeName)},
			},
		},
		Metrics:                metricsOptions(o.metricsAddr, o.metricsCertDir),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
	})
	if err != nil {
		return fmt.Errorf("create the node agent's manager: %w", err)
	}
	a, err := agent.New(mgr.GetClient(), agent.Options{Reader: mgr.GetAPIReader(),
		NodeName: o.nodeName, Version: version, Namespace: o.namespace, Runner: runner, LVMDConfigPath: o.lvmdConfig, Root: o.deviceRoot, Resync: o.resync,
		DeviceEvents: o.deviceEvents, EventResync: o.eventResync,
		SanlockIOTimeout: o.sanlockIOTimeout,
		ForceExternal:    o.configurationPolicy == string(lvmv1.ConfigurationPolicyExternal),
	})
	if err != nil {
		return err
	}
	if err := a.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupCSINode(mgr, runner, o.nodeName, o.lvmdConfig, o.csi); err != nil {
		return err
	}
	if err := setupSharedCSINode(mgr, runner, a.Shared(), o.nodeName, o.csi); err != nil {
		return err
	}
	if err := setupTransfer(mgr, cfg, o); err != nil {
		return err
	}
	if err := setupDiagnostics(mgr, cfg, a, runner, o); err != nil {
		return err
	}
	if err := addProbes(mgr, o.probeAddr); err != nil {
		return err
	}
	if err := addPageOut(mgr, o.pageOut); err != nil {
		return err
	}
	logger.Info("Starting the node agent", "node", o.nodeName, "namespace", o.namespace, "nsenter", len(runner.Prefix) > 0,
		"devicesFile", runner.DevicesFile, "lvmdConfig", o.lvmdConfig)
	if err := mgr.Start(log.IntoContext(cmd.Context(), logger)); err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	return nil
}

// setupDiagnostics serves the node agent's diagnostics endpoint (nodeagent/diagnostics) for support
// bundles, authorizing callers with TokenReview and SubjectAccessReview.
func setupDiagnostics(mgr ctrl.Manager, cfg *rest.Config, a *agent.Agent, runner lvm.Runner, o nodeagentOptions) error {
	if o.diagnosticsAddr == "0" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for the diagnostics endpoint: %w", err)
	}
	srv, err := diagnostics.New(diagnostics.Options{Node: o.nodeName, Version: version, Runner: runner, Root: o.deviceRoot, LVMDConfigPath: o.lvmdConfig,
		Desired: a.Desired, Authorizer: &diagnostics.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(),
			Access: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: o.namespace, Node: o.nodeName}})
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return srv.ListenAndServe(ctx, o.diagnosticsAddr) })); err != nil {
		return fmt.Errorf("add the diagnostics endpoint: %w", err)
	}
	return nil
}
