package plan

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
)

// InvalidError is an LVMCluster the planner refuses; Problems each name a field, what is wrong and the fix.
type InvalidError struct {
	Cluster  string
	Problems []string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("LVMCluster %s cannot be planned:\n  - %s", e.Cluster, strings.Join(e.Problems, "\n  - "))
}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	poolName     = regexp.MustCompile(`^[a-zA-Z0-9+_.][a-zA-Z0-9+_.-]*$`)
)

// Limits of the v2alpha1 API the plan has to fit (api/lvm/v2alpha1).
const (
	maxV2Name          = 63 // volume group and device class names
	maxVolumeGroups    = 8  // per LVMNodeSet template
	maxValuesPerExpr   = 32
	maxSelectorTerms   = 8
	maxV1DeviceClasses = 16
)

// Validate refuses what the v1alpha1 API server would have refused and what cannot be carried into
// v2alpha1 without renaming a volume group. Files given to `lvms migrate plan -f` never went through the
// API server, so nothing is assumed.
func Validate(c *lvmv1.LVMCluster) error {
	if c == nil {
		return &InvalidError{Cluster: "(none)", Problems: []string{"no LVMCluster was given"}}
	}
	v := &validator{}
	if c.Name == "" {
		v.problem("metadata.name is empty: the LVMNodeSets name the LVMCluster they replace; give the LVMCluster its name")
	}
	if c.Namespace == "" {
		v.problem("metadata.namespace is empty: the LVMNodeSets must live in the LVMCluster's namespace; add it to the file or pass -n")
	}
	dcs := c.Spec.Storage.DeviceClasses
	switch {
	case c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal:
		v.problem("spec.configurationPolicy is ExternalConfiguration: the device classes live in the host's lvmd.yaml, and v2alpha1 has no way to hand a host's own configuration to LVMS; keep this LVMCluster (nothing to migrate)")
	case c.Spec.ConfigurationPolicy != "":
		v.problem("spec.configurationPolicy %q is unknown: leave it empty or use ExternalConfiguration", c.Spec.ConfigurationPolicy)
	case len(dcs) == 0:
		v.problem("spec.storage.deviceClasses is empty: there is nothing to migrate; add the device classes the LVMCluster manages")
	case len(dcs) > maxV1DeviceClasses:
		v.problem("spec.storage.deviceClasses has %d device classes, more than the %d v1alpha1 allows; remove the extra ones", len(dcs), maxV1DeviceClasses)
	}
	seen := map[string]int{}
	pathOwner := map[string]string{}
	defaults := 0
	for i := range dcs {
		dc := &dcs[i]
		if j, dup := seen[dc.Name]; dup && dc.Name != "" {
			v.problem("%s.name %q is also the name of deviceClasses[%d]: every device class needs its own name (it names its volume group); rename or remove one", classPath(i), dc.Name, j)
		}
		seen[dc.Name] = i
		if dc.Default {
			defaults++
		}
		v.deviceClass(i, dc, pathOwner)
	}
	if defaults > 1 {
		v.problem("spec.storage.deviceClasses: %d device classes set default: true; unset default on all but one", defaults)
	}
	if len(v.problems) > 0 {
		id := c.Namespace + "/" + c.Name
		if c.Name == "" {
			id = "(unnamed)"
		}
		return &InvalidError{Cluster: id, Problems: v.problems}
	}
	return nil
}

type validator struct{ problems []string }

