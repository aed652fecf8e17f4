package plan_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
)

// cluster decodes an LVMCluster spec written as YAML (name c, namespace ns).
func cluster(t *testing.T, spec string) *lvmv1.LVMCluster {
	t.Helper()
	c := &lvmv1.LVMCluster{}
	if err := yaml.UnmarshalStrict([]byte("metadata: {name: c, namespace: ns}\nspec:\n"+spec), c); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	return c
}

func classes(list string) string { return "  storage:\n    deviceClasses: " + list + "\n" }

// TestBuild_RefusesMalformedClusters: each refusal names the field and says what to do.
func TestBuild_RefusesMalformedClusters(t *testing.T) {
	cases := []struct {
		name string
		spec string
		want string
	}{
		{"no device classes", "  storage: {}\n", "spec.storage.deviceClasses is empty"},
		{"external configuration", "  configurationPolicy: ExternalConfiguration\n", "keep this LVMCluster (nothing to migrate)"},
		{"duplicate name", classes("[{name: a}, {name: a}]"), `deviceClasses[1].name "a" is also the name of deviceClasses[0]`},
		{"empty name", classes("[{name: ''}]"), "deviceClasses[0].name is empty"},
		{"name too long for v2", classes("[{name: " + strings.Repeat("a", 64) + "}]"), "v2alpha1 allows 63"},
		{"name not DNS-1123", classes("[{name: Fast_Disks}]"), "must be a DNS-1123 label"},
		{"two defaults", classes("[{name: a, default: true}, {name: b, default: true}]"), "2 device classes set default: true"},
		{"relative path", classes("[{name: a, deviceSelector: {paths: [sdb]}}]"), "deviceSelector.paths[0] \"sdb\" must be an absolute path under /dev/"},
		{"path twice in a class", classes("[{name: a, deviceSelector: {paths: [/dev/sdb], optionalPaths: [/dev/sdb]}}]"), "listed twice"},
		{"path in two classes", classes("[{name: a, deviceSelector: {paths: [/dev/sdb]}}, {name: b, deviceSelector: {paths: [/dev/sdb]}}]"), "also belongs to device class a"},
		{"empty device selector", classes("[{name: a, deviceSelector: {}}]"), "neither paths nor optionalPaths"},
		{"thin and raid", classes("[{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}, raidConfig: {type: raid1}}]"), "both thinPoolConfig and raidConfig"},
		{"thin pool without name", classes("[{name: a, thinPoolConfig: {name: '', overprovisionRatio: 2}}]"), "thinPoolConfig.name is empty"},
		{"overprovision ratio missing", classes("[{name: a, thinPoolConfig: {name: p}}]"), "overprovisionRatio 0 is outside 1-100"},
		{"sizePercent out of range", classes("[{name: a, thinPoolConfig: {name: p, sizePercent: 5, overprovisionRatio: 2}}]"), "sizePercent 5 is outside 10-100"},
		{"chunk size with Host", classes("[{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, chunkSizeCalculationPolicy: Host, chunkSize: 128Ki}}]"), "chunkSize is set with chunkSizeCalculationPolicy Host"},
		{"chunk size too small", classes("[{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, chunkSize: 4Ki}}]"), "chunkSize 4Ki must be between 64Ki and 1Gi"},
		{"metadata size without Static", classes("[{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, metadataSize: 1Gi}}]"), "metadataSize is set without metadataSizeCalculationPolicy Static"},
		{"shared without paths", classes("[{name: a, deviceAccessPolicy: shared}]"), "needs deviceSelector.paths naming the shared LUN"},
		{"shared with thin pool", classes("[{name: a, deviceAccessPolicy: shared, deviceSelector: {paths: [/dev/sdb]}, thinPoolConfig: {name: p, overprovisionRatio: 2}}]"), "remove thinPoolConfig, raidConfig and fstype"},
		{"unknown fstype", classes("[{name: a, fstype: btrfs}]"), `fstype "btrfs" is unknown`},
		{"invalid node selector", classes("[{name: a, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In}]}]}}]"), "deviceClasses[0].nodeSelector is invalid"},
		{"managed parameter", classes("[{name: a, storageClassOptions: {additionalParameters: {topolvm.io/device-class: x}}}]"), "sets topolvm.io/device-class, which LVMS manages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plan.Build(plan.Input{Cluster: cluster(t, tc.spec)})
			var invalid *plan.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "LVMCluster ns/c cannot be planned:") {
				t.Errorf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

func TestBuild_RefusesAClusterWithoutNameOrNamespace(t *testing.T) {
	c := cluster(t, classes("[{name: a}]"))
	c.Name, c.Namespace = "", ""
	_, err := plan.Build(plan.Input{Cluster: c})
	for _, want := range []string{"metadata.name is empty", "metadata.namespace is empty", "pass -n"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if _, err := plan.Build(plan.Input{}); err == nil || !strings.Contains(err.Error(), "no LVMCluster was given") {
		t.Errorf("a nil LVMCluster: got %v", err)
	}
}
