package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/move"
)

// movePollInterval is how often --wait reads the claim's move status.
const movePollInterval = 2 * time.Second

// moveClock is what --wait polls with; tests replace it so that no test depends on the wall clock.
type moveClock struct {
	now func() time.Time
	// sleep waits d or until ctx ends.
	sleep    func(ctx context.Context, d time.Duration) error
	interval time.Duration
}

func realMoveClock() moveClock {
	return moveClock{now: time.Now, interval: movePollInterval, sleep: func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}}
}

// moveOptions are the flags every `lvms move` command shares.
type moveOptions struct {
	kubeconfig, context string
	namespace           string
	clock               moveClock
}

func (o *moveOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the claim (required)")
}

// claim checks the arguments and connects with the user's own kubeconfig: what the user may do to a move
// is what the API server lets them do to the claim. check, when not nil, checks the other flags first.
func (o *moveOptions) claim(cmd *cobra.Command, args []string, check func() error) (client.Client, types.NamespacedName, error) {
	if len(args) != 1 || args[0] == "" {
		return nil, types.NamespacedName{}, fmt.Errorf("name one PersistentVolumeClaim: %s NAME -n NAMESPACE", cmd.CommandPath())
	}
	if o.namespace == "" {
		return nil, types.NamespacedName{}, fmt.Errorf("-n/--namespace is required: the namespace of claim %s (%s %s -n NAMESPACE)", args[0], cmd.CommandPath(), args[0])
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, types.NamespacedName{}, err
		}
	}
	cfg, clusterName, err := kubeConfig(o.kubeconfig, o.context)
	if err != nil {
		return nil, types.NamespacedName{}, err
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("connect to %s: %w", clusterName, err)
	}
	return c, types.NamespacedName{Namespace: o.namespace, Name: args[0]}, nil
}

func newMoveCommand() *cobra.Command { return newMoveCommandWith(realMoveClock()) }

func newMoveCommandWith(clock moveClock) *cobra.Command {
	cmd := &cobra.Command{
		Use: "move",
		Example: `  lvms move pvc data-db-0 -n shop --to-node worker-2 --wait
  lvms move status data-db-0 -n shop
  lvms move confirm data-db-0 -n shop --id 3f2a9c1e07b4d5a6`,
		Short: "Move a PersistentVolumeClaim's volume to another node",
		Long: `Move the LVMS volume of a PersistentVolumeClaim to another node: LVMS creates a volume of the same
class and size there, copies the data block by block from node agent to node agent over mutual TLS,
verifies the SHA-256 of both copies, and swaps the claim onto the new volume (the claim is deleted and
created again with the same name, bound to the new volume: its UID changes). The source volume is kept
until you confirm.

You act with your own kubeconfig: a move needs get, patch and delete on the claim in its namespace (it deletes
the claim and creates it again), nothing else; abort needs only get and patch.
LVMS never scales your workloads: scale what uses the claim to zero before you move it, start it again
when the claim uses the new volume, check the data, then confirm.

  lvms move pvc NAME -n NAMESPACE --to-node NODE [--wait]   request the move
  lvms move status NAME -n NAMESPACE                        where it is
  lvms move confirm NAME -n NAMESPACE --id ID               release the source volume
  lvms move abort NAME -n NAMESPACE                         undo it, before the swap`,
	}
	cmd.AddCommand(newMovePVCCommand(clock), newMoveStatusCommand(), newMoveConfirmCommand(), newMoveAbortCommand())
	return cmd
}

