package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

// TestOwnImage: the node agent's image is what the operator's Pod runs (an overlay's image override reaches
// both), the default outside a pod, and a clear error when the Pod cannot say.
func TestOwnImage(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	ctx := context.Background()
	ns := env.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lvms-operator-7d9f-abcde", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-rbac-proxy", Image: "example.com/proxy:v1"},
			{Name: "operator", Image: "mirror.example.com/lvms/lvms@sha256:" + strings.Repeat("a", 64)},
		}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	if got, err := ownImage(ctx, env.Config, ns, pod.Name); err != nil || got != pod.Spec.Containers[1].Image {
		t.Errorf("ownImage = %q, %v; want the operator container's image %q", got, err, pod.Spec.Containers[1].Image)
	}
	if got, err := ownImage(ctx, env.Config, ns, ""); err != nil || got != defaultAgentImage {
		t.Errorf("outside a pod: %q, %v; want %q", got, err, defaultAgentImage)
	}
	if _, err := ownImage(ctx, env.Config, ns, "gone"); err == nil || !strings.Contains(err.Error(), "--node-agent-image") {
		t.Errorf("a missing Pod: %v; want an error that names --node-agent-image", err)
	}
	if _, err := podImage([]corev1.Container{{Name: "sidecar", Image: "x"}}); err == nil {
		t.Error("a Pod without the operator container must not give another container's image")
	}
}
