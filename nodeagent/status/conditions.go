package status

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Condition reasons the node agent uses.
const (
	ReasonAllHealthy            = "AllHealthy"
	ReasonNoVolumeGroups        = lvmv2.ReasonNoVolumeGroups
	ReasonNoDeviceClasses       = lvmv2.ReasonNoDeviceClasses
	ReasonExternalConfiguration = "ExternalConfiguration"
	ReasonProgressing           = "Progressing"
	ReasonDegraded              = "Degraded"
	ReasonFailed                = "Failed"
	ReasonManualCleanupRequired = "ManualCleanupRequired"
	ReasonKernelTargetMissing   = "KernelTargetMissing"
	ReasonVolumeGroupNotReady   = "VolumeGroupNotReady"
	ReasonThinPoolNotReady      = "ThinPoolNotReady"
	ReasonWritten               = "Written"
	ReasonPartial               = "Partial"
	ReasonNothingToWrite        = "NothingToWrite"
	ReasonWriteFailed           = "WriteFailed"
	ReasonValid                 = "Valid"
	ReasonInvalid               = "Invalid"
	ReasonMissing               = "Missing"
)

// conditionOrder is the order conditions appear in; other types follow, sorted.
var conditionOrder = []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy,
	lvmv2.ConditionStorageClassesHealthy, lvmv2.ConditionLVMDConfigured}

// SetCondition sets c in conds (by type) and returns the result in a fixed order. lastTransitionTime
// moves to now only when the status changes (or the condition is new); other condition types are kept.
func SetCondition(conds []metav1.Condition, c metav1.Condition, now metav1.Time) []metav1.Condition {
	out := slices.Clone(conds)
	i := slices.IndexFunc(out, func(x metav1.Condition) bool { return x.Type == c.Type })
	switch {
	case i < 0:
		c.LastTransitionTime = now
		out = append(out, c)
	case out[i].Status != c.Status:
		c.LastTransitionTime = now
		out[i] = c
	default:
		c.LastTransitionTime = out[i].LastTransitionTime
		out[i] = c
	}
	slices.SortStableFunc(out, func(a, b metav1.Condition) int {
		ia, ib := slices.Index(conditionOrder, a.Type), slices.Index(conditionOrder, b.Type)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

// FindCondition returns the condition of a type.
func FindCondition(conds []metav1.Condition, typ string) (metav1.Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

func boolStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}
