package conditions

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	order := []string{"A", "B", "C"}
	old := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name          string
		existing      []metav1.Condition
		set           metav1.Condition
		wantTypes     []string
		wantKeptTime  bool
		wantGenFilled int64
	}{
		{
			name:          "new condition is added and placed in order",
			existing:      []metav1.Condition{{Type: "C", Status: metav1.ConditionTrue, LastTransitionTime: old}},
			set:           metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R"},
			wantTypes:     []string{"A", "C"},
			wantGenFilled: 3,
		},
		{
			name:          "same status keeps the transition time",
			existing:      []metav1.Condition{{Type: "B", Status: metav1.ConditionTrue, Reason: "Old", LastTransitionTime: old}},
			set:           metav1.Condition{Type: "B", Status: metav1.ConditionTrue, Reason: "New"},
			wantTypes:     []string{"B"},
			wantKeptTime:  true,
			wantGenFilled: 3,
		},
		{
			name:          "flipped status moves the transition time",
			existing:      []metav1.Condition{{Type: "B", Status: metav1.ConditionTrue, Reason: "Old", LastTransitionTime: old}},
			set:           metav1.Condition{Type: "B", Status: metav1.ConditionFalse, Reason: "New"},
			wantTypes:     []string{"B"},
			wantGenFilled: 3,
		},
		{
			name:          "unknown types go last sorted by type",
			existing:      []metav1.Condition{{Type: "Z", Status: metav1.ConditionTrue, LastTransitionTime: old}, {Type: "X", Status: metav1.ConditionTrue, LastTransitionTime: old}},
			set:           metav1.Condition{Type: "C", Status: metav1.ConditionTrue, Reason: "R"},
			wantTypes:     []string{"C", "X", "Z"},
			wantGenFilled: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tc.existing...)
			Set(&conds, tc.set, 3, order)
			var types []string
			for _, c := range conds {
				types = append(types, c.Type)
			}
			if len(types) != len(tc.wantTypes) {
				t.Fatalf("types = %v, want %v", types, tc.wantTypes)
			}
			for i := range types {
				if types[i] != tc.wantTypes[i] {
					t.Fatalf("types = %v, want %v", types, tc.wantTypes)
				}
			}
			got := Get(conds, tc.set.Type)
			if got.ObservedGeneration != tc.wantGenFilled {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, tc.wantGenFilled)
			}
			if got.Reason != tc.set.Reason {
				t.Errorf("reason = %q, want %q", got.Reason, tc.set.Reason)
			}
			if kept := got.LastTransitionTime.Equal(&old); kept != tc.wantKeptTime {
				t.Errorf("lastTransitionTime kept = %v, want %v", kept, tc.wantKeptTime)
			}
		})
	}
}