func newMovePVCCommand(clock moveClock) *cobra.Command {
	o := &moveOptions{clock: clock}
	var node string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use: "pvc NAME -n NAMESPACE --to-node NODE",
		Example: `  lvms move pvc data-db-0 -n shop --to-node worker-2
  lvms move pvc data-db-0 -n shop --to-node worker-2 --wait --timeout 2h`,
		Short: "Request to move a claim's volume to another node",
		Long: `Request to move the volume of PersistentVolumeClaim NAME to node NODE. The request is an annotation
on the claim (` + moveapi.AnnotationToNode + `); the LVMS operator then checks that the claim is Bound to an
LVMS volume, that NODE has the claim's device class with enough free space and that no pod uses the
claim, and runs the move. Nothing changes while a check fails; lvms move status says why.

Scale the workload that uses the claim to zero first, and keep it there until the move reaches
AwaitingConfirmation: the check refuses a claim in use and the swap waits until no pod uses it.

--wait follows the move, printing each phase and the copy's progress, until it reaches
AwaitingConfirmation (exit 0), is refused (exit 1, with the reason) or is aborted (exit 1). The move goes
on without the command: stopping --wait stops nothing.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := o.claim(cmd, args, func() error {
				if node == "" {
					return fmt.Errorf("--to-node is required: the node to move the volume to (kubectl get nodes lists them)")
				}
				if timeout <= 0 {
					return fmt.Errorf("--timeout %s: give a positive duration, for example 30m", timeout)
				}
				return nil
			})
			if err != nil {
				return err
			}
			return o.request(cmd.Context(), cmd.OutOrStdout(), c, key, node, wait, timeout)
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&node, "to-node", "", "node to move the volume to (required)")
	f.BoolVar(&wait, "wait", false, "follow the move until it awaits your confirmation, is refused or is aborted")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: how long to follow the move before giving up (the move goes on)")
	return cmd
}

func (o *moveOptions) request(ctx context.Context, w io.Writer, c client.Client, key types.NamespacedName, node string, wait bool, timeout time.Duration) error {
	before, hadStatus, err := move.GetStatus(ctx, c, key)
	if err != nil {
		return err
	}
	if err := move.Request(ctx, c, key, node); err != nil {
		return err
	}
	ref := claimRef(key)
	if hadStatus && before.Phase.Active() {
		fmt.Fprintf(w, "Claim %s is being moved to node %s already (move %s, %s).\n\n", key, node, before.ID, before.Phase)
	} else {
		fmt.Fprintf(w, "Requested: move the volume of claim %s to node %s (annotation %s on the claim).\n\n", key, node, moveapi.AnnotationToNode)
	}
	fmt.Fprintf(w, `What LVMS does:
  1. checks that the claim is Bound to an LVMS volume, that node %s has the claim's device class with
     enough free space and can run the claim's pods, and that no pod uses the claim; if not, nothing
     changes and lvms move status says why (LVMS does not check again by itself: fix the cause and run
     this command again)
  2. holds the source volume: from then on its node refuses it to every pod (lvms move status names a
     pod that tried), so nothing writes it while it moves
  3. creates a volume of the same class and size on %s and copies the data block by block,
     node agent to node agent over mutual TLS, and verifies that both copies have the same SHA-256
  4. swaps: the claim is deleted; once it is gone the source is read whole again, and only if it is
     still what was copied is the claim created again with the same name, bound to the new volume
     (its UID changes); if not, the claim goes back to its own volume and the move stops, saying why
  5. keeps the source volume (reclaim policy Retain) until you confirm

What you do:
  1. now: scale the workload that uses the claim to zero (kubectl scale --replicas=0 ...) and keep it
     there until the move reaches AwaitingConfirmation; LVMS never scales your workloads
  2. at AwaitingConfirmation: start the workload again (it runs on %s now) and check its data
  3. then release the source volume: lvms move confirm %s --id ID (lvms move status shows the ID);
     until you confirm, the source volume keeps the data as it was before the move
`, node, node, node, ref)
	if hadStatus && before.Phase == moveapi.PhaseRefused && before.TargetNode == node && before.Message != "" {
		fmt.Fprintf(w, "\nThe last check of this request said: %s\n", before.Message)
	}
	if !wait {
		fmt.Fprintf(w, "\nFollow it: lvms move status %s (or run this again with --wait).\n", ref)
		return nil
	}
	fmt.Fprintf(w, "\nFollowing the move (Ctrl-C stops following, not the move):\n")
	return o.follow(ctx, w, c, key, timeout)
}

// follow polls the claim's move status until the move awaits confirmation, is refused or aborted, or
// timeout passes. A request clears the status of the request or move before it (move.Request), so what
// the claim shows is the operator's answer.
func (o *moveOptions) follow(ctx context.Context, w io.Writer, c client.Client, key types.NamespacedName, timeout time.Duration) error {
	clk := o.clock
	start := clk.now()
	deadline := start.Add(timeout)
	ref := claimRef(key)
	var last *moveapi.Status
	lastProgress, swapNoted := "", false
	for {
		st, ok, err := move.GetStatus(ctx, c, key)
		switch {
		case err != nil && last != nil && last.Phase.Active() && claimGone(ctx, c, key):
			// The swap deletes the claim and creates it again.
			if !swapNoted {
				fmt.Fprintf(w, "  the claim is deleted for the swap; LVMS creates it again bound to the new volume\n")
				swapNoted = true
			}
		case err != nil:
			return err
		case ok:
			reportMove(w, last, st, &lastProgress)
			last = &st
			switch st.Phase {
			case moveapi.PhaseAwaitingConfirmation:
				fmt.Fprintf(w, `
The claim uses the new volume (PersistentVolume %s on node %s); the source PersistentVolume %s is kept.
Now: start the workload again, check its data, then release the source volume:
  lvms move confirm %s --id %s
`, st.TargetPV, st.TargetNode, st.SourcePV, ref, st.ID)
				return nil
			case moveapi.PhaseDone:
				fmt.Fprintf(w, "\nThe move is confirmed already: %s\n", st.Message)
				return nil
			case moveapi.PhaseRefused:
				return fmt.Errorf("the move of claim %s to node %s was refused: %s\nNothing was changed. LVMS does not check again by itself: once the cause is fixed, run this command again, or withdraw the request: lvms move abort %s",
					key, st.TargetNode, st.Message, ref)
			case moveapi.PhaseAborted:
				return fmt.Errorf("the move of claim %s was aborted: %s", key, st.Message)
			}
		}
		if !clk.now().Before(deadline) {
			if last == nil {
				return fmt.Errorf("LVMS did not answer the request to move claim %s within %s: is the LVMS operator running? The request stands (lvms move status %s)", key, timeout, ref)
			}
			return fmt.Errorf("claim %s is still in phase %s after %s; the move goes on: lvms move status %s", key, last.Phase, timeout, ref)
		}
		if err := clk.sleep(ctx, clk.interval); err != nil {
			return fmt.Errorf("stopped following the move of claim %s (it goes on: lvms move status %s): %w", key, ref, err)
		}
	}
}

// claimGone reports whether the claim does not exist (the swap deleted it).
func claimGone(ctx context.Context, c client.Client, key types.NamespacedName) bool {
	return apierrors.IsNotFound(c.Get(ctx, key, &corev1.PersistentVolumeClaim{}))
}

// reportMove prints what changed since prev: the phase, the message, the progress (each percent once).
func reportMove(w io.Writer, prev *moveapi.Status, st moveapi.Status, lastProgress *string) {
	if prev == nil || prev.Phase != st.Phase {
		fmt.Fprintf(w, "%-21s %s\n", st.Phase, phaseWords(st))
	}
	if st.Message != "" && (prev == nil || prev.Message != st.Message || prev.Phase != st.Phase) && st.Phase != moveapi.PhaseRefused && st.Message != "copying" {
		fmt.Fprintf(w, "  %s\n", st.Message)
	}
	if p := progressWords(st.Progress); p != "" && p != *lastProgress {
		fmt.Fprintf(w, "  %s\n", p)
		*lastProgress = p
	}
}

// phaseWords says in plain words what a phase means.
func phaseWords(st moveapi.Status) string {
	switch st.Phase {
	case moveapi.PhaseCreatingTarget:
		return fmt.Sprintf("the checks passed; creating volume %s on node %s (the source volume's reclaim policy is Retain until you confirm)", st.TargetPV, st.TargetNode)
	case moveapi.PhaseCopying:
		return fmt.Sprintf("copying block by block to node %s, agent to agent over mutual TLS; both agents then report the SHA-256 of the whole volume", st.TargetNode)
	case moveapi.PhaseSwapping:
		sum := ""
		if st.SHA256 != "" {
			sum = " (" + st.SHA256 + ")"
		}
		return fmt.Sprintf("both copies have the same SHA-256%s; swapping: the claim is deleted and created again bound to PersistentVolume %s (its UID changes), once no pod uses it", sum, st.TargetPV)
	case moveapi.PhaseAwaitingConfirmation:
		return fmt.Sprintf("the claim uses PersistentVolume %s on node %s; the source PersistentVolume %s is kept until you confirm", st.TargetPV, st.TargetNode, st.SourcePV)
	case moveapi.PhaseDone:
		return "confirmed"
	case moveapi.PhaseAborted:
		return "aborted"
	case moveapi.PhaseRefused:
		return "the checks failed; nothing was changed"
	}
	return ""
}

// progressWords turns the receiver's "<chunks>/<total>" into words; "" when there is none.
func progressWords(p string) string {
	if p == "" {
		return ""
	}
	a, b, ok := strings.Cut(p, "/")
	done, err1 := strconv.ParseInt(a, 10, 64)
	total, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || total <= 0 || done < 0 {
		return "progress " + p
	}
	return fmt.Sprintf("copied %d of %d chunks (%d%%)", done, total, min(done, total)*100/total)
}

func claimRef(key types.NamespacedName) string { return key.Name + " -n " + key.Namespace }

func newMoveStatusCommand() *cobra.Command {
	o := &moveOptions{}
	var output string
	cmd := &cobra.Command{
		Use: "status NAME -n NAMESPACE",
		Example: `  lvms move status data-db-0 -n shop
  lvms move status data-db-0 -n shop -o json`,
		Short: "Show where the move of a claim's volume is",
		Long: `Show the move of PersistentVolumeClaim NAME as LVMS shows it on the claim: the phase, the move's ID
(lvms move confirm needs it), the source and target PersistentVolumes and nodes, the copy's progress and
LVMS's message. -o json prints the status object the claim carries ({} when it carries none).

Phases: Refused (the checks failed, nothing changed), CreatingTarget, Copying, Swapping,
AwaitingConfirmation (the claim uses the new volume, the source is kept), Done (confirmed), Aborted.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := o.claim(cmd, args, func() error {
				return nil
			})
			if err != nil {
				return err
			}
			st, ok, err := move.GetStatus(cmd.Context(), c, key)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				var v any = struct{}{}
				if ok {
					v = st
				}
				b, _ := json.MarshalIndent(v, "", "  ")
				_, err := fmt.Fprintf(w, "%s\n", b)
				return err
			}
			if !ok {
				pvc := &corev1.PersistentVolumeClaim{}
				if err := c.Get(cmd.Context(), key, pvc); err == nil && pvc.Annotations[moveapi.AnnotationToNode] != "" {
					fmt.Fprintf(w, "Claim %s: a move to node %s is requested; LVMS has not answered yet (is the LVMS operator running?).\n", key, pvc.Annotations[moveapi.AnnotationToNode])
					return nil
				}
				fmt.Fprintf(w, "Claim %s is not being moved.\n", key)
				return nil
			}
			writeMoveStatus(w, key, st, sourceNode(cmd.Context(), c, st.SourcePV))
			return nil
		},
	}
	o.flags(cmd)
	addOutputFlag(cmd.Flags(), &output, "text", "json")
	return cmd
}

