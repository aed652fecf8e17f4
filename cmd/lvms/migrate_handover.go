package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/progress"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// exitFound is the exit code of a preflight that found a problem and of a verify that found a difference.
const exitFound = 2

// migrateRunOptions are the flags shared by preflight, apply, verify and rollback.
type migrateRunOptions struct {
	kubeconfig, context string
	namespace           string
	acceptLossy         bool
	timeout             time.Duration
	// newClient is replaced by tests; nil connects with kubeconfig and context.
	newClient func() (client.Client, error)
}

func (o *migrateRunOptions) flags(cmd *cobra.Command, lossy, timeout bool) {
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVarP(&o.namespace, "namespace", "n", names.DefaultNamespace, "namespace of the LVMCluster")
	if lossy {
		f.BoolVar(&o.acceptLossy, "accept-lossy", false, "go on although the plan is lossy (read lvms migrate plan first)")
	}
	if timeout {
		f.DurationVar(&o.timeout, "timeout", handover.DefaultTimeout, "how long each wait (a node's adoption, the classes, the removal) may take before the command stops; run it again to keep waiting")
	}
}

func (o *migrateRunOptions) client() (client.Client, error) {
	if o.newClient != nil {
		return o.newClient()
	}
	cfg, clusterName, err := kubeConfig(o.kubeconfig, o.context)
	if err != nil {
		return nil, err
	}
	scheme := api.NewScheme()
	utilruntime.Must(snapshotv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", clusterName, err)
	}
	return c, nil
}

// connect is the start of every step that has a target: the client, the LVMCluster's name and its plan.
func (o *migrateRunOptions) connect(ctx context.Context, args []string) (client.Client, string, *plan.Plan, error) {
	c, err := o.client()
	if err != nil {
		return nil, "", nil, err
	}
	name, p, err := o.target(ctx, c, args)
	return c, name, p, err
}

// target finds the LVMCluster's name (the argument, or the namespace's only LVMCluster) and plans its
// migration; the plan is nil once the LVMCluster is gone.
func (o *migrateRunOptions) target(ctx context.Context, c client.Client, args []string) (string, *plan.Plan, error) {
	name := ""
	if len(args) == 1 {
		name = args[0]
	} else {
		var list lvmv1.LVMClusterList
		if err := c.List(ctx, &list, client.InNamespace(o.namespace)); err != nil {
			return "", nil, fmt.Errorf("list LVMClusters in %s: %w", o.namespace, err)
		}
		cl, err := plan.Select(list.Items, "", "namespace "+o.namespace)
		if err != nil {
			return "", nil, fmt.Errorf("%w (once the LVMCluster is removed, name it: lvms migrate <step> NAME)", err)
		}
		name = cl.Name
	}
	p, err := handover.PlanFromCluster(ctx, c, o.namespace, name)
	return name, p, err
}

func (o *migrateRunOptions) migrator(c client.Client, out io.Writer) *handover.Migrator {
	return &handover.Migrator{Client: c, Timeout: o.timeout, Progress: progressPrinter(out, isTerminal(out))}
}

// isTerminal reports whether w is a terminal (not a pipe, a file or a test's buffer).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressPrinter writes one line per progress event. On a terminal the line starts with a bar of the
// step's units; elsewhere (a pipe, a file, CI logs) it is plain and colourless: "[step done/total] message".
func progressPrinter(w io.Writer, tty bool) func(handover.Progress) {
	bar := progress.New(progress.WithWidth(20), progress.WithoutPercentage(), progress.WithColorProfile(termenv.NewOutput(w).Profile))
	return func(p handover.Progress) {
		if !tty || p.Total <= 0 {
			fmt.Fprintf(w, "[%s %d/%d] %s\n", p.Step, p.Done, p.Total, p.Message)
			return
		}
		fmt.Fprintf(w, "%s %-14s %d/%d %s\n", bar.ViewAs(float64(p.Done)/float64(p.Total)), p.Step, p.Done, p.Total, p.Message)
	}
}

// announce lists, on a terminal, the steps apply or rollback is about to take, by the names its progress
// lines use, with those the migration's record says are done. It says nothing when the state cannot be
// read: the step itself then reports why.
func (o *migrateRunOptions) announce(ctx context.Context, c client.Client, out io.Writer, a handover.Action, name string, p *plan.Plan) {
	if !isTerminal(out) || p == nil {
		return
	}
	rec, _, err := handover.ReadRecord(ctx, c, o.namespace, name)
	if err != nil {
		return
	}
	if a == handover.ActionRollback {
		writeRollbackSteps(out, o.namespace, name, rec)
		return
	}
	var nodes int
	if rec != nil {
		nodes = len(rec.Nodes)
	} else {
		nodes = managedNodes(ctx, c, o.namespace, name)
	}
	writeApplySteps(out, o.namespace, name, p, rec, nodes)
}

