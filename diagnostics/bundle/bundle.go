package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/redact"
)

// Bundle is a support bundle read back: its manifest, API objects, node states and redaction report.
type Bundle struct {
	Files    *Files
	Manifest Manifest
	// Version is line 2 of the version file.
	Version string
	// Objects are the API objects, typed when LVMS knows the kind (unstructured otherwise), in path order.
	Objects []client.Object
	// Paths[i] is the file Objects[i] came from.
	Paths []string
	// Nodes are the node agents' views by node name.
	Nodes map[string]*NodeState
	// Redactions is the redaction report, nil when the bundle has none.
	Redactions *redact.Report
	// Problems are files that could not be read; the rest of the bundle is still usable.
	Problems []string
}

// Load opens and decodes a bundle. A bundle of a newer format fails with ErrNewerFormat; unreadable
// object or node files are listed in Problems instead of failing the load.
func Load(name string, lim Limits) (*Bundle, error) {
	files, err := Open(name, lim)
	if err != nil {
		return nil, err
	}
	return Decode(files)
}

// Decode decodes the files of a bundle.
func Decode(files *Files) (*Bundle, error) {
	b := &Bundle{Files: files, Nodes: map[string]*NodeState{}}
	v, _ := files.Get(FileVersion)
	lines := strings.Split(strings.TrimSpace(string(v)), "\n")
	if lines[0] != Product {
		return nil, fmt.Errorf("%s: %w: the version file names %q, not %q", files.Source, ErrNotBundle, lines[0], Product)
	}
	if len(lines) > 1 {
		b.Version = strings.TrimSpace(lines[1])
	}
	m, ok := files.Get(FileManifest)
	if !ok {
		return nil, fmt.Errorf("%s: %w: it has no %s", files.Source, ErrNotBundle, FileManifest)
	}
	if err := json.Unmarshal(m, &b.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w: %s is not valid: %v", files.Source, ErrCorrupt, FileManifest, err)
	}
	if b.Manifest.Format > FormatVersion {
		return nil, fmt.Errorf("%s: %w: lvms %s wrote bundle format %d, this lvms reads format %d and older: use lvms %s or newer",
			files.Source, ErrNewerFormat, b.Manifest.Version, b.Manifest.Format, FormatVersion, b.Manifest.Version)
	}
	if b.Manifest.Format < 1 {
		return nil, fmt.Errorf("%s: %w: %s has no format version", files.Source, ErrNotBundle, FileManifest)
	}
	if r, ok := files.Get(FileRedactions); ok {
		var rep redact.Report
		if err := json.Unmarshal(r, &rep); err != nil {
			b.Problems = append(b.Problems, fmt.Sprintf("%s: %v", FileRedactions, err))
		} else {
			b.Redactions = &rep
		}
	}
	scheme := api.NewScheme()
	nodeFiles := map[string]map[string][]byte{}
	for _, p := range files.Names() {
		data := files.data[p]
		switch {
		case isObjectFile(p):
			objs, err := decodeObjects(scheme, data)
			if err != nil {
				b.Problems = append(b.Problems, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			for _, o := range objs {
				b.Objects = append(b.Objects, o)
				b.Paths = append(b.Paths, p)
			}
		case strings.HasPrefix(p, DirNodes+"/") && strings.Count(p, "/") == 2:
			node, file := path.Split(strings.TrimPrefix(p, DirNodes+"/"))
			node = strings.TrimSuffix(node, "/")
			if nodeFiles[node] == nil {
				nodeFiles[node] = map[string][]byte{}
			}
			nodeFiles[node][file] = data
		}
	}
	for _, node := range sortedKeys(nodeFiles) {
		st, err := readNode(node, func(f string) ([]byte, bool) { d, ok := nodeFiles[node][f]; return d, ok })
		if err != nil {
			b.Problems = append(b.Problems, fmt.Sprintf("%s/%s: %v", DirNodes, node, err))
			continue
		}
		b.Nodes[node] = st
	}
	return b, nil
}

// isObjectFile: YAML under the resource directories, not logs.
func isObjectFile(p string) bool {
	return strings.HasSuffix(p, ".yaml") && !strings.Contains(p, "/logs/") &&
		(strings.HasPrefix(p, DirClusterScoped+"/") || strings.HasPrefix(p, DirNamespaces+"/"))
}

// decodeObjects reads one object or a List, typed where the scheme knows the kind.
func decodeObjects(scheme *runtime.Scheme, data []byte) ([]client.Object, error) {
	items, err := DecodeUnstructured(data)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, u := range items {
		o, err := typed(scheme, u)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out = append(out, o)
	}
	return out, nil
}

// DecodeUnstructured reads one object file of a bundle (YAML or JSON: one object or a List) as stored.
func DecodeUnstructured(data []byte) ([]*unstructured.Unstructured, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	if !u.IsList() {
		return []*unstructured.Unstructured{u}, nil
	}
	l, err := u.ToList()
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// typed converts u to its Go type when the scheme knows it.
func typed(scheme *runtime.Scheme, u *unstructured.Unstructured) (client.Object, error) {
	gvk := u.GroupVersionKind()
	if !scheme.Recognizes(gvk) {
		return u, nil
	}
	o, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		return nil, err
	}
	co, ok := o.(client.Object)
	if !ok {
		return u, nil
	}
	co.GetObjectKind().SetGroupVersionKind(gvk)
	return co, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Snapshot is the bundle as the console reads a cluster: at the time collection started, with the
// cluster, user and hidden kinds the collector recorded.
func (b *Bundle) Snapshot() *console.Snapshot {
	s := console.FromObjects(b.Objects, b.Manifest.Started)
	s.Cluster, s.User = b.Manifest.Cluster, b.Manifest.User
	s.Installed = b.installed()
	s.Hidden = slices.Clone(b.Manifest.Hidden)
	s.Sort()
	return s
}

// installed: the collector found the LVMS APIs served, or the bundle holds an LVMS object.
func (b *Bundle) installed() bool {
	return b.Manifest.Installed || slices.ContainsFunc(b.Objects, func(o client.Object) bool {
		return o.GetObjectKind().GroupVersionKind().Group == "lvm.topolvm.io"
	})
}

// Find returns the objects of a kind (as in apiVersion's group and Kind), in bundle order.
func (b *Bundle) Find(group, kind string) []client.Object {
	var out []client.Object
	for _, o := range b.Objects {
		if gvk := o.GetObjectKind().GroupVersionKind(); gvk.Group == group && gvk.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// Source is a read-only console.Source over a bundle: it always returns the same snapshot.
type Source struct {
	snap *console.Snapshot
	b    *Bundle
}

var _ console.Source = (*Source)(nil)

// NewSource returns a source over b.
func NewSource(b *Bundle) *Source { return &Source{snap: b.Snapshot(), b: b} }

// Snapshot returns the bundle's snapshot.
func (s *Source) Snapshot(ctx context.Context) (*console.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.snap, nil
}

// Bundle returns the bundle behind the source.
func (s *Source) Bundle() *Bundle { return s.b }

// LoadSource loads the bundle at name and returns a source over it.
func LoadSource(name string, lim Limits) (*Source, error) {
	b, err := Load(name, lim)
	if err != nil {
		return nil, err
	}
	return NewSource(b), nil
}
