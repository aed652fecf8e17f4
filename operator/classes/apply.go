package classes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	storagev1ac "k8s.io/client-go/applyconfigurations/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/names"
)

// Result is what Apply did.
type Result struct {
	// Taken lists classes that could not be created because an object of the same name belongs to someone
	// else, as sentences naming the class and its owner, sorted.
	Taken []string
	// SnapshotsUnavailable is true when the cluster has no VolumeSnapshotClass API, so thin device classes
	// got no VolumeSnapshotClass.
	SnapshotsUnavailable bool
}

// SnapshotAPIAvailable reports whether the cluster serves snapshot.storage.k8s.io/v1 VolumeSnapshotClass.
func SnapshotAPIAvailable(c client.Client) (bool, error) {
	_, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: snapshotv1.GroupName, Kind: "VolumeSnapshotClass"}, "v1")
	if apimeta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover the VolumeSnapshotClass API: %w", err)
	}
	return true, nil
}

// Apply creates or updates the classes of s and deletes the owner's classes s no longer has.
func Apply(ctx context.Context, c client.Client, s Set) (Result, error) {
	var res Result
	var errs []error
	keepSC := map[string]bool{}
	for _, sc := range s.StorageClasses {
		taken, err := applyStorageClass(ctx, c, s, sc)
		switch {
		case err != nil:
			errs = append(errs, err)
			keepSC[sc.Name] = true
		case taken != "":
			res.Taken = append(res.Taken, taken)
		default:
			keepSC[sc.Name] = true
		}
	}
	if err := pruneStorageClasses(ctx, c, s.Owner, keepSC); err != nil {
		errs = append(errs, err)
	}

	snapshots, err := SnapshotAPIAvailable(c)
	if err != nil {
		errs = append(errs, err)
	}
	if snapshots {
		keep := map[string]bool{}
		for _, vsc := range s.SnapshotClasses {
			taken, err := applySnapshotClass(ctx, c, s, vsc)
			switch {
			case err != nil:
				errs = append(errs, err)
				keep[vsc.Name] = true
			case taken != "":
				res.Taken = append(res.Taken, taken)
			default:
				keep[vsc.Name] = true
			}
		}
		if err := pruneSnapshotClasses(ctx, c, s.Owner, keep); err != nil {
			errs = append(errs, err)
		}
	} else if err == nil && len(s.SnapshotClasses) > 0 {
		res.SnapshotsUnavailable = true
	}
	slices.Sort(res.Taken)
	return res, errors.Join(errs...)
}

// Delete deletes every class generated for owner and reports how many are still there (being deleted).
func Delete(ctx context.Context, c client.Client, owner Owner) (int, error) {
	if err := pruneStorageClasses(ctx, c, owner, nil); err != nil {
		return 0, err
	}
	snapshots, err := SnapshotAPIAvailable(c)
	if err != nil {
		return 0, err
	}
	if snapshots {
		if err := pruneSnapshotClasses(ctx, c, owner, nil); err != nil {
			return 0, err
		}
	}
	var scs storagev1.StorageClassList
	if err := c.List(ctx, &scs, client.MatchingLabels(owner.Labels())); err != nil {
		return 0, fmt.Errorf("list StorageClasses of %s: %w", owner, err)
	}
	return len(scs.Items), nil
}

