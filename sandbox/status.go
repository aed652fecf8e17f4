package sandbox

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// row is one line of the status table.
type row struct{ kind, name, state, message string }

// statusRows reads the sets, nodes and clusters of namespace, each kind sorted by name (as the API lists
// them).
func statusRows(ctx context.Context, c client.Reader, namespace string) ([]row, error) {
	var rows []row
	var sets lvmv2.LVMNodeSetList
	if err := c.List(ctx, &sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMNodeSets: %w", err)
	}
	for _, s := range sets.Items {
		rows = append(rows, row{"LVMNodeSet", s.Name, string(s.Status.State), s.Status.Message})
	}
	var nodes lvmv2.LVMNodeList
	if err := c.List(ctx, &nodes, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMNodes: %w", err)
	}
	for _, n := range nodes.Items {
		rows = append(rows, row{"LVMNode", n.Name, string(n.Status.State), n.Status.Message})
	}
	var clusters lvmv1.LVMClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMClusters: %w", err)
	}
	for _, cl := range clusters.Items {
		rows = append(rows, row{"LVMCluster", cl.Name, string(cl.Status.State), cl.Status.Message})
	}
	return rows, nil
}

// PrintStatus writes the state and message of every LVMNodeSet, LVMNode and LVMCluster of namespace as a
// table: what `kubectl get lvmnodesets,lvmnodes,lvmclusters` shows, for machines without kubectl.
func PrintStatus(ctx context.Context, c client.Reader, namespace string, w io.Writer) error {
	rows, err := statusRows(ctx, c, namespace)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATE\tMESSAGE")
	for _, r := range rows {
		state := r.state
		if state == "" {
			state = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.kind, r.name, state, strings.ReplaceAll(r.message, "\n", " "))
	}
	return tw.Flush()
}

// WaitSettled waits until every LVMNodeSet, LVMNode and LVMCluster of namespace has a state other than
// Progressing (or none), or ctx ends.
func WaitSettled(ctx context.Context, c client.Reader, namespace string) error {
	for {
		rows, err := statusRows(ctx, c, namespace)
		settled := err == nil && len(rows) > 0
		for _, r := range rows {
			if r.state == "" || r.state == string(lvmv2.StateProgressing) {
				settled = false
			}
		}
		if settled {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
