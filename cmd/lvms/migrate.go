package main

import (
	"context"
	"fmt"
	"io"
	"os"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/spf13/cobra"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
)

// exitLossy is the exit code of a lossy plan run without --accept-lossy.
const exitLossy = 3

func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "migrate",
		Example: `  lvms migrate plan my-lvmcluster -n openshift-storage
  lvms migrate preflight my-lvmcluster
  lvms migrate apply my-lvmcluster
  lvms migrate verify my-lvmcluster`,
		Short: "Plan and run the migration from v1alpha1 LVMCluster to v2alpha1 LVMNodeSets",
		Long: `Move an LVMCluster (v1alpha1) to LVMNodeSets (v2alpha1) without touching data: volume groups, thin
pools, StorageClass and VolumeSnapshotClass names stay as they are. 'lvms migrate plan' shows what the
LVMCluster becomes and every place where v2alpha1 behaves differently; preflight checks that it can run,
apply runs it node by node (run it again to resume), verify compares before and after, and rollback
hands the nodes back until the last step.`,
	}
	cmd.AddCommand(
		newMigratePlanCommand(),
		newMigratePreflightCommand(),
		newMigrateApplyCommand(),
		newMigrateVerifyCommand(),
		newMigrateRollbackCommand(),
	)
	return cmd
}

// migratePlanOptions are the flags of `lvms migrate plan`.
type migratePlanOptions struct {
	file                string
	output              string
	acceptLossy         bool
	kubeconfig, context string
	namespace           string
}

func newMigratePlanCommand() *cobra.Command {
	o := &migratePlanOptions{}
	cmd := &cobra.Command{
		Use: "plan [LVMCLUSTER]",
		Example: `  lvms migrate plan my-lvmcluster -n openshift-storage
  lvms migrate plan -f lvmcluster.yaml -o yaml > lvmnodesets.yaml`,
		Short: "Show the LVMNodeSets an LVMCluster becomes, and what changes",
		Long: `Plan the migration of an LVMCluster to LVMNodeSets: one set per distinct node selector of its device
classes, volume groups and thin pools unchanged, StorageClass and VolumeSnapshotClass names kept
(namingPolicy Explicit), the default class kept. The plan is computed offline and writes nothing.

The LVMCluster comes from -f (a file, or - for stdin; StorageClasses and VolumeSnapshotClasses in the same
file are taken as the cluster's) or from the cluster (-n, the LVMCluster's name when the namespace has
several). -o text prints a report: what becomes what, then the findings, each with a code, the v1 field
and what it means. -o yaml and -o json print the LVMNodeSets to apply (a multi-document YAML whose
comments list the findings, or a v1 List).`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd, name)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "LVMCluster file (YAML or JSON; - reads stdin); without it the LVMCluster is read from the cluster")
	addOutputFlag(f, &o.output, "text", "yaml", "json")
	f.BoolVar(&o.acceptLossy, "accept-lossy", false, "exit 0 and print the objects although the plan is lossy (the findings are still printed)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVarP(&o.namespace, "namespace", "n", names.DefaultNamespace, "namespace of the LVMCluster (with -f: used when the file's LVMCluster has none)")
	return cmd
}

func (o *migratePlanOptions) run(cmd *cobra.Command, name string) error {
	var in plan.Input
	var err error
	if o.file != "" {
		in, err = o.fromFile(cmd, name)
	} else {
		in, err = o.fromCluster(cmd.Context(), name)
	}
	if err != nil {
		return err
	}
	p, err := plan.Build(in)
	if err != nil {
		return err
	}
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	gate := p.Lossy() && !o.acceptLossy
	switch {
	case o.output == "text":
		err = plan.WriteText(out, p)
	case gate:
		// No objects to pipe into kubectl apply until the findings were read.
		err = plan.WriteText(stderr, p)
	case o.output == "yaml":
		err = writeRendered(out, plan.YAML, p)
	default:
		if err = writeRendered(out, plan.JSON, p); err == nil && len(p.Findings) > 0 {
			err = plan.WriteFindings(stderr, p)
		}
	}
	if err != nil {
		return err
	}
	if gate {
		lossy, _ := p.Counts()
		return &exitError{code: exitLossy, err: fmt.Errorf("the plan is lossy: %d %s behave differently in v2alpha1 (listed above); read them, then run again with --accept-lossy",
			lossy, map[bool]string{true: "mapping", false: "mappings"}[lossy == 1])}
	}
	return nil
}

func writeRendered(w io.Writer, render func(*plan.Plan) ([]byte, error), p *plan.Plan) error {
	data, err := render(p)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func (o *migratePlanOptions) fromFile(cmd *cobra.Command, name string) (plan.Input, error) {
	var data []byte
	var err error
	if o.file == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return plan.Input{}, fmt.Errorf("read %s: %w", o.file, err)
	}
	objs, err := plan.Decode(data)
	if err != nil {
		return plan.Input{}, fmt.Errorf("%s: %w", o.file, err)
	}
	c, err := plan.Select(objs.Clusters, name, o.file)
	if err != nil {
		return plan.Input{}, err
	}
	if c.Namespace == "" { // as kubectl apply -f would place it: -n, else the default the flag shows
		c.Namespace = o.namespace
	}
	return plan.Input{Cluster: c, Existing: objs.Existing()}, nil
}

// fromCluster reads the LVMClusters of the namespace and every StorageClass and VolumeSnapshotClass.
func (o *migratePlanOptions) fromCluster(ctx context.Context, name string) (plan.Input, error) {
	cfg, clusterName, err := kubeConfig(o.kubeconfig, o.context)
	if err != nil {
		return plan.Input{}, err
	}
	scheme := api.NewScheme()
	utilruntime.Must(snapshotv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return plan.Input{}, fmt.Errorf("connect to %s: %w", clusterName, err)
	}
	var clusters lvmv1.LVMClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(o.namespace)); err != nil {
		return plan.Input{}, fmt.Errorf("list LVMClusters in namespace %s of %s: %w", o.namespace, clusterName, err)
	}
	cl, err := plan.Select(clusters.Items, name, fmt.Sprintf("namespace %s of %s", o.namespace, clusterName))
	if err != nil {
		return plan.Input{}, err
	}
	ex := &plan.Existing{}
	var scs storagev1.StorageClassList
	if err := c.List(ctx, &scs); err != nil {
		return plan.Input{}, fmt.Errorf("list StorageClasses of %s: %w", clusterName, err)
	}
	ex.StorageClasses = scs.Items
	var vscs snapshotv1.VolumeSnapshotClassList
	switch err := c.List(ctx, &vscs); {
	case apimeta.IsNoMatchError(err):
		// No snapshot API: the cluster has no VolumeSnapshotClasses, and the operator makes none.
	case err != nil:
		return plan.Input{}, fmt.Errorf("list VolumeSnapshotClasses of %s: %w", clusterName, err)
	default:
		ex.SnapshotClasses = vscs.Items
	}
	return plan.Input{Cluster: cl, Existing: ex}, nil
}
