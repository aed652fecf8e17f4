package api_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// object decodes YAML into an unstructured object in namespace ns (cluster-scoped kinds ignore it), so the
// API server, not the Go types, judges every field.
func object(t *testing.T, doc, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	if u.GetKind() != "LogicalVolume" {
		u.SetNamespace(ns)
	}
	return u
}

// TestSamples_Accepted creates every sample against the real API server.
func TestSamples_Accepted(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	for name, raw := range samples(t) {
		t.Run(name, func(t *testing.T) {
			u := object(t, string(raw), ns)
			if err := env.Client.Create(context.Background(), u); err != nil {
				t.Fatalf("sample rejected: %v", err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
		})
	}
}

const (
	clusterHead = "apiVersion: lvm.topolvm.io/v1alpha1\nkind: LVMCluster\nmetadata: {name: c}\n"
	setHead     = "apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMNodeSet\nmetadata: {name: s}\n"
	nodeHead    = "apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMNode\nmetadata: {name: node-1}\n"
	vgHead      = "apiVersion: lvm.topolvm.io/v1alpha1\nkind: LVMVolumeGroup\nmetadata: {name: vg}\n"
	lvHead      = "apiVersion: topolvm.io/v1\nkind: LogicalVolume\nmetadata: {name: lv-bad}\n"
)

// v1 builds an LVMCluster with the given device classes (YAML flow list items).
func v1(classes ...string) string {
	return clusterHead + "spec:\n  storage:\n    deviceClasses: [" + strings.Join(classes, ", ") + "]\n"
}

// v2 builds an LVMNodeSet template from YAML flow lists of volume groups and device classes.
func v2(vgs, classes string) string {
	return setHead + "spec:\n  template:\n    volumeGroups: " + vgs + "\n    deviceClasses: " + classes + "\n"
}

const (
	okVG      = "[{name: vg1, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: Any}]}]}}]"
	okThick   = "[{name: fast, strategy: Thick, volumeGroup: vg1}]"
	sharedVG  = "[{name: san, accessPolicy: Shared, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: wwn, operator: In, values: ['0x6001']}]}]}}]"
	pathClass = "{name: a, deviceSelector: {paths: [/dev/sdb]}}"
)

func vgWith(expr string) string {
	return "[{name: vg1, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [" + expr + "]}]}}]"
}

// TestValidation_Rejects proves the CRDs' validation against a real API server: every invalid object is
// refused with a message that says what to fix.
func TestValidation_Rejects(t *testing.T) {
	testenv.Require(t)
	cases := []struct {
		name string
		doc  string
		want string
	}{
		// v1alpha1 LVMCluster
		{"v1 no device classes", clusterHead + "spec: {}\n", "needs at least one device class"},
		{"v1 device classes with ExternalConfiguration", clusterHead + "spec:\n  configurationPolicy: ExternalConfiguration\n  storage: {deviceClasses: [{name: a}]}\n", "must be empty when configurationPolicy is ExternalConfiguration"},
		{"v1 unknown configurationPolicy", clusterHead + "spec:\n  configurationPolicy: Sometimes\n", `supported values: "ExternalConfiguration"`},
		{"v1 device class name not DNS-1123", v1("{name: Fast_Disks}"), "must be a DNS-1123 label"},
		{"v1 two default device classes", v1("{name: a, default: true, deviceSelector: {paths: [/dev/sdb]}}", "{name: b, default: true, deviceSelector: {paths: [/dev/sdc]}}"), "at most one device class may set default"},
		{"v1 relative device path", v1("{name: a, deviceSelector: {paths: [sdb]}}"), "absolute paths under /dev/"},
		{"v1 path with ..", v1("{name: a, deviceSelector: {paths: [/dev/../etc/passwd]}}"), "without '..'"},
		{"v1 duplicate path", v1("{name: a, deviceSelector: {paths: [/dev/sdb, /dev/sdb]}}"), "Duplicate value"},
		{"v1 path in paths and optionalPaths", v1("{name: a, deviceSelector: {paths: [/dev/sdb], optionalPaths: [/dev/sdb]}}"), "both paths and optionalPaths"},
		{"v1 path in two device classes", v1(pathClass, "{name: b, deviceSelector: {paths: [/dev/sdb]}}"), "may belong to only one device class"},
		{"v1 empty device selector", v1("{name: a, deviceSelector: {}}"), "needs paths or optionalPaths"},
		{"v1 sizePercent too small", v1("{name: a, thinPoolConfig: {name: p, sizePercent: 5, overprovisionRatio: 2}}"), "should be greater than or equal to 10"},
		{"v1 sizePercent too big", v1("{name: a, thinPoolConfig: {name: p, sizePercent: 101, overprovisionRatio: 2}}"), "should be less than or equal to 100"},
		{"v1 overprovisionRatio zero", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 0}}"), "should be greater than or equal to 1"},
		{"v1 thin pool on shared class", v1("{name: a, deviceAccessPolicy: shared, deviceSelector: {paths: [/dev/sdb]}, thinPoolConfig: {name: p, overprovisionRatio: 2}}"), "thinPoolConfig is not supported on a shared device class"},
		{"v1 fstype on shared class", v1("{name: a, deviceAccessPolicy: shared, fstype: xfs, deviceSelector: {paths: [/dev/sdb]}}"), "fstype must be empty on a shared device class"},
		{"v1 shared class without paths", v1("{name: a, deviceAccessPolicy: shared}"), "a shared device class needs deviceSelector.paths"},
		{"v1 wipe on shared class", v1("{name: a, deviceAccessPolicy: shared, deviceSelector: {paths: [/dev/sdb], forceWipeDevicesAndDestroyAllData: true}}"), "every node would wipe the same LUN"},
		{"v1 unknown access policy", v1("{name: a, deviceAccessPolicy: global}"), `supported values: "shared", "nodeLocal", "local"`},
		{"v1 unknown fstype", v1("{name: a, fstype: btrfs}"), `supported values: "xfs", "ext4"`},
		{"v1 thin pool and raid", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}, raidConfig: {type: raid1}}"), "mutually exclusive"},
		{"v1 chunkSize with Host policy", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, chunkSizeCalculationPolicy: Host, chunkSize: 128Ki}}"), "chunkSize can only be set with chunkSizeCalculationPolicy: Static"},
		{"v1 chunkSize too small", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, chunkSize: 4Ki}}"), "chunkSize must be between 64Ki and 1Gi"},
		{"v1 managed storage class parameter", v1("{name: a, storageClassOptions: {additionalParameters: {topolvm.io/device-class: x}}}"), "LVMS manages them"},
		{"v1 mirrors on raid5", v1("{name: a, raidConfig: {type: raid5, mirrors: 2}}"), "mirrors is only valid for raid1 and raid10"},
		// v1alpha1 LVMVolumeGroup
		{"v1 LVMVolumeGroup thin and raid", vgHead + "spec: {thinPoolConfig: {name: p, overprovisionRatio: 2}, raidConfig: {type: raid1}}\n", "mutually exclusive"},
		// v2alpha1 LVMNodeSet / LVMNode
		{"v2 device class on undefined volume group", v2(okVG, "[{name: fast, strategy: Thick, volumeGroup: nope}]"), "must name a volume group defined in volumeGroups"},
		{"v2 two defaults", v2(okVG, "[{name: a, strategy: Thick, volumeGroup: vg1, default: true}, {name: b, strategy: Thick, volumeGroup: vg1, default: true}]"), "at most one device class may set default"},
		{"v2 thin without thin section", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1}]"), "strategy Thin needs the thin section"},
		{"v2 thick with thin section", v2(okVG, "[{name: a, strategy: Thick, volumeGroup: vg1, thin: {poolName: p}}]"), "strategy Thick must not have one"},
		{"v2 unknown strategy", v2(okVG, "[{name: a, strategy: Fat, volumeGroup: vg1}]"), `supported values: "Thin", "Thick"`},
		{"v2 sizePercent out of range", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, sizePercent: 200}}]"), "should be less than or equal to 100"},
		{"v1 dataUsageThreshold zero", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, dataUsageThreshold: 0}}"), "thinPoolConfig.dataUsageThreshold is a percentage: set it above 0 and at most 100 (default 90)"},
		{"v1 metadataUsageThreshold above 100", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, metadataUsageThreshold: 101}}"), "thinPoolConfig.metadataUsageThreshold is a percentage: set it above 0 and at most 100 (default 75)"},
		{"v2 dataUsageThreshold above 100", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, dataUsageThreshold: 150}}]"), "thin.dataUsageThreshold is a percentage: set it above 0 and at most 100 (default 90)"},
		{"v2 metadataUsageThreshold negative", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, metadataUsageThreshold: -5}}]"), "thin.metadataUsageThreshold is a percentage: set it above 0 and at most 100 (default 75)"},
		{"v2 overprovisionRatio out of range", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, overprovisionRatio: 0}}]"), "should be greater than or equal to 1"},
		{"v2 thin class on shared VG", v2(sharedVG, "[{name: a, strategy: Thin, volumeGroup: san, thin: {poolName: p}}]"), "device classes on a Shared volume group must use strategy: Thick and no fstype"},
		{"v2 fstype on shared VG", v2(sharedVG, "[{name: a, strategy: Thick, volumeGroup: san, fstype: xfs}]"), "device classes on a Shared volume group must use strategy: Thick and no fstype"},
		{"v2 two thin classes share a pool name", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p}}, {name: b, strategy: Thin, volumeGroup: vg1, thin: {poolName: p}}]"), "need different thin.poolName values"},
		{"v2 volume group name not DNS-1123", v2("[{name: VG_1, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: Any}]}]}}]", okThick), "volume group name must be a DNS-1123 label"},
		{"v2 unknown selector key", v2(vgWith("{key: colour, operator: In, values: [red]}"), okThick), `supported values: "kname", "path"`},
		{"v2 unknown selector operator", v2(vgWith("{key: kname, operator: Like, values: [sd]}"), okThick), `supported values: "In", "NotIn"`},
		{"v2 In without values", v2(vgWith("{key: kname, operator: In}"), okThick), "operators In and NotIn need at least one value"},
		{"v2 Exists with values", v2(vgWith("{key: serial, operator: Exists, values: [x]}"), okThick), "take no values"},
		{"v2 Gt on a non-size key", v2(vgWith("{key: model, operator: Gt, values: ['1']}"), okThick), "operators Gt and Lt only apply to key size"},
		{"v2 size value not a quantity", v2(vgWith("{key: size, operator: Gt, values: [big]}"), okThick), "size values must be quantities"},
		{"v2 rotational not boolean", v2(vgWith("{key: rotational, operator: In, values: ['yes']}"), okThick), `rotational values must be "true" or "false"`},
		{"v2 relative kname", v2(vgWith("{key: kname, operator: In, values: [sdb]}"), okThick), "kname and path values must be absolute paths under /dev/"},
		{"v2 wipe with a pattern selector", v2("[{name: vg1, forceWipeDevicesAndDestroyAllData: true, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: model, operator: In, values: [X]}]}]}}]", okThick), "LVMS never wipes devices it discovered by pattern"},
		{"v2 empty selector terms", v2("[{name: vg1, deviceSelector: {deviceSelectorTerms: []}}]", okThick), "should have at least 1 items"},
		{"v2 two thick classes share a volume group", v2(okVG, "[{name: a, strategy: Thick, volumeGroup: vg1}, {name: b, strategy: Thick, volumeGroup: vg1, fstype: btrfs}]"), "two Thick device classes cannot share a volume group"},
		{"v2 unknown fstype", v2(okVG, "[{name: a, strategy: Thick, volumeGroup: vg1, fstype: zfs}]"), `supported values: "xfs", "ext4", "btrfs"`},
		{"v2 explicit naming without name", v2(okVG, "[{name: a, strategy: Thick, volumeGroup: vg1, storageClass: {namingPolicy: Explicit}}]"), "namingPolicy Explicit needs storageClass.name"},
		{"v2 relative lvmd socket", setHead + "spec:\n  template:\n    lvmd: {socketName: lvmd.sock}\n", "lvmd.socketName must be an absolute path"},
		{"v2 LVMNode with undefined volume group", nodeHead + "spec:\n  deviceClasses: [{name: a, strategy: Thick, volumeGroup: vg9}]\n", "must name a volume group defined in volumeGroups"},
		{"v2 LVMNode bad state", nodeHead + "spec: {}\nstatus: {state: Sleepy}\n", ""},
		// topolvm.io/v1 LogicalVolume
		{"LogicalVolume without nodeName", lvHead + "spec: {name: lv-bad, size: 1Gi}\n", "spec.nodeName: Required value"},
	}
	ns := env.Namespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := object(t, tc.doc, ns)
			err := env.Client.Create(context.Background(), u)
			if tc.want == "" {
				// Status is a subresource: a create may not set it, so an invalid status is dropped, not
				// stored. Prove the object was stored without it.
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				defer func() { _ = env.Client.Delete(context.Background(), u) }()
				if _, found, _ := unstructured.NestedString(u.Object, "status", "state"); found {
					t.Fatalf("status was stored on create: %v", u.Object["status"])
				}
				return
			}
			if err == nil {
				_ = env.Client.Delete(context.Background(), u)
				t.Fatalf("accepted; want rejection with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("rejected with\n  %v\nwant a message containing\n  %q", err, tc.want)
			}
		})
	}
}

