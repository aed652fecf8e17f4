package move

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// preflightInput is what the preflight looks at, read by the reconciler (or the CLI).
type preflightInput struct {
	Names      driver.Names
	Claim      *corev1.PersistentVolumeClaim
	PV         *corev1.PersistentVolume // nil: the claim's volume does not exist
	Source     *topolvmv1.LogicalVolume // nil: no LogicalVolume has the PV's volume ID
	TargetName string                   // the node asked for
	Target     *corev1.Node             // nil: no such node
	Users      []corev1.Pod             // pods in the claim's namespace that use the claim
	// Class is the claim's StorageClass (nil: it has none, or it was deleted): its allowedTopologies bound
	// where the volume may go.
	Class *storagev1.StorageClass
	// Unsafe says why no move may start now ("": they may), see Reconciler.Admission.
	Unsafe string
}

// RefusedError is a preflight refusal: the message says what is wrong and what to do.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

func refuse(format string, args ...any) error {
	return &RefusedError{Msg: fmt.Sprintf(format, args...)}
}

// preflight checks that the claim's volume can move to the target node now.
func preflight(in preflightInput) error {
	c := in.Claim
	name := c.Namespace + "/" + c.Name
	if in.Unsafe != "" {
		return refuse("volume moves are off in this cluster: %s", in.Unsafe)
	}
	if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
		return refuse("claim %s is not Bound (phase %q): only a bound claim's volume can move", name, c.Status.Phase)
	}
	pv := in.PV
	if pv == nil {
		return refuse("claim %s names PersistentVolume %s, which does not exist", name, c.Spec.VolumeName)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != in.Names.Driver() {
		return refuse("PersistentVolume %s of claim %s is not an LVMS volume (driver %s): only %s volumes can move", pv.Name, name, csiDriver(pv), in.Names.Driver())
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != c.UID || ref.Namespace != c.Namespace || ref.Name != c.Name {
		return refuse("PersistentVolume %s is not bound to claim %s (its claimRef names another claim): only a claim's own volume can move", pv.Name, name)
	}
	if !pv.DeletionTimestamp.IsZero() {
		return refuse("PersistentVolume %s is being deleted", pv.Name)
	}
	src := in.Source
	if src == nil {
		return refuse("no LogicalVolume has volume ID %s of PersistentVolume %s: is the LVMS node agent running?", pv.Spec.CSI.VolumeHandle, pv.Name)
	}
	if src.Spec.AccessType == "ro" {
		return refuse("PersistentVolume %s is a read-only snapshot volume: restore it to a claim and move that", pv.Name)
	}
	if errs := validation.IsDNS1123Subdomain(in.TargetName); len(errs) > 0 {
		return refuse("target node %q is not a node name: %s", in.TargetName, strings.Join(errs, "; "))
	}
	if in.TargetName == src.Spec.NodeName {
		return refuse("the volume of claim %s is on node %s already: name another node", name, src.Spec.NodeName)
	}
	if in.Target == nil {
		return refuse("node %s does not exist (kubectl get nodes lists the nodes)", in.TargetName)
	}
	if msg := unschedulable(in.Target, in.Class); msg != "" {
		return refuse("%s: choose another node", msg)
	}
	key := in.Names.CapacityAnnotation(src.Spec.DeviceClass)
	raw, ok := in.Target.Annotations[key]
	if !ok {
		return refuse("node %s has no device class %q (no %s annotation): move to a node whose LVMS volume group has it", in.TargetName, deviceClassName(src.Spec.DeviceClass), key)
	}
	free, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || free < 0 {
		return refuse("node %s reports capacity %q for device class %q, not a number of bytes: check its LVMS node agent", in.TargetName, raw, deviceClassName(src.Spec.DeviceClass))
	}
	if need := src.Spec.Size.Value(); free < need {
		return refuse("node %s has %s free in device class %q, the volume needs %s: free space there or choose another node", in.TargetName,
			resource.NewQuantity(free, resource.BinarySI), deviceClassName(src.Spec.DeviceClass), resource.NewQuantity(need, resource.BinarySI))
	}
	if msg := usersMessage(name, in.Users); msg != "" {
		return refuse("%s", msg)
	}
	return nil
}

// unschedulable says why the claim's pods could not run on node; "" when they could. Pods are scaled down
// during a move, so their tolerations are unknown: a taint that keeps pods off the node refuses it.
func unschedulable(node *corev1.Node, class *storagev1.StorageClass) string {
	if node.Spec.Unschedulable {
		return fmt.Sprintf("node %s is cordoned (unschedulable): the claim's pods could not start there (kubectl uncordon %s lifts it)", node.Name, node.Name)
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("node %s has the taint %s: the claim's pods could not start there unless they tolerate it (remove the taint first if they do)", node.Name, t.ToString())
		}
	}
	if class != nil && len(class.AllowedTopologies) > 0 && !slices.ContainsFunc(class.AllowedTopologies, func(term corev1.TopologySelectorTerm) bool {
		for _, req := range term.MatchLabelExpressions {
			if v, ok := node.Labels[req.Key]; !ok || !slices.Contains(req.Values, v) {
				return false
			}
		}
		return true
	}) {
		return fmt.Sprintf("node %s is outside the allowedTopologies of StorageClass %s: its volumes may not be there", node.Name, class.Name)
	}
	return ""
}

// usersMessage says what to scale down so that no pod uses the claim; "" when none does.
func usersMessage(claim string, pods []corev1.Pod) string {
	var users []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := "Pod " + p.Name
		for _, o := range p.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				u += " (of " + o.Kind + " " + o.Name + ")"
			}
		}
		users = append(users, u)
	}
	if len(users) == 0 {
		return ""
	}
	slices.Sort(users)
	return fmt.Sprintf("claim %s is in use by %s: scale what runs them to zero (kubectl scale --replicas=0 ...), wait until the pods are gone, then move again; LVMS never scales your workloads",
		claim, strings.Join(users, ", "))
}

// usesClaim reports whether pod mounts the claim named name.
func usesClaim(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name {
			return true
		}
		if v.Ephemeral != nil && pod.Name+"-"+v.Name == name { // a generic ephemeral volume's claim
			return true
		}
	}
	return false
}

func csiDriver(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI == nil {
		return "none: not a CSI volume"
	}
	return pv.Spec.CSI.Driver
}

func deviceClassName(dc string) string {
	if dc == "" {
		return "default"
	}
	return dc
}
