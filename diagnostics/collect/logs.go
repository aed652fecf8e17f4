package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// LogSource reads container logs.
type LogSource interface {
	Logs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// clusterLogs reads logs through the API server (which asks the kubelet).
type clusterLogs struct{ cs kubernetes.Interface }

func (c clusterLogs) Logs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return c.cs.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

func (r *run) logSource() LogSource {
	if r.opts.Logs != nil {
		return r.opts.Logs
	}
	return clusterLogs{cs: r.cs}
}

// logCollectors: one per pod of the LVMS namespaces, each writing every container's current log and, after
// a restart, its previous one.
func (r *run) logCollectors() []collector {
	r.mu.Lock()
	pods := append([]corev1.Pod(nil), r.facts.nsPods...)
	r.mu.Unlock()
	var cs []collector
	for i := range pods {
		p := &pods[i]
		cs = append(cs, collector{name: "logs/" + p.Namespace + "/" + p.Name, run: func(ctx context.Context, t *tally) error {
			return r.podLogs(ctx, t, p)
		}})
	}
	return cs
}

func (r *run) podLogs(ctx context.Context, t *tally, p *corev1.Pod) error {
	restarted := map[string]bool{}
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		restarted[st.Name] = st.RestartCount > 0 || st.LastTerminationState.Terminated != nil
	}
	var errs []error
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, previous := range []bool{false, true} {
			if previous && !restarted[c.Name] {
				continue
			}
			if err := r.containerLog(ctx, t, p, c.Name, previous); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (r *run) containerLog(ctx context.Context, t *tally, p *corev1.Pod, container string, previous bool) error {
	path, err := bundle.LogPath(p.Namespace, p.Name, container, previous)
	if err != nil {
		return err
	}
	limit := r.opts.LogLimitBytes
	opts := &corev1.PodLogOptions{Container: container, Previous: previous, Timestamps: true, LimitBytes: &limit}
	if !r.opts.Since.IsZero() {
		opts.SinceTime = &metav1.Time{Time: r.opts.Since}
	}
	which := "log"
	if previous {
		which = "previous log"
	}
	rc, err := r.logSource().Logs(ctx, p.Namespace, p.Name, opts)
	if err != nil {
		return fmt.Errorf("%s of container %s: %w", which, container, err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil && len(data) == 0 {
		return fmt.Errorf("read the %s of container %s: %w", which, container, err)
	}
	if int64(len(data)) > limit {
		data = append(data[:limit], []byte("\n[log cut at "+fmt.Sprint(limit)+" bytes by --log-limit-bytes]\n")...)
	}
	if err != nil {
		data = append(data, []byte("\n[log incomplete: "+strings.TrimSpace(err.Error())+"]\n")...)
	}
	return t.write(path, data)
}
