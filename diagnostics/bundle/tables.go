package bundle

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FileDiscovery is the API server's discovery at collection time (Discovery), so that a served bundle
// (`lvms bundle serve`) resolves kinds, short names and scopes as the cluster did.
const FileDiscovery = "discovery.json"

// DirTables holds the API server's own Table of each collected resource (Table), one file per resource.
const DirTables = "tables"

// Discovery is what the API server said it serves: its groups and, per group version, its resources.
type Discovery struct {
	Groups    metav1.APIGroupList      `json:"groups"`
	Resources []metav1.APIResourceList `json:"resources"`
}

// Table is the API server's Table (what `kubectl get` prints) of the collected objects of one resource,
// recorded at collection time: its columns and, per object, its cells. Ages in the cells are as of the
// collection.
type Table struct {
	Columns []metav1.TableColumnDefinition `json:"columns"`
	Rows    []TableRow                     `json:"rows"`
}

// TableRow is one object's cells, as the server encoded them.
type TableRow struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name"`
	Cells     []json.RawMessage `json:"cells"`
}

// TablePath is where the Table of a resource lives: tables/<group>/<resource>.json ("core" for the core
// group).
func TablePath(group, resource string) (string, error) {
	if group == "" {
		group = coreGroup
	}
	return join(DirTables, group, resource+".json")
}
