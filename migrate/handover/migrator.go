package handover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// Defaults of Migrator's bounds.
const (
	DefaultPoll    = 2 * time.Second
	DefaultTimeout = 10 * time.Minute
)

// Progress is one step of apply or rollback, for a front end to render.
type Progress struct {
	// Step is a short name: mark, create-sets, hand-over, adopt-classes, remove-cluster, hand-back,
	// delete-sets, unmark, done.
	Step string
	// Node is the node the step is about ("" when none).
	Node string
	// Done of Total units of the step (nodes for hand-over and hand-back, 1 otherwise).
	Done, Total int
	// Message says what happens, in a sentence.
	Message string
}

// Migrator runs the hand-over of one LVMCluster. Its zero bounds take the defaults.
type Migrator struct {
	Client client.Client
	// Clock bounds every wait (default the real clock).
	Clock clock.Clock
	// Progress, when set, is called at every step.
	Progress func(Progress)
	// Poll is how often a wait looks again; Timeout bounds each wait.
	Poll, Timeout time.Duration
}

func (m *Migrator) clock() clock.Clock {
	if m.Clock == nil {
		return clock.RealClock{}
	}
	return m.Clock
}

func (m *Migrator) report(p Progress) {
	if m.Progress != nil {
		m.Progress(p)
	}
}

// TimeoutError is a wait that did not end within Migrator.Timeout.
type TimeoutError struct {
	What  string
	After time.Duration
	// Last is what the wait saw last.
	Last string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s waiting for %s; last seen: %s", e.After, e.What, e.Last)
}

// waitFor calls check until it returns true, the bound passes on the clock, or ctx ends.
func (m *Migrator) waitFor(ctx context.Context, what string, check func(context.Context) (bool, string, error)) error {
	poll, timeout := m.Poll, m.Timeout
	if poll <= 0 {
		poll = DefaultPoll
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	clk := m.clock()
	deadline := clk.Now().Add(timeout)
	for {
		ok, last, err := check(ctx)
		if err != nil || ok {
			return err
		}
		if !clk.Now().Before(deadline) {
			return &TimeoutError{What: what, After: timeout, Last: last}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(poll):
		}
	}
}

// getCluster returns the LVMCluster, or nil when it does not exist.
func (m *Migrator) getCluster(ctx context.Context, ns, name string) (*lvmv1.LVMCluster, error) {
	var cl lvmv1.LVMCluster
	switch err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cl); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get LVMCluster %s/%s: %w", ns, name, err)
	}
	return &cl, nil
}

// migratedSets are the LVMNodeSets of ns that name cluster as their migration source, sorted by name.
func (m *Migrator) migratedSets(ctx context.Context, ns, cluster string) ([]lvmv2.LVMNodeSet, error) {
	var list lvmv2.LVMNodeSetList
	if err := m.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list LVMNodeSets in %s: %w", ns, err)
	}
	var out []lvmv2.LVMNodeSet
	for _, s := range list.Items {
		if s.Annotations[names.MigratedFromAnnotation] == cluster {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b lvmv2.LVMNodeSet) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// loadRecord returns the cluster (nil when gone), the record (from the cluster, or from a set once the
// cluster is gone; nil when there is none) and the migrated sets.
func (m *Migrator) loadRecord(ctx context.Context, ns, name string) (*lvmv1.LVMCluster, *Record, []lvmv2.LVMNodeSet, error) {
	cl, err := m.getCluster(ctx, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	sets, err := m.migratedSets(ctx, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	if cl != nil {
		rec, err := decodeRecord("LVMCluster "+ns+"/"+name, cl.Annotations)
		return cl, rec, sets, err
	}
	for _, s := range sets {
		rec, err := decodeRecord("LVMNodeSet "+ns+"/"+s.Name, s.Annotations)
		if err != nil || rec != nil {
			return nil, rec, sets, err
		}
	}
	return nil, nil, sets, nil
}

// handedOver is the union of the sets' handed-over-nodes lists, sorted.
func handedOver(sets []lvmv2.LVMNodeSet) []string {
	var out []string
	for _, s := range sets {
		out = append(out, names.HandedOverNodes(s.Annotations)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// selects reports whether a set's node selector and tolerations select node.
func selects(set *lvmv2.LVMNodeSet, node *corev1.Node) (bool, error) {
	return nodeselect.Eligible(node, set.Spec.NodeSelector, set.Spec.Tolerations)
}

// ReadRecord returns the record of the migration of LVMCluster ns/name (nil when none) and whether the
// LVMCluster is gone, for front ends that show a migration's state. While the LVMCluster exists it reads
// only the LVMCluster, so a caller who may read nothing else can still see the plan.
func ReadRecord(ctx context.Context, c client.Client, ns, name string) (*record.Record, bool, error) {
	m := &Migrator{Client: c}
	cl, err := m.getCluster(ctx, ns, name)
	if err != nil {
		return nil, false, err
	}
	var rec *Record
	if cl != nil {
		rec, err = decodeRecord("LVMCluster "+ns+"/"+name, cl.Annotations)
	} else {
		_, rec, _, err = m.loadRecord(ctx, ns, name)
	}
	if err != nil || rec == nil {
		return nil, cl == nil, err
	}
	return &rec.Record, cl == nil, nil
}