// managedNodes counts the nodes apply records and hands over: those whose LVMVolumeGroupNodeStatus the
// LVMCluster controls. It returns -1 when they cannot be read.
func managedNodes(ctx context.Context, c client.Client, ns, name string) int {
	var cl lvmv1.LVMCluster
	var list lvmv1.LVMVolumeGroupNodeStatusList
	if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cl) != nil || c.List(ctx, &list, client.InNamespace(ns)) != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == cl.UID {
			n++
		}
	}
	return n
}

// stepLine is one step of the list: a mark when done, the step's name as progress names it, what it does.
func stepLine(w io.Writer, done bool, step, what string) {
	mark := " "
	if done {
		mark = "✓"
	}
	fmt.Fprintf(w, "  %s %-14s %s\n", mark, step, what)
}

// writeApplySteps lists apply's steps; nodes < 0 means the count is unknown. rec is nil before the first run.
func writeApplySteps(w io.Writer, ns, name string, p *plan.Plan, rec *record.Record, nodes int) {
	reached := func(s record.Step) bool { return rec != nil && rec.Step.Reached(s) }
	var sets []string
	for _, s := range p.NodeSets {
		sets = append(sets, s.Name)
	}
	fmt.Fprintf(w, "Migrating LVMCluster %s/%s to LVMNodeSets in 5 steps; run apply again to resume from any of them:\n", ns, name)
	stepLine(w, rec != nil, "mark", "mark the LVMCluster to keep its storage when removed, and record what v1 shows")
	stepLine(w, reached(record.StepSetsCreated), "create-sets", fmt.Sprintf("create %d LVMNodeSet(s): %s", len(sets), strings.Join(sets, ", ")))
	handOver := "hand over the nodes the LVMCluster manages one at a time, each once its volume groups are adopted"
	if nodes >= 0 {
		handOver = fmt.Sprintf("hand over %d node(s) one at a time, each once its volume groups are adopted", nodes)
	}
	if rec != nil && !reached(record.StepNodesHandedOver) && len(rec.HandedOver) > 0 {
		handOver += fmt.Sprintf(" (%d done)", len(rec.HandedOver))
	}
	stepLine(w, reached(record.StepNodesHandedOver), "hand-over", handOver)
	stepLine(w, reached(record.StepClassesAdopted), "adopt-classes", "wait for the LVMNodeSets to adopt the StorageClasses and VolumeSnapshotClasses in place")
	stepLine(w, reached(record.StepClusterRemoved), "remove-cluster", "remove the LVMCluster; its volume groups, volumes and classes stay")
	fmt.Fprintln(w)
}

// writeRollbackSteps lists rollback's steps; without a record there is nothing to list (rollback says why).
func writeRollbackSteps(w io.Writer, ns, name string, rec *record.Record) {
	if rec == nil {
		return
	}
	fmt.Fprintf(w, "Rolling back the migration of LVMCluster %s/%s in 3 steps; run rollback again to resume:\n", ns, name)
	stepLine(w, false, "hand-back", fmt.Sprintf("hand the handed-over nodes (%d in the record) back to the LVMCluster, the last first", len(rec.HandedOver)))
	stepLine(w, false, "delete-sets", fmt.Sprintf("delete the LVMNodeSets (%s), keeping their storage", strings.Join(rec.Sets, ", ")))
	stepLine(w, false, "done", "wait for the LVMCluster to own its classes again, then unmark it")
	fmt.Fprintln(w)
}

func newMigratePreflightCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use: "preflight [LVMCLUSTER]",
		Example: `  lvms migrate preflight my-lvmcluster -n openshift-storage
  lvms migrate preflight my-lvmcluster --accept-lossy`,
		Short: "Check that a planned migration can run: dry-run, permissions, node readiness, claims",
		Long: `Check, without writing anything, that the migration of the LVMCluster can run now: the API server
accepts every object the plan creates (server-side dry run); you may make every write apply and rollback
make (SelfSubjectAccessReview); the LVMCluster is Ready on every node it manages; no other LVMNodeSet selects
those nodes and a planned set selects each; the plan is exact (or --accept-lossy). It also lists every
PersistentVolume and claim on the planned classes with its node. The agent-version check wants the node
agent of every node still to hand over to say (in its LVMVolumeGroupNodeStatus's
lvm.topolvm.io/node-facts annotation) that it adopts existing volume groups as they are, and prints the
versions it found; an agent that does not say so (an older release) fails it: upgrade the DaemonSet first.`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, p, err := o.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			if p == nil {
				return fmt.Errorf("no LVMCluster %s/%s to migrate", o.namespace, name)
			}
			checks, err := o.migrator(c, cmd.OutOrStdout()).Preflight(cmd.Context(), p, handover.PreflightOptions{AcceptLossy: o.acceptLossy})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			failed := 0
			for _, ch := range checks {
				fmt.Fprintf(out, "[%s] %s: %s\n", ch.Verdict, ch.Name, ch.Reason)
				if ch.Fix != "" && ch.Verdict != handover.Pass {
					fmt.Fprintf(out, "    fix: %s\n", ch.Fix)
				}
				for _, d := range ch.Details {
					fmt.Fprintf(out, "    %s\n", d)
				}
				if ch.Verdict == handover.Fail {
					failed++
				}
			}
			if failed > 0 {
				return &exitError{code: exitFound, err: fmt.Errorf("preflight failed: %d check(s) above; fix them and run preflight again", failed)}
			}
			return nil
		},
	}
	o.flags(cmd, true, false)
	return cmd
}

func newMigrateApplyCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use: "apply [LVMCLUSTER]",
		Example: `  lvms migrate apply my-lvmcluster -n openshift-storage
  lvms migrate apply my-lvmcluster --accept-lossy --timeout 30m`,
		Short: "Run a planned migration node by node; run it again to resume",
		Long: `Migrate the LVMCluster to the LVMNodeSets its plan makes, without touching data: mark the LVMCluster
to keep its storage when removed and record what v1 shows; create the sets; hand the nodes over one at a
time (sorted), each only counting once its LVMNode status shows the volume groups, devices and thin pools
v1 reported; wait for the sets to adopt the StorageClasses and VolumeSnapshotClasses in place; remove the
LVMCluster (its disks are not touched). Progress is recorded in the API, so running apply again, from any
machine, resumes where it stopped. Until the LVMCluster's removal, lvms migrate rollback undoes it.

Run lvms migrate preflight first.`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, p, err := o.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			if p != nil && p.Lossy() && !o.acceptLossy {
				lossy, _ := p.Counts()
				return &exitError{code: exitLossy, err: fmt.Errorf("the plan is lossy: %s in v2alpha1; read lvms migrate plan, then run again with --accept-lossy", plan.LossyMappings(lossy))}
			}
			o.announce(cmd.Context(), c, cmd.OutOrStdout(), handover.ActionApply, name, p)
			return o.migrator(c, cmd.OutOrStdout()).Apply(cmd.Context(), o.namespace, name, p)
		},
	}
	o.flags(cmd, true, true)
	return cmd
}

func newMigrateVerifyCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use:     "verify [LVMCLUSTER]",
		Example: `  lvms migrate verify my-lvmcluster -n openshift-storage`,
		Short:   "Compare volume groups, volumes, PVs, classes and capacity before and after a migration",
		Long: `Compare what the migration recorded when it started (volume groups with their devices and thin pools,
LogicalVolumes, PersistentVolumes, StorageClasses and VolumeSnapshotClasses, free capacity per node) with
the cluster now: handed-over nodes as their LVMNode status shows them, the others as the LVMCluster does.`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			} else if name, _, err = o.target(cmd.Context(), c, args); err != nil {
				return err
			}
			v, err := o.migrator(c, cmd.OutOrStdout()).Verify(cmd.Context(), o.namespace, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Migration of LVMCluster %s/%s at step %s: %d node(s), %d LogicalVolume(s), %d PersistentVolume(s), %d StorageClass(es) recorded\n",
				o.namespace, name, v.Step, len(v.Before.Nodes), len(v.Before.LogicalVolumes), len(v.Before.PersistentVolumes), len(v.Before.StorageClasses))
			if len(v.Differences) == 0 {
				fmt.Fprintln(out, "No difference.")
				return nil
			}
			for _, d := range v.Differences {
				fmt.Fprintf(out, "  - %s\n", d)
			}
			return &exitError{code: exitFound, err: fmt.Errorf("%d difference(s) between before and after (listed above)", len(v.Differences))}
		},
	}
	o.flags(cmd, false, false)
	return cmd
}

func newMigrateRollbackCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use:     "rollback [LVMCLUSTER]",
		Example: `  lvms migrate rollback my-lvmcluster -n openshift-storage --timeout 20m`,
		Short:   "Hand migrated nodes back to the LVMCluster and remove the sets, until the last step",
		Long: `Undo a migration that has not reached its last step: hand every node back to the LVMCluster (the
last handed over first), delete the LVMNodeSets without touching the storage (they are marked to keep it),
wait for the LVMCluster to own its classes again, and unmark it. Once apply has asked for the LVMCluster's
removal, rollback refuses and says why: there is nothing left to hand the nodes back to.

Exit codes: 0 rolled back; 1 an error or a refusal.`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, p, err := o.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			o.announce(cmd.Context(), c, cmd.OutOrStdout(), handover.ActionRollback, name, p)
			return o.migrator(c, cmd.OutOrStdout()).Rollback(cmd.Context(), o.namespace, name, p)
		},
	}
	o.flags(cmd, false, true)
	return cmd
}
