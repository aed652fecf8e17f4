package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
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
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
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
	return &handover.Migrator{Client: c, Timeout: o.timeout, Progress: progressPrinter(out)}
}

// progressPrinter writes one line per step; on a terminal the line starts with a bar of the step's units.
func progressPrinter(w io.Writer) func(handover.Progress) {
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	return func(p handover.Progress) {
		prefix := fmt.Sprintf("[%s %d/%d]", p.Step, p.Done, p.Total)
		if tty && p.Total > 0 {
			const width = 20
			done := width * p.Done / p.Total
			prefix = fmt.Sprintf("[%s%s] %-14s %d/%d", strings.Repeat("#", done), strings.Repeat("-", width-done), p.Step, p.Done, p.Total)
		}
		fmt.Fprintf(w, "%s %s\n", prefix, p.Message)
	}
}

func newMigratePreflightCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use:   "preflight [LVMCLUSTER]",
		Short: "Check that a planned migration can run: dry-run, permissions, node readiness, claims",
		Long: `Check, without writing anything, that the migration of the LVMCluster can run now: the API server
accepts every object the plan creates (server-side dry run); you may make every write apply and rollback
make (SelfSubjectAccessReview); the LVMCluster is Ready on every node it manages; no other LVMNodeSet selects
those nodes and a planned set selects each; the plan is exact (or --accept-lossy). It also lists every
PersistentVolume and claim on the planned classes with its node, and warns that the node agents' version
cannot be checked (they do not publish it).

Exit codes: 0 every check passed; 2 a check failed (each with its reason and fix); 1 an error.`,
		Args: cobra.MaximumNArgs(1),
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
		Use:   "apply [LVMCLUSTER]",
		Short: "Run a planned migration node by node; run it again to resume",
		Long: `Migrate the LVMCluster to the LVMNodeSets its plan makes, without touching data: mark the LVMCluster
to keep its storage when removed and record what v1 shows; create the sets; hand the nodes over one at a
time (sorted), each only counting once its LVMNode status shows the volume groups, devices and thin pools
v1 reported; wait for the sets to adopt the StorageClasses and VolumeSnapshotClasses in place; remove the
LVMCluster (its disks are not touched). Progress is recorded in the API, so running apply again, from any
machine, resumes where it stopped. Until the LVMCluster's removal, lvms migrate rollback undoes it.

Run lvms migrate preflight first. Exit codes: 0 the migration is complete; 3 the plan is lossy and
--accept-lossy was not given; 1 an error (the message says which step stopped and what to do).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, p, err := o.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			if p != nil && p.Lossy() && !o.acceptLossy {
				lossy, _ := p.Counts()
				return &exitError{code: exitLossy, err: fmt.Errorf("the plan is lossy: %d mapping(s) behave differently in v2alpha1; read lvms migrate plan, then run again with --accept-lossy", lossy)}
			}
			return o.migrator(c, cmd.OutOrStdout()).Apply(cmd.Context(), o.namespace, name, p)
		},
	}
	o.flags(cmd, true, true)
	return cmd
}

func newMigrateVerifyCommand() *cobra.Command {
	o := &migrateRunOptions{}
	cmd := &cobra.Command{
		Use:   "verify [LVMCLUSTER]",
		Short: "Compare volume groups, volumes, PVs, classes and capacity before and after a migration",
		Long: `Compare what the migration recorded when it started (volume groups with their devices and thin pools,
LogicalVolumes, PersistentVolumes, StorageClasses and VolumeSnapshotClasses, free capacity per node) with
the cluster now: handed-over nodes as their LVMNode status shows them, the others as the LVMCluster does.

Exit codes: 0 no difference; 2 differences (each listed); 1 an error (for example no migration record).`,
		Args: cobra.MaximumNArgs(1),
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
		Use:   "rollback [LVMCLUSTER]",
		Short: "Hand migrated nodes back to the LVMCluster and remove the sets, until the last step",
		Long: `Undo a migration that has not reached its last step: hand every node back to the LVMCluster (the
last handed over first), delete the LVMNodeSets without touching the storage (they are marked to keep it),
wait for the LVMCluster to own its classes again, and unmark it. Once apply has asked for the LVMCluster's
removal, rollback refuses and says why: there is nothing left to hand the nodes back to.

Exit codes: 0 rolled back; 1 an error or a refusal.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, p, err := o.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			return o.migrator(c, cmd.OutOrStdout()).Rollback(cmd.Context(), o.namespace, name, p)
		},
	}
	o.flags(cmd, false, true)
	return cmd
}