// writeMoveStatus prints a move's status in short human form, and what to do next.
func writeMoveStatus(w io.Writer, key types.NamespacedName, st moveapi.Status, srcNode string) {
	id := ""
	if st.ID != "" {
		id = " (move " + st.ID + ")"
	}
	fmt.Fprintf(w, "Claim %s: %s%s\n", key, st.Phase, id)
	if st.SourcePV != "" {
		from := "PersistentVolume " + st.SourcePV
		if srcNode != "" {
			from += " on node " + srcNode
		}
		fmt.Fprintf(w, "  from:     %s\n", from)
	}
	to := "node " + st.TargetNode
	if st.TargetPV != "" {
		to = "PersistentVolume " + st.TargetPV + " on " + to
	}
	fmt.Fprintf(w, "  to:       %s\n", to)
	if p := progressWords(st.Progress); p != "" {
		fmt.Fprintf(w, "  progress: %s\n", p)
	}
	if st.SHA256 != "" {
		fmt.Fprintf(w, "  sha256:   %s (both copies)\n", st.SHA256)
	}
	if st.Message != "" {
		fmt.Fprintf(w, "  message:  %s\n", st.Message)
	}
	ref := claimRef(key)
	switch st.Phase {
	case moveapi.PhaseRefused:
		fmt.Fprintf(w, "Nothing was changed. Fix what the message says, then ask again (lvms move pvc %s --to-node %s): LVMS does not check again by itself. Withdraw the request with lvms move abort %s.\n", ref, st.TargetNode, ref)
	case moveapi.PhaseCreatingTarget, moveapi.PhaseCopying:
		fmt.Fprintf(w, "Keep the workload that uses the claim scaled to zero until AwaitingConfirmation. To undo the move: lvms move abort %s\n", ref)
	case moveapi.PhaseSwapping:
		fmt.Fprintf(w, "Keep the workload that uses the claim scaled to zero: the swap waits until no pod uses the claim. The move can no longer be aborted.\n")
	case moveapi.PhaseAwaitingConfirmation:
		fmt.Fprintf(w, "Start the workload again, check its data, then release the source volume: lvms move confirm %s --id %s\n", ref, st.ID)
	}
}