func (v *validator) problem(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *validator) deviceClass(i int, dc *lvmv1.DeviceClass, pathOwner map[string]string) {
	at := classPath(i)
	switch {
	case dc.Name == "":
		v.problem("%s.name is empty: name the device class (its volume group has the same name)", at)
	case len(dc.Name) > maxV2Name:
		v.problem("%s.name %q has %d characters; v2alpha1 allows %d for volume group and device class names, and a volume group holding volumes cannot be renamed, so this device class cannot be migrated", at, dc.Name, len(dc.Name), maxV2Name)
	case !dns1123Label.MatchString(dc.Name):
		v.problem("%s.name %q must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit", at, dc.Name)
	}
	shared := dc.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared
	switch dc.DeviceAccessPolicy {
	case "", lvmv1.DeviceAccessPolicyShared, lvmv1.DeviceAccessPolicyNodeLocal, lvmv1.DeviceAccessPolicyLocal:
	default:
		v.problem("%s.deviceAccessPolicy %q is unknown: use nodeLocal or shared", at, dc.DeviceAccessPolicy)
	}
	switch dc.FilesystemType {
	case "", lvmv1.FilesystemXFS, lvmv1.FilesystemExt4:
	default:
		v.problem("%s.fstype %q is unknown: use xfs or ext4", at, dc.FilesystemType)
	}
	if dc.ThinPoolConfig != nil && dc.RAIDConfig != nil {
		v.problem("%s has both thinPoolConfig and raidConfig: a device class is either thin-provisioned or RAID; remove one", at)
	}
	if p := dc.DeviceDiscoveryPolicy; p != nil && *p != lvmv1.DeviceDiscoveryPolicyStatic && *p != lvmv1.DeviceDiscoveryPolicyDynamic {
		v.problem("%s.deviceDiscoveryPolicy %q is unknown: use Static or Dynamic", at, *p)
	}
	if shared {
		ds := dc.DeviceSelector
		switch {
		case ds == nil || len(ds.Paths) == 0 || len(ds.OptionalPaths) > 0:
			v.problem("%s is shared: it needs deviceSelector.paths naming the shared LUN and no optionalPaths", at)
		case ds.ForceWipeDevicesAndDestroyAllData != nil && *ds.ForceWipeDevicesAndDestroyAllData:
			v.problem("%s is shared and sets forceWipeDevicesAndDestroyAllData: every node would wipe the same LUN; remove the flag", at)
		}
		if dc.ThinPoolConfig != nil || dc.RAIDConfig != nil || dc.FilesystemType != "" {
			v.problem("%s is shared: remove thinPoolConfig, raidConfig and fstype (shared volumes are linear raw block devices)", at)
		}
	}
	v.deviceSelector(at+".deviceSelector", dc.Name, dc.DeviceSelector, pathOwner)
	v.nodeSelector(at+".nodeSelector", dc.NodeSelector)
	if dc.ThinPoolConfig != nil {
		v.thinPool(at+".thinPoolConfig", dc.ThinPoolConfig)
	}
	v.storageClassOptions(at+".storageClassOptions", dc.StorageClassOptions)
}

func (v *validator) deviceSelector(at, class string, ds *lvmv1.DeviceSelector, pathOwner map[string]string) {
	if ds == nil {
		return
	}
	if len(ds.Paths) == 0 && len(ds.OptionalPaths) == 0 {
		v.problem("%s has neither paths nor optionalPaths: list the devices, or remove the deviceSelector to use every available device", at)
	}
	inClass := map[string]bool{}
	for _, part := range []struct {
		field string
		list  []lvmv1.DevicePath
	}{{"paths", ds.Paths}, {"optionalPaths", ds.OptionalPaths}} {
		for j, p := range part.list {
			s := string(p)
			where := fmt.Sprintf("%s.%s[%d]", at, part.field, j)
			switch {
			case len(s) > 255:
				v.problem("%s is longer than 255 characters; use a shorter /dev/disk/by-id link", where)
			case !strings.HasPrefix(s, "/dev/") || strings.Contains(s, "/../") || strings.HasSuffix(s, "/.."):
				v.problem("%s %q must be an absolute path under /dev/ without '..' (for example /dev/disk/by-id/wwn-0x5000c500a0b1c2d3)", where, s)
			}
			if inClass[s] {
				v.problem("%s %q is listed twice in the device class; list each device once", where, s)
				continue
			}
			inClass[s] = true
			if other, taken := pathOwner[s]; taken && other != class {
				v.problem("%s %q also belongs to device class %s: a device may belong to only one device class; remove it from one", where, s, other)
			}
			pathOwner[s] = class
		}
	}
	if n := len(ds.Paths) + len(ds.OptionalPaths); n > maxValuesPerExpr*maxSelectorTerms {
		v.problem("%s lists %d devices; a v2alpha1 volume group names at most %d", at, n, maxValuesPerExpr*maxSelectorTerms)
	}
}

