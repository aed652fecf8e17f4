package bundleserve

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// fallbackColumns are the API server's default columns for kinds without printer columns.
var fallbackColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// table is the Table of objs: the recorded cells when the bundle has a row for each of them, else NAME and
// AGE (as of the bundle's time). Each row carries the object's metadata (or the object) as include asks, which
// kubectl reads for -A, --show-labels and -L.
func (s *store) table(res *resource, objs []*unstructured.Unstructured, include metav1.IncludeObjectPolicy, version string) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + version}, Rows: []metav1.TableRow{}}
	recorded := res.table != nil
	for _, u := range objs {
		if _, ok := res.rows[u.GetNamespace()+"/"+u.GetName()]; !ok {
			recorded = false
		}
	}
	if recorded {
		t.ColumnDefinitions = res.table.Columns
	} else {
		t.ColumnDefinitions = fallbackColumns
	}
	for _, u := range objs {
		var row metav1.TableRow
		if recorded {
			for _, c := range res.table.Rows[res.rows[u.GetNamespace()+"/"+u.GetName()]].Cells {
				row.Cells = append(row.Cells, c)
			}
		} else {
			row.Cells = []any{u.GetName(), s.age(u)}
		}
		switch include {
		case metav1.IncludeMetadata:
			row.Object = runtime.RawExtension{Raw: metadataJSON(u)}
		case metav1.IncludeObject:
			raw, _ := json.Marshal(u.Object)
			row.Object = runtime.RawExtension{Raw: raw}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// age is the object's age at the bundle's time, as the API server prints it.
func (s *store) age(u *unstructured.Unstructured) string {
	created := u.GetCreationTimestamp()
	if created.IsZero() || s.at.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(s.at.Sub(created.Time))
}

// metadataJSON is the object's metadata as the API server sends it in a row (a PartialObjectMetadata).
func metadataJSON(u *unstructured.Unstructured) []byte {
	md, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata")
	raw, _ := json.Marshal(map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md})
	return raw
}
