package bundle

import (
	"testing"

	"github.com/lvms-dev/lvms/api"
)

// FuzzDecodeObjects: any file content decodes to objects or an error, never a panic.
func FuzzDecodeObjects(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMNode\nmetadata:\n  name: a\nstatus:\n  volumeGroups:\n  - name: vg1\n    size: 10Gi\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Event\n  metadata:\n    name: e\n  count: 3\n",
		"apiVersion: topolvm.io/v1\nkind: LogicalVolume\nmetadata:\n  name: lv\nspec:\n  size: 1Gi\n",
		"apiVersion: v1\nkind: Pod\nspec:\n  containers: 5\n",
		"null", "- 1\n- 2\n", "kind: [",
	} {
		f.Add([]byte(seed))
	}
	scheme := api.NewScheme()
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := decodeObjects(scheme, data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o == nil {
				t.Fatal("nil object without an error")
			}
		}
	})
}
