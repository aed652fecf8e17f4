package provider

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	storagev1ac "k8s.io/client-go/applyconfigurations/storage/v1"

	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/operator/names"
)

// AgentOptions configure the node agent DaemonSet.
type AgentOptions struct {
	// Image of the lvms binary (the operator's own image in a normal installation).
	Image string
	// ImagePullPolicy of the container (default IfNotPresent).
	ImagePullPolicy corev1.PullPolicy
	// PriorityClassName of the pods (default system-node-critical; OpenShift uses openshift-user-critical).
	PriorityClassName string
	// CPURequest and MemoryRequest of the container (defaults 10m and 64Mi); the memory request also sets
	// GOMEMLIMIT.
	CPURequest, MemoryRequest string
	// LVMDConfigDir is the host directory holding lvmd.yaml (default /etc/topolvm; MicroShift:
	// /var/lib/microshift/lvms).
	LVMDConfigDir string
}

func (o AgentOptions) withDefaults() AgentOptions {
	if o.Image == "" {
		o.Image = "lvms:latest"
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if o.PriorityClassName == "" {
		o.PriorityClassName = "system-node-critical"
	}
	if o.CPURequest == "" {
		o.CPURequest = "10m"
	}
	if o.MemoryRequest == "" {
		o.MemoryRequest = "64Mi"
	}
	if o.LVMDConfigDir == "" {
		o.LVMDConfigDir = "/etc/topolvm"
	}
	return o
}

func (r *Reconciler) csiDrivers(shared bool) []*storagev1.CSIDriver {
	mk := func(name string, capacity bool) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: r.labels()},
			Spec: storagev1.CSIDriverSpec{
				AttachRequired:       ptr(false),
				PodInfoOnMount:       ptr(true),
				StorageCapacity:      ptr(capacity),
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			},
		}
	}
	out := []*storagev1.CSIDriver{mk(r.Names.Driver(), true)}
	if shared {
		// Its CSIStorageCapacity names the nodes in the volume group's lockspace: the scheduler puts a pod
		// with a new claim only on a node that can stage it.
		out = append(out, mk(names.SharedCSIDriverName, true))
	}
	return out
}

func csiDriverConfig(d *storagev1.CSIDriver) *storagev1ac.CSIDriverApplyConfiguration {
	return storagev1ac.CSIDriver(d.Name).
		WithLabels(d.Labels).
		WithSpec(storagev1ac.CSIDriverSpec().
			WithAttachRequired(*d.Spec.AttachRequired).
			WithPodInfoOnMount(*d.Spec.PodInfoOnMount).
			WithStorageCapacity(*d.Spec.StorageCapacity).
			WithVolumeLifecycleModes(d.Spec.VolumeLifecycleModes...))
}

// podLabels select the node agent's pods.
func podLabels() map[string]string {
	return map[string]string{names.NameLabel: names.AppName, names.ComponentLabel: names.ComponentNodeAgent}
}

