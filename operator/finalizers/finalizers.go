package finalizers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds finalizer to obj unless obj already has it or is being deleted. It reports whether it added it.
func Ensure(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("add finalizer %s to %s: %w", finalizer, obj.GetName(), err)
	}
	return true, nil
}

// Remove removes finalizer from obj if it has it. It reports whether it removed it.
func Remove(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("remove finalizer %s from %s: %w", finalizer, obj.GetName(), err)
	}
	return true, nil
}

// RemoveAll removes every finalizer from obj (used only for objects of a Node that no longer exists, where no
// one is left to act on them). It reports whether there were any.
func RemoveAll(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if len(obj.GetFinalizers()) == 0 {
		return false, nil
	}
	base := obj.DeepCopyObject().(client.Object)
	obj.SetFinalizers(nil)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("remove finalizers %v from %s: %w", base.GetFinalizers(), obj.GetName(), err)
	}
	return true, nil
}
