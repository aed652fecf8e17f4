package plan_test

import (
	"errors"
	"fmt"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
)

// checkInvariants holds for every plan, whatever the LVMCluster: each v1 device class becomes exactly one
// v2 device class of the same name, on a volume group of the same name in the same set, with StorageClass
// lvms-<name>; at most one class is the default, and it is the one v1 made the default; every set names
// the LVMCluster it replaces and hands over no node; the sets fit the v2 limits; the operator would
// generate the same classes from the sets as from the LVMCluster.
func checkInvariants(c *lvmv1.LVMCluster, p *plan.Plan) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	seen := map[string]int{}
	setNames := map[string]bool{}
	defaults := 0
	for _, s := range p.NodeSets {
		if setNames[s.Name] {
			fail("set name %s is used twice", s.Name)
		}
		setNames[s.Name] = true
		if s.APIVersion != lvmv2.GroupVersion.String() || s.Kind != "LVMNodeSet" {
			fail("set %s has apiVersion %q kind %q", s.Name, s.APIVersion, s.Kind)
		}
		if s.Namespace != c.Namespace {
			fail("set %s is in namespace %q, the LVMCluster in %q", s.Name, s.Namespace, c.Namespace)
		}
		if got := s.Annotations[names.MigratedFromAnnotation]; got != c.Name {
			fail("set %s has %s=%q, want %q", s.Name, names.MigratedFromAnnotation, got, c.Name)
		}
		if _, ok := s.Annotations[names.HandedOverNodesAnnotation]; ok {
			fail("set %s already hands nodes over", s.Name)
		}
		if n := len(s.Spec.Template.VolumeGroups); n > 8 {
			fail("set %s has %d volume groups, more than v2 allows", s.Name, n)
		}
		for _, dc := range s.Spec.Template.DeviceClasses {
			seen[dc.Name]++
			if dc.Default {
				defaults++
			}
			if dc.VolumeGroup != dc.Name {
				fail("device class %s allocates from volume group %s", dc.Name, dc.VolumeGroup)
			}
			if !hasVG(s.Spec.Template, dc.Name) {
				fail("set %s has device class %s but not its volume group", s.Name, dc.Name)
			}
			if dc.StorageClass == nil || dc.StorageClass.NamingPolicy != lvmv2.NamingExplicit || dc.StorageClass.Name != "lvms-"+dc.Name {
				fail("device class %s does not keep StorageClass lvms-%s: %+v", dc.Name, dc.Name, dc.StorageClass)
			}
		}
	}
	wantDefault := ""
	dcs := c.Spec.Storage.DeviceClasses
	for _, dc := range dcs {
		if seen[dc.Name] != 1 {
			fail("v1 device class %s appears %d times in the plan", dc.Name, seen[dc.Name])
		}
		if dc.Default || len(dcs) == 1 {
			wantDefault = dc.Name
		}
	}
	if len(seen) != len(dcs) {
		fail("the plan has %d device classes, the LVMCluster %d", len(seen), len(dcs))
	}
	if defaults > 1 {
		fail("%d device classes are the default", defaults)
	}
	for _, m := range p.Mappings {
		if m.Default != (m.DeviceClass == wantDefault) {
			fail("device class %s default=%v; v1's default is %q", m.DeviceClass, m.Default, wantDefault)
		}
	}
	for _, f := range p.Findings {
		if f.Code == plan.CodeGeneratedClassDiffers {
			fail("%s: %s", f.Code, f.Message)
		}
	}
	return errors.Join(errs...)
}

func hasVG(t lvmv2.LVMNodeSpec, name string) bool {
	for _, vg := range t.VolumeGroups {
		if vg.Name == name {
			return true
		}
	}
	return false
}
