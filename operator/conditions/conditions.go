package conditions

import (
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set adds or updates c in conds. ObservedGeneration is set to generation; LastTransitionTime is kept when
// the status did not change and set to now when it did (or when the condition is new). Conditions whose
// type appears in order are sorted in that order, others after them by type.
func Set(conds *[]metav1.Condition, c metav1.Condition, generation int64, order []string) {
	c.ObservedGeneration = generation
	apimeta.SetStatusCondition(conds, c)
	Sort(*conds, order)
}

// Sort orders conditions by their position in order; unknown types go last, sorted by type.
func Sort(conds []metav1.Condition, order []string) {
	rank := func(t string) int {
		if i := slices.Index(order, t); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int {
		ra, rb := rank(a.Type), rank(b.Type)
		if ra != rb {
			return ra - rb
		}
		switch {
		case a.Type < b.Type:
			return -1
		case a.Type > b.Type:
			return 1
		}
		return 0
	})
}

// Get returns the condition of type t, or nil.
func Get(conds []metav1.Condition, t string) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, t)
}

// IsTrue reports whether the condition of type t exists and is True.
func IsTrue(conds []metav1.Condition, t string) bool {
	return apimeta.IsStatusConditionTrue(conds, t)
}