// sourceNode is the node of the source PersistentVolume, from its node affinity; "" when the user may
// not read PersistentVolumes (they are cluster-scoped) or it names none.
func sourceNode(ctx context.Context, c client.Client, pvName string) string {
	if pvName == "" {
		return ""
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, types.NamespacedName{Name: pvName}, pv); err != nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	keys := []string{driver.New(false).TopologyKey(), driver.New(true).TopologyKey()}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			for _, k := range keys {
				if e.Key == k && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
					return e.Values[0]
				}
			}
		}
	}
	return ""
}

func newMoveConfirmCommand() *cobra.Command {
	o := &moveOptions{}
	var id string
	cmd := &cobra.Command{
		Use:     "confirm NAME -n NAMESPACE --id ID",
		Example: `  lvms move confirm data-db-0 -n shop --id 3f2a9c1e07b4d5a6`,
		Short:   "Confirm a move: release the source volume",
		Long: `Confirm the move of PersistentVolumeClaim NAME once the claim uses the new volume (phase
AwaitingConfirmation) and you checked its data. ID is the move's ID as lvms move status shows it, so a
confirmation never applies to another move.

LVMS then restores the reclaim policy the source PersistentVolume had before the move (it was Retain
during the move): with Delete, the source volume is deleted and its space on the source node freed; with
Retain, it stays until you delete the PersistentVolume yourself. This cannot be undone.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := o.claim(cmd, args, nil)
			if err != nil {
				return err
			}
			ctx, ref := cmd.Context(), claimRef(key)
			st, ok, err := move.GetStatus(ctx, c, key)
			if err != nil {
				return err
			}
			waiting := ok && st.Phase == moveapi.PhaseAwaitingConfirmation
			if id == "" {
				if waiting {
					return fmt.Errorf("--id is required: the ID of the move you confirm; claim %s awaits confirmation of move %s (lvms move confirm %s --id %s)", key, st.ID, ref, st.ID)
				}
				return fmt.Errorf("--id is required: the ID of the move you confirm, as lvms move status %s shows it", ref)
			}
			if err := move.Confirm(ctx, c, key, id); err != nil {
				if waiting && st.ID != id {
					return fmt.Errorf("%w: lvms move confirm %s --id %s", err, ref, st.ID)
				}
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Confirmed move %s of claim %s.\n", id, key)
			fmt.Fprintf(w, `The claim keeps using PersistentVolume %s on node %s.
LVMS now gives the source PersistentVolume %s back the reclaim policy it had before the move (Retain
during the move): with Delete, the source volume is deleted and its space on the source node freed; with
Retain, it stays until you delete the PersistentVolume yourself. This cannot be undone.
lvms move status %s shows Done once LVMS has done it.
`, st.TargetPV, st.TargetNode, st.SourcePV, ref)
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "the move's ID, as lvms move status shows it (required)")
	return cmd
}

func newMoveAbortCommand() *cobra.Command {
	o := &moveOptions{}
	cmd := &cobra.Command{
		Use:     "abort NAME -n NAMESPACE",
		Example: `  lvms move abort data-db-0 -n shop`,
		Short:   "Abort a move before the swap, or withdraw a request",
		Long: `Abort the move of PersistentVolumeClaim NAME. Before the swap, LVMS deletes the volume it created on the
target node and restores the source PersistentVolume's reclaim policy; the claim keeps its volume and
its data. A request that was refused or not yet answered is withdrawn. From the swap on (Swapping,
AwaitingConfirmation) a move cannot be aborted: the claim uses, or is switching to, the new volume.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := o.claim(cmd, args, nil)
			if err != nil {
				return err
			}
			ctx, ref := cmd.Context(), claimRef(key)
			st, ok, err := move.GetStatus(ctx, c, key)
			if err != nil {
				return err
			}
			if err := move.Abort(ctx, c, key); err != nil {
				if !ok {
					return fmt.Errorf("%w: nothing to abort", err)
				}
				return err
			}
			w := cmd.OutOrStdout()
			if !ok || !st.Phase.Active() {
				fmt.Fprintf(w, "Withdrew the request to move claim %s: nothing had been changed, and nothing will be.\n", key)
				return nil
			}
			fmt.Fprintf(w, `Asked LVMS to abort move %s of claim %s (it was %s).
LVMS stops the copy, deletes the volume it created on node %s (%s)
and gives PersistentVolume %s back its reclaim policy; the claim keeps that volume and its data.
lvms move status %s shows Aborted once it is done; then you may start the workload again.
`, st.ID, key, st.Phase, st.TargetNode, st.TargetPV, st.SourcePV, ref)
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}