// ownedBy reports whether labels mark an object generated for owner.
func ownedBy(labels map[string]string, owner Owner) bool {
	for k, v := range owner.Labels() {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func describeOwner(labels map[string]string) string {
	if labels[names.OwnerKindLabel] == "" {
		return "was not created by LVMS for this object"
	}
	return fmt.Sprintf("belongs to %s %s/%s", labels[names.OwnerKindLabel], labels[names.OwnerNamespaceLabel], labels[names.OwnerNameLabel])
}

func applyStorageClass(ctx context.Context, c client.Client, s Set, sc StorageClass) (string, error) {
	owner, d := s.Owner, s.Driver
	var existing storagev1.StorageClass
	err := c.Get(ctx, client.ObjectKey{Name: sc.Name}, &existing)
	adopting := false
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("get StorageClass %s: %w", sc.Name, err)
	case ownedBy(existing.Labels, owner):
	default:
		if _, ok := ownerIn(existing.Labels, s.Yield); ok {
			return "", nil
		}
		if _, ok := ownerIn(existing.Labels, s.Adopt); !ok {
			return fmt.Sprintf("StorageClass %s for device class %s already exists and %s; give the device class another StorageClass name",
				sc.Name, sc.DeviceClass, describeOwner(existing.Labels)), nil
		}
		adopting = true
	}
	isDefault, err := defaultAllowed(ctx, c, sc)
	if err != nil {
		return "", err
	}
	desired := storageClassConfig(owner, d, sc, isDefault)
	if adopting {
		if diff := storageClassImmutableDiff(&existing, desired); diff != "" {
			return fmt.Sprintf("StorageClass %s for device class %s %s and cannot be adopted in place: %s differ (a StorageClass cannot change them, and LVMS never deletes one to adopt it); make the device class match it",
				sc.Name, sc.DeviceClass, describeOwner(existing.Labels), diff), nil
		}
	}
	if existing.Name != "" && storageClassMatches(&existing, desired) {
		return "", nil
	}
	err = c.Apply(ctx, desired, client.FieldOwner(names.FieldOwner), client.ForceOwnership)
	if apierrors.IsInvalid(err) && existing.Name != "" && !adopting {
		// Provisioner, parameters, reclaim policy and binding mode of a StorageClass cannot change; PVs keep
		// their own copies of them, so replacing the class is safe.
		if err := c.Delete(ctx, &existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("replace StorageClass %s: %w", sc.Name, err)
		}
		err = c.Apply(ctx, desired, client.FieldOwner(names.FieldOwner), client.ForceOwnership)
	}
	if err != nil {
		return "", fmt.Errorf("apply StorageClass %s: %w", sc.Name, err)
	}
	return "", nil
}

// defaultAllowed reports whether sc may be annotated as the cluster default: it asks to be, and no
// StorageClass generated for another device class or made by someone else already is.
func defaultAllowed(ctx context.Context, c client.Client, sc StorageClass) (bool, error) {
	if !sc.Default {
		return false, nil
	}
	var all storagev1.StorageClassList
	if err := c.List(ctx, &all); err != nil {
		return false, fmt.Errorf("list StorageClasses: %w", err)
	}
	for _, other := range all.Items {
		if other.Name != sc.Name && other.Annotations[names.DefaultClassAnnotation] == "true" {
			return false, nil
		}
	}
	return true, nil
}

func storageClassConfig(owner Owner, d driver.Names, sc StorageClass, isDefault bool) *storagev1ac.StorageClassApplyConfiguration {
	labels := maps.Clone(sc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, owner.Labels())
	labels[names.DeviceClassLabel] = sc.DeviceClass
	params := maps.Clone(sc.Parameters)
	if params == nil {
		params = map[string]string{}
	}
	params[d.DeviceClassParam()] = sc.DeviceClass
	if sc.FSType != "" {
		params[names.FSTypeParameter] = sc.FSType
	}
	return storagev1ac.StorageClass(sc.Name).
		WithLabels(labels).
		WithAnnotations(map[string]string{
			names.DescriptionAnnotation:  description,
			names.DefaultClassAnnotation: fmt.Sprint(isDefault),
		}).
		WithProvisioner(sc.Provisioner).
		WithParameters(params).
		WithReclaimPolicy(sc.ReclaimPolicy).
		WithVolumeBindingMode(sc.VolumeBindingMode).
		WithAllowVolumeExpansion(true)
}

func pruneStorageClasses(ctx context.Context, c client.Client, owner Owner, keep map[string]bool) error {
	var list storagev1.StorageClassList
	if err := c.List(ctx, &list, client.MatchingLabels(owner.Labels())); err != nil {
		return fmt.Errorf("list StorageClasses of %s: %w", owner, err)
	}
	var errs []error
	for i := range list.Items {
		sc := &list.Items[i]
		if keep[sc.Name] || sc.DeletionTimestamp != nil {
			continue
		}
		if err := c.Delete(ctx, sc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete StorageClass %s: %w", sc.Name, err))
		}
	}
	return errors.Join(errs...)
}

func applySnapshotClass(ctx context.Context, c client.Client, s Set, vsc SnapshotClass) (string, error) {
	owner, d := s.Owner, s.Driver
	var existing snapshotv1.VolumeSnapshotClass
	err := c.Get(ctx, client.ObjectKey{Name: vsc.Name}, &existing)
	adopting := false
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("get VolumeSnapshotClass %s: %w", vsc.Name, err)
	case ownedBy(existing.Labels, owner):
	default:
		if _, ok := ownerIn(existing.Labels, s.Yield); ok {
			return "", nil
		}
		if _, ok := ownerIn(existing.Labels, s.Adopt); !ok {
			return fmt.Sprintf("VolumeSnapshotClass %s for device class %s already exists and %s; give the device class another snapshot class name",
				vsc.Name, vsc.DeviceClass, describeOwner(existing.Labels)), nil
		}
		adopting = true
	}
	labels := owner.Labels()
	labels[names.DeviceClassLabel] = vsc.DeviceClass
	obj := &snapshotv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: vsc.Name, Labels: labels},
		Driver:         d.Driver(),
		DeletionPolicy: snapshotv1.DeletionPolicy(vsc.DeletionPolicy),
		Parameters:     map[string]string{d.DeviceClassParam(): vsc.DeviceClass},
	}
	if adopting && (existing.Driver != obj.Driver || existing.DeletionPolicy != obj.DeletionPolicy || !maps.Equal(existing.Parameters, obj.Parameters)) {
		return fmt.Sprintf("VolumeSnapshotClass %s for device class %s %s and cannot be adopted in place: its driver, deletion policy or parameters differ; make the device class match it",
			vsc.Name, vsc.DeviceClass, describeOwner(existing.Labels)), nil
	}
	err = apply.Object(ctx, c, obj, names.FieldOwner, true)
	if apierrors.IsInvalid(err) && existing.Name != "" && !adopting && !strings.Contains(err.Error(), "Required value") {
		if err := c.Delete(ctx, &existing); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("replace VolumeSnapshotClass %s: %w", vsc.Name, err)
		}
		err = apply.Object(ctx, c, obj, names.FieldOwner, true)
	}
	return "", err
}