// TestValidation_Immutable proves that updates that would destroy data are refused, and that safe day-2
// changes are accepted.
func TestValidation_Immutable(t *testing.T) {
	testenv.Require(t)
	cases := []struct {
		name, before, after, want string
	}{
		{"v1 thin pool removed", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}}"), v1("{name: a}"), "thinPoolConfig cannot be added to or removed from"},
		{"v1 thin pool renamed", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}}"), v1("{name: a, thinPoolConfig: {name: q, overprovisionRatio: 2}}"), "thinPoolConfig.name is immutable"},
		{"v1 access policy changed", v1("{name: a, deviceSelector: {paths: [/dev/sdb]}}"), v1("{name: a, deviceAccessPolicy: shared, deviceSelector: {paths: [/dev/sdb]}}"), "deviceAccessPolicy is immutable"},
		{"v1 fstype changed", v1("{name: a, fstype: xfs}"), v1("{name: a, fstype: ext4}"), "fstype is immutable"},
		{"v1 node selector changed", v1("{name: a, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]}}"), v1("{name: a, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: b, operator: Exists}]}]}}"), "nodeSelector is immutable"},
		{"v1 configuration policy switched", clusterHead + "spec: {configurationPolicy: ExternalConfiguration}\n", v1("{name: a}"), "configurationPolicy is immutable"},
		{"v1 selector added later", v1("{name: a}"), v1(pathClass), "a deviceSelector cannot be added"},
		{"v2 device class moved to another VG", v2("[{name: vg1, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: Any}]}]}}, {name: vg2, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: In, values: [/dev/sdz]}]}]}}]", okThick),
			v2("[{name: vg1, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: Any}]}]}}, {name: vg2, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: In, values: [/dev/sdz]}]}]}}]", "[{name: fast, strategy: Thick, volumeGroup: vg2}]"), "volumeGroup is immutable"},
		{"v2 strategy changed", v2(okVG, okThick), v2(okVG, "[{name: fast, strategy: Thin, volumeGroup: vg1, thin: {poolName: p}}]"), "strategy is immutable"},
		{"v2 access policy changed", v2(okVG, okThick), v2("[{name: vg1, accessPolicy: Shared, deviceSelector: {deviceSelectorTerms: [{matchExpressions: [{key: kname, operator: Any}]}]}}]", okThick), "accessPolicy is immutable"},
		{"v2 pool renamed", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p}}]"), v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: q}}]"), "thin.poolName is immutable"},
		// Allowed day-2 changes.
		{"v1 device added (allowed)", v1(pathClass), v1("{name: a, deviceSelector: {paths: [/dev/sdb, /dev/sdc]}}"), ""},
		{"v1 overprovision ratio raised (allowed)", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}}"), v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 5}}"), ""},
		{"v1 local normalised to nodeLocal (allowed)", v1("{name: a, deviceAccessPolicy: local}"), v1("{name: a, deviceAccessPolicy: nodeLocal}"), ""},
		{"v1 usage thresholds changed day-2 (allowed)", v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2}}"), v1("{name: a, thinPoolConfig: {name: p, overprovisionRatio: 2, dataUsageThreshold: 95, metadataUsageThreshold: 60}}"), ""},
		{"v2 usage thresholds changed day-2 (allowed)", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p}}]"), v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, dataUsageThreshold: 80, metadataUsageThreshold: 100}}]"), ""},
		{"v2 overprovision ratio raised (allowed)", v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, overprovisionRatio: 2}}]"), v2(okVG, "[{name: a, strategy: Thin, volumeGroup: vg1, thin: {poolName: p, overprovisionRatio: 4}}]"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := context.Background()
			before := object(t, tc.before, ns)
			if err := env.Client.Create(ctx, before); err != nil {
				t.Fatalf("create the starting object: %v", err)
			}
			after := object(t, tc.after, ns)
			after.SetResourceVersion(before.GetResourceVersion())
			err := env.Client.Update(ctx, after)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("safe change refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("update accepted; want refusal with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %q", err, tc.want)
			}
		})
	}
}