func (v *validator) nodeSelector(at string, sel *corev1.NodeSelector) {
	if sel == nil {
		return
	}
	if _, err := nodeaffinity.NewNodeSelector(sel); err != nil {
		v.problem("%s is invalid: %v", at, err)
	}
}

func (v *validator) thinPool(at string, t *lvmv1.ThinPoolConfig) {
	switch {
	case t.Name == "":
		v.problem("%s.name is empty: name the thin pool as it exists in the volume group", at)
	case len(t.Name) > 128 || !poolName.MatchString(t.Name):
		v.problem("%s.name %q may contain letters, digits and + _ . - , must not start with '-' and has at most 128 characters", at, t.Name)
	}
	if t.SizePercent != 0 && (t.SizePercent < 10 || t.SizePercent > 100) {
		v.problem("%s.sizePercent %d is outside 10-100", at, t.SizePercent)
	}
	if t.OverprovisionRatio < 1 || t.OverprovisionRatio > 100 {
		v.problem("%s.overprovisionRatio %d is outside 1-100: set it (1 disables over-provisioning)", at, t.OverprovisionRatio)
	}
	switch t.ChunkSizeCalculationPolicy {
	case "", lvmv1.ChunkSizeCalculationPolicyStatic:
		v.quantity(at+".chunkSize", t.ChunkSize, "64Ki", "1Gi")
	case lvmv1.ChunkSizeCalculationPolicyHost:
		if t.ChunkSize != nil {
			v.problem("%s.chunkSize is set with chunkSizeCalculationPolicy Host: remove chunkSize or use Static", at)
		}
	default:
		v.problem("%s.chunkSizeCalculationPolicy %q is unknown: use Static or Host", at, t.ChunkSizeCalculationPolicy)
	}
	switch t.MetadataSizeCalculationPolicy {
	case lvmv1.MetadataSizePolicyStatic:
		v.quantity(at+".metadataSize", t.MetadataSize, "2Mi", "16Gi")
	case "", lvmv1.MetadataSizePolicyHost:
		if t.MetadataSize != nil {
			v.problem("%s.metadataSize is set without metadataSizeCalculationPolicy Static: remove metadataSize or set the policy to Static", at)
		}
	default:
		v.problem("%s.metadataSizeCalculationPolicy %q is unknown: use Host or Static", at, t.MetadataSizeCalculationPolicy)
	}
}

func (v *validator) quantity(at string, q *resource.Quantity, lo, hi string) {
	if q == nil {
		return
	}
	if q.Cmp(resource.MustParse(lo)) < 0 || q.Cmp(resource.MustParse(hi)) > 0 {
		v.problem("%s %s must be between %s and %s", at, q.String(), lo, hi)
	}
}

func (v *validator) storageClassOptions(at string, o *lvmv1.StorageClassOptions) {
	if o == nil {
		return
	}
	if p := o.ReclaimPolicy; p != nil && *p != corev1.PersistentVolumeReclaimDelete && *p != corev1.PersistentVolumeReclaimRetain {
		v.problem("%s.reclaimPolicy %q is unknown: use Delete or Retain", at, *p)
	}
	if m := o.VolumeBindingMode; m != nil && *m != "WaitForFirstConsumer" && *m != "Immediate" {
		v.problem("%s.volumeBindingMode %q is unknown: use WaitForFirstConsumer or Immediate", at, *m)
	}
	if len(o.AdditionalParameters) > 16 {
		v.problem("%s.additionalParameters has %d entries, more than 16", at, len(o.AdditionalParameters))
	}
	for _, k := range []string{"topolvm.io/device-class", "csi.storage.k8s.io/fstype"} {
		if _, ok := o.AdditionalParameters[k]; ok {
			v.problem("%s.additionalParameters sets %s, which LVMS manages; remove it", at, k)
		}
	}
	if _, ok := o.AdditionalParameters[""]; ok {
		v.problem("%s.additionalParameters has an empty key; remove it", at)
	}
}
