package collect

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// Recording the API server's discovery and its Tables lets `lvms bundle serve` answer kubectl as the cluster
// did: kubectl resolves names through discovery and prints the server's Table cells, which depend on the
// server's own printers (built-in kinds) or the CRDs' printer columns; neither is in the objects.

// tableAccept asks for a server-side Table, as kubectl does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// maxTableBytes bounds one Table response page.
const maxTableBytes = 64 << 20

// writeDiscovery records every group, version and resource the API server serves.
func (r *run) writeDiscovery(t *tally) error {
	groups, lists, err := r.disc.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovery: %w", err)
	}
	d := bundle.Discovery{Groups: metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}}
	for _, g := range groups {
		d.Groups.Groups = append(d.Groups.Groups, *g)
	}
	for _, l := range lists {
		d.Resources = append(d.Resources, *l)
	}
	slices.SortFunc(d.Resources, func(a, b metav1.APIResourceList) int { return strings.Compare(a.GroupVersion, b.GroupVersion) })
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode %s: %w", bundle.FileDiscovery, err)
	}
	return t.write(bundle.FileDiscovery, data)
}

// recordTable fetches the server's Table of a resource in namespace ("" for all) and keeps the rows of the
// objects in kept (namespace/name), for writeTables.
func (r *run) recordTable(ctx context.Context, ar apiResource, namespace string, kept map[string]bool) error {
	if len(kept) == 0 {
		return nil
	}
	base := "/api/" + ar.gvr.Version
	if ar.gvr.Group != "" {
		base = "/apis/" + ar.gvr.Group + "/" + ar.gvr.Version
	}
	if ar.namespaced && namespace != "" {
		base = path.Join(base, "namespaces", namespace)
	}
	base = path.Join(base, ar.gvr.Resource)
	var rows []bundle.TableRow
	var cols []metav1.TableColumnDefinition
	cont := ""
	for {
		q := url.Values{"includeObject": {"Metadata"}, "limit": {"500"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		tbl, err := r.getTable(ctx, strings.TrimSuffix(r.opts.Config.Host, "/")+base+"?"+q.Encode())
		if err != nil {
			return fmt.Errorf("server-side table of %s: %w", ar.gvr.GroupResource(), err)
		}
		cols = tbl.ColumnDefinitions
		for _, row := range tbl.Rows {
			var m metav1.PartialObjectMetadata
			if json.Unmarshal(row.Object.Raw, &m) != nil || !kept[m.Namespace+"/"+m.Name] {
				continue
			}
			cells := make([]json.RawMessage, len(row.Cells))
			for i, c := range row.Cells {
				if cells[i], err = json.Marshal(c); err != nil {
					return fmt.Errorf("server-side table of %s: %w", ar.gvr.GroupResource(), err)
				}
			}
			rows = append(rows, bundle.TableRow{Namespace: m.Namespace, Name: m.Name, Cells: cells})
		}
		if cont = tbl.Continue; cont == "" {
			break
		}
	}
	gr := ar.gvr.GroupResource()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tables == nil {
		r.tables = map[schema.GroupResource]*bundle.Table{}
	}
	tb := r.tables[gr]
	if tb == nil {
		tb = &bundle.Table{Columns: cols}
		r.tables[gr] = tb
	}
	tb.Rows = append(tb.Rows, rows...)
	return nil
}

func (r *run) getTable(ctx context.Context, u string) (*metav1.Table, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", tableAccept)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTableBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		return nil, err
	}
	if tbl.Kind != "Table" {
		return nil, fmt.Errorf("the server answered %q, not a Table", tbl.Kind)
	}
	return &tbl, nil
}

// writeTables writes the recorded Tables, rows in namespace and name order (the API server's list order).
func (r *run) writeTables(_ context.Context, t *tally) error {
	r.mu.Lock()
	tables := r.tables
	r.mu.Unlock()
	grs := make([]schema.GroupResource, 0, len(tables))
	for gr := range tables {
		grs = append(grs, gr)
	}
	slices.SortFunc(grs, func(a, b schema.GroupResource) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource))
	})
	for _, gr := range grs {
		tb := tables[gr]
		slices.SortFunc(tb.Rows, func(a, b bundle.TableRow) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		tb.Rows = slices.CompactFunc(tb.Rows, func(a, b bundle.TableRow) bool { return a.Namespace == b.Namespace && a.Name == b.Name })
		p, err := bundle.TablePath(gr.Group, gr.Resource)
		if err != nil {
			return err
		}
		data, err := json.Marshal(tb)
		if err != nil {
			return fmt.Errorf("encode %s: %w", p, err)
		}
		if err := t.write(p, data); err != nil {
			return err
		}
	}
	return nil
}