func pruneSnapshotClasses(ctx context.Context, c client.Client, owner Owner, keep map[string]bool) error {
	var list snapshotv1.VolumeSnapshotClassList
	if err := c.List(ctx, &list, client.MatchingLabels(owner.Labels())); err != nil {
		return fmt.Errorf("list VolumeSnapshotClasses of %s: %w", owner, err)
	}
	var errs []error
	for i := range list.Items {
		vsc := &list.Items[i]
		if keep[vsc.Name] || vsc.DeletionTimestamp != nil {
			continue
		}
		if err := c.Delete(ctx, vsc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete VolumeSnapshotClass %s: %w", vsc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// storageClassImmutableDiff names the fields a StorageClass cannot change on which existing and desired
// differ ("" when none does).
func storageClassImmutableDiff(existing *storagev1.StorageClass, desired *storagev1ac.StorageClassApplyConfiguration) string {
	var diff []string
	if existing.Provisioner != *desired.Provisioner {
		diff = append(diff, fmt.Sprintf("provisioner (%s, wanted %s)", existing.Provisioner, *desired.Provisioner))
	}
	if !maps.Equal(existing.Parameters, desired.Parameters) {
		diff = append(diff, fmt.Sprintf("parameters (%v, wanted %v)", existing.Parameters, desired.Parameters))
	}
	if existing.ReclaimPolicy == nil || *existing.ReclaimPolicy != *desired.ReclaimPolicy {
		diff = append(diff, fmt.Sprintf("reclaimPolicy (wanted %s)", *desired.ReclaimPolicy))
	}
	if existing.VolumeBindingMode == nil || *existing.VolumeBindingMode != *desired.VolumeBindingMode {
		diff = append(diff, fmt.Sprintf("volumeBindingMode (wanted %s)", *desired.VolumeBindingMode))
	}
	return strings.Join(diff, ", ")
}

// storageClassMatches reports whether existing already has every field of desired (no write needed).
func storageClassMatches(existing *storagev1.StorageClass, desired *storagev1ac.StorageClassApplyConfiguration) bool {
	for k, v := range desired.Labels {
		if existing.Labels[k] != v {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if existing.Annotations[k] != v {
			return false
		}
	}
	if !maps.Equal(existing.Parameters, desired.Parameters) || existing.Provisioner != *desired.Provisioner {
		return false
	}
	return existing.ReclaimPolicy != nil && *existing.ReclaimPolicy == *desired.ReclaimPolicy &&
		existing.VolumeBindingMode != nil && *existing.VolumeBindingMode == *desired.VolumeBindingMode &&
		existing.AllowVolumeExpansion != nil && *existing.AllowVolumeExpansion
}

// Names returns the StorageClass names of s together with those of every StorageClass already generated for
// its owner (a class renamed or removed from the spec still holds volumes), sorted.
func Names(ctx context.Context, c client.Client, s Set) ([]string, error) {
	out := s.StorageClassNames()
	var existing storagev1.StorageClassList
	if err := c.List(ctx, &existing, client.MatchingLabels(s.Owner.Labels())); err != nil {
		return nil, fmt.Errorf("list StorageClasses of %s: %w", s.Owner, err)
	}
	for _, sc := range existing.Items {
		if !slices.Contains(out, sc.Name) {
			out = append(out, sc.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}