// daemonSet is the node agent DaemonSet for p.
func (r *Reconciler) daemonSet(p placement) *appsv1ac.DaemonSetApplyConfiguration {
	o := r.Agent.withDefaults()
	// The registration directory is mounted at /registration (see mounts below).
	args := []string{"nodeagent", "--namespace=" + r.Namespace, "--kubelet-registration-dir=/registration",
		"--metrics-bind-address=:" + itoa(names.NodeAgentMetricsPort), "--metrics-cert-dir=" + metricsCertDir,
		"--health-probe-bind-address=:" + itoa(names.NodeAgentHealthPort)}
	if p.external {
		args = append(args, "--configuration-policy=ExternalConfiguration")
	}
	if r.Names.Legacy() {
		// The agents' own default follows $USE_LEGACY, which the pods do not have.
		args = append(args, "--legacy")
	}
	mem := resource.MustParse(o.MemoryRequest)
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("NODE_NAME").WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("spec.nodeName"))),
		corev1ac.EnvVar().WithName("POD_NAMESPACE").WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("metadata.namespace"))),
		// Where the receiver of a volume move listens (nodeagent/transfer): other nodes' agents reach it there.
		corev1ac.EnvVar().WithName("POD_IP").WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("status.podIP"))),
		corev1ac.EnvVar().WithName("GOMEMLIMIT").WithValue(fmt.Sprintf("%dMiB", mem.Value()>>20)),
		corev1ac.EnvVar().WithName("GOGC").WithValue(names.AgentGOGC),
	}
	type hostMount struct {
		name, hostPath, mountPath string
		bidirectional             bool
		kind                      corev1.HostPathType
	}
	mounts := []hostMount{
		{"dev", "/dev", "/dev", false, corev1.HostPathDirectory},
		{"sys", "/sys", "/sys", false, corev1.HostPathDirectory},
		{"udev", "/run/udev", "/run/udev", false, corev1.HostPathDirectoryOrCreate},
		{"lvm-config", "/etc/lvm", "/etc/lvm", false, corev1.HostPathDirectoryOrCreate},
		{"lvm-lock", "/run/lock/lvm", "/run/lock/lvm", false, corev1.HostPathDirectoryOrCreate},
		// The lock managers' lock file (nodeagent/shared/lockd): one flock per host, across agent restarts.
		{"lvms-run", "/run/lvms", "/run/lvms", false, corev1.HostPathDirectoryOrCreate},
		{"lvmd-config", o.LVMDConfigDir, "/etc/topolvm", false, corev1.HostPathDirectoryOrCreate},
		{"registration", "/var/lib/kubelet/plugins_registry", "/registration", false, corev1.HostPathDirectoryOrCreate},
		{"plugin-dir", "/var/lib/kubelet/plugins/topolvm.io/node", "/var/lib/kubelet/plugins/topolvm.io/node", false, corev1.HostPathDirectoryOrCreate},
		{"shared-plugin-dir", "/var/lib/kubelet/plugins/" + names.SharedCSIDriverName + "/node", "/var/lib/kubelet/plugins/" + names.SharedCSIDriverName + "/node", false, corev1.HostPathDirectoryOrCreate},
		{"pods", "/var/lib/kubelet/pods", "/var/lib/kubelet/pods", true, corev1.HostPathDirectoryOrCreate},
		{"csi-plugins", "/var/lib/kubelet/plugins/kubernetes.io/csi", "/var/lib/kubelet/plugins/kubernetes.io/csi", true, corev1.HostPathDirectoryOrCreate},
	}
	// The metrics certificate: the service CA's serving certificate on OpenShift (the Service
	// lvms-node-agent-metrics asks for it), a Secret of that name elsewhere, or self-signed when neither exists.
	volumes := []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("metrics-cert").
		WithSecret(corev1ac.SecretVolumeSource().WithSecretName(names.NodeAgentMetricsCertSecret).WithOptional(true))}
	volumeMounts := []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("metrics-cert").
		WithMountPath(metricsCertDir).WithReadOnly(true)}
	for _, m := range mounts {
		volumes = append(volumes, corev1ac.Volume().WithName(m.name).WithHostPath(corev1ac.HostPathVolumeSource().WithPath(m.hostPath).WithType(m.kind)))
		vm := corev1ac.VolumeMount().WithName(m.name).WithMountPath(m.mountPath)
		if m.bidirectional {
			vm = vm.WithMountPropagation(corev1.MountPropagationBidirectional)
		} else if m.name == "lvmd-config" {
			vm = vm.WithMountPropagation(corev1.MountPropagationHostToContainer)
		}
		volumeMounts = append(volumeMounts, vm)
	}
	container := corev1ac.Container().
		WithName("node-agent").
		WithImage(o.Image).
		WithImagePullPolicy(o.ImagePullPolicy).
		WithCommand("/lvms").
		WithArgs(args...).
		WithEnv(env...).
		WithPorts(
			corev1ac.ContainerPort().WithName(diagnostics.PortName).WithContainerPort(diagnostics.DefaultPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("metrics").WithContainerPort(names.NodeAgentMetricsPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("health").WithContainerPort(names.NodeAgentHealthPort).WithProtocol(corev1.ProtocolTCP)).
		// Liveness restarts an agent whose process hangs; readiness holds the rollout until its caches synced.
		WithLivenessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("health"))).
			WithPeriodSeconds(30).WithFailureThreshold(3).WithTimeoutSeconds(5)).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/readyz").WithPort(intstr.FromString("health"))).
			WithPeriodSeconds(10).WithTimeoutSeconds(5)).
		WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(true).WithRunAsUser(0)).
		WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(o.CPURequest),
			corev1.ResourceMemory: mem,
		})).
		WithVolumeMounts(volumeMounts...).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)

	var tolerations []*corev1ac.TolerationApplyConfiguration
	for _, t := range nodeselect.MergeTolerations(append(p.tolerations, nodeselect.AgentTolerations())...) {
		ac := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithValue(t.Value).WithEffect(t.Effect)
		if t.TolerationSeconds != nil {
			ac = ac.WithTolerationSeconds(*t.TolerationSeconds)
		}
		tolerations = append(tolerations, ac)
	}
	spec := corev1ac.PodSpec().
		WithServiceAccountName(names.NodeAgent).
		WithHostPID(true).
		WithPriorityClassName(o.PriorityClassName).
		WithTerminationGracePeriodSeconds(30).
		WithTolerations(tolerations...).
		WithContainers(container).
		WithVolumes(volumes...)
	if union := nodeselect.Union(p.selectors); union != nil {
		spec = spec.WithAffinity(corev1ac.Affinity().WithNodeAffinity(corev1ac.NodeAffinity().
			WithRequiredDuringSchedulingIgnoredDuringExecution(nodeSelectorConfig(union))))
	}
	return appsv1ac.DaemonSet(names.NodeAgent, r.Namespace).
		WithLabels(r.labels()).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels())).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().WithType(appsv1.RollingUpdateDaemonSetStrategyType)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels()).
				WithSpec(spec)))
}

func nodeSelectorConfig(sel *corev1.NodeSelector) *corev1ac.NodeSelectorApplyConfiguration {
	out := corev1ac.NodeSelector()
	for _, t := range sel.NodeSelectorTerms {
		term := corev1ac.NodeSelectorTerm()
		for _, e := range t.MatchExpressions {
			term = term.WithMatchExpressions(corev1ac.NodeSelectorRequirement().WithKey(e.Key).WithOperator(e.Operator).WithValues(e.Values...))
		}
		for _, e := range t.MatchFields {
			term = term.WithMatchFields(corev1ac.NodeSelectorRequirement().WithKey(e.Key).WithOperator(e.Operator).WithValues(e.Values...))
		}
		out = out.WithNodeSelectorTerms(term)
	}
	return out
}

// metricsCertDir is where the node agent finds tls.crt and tls.key for its metrics endpoint.
const metricsCertDir = "/etc/lvms/metrics-tls"

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func ptr[T any](v T) *T { return &v }
