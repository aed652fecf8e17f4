package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Config turns obj into an apply configuration: its JSON form (so omitempty fields the caller left empty are
// not asserted) without status, resourceVersion, creationTimestamp, uid and managedFields, with apiVersion
// and kind from the scheme.
func Config(scheme *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "managedFields", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"} {
			delete(md, k)
		}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvk.GroupVersion().String())
	u.SetKind(gvk.Kind)
	return u, nil
}

// Object applies obj as field manager owner. Without force a field another manager owns with a different
// value is a conflict error (apierrors.IsConflict).
func Object(ctx context.Context, c client.Client, obj client.Object, owner string, force bool) error {
	u, err := Config(c.Scheme(), obj)
	if err != nil {
		return err
	}
	return Unstructured(ctx, c, u, owner, force)
}

// Unstructured applies u as field manager owner.
func Unstructured(ctx context.Context, c client.Client, u *unstructured.Unstructured, owner string, force bool) error {
	opts := []client.ApplyOption{client.FieldOwner(owner)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), nameOf(u), err)
	}
	return nil
}

// Status applies the status of u (apiVersion, kind, name, namespace and status only) through the status
// subresource as field manager owner.
func Status(ctx context.Context, c client.Client, u *unstructured.Unstructured, owner string, force bool) error {
	opts := []client.SubResourceApplyOption{client.FieldOwner(owner)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return fmt.Errorf("apply status of %s %s: %w", u.GetKind(), nameOf(u), err)
	}
	return nil
}

func nameOf(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}
