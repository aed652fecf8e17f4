package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// chooseGroup decides which LogicalVolume group this process serves, before anything starts: one driver
// never runs over the other group's volumes.
//
//   - --legacy (or $USE_LEGACY) given: that group, unless every LogicalVolume is in the other one, which
//     is refused with the flag to change;
//   - not given: topolvm.io, or topolvm.cybozu.com when the cluster's LogicalVolumes are all there (a
//     cluster that ran TopoLVM before its rename, MicroShift before 4.15), said in the log;
//   - LogicalVolumes in both groups: refused, whatever the flag (one of them must be dealt with first).
func chooseGroup(ctx context.Context, cfg *rest.Config, flags *pflag.FlagSet, o *csiDriverOptions, log logr.Logger) error {
	c, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		return err
	}
	current, err := countLogicalVolumes(ctx, c, topolvmv1.GroupName)
	if err != nil {
		return err
	}
	legacy, err := countLogicalVolumes(ctx, c, topolvmv1.LegacyGroupName)
	if err != nil {
		return err
	}
	explicit := flags.Changed("legacy") || os.Getenv("USE_LEGACY") != ""
	use, err := decideGroup(current, legacy, o.legacy, explicit)
	if err != nil {
		return err
	}
	if use != o.legacy {
		log.Info("Serving the legacy group: every LogicalVolume of this cluster is in topolvm.cybozu.com", "logicalVolumes", legacy)
	}
	o.legacy = use
	return nil
}

// decideGroup is chooseGroup's rule: whether to serve the legacy group, given how many LogicalVolumes
// each group holds, the flag's value and whether it was given.
func decideGroup(current, legacy int, flag, explicit bool) (bool, error) {
	switch {
	case current > 0 && legacy > 0:
		return false, fmt.Errorf("the cluster has LogicalVolumes in both %s (%d) and %s (%d): LVMS serves one group, so that one driver never acts on the other's volumes; "+
			"move or remove the volumes of the group you do not use, then start LVMS again", topolvmv1.GroupName, current, topolvmv1.LegacyGroupName, legacy)
	case explicit && flag && current > 0:
		return false, fmt.Errorf("--legacy (or $USE_LEGACY) is set, but this cluster's %d LogicalVolumes are in %s: unset it", current, topolvmv1.GroupName)
	case explicit && !flag && legacy > 0:
		return false, fmt.Errorf("this cluster's %d LogicalVolumes are in the legacy group %s: run LVMS with --legacy (or $USE_LEGACY=1) instead of --legacy=false", legacy, topolvmv1.LegacyGroupName)
	case explicit:
		return flag, nil
	}
	return legacy > 0, nil
}

// countLogicalVolumes counts the LogicalVolumes of a group; a group whose CRD is not installed has none.
func countLogicalVolumes(ctx context.Context, c client.Reader, group string) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(topolvmv1.GroupVersion.WithKind("LogicalVolumeList"))
	gvk := list.GroupVersionKind()
	gvk.Group = group
	list.SetGroupVersionKind(gvk)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("count the LogicalVolumes of %s: %w", group, err)
	}
	return len(list.Items), nil
}
